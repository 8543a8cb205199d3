"""Build the dashboard's default coverage profiles of the shipped models, once, in set-up.

The Coverage and Gates pages of a model read four criteria (RConC, NC, HS_C, CS_C) after one
pass over the first 200 test inputs; the dashboard keeps each on disk
(``.cache/dashboard-profiles``) after computing it on the first open. Computing them costs
the first open of an IMDB page about 5-8 s on two cores (tracing RConC's graphs and the
passes), so the set-up computes them here, with the dashboard's own function, and the first
open only reads them. A profile refused on reading (another model's weights) is computed
again by the page, so a stale file is never shown.

    .venv/bin/python scripts/build_profiles.py [--models imdb-lstm mnist-lstm]

Without ``--models``: every shipped recurrent model whose profiles are not kept yet.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", help="shipped model names (default: all)")
    args = ap.parse_args()
    import streamlit.logger
    streamlit.logger.set_log_level("error")      # bare mode: no app is served, no warnings
    from rnncon_core.cli.common import quiet_tensorflow
    quiet_tensorflow()
    from dashboard import state
    from rnncon_core import zoo
    shipped = state.shipped()
    names = args.models or shipped
    unknown = sorted(set(names) - set(shipped))
    if unknown:
        print(f"error: not a shipped model: {', '.join(unknown)} (shipped: "
              f"{', '.join(shipped)})", file=sys.stderr)
        return 2
    for name in names:
        started = time.perf_counter()
        dataset = zoo.ARCHITECTURES[name].dataset
        state.coverage(state.Profile(name, dataset, state.DEFAULT_INPUTS))
        state.coverage.clear()          # kept on disk; one model's criteria in memory at a time
        print(f"profiles of {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
