#!/usr/bin/env bash
# The test command: set-up if needed, the structure check (scripts/measure_structure.py: import
# circles, imports against the layer order, long functions; about 1 s), then the default suite
# (fast unit tests, AppTest and the headless-Chromium test). Extra arguments go to pytest.
# pytest's "no tests collected" (5) would mean the suite is missing: it is reported as a
# failure, not hidden.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONHASHSEED=0
.venv/bin/python scripts/measure_structure.py || { echo "test.sh: the structure check failed" >&2; exit 1; }
.venv/bin/python -m pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "test.sh: pytest collected no tests: the test suite is missing" >&2
  exit 1
fi
exit $rc
