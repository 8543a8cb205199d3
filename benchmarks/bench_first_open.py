"""The first open of a shared link on a fresh dashboard server (issue 41's target: at most 10 s
on an idle 2-core machine for any shipped model's page).

For each model: a new `python -m dashboard` (`make run`) (empty run store), then as soon as it
answers its health check, one headless Chromium tab opens ``/<page>?model=<model>`` and the
time until the page's main view is drawn is printed (Coverage: the per-layer bars; Models: the
sample of test inputs), with the server's resident memory and the CPU load of the machine
while it ran (a loaded machine gives pessimistic times).

    .venv/bin/python benchmarks/bench_first_open.py [--models imdb-lstm mnist-lstm]
                                                      [--page coverage] [--timeout 240]
                                                      [--cache setup|none|kept]

Measured figures only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from harness import Server, chart_drawn, chromium, images_drawn  # noqa: E402

DRAWN = {"coverage": chart_drawn("cov_by_layer"), "models": images_drawn("models_sample")}
TARGET = 10.0
CACHES = {"setup": "with the profiles the set-up builds", "none": "with no profile at all",
          "kept": "with the profiles kept in .cache"}


def fresh_cache(tmp: Path, model: str, setup_profiles: bool) -> dict:
    """A cache folder as a fresh clone has it after the set-up: the data sets' files and the
    default profiles the set-up builds (``scripts/build_profiles.py``, run here for ``model``
    into this folder); with ``setup_profiles`` False, no profile at all (the page computes
    each on the first open, as before the set-up built them)."""
    from rnncon_core.paths import CACHE_DIR
    cache = tmp / "cache"
    cache.mkdir()
    for f in CACHE_DIR.glob("*.npz"):
        (cache / f.name).symlink_to(f)
    for f in CACHE_DIR.glob("*.json"):
        (cache / f.name).symlink_to(f)
    env = {"RNNCON_CACHE": str(cache)}
    if setup_profiles:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_profiles.py"),
                        "--models", model], env={**os.environ, **env}, check=True)
    return env


def first_open(model: str, page: str, timeout: float, cache: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {} if cache == "kept" else fresh_cache(Path(tmp), model, cache == "setup")
        srv = Server(Path(tmp) / "runs", Path(tmp) / "streamlit.log", env=env)
        try:
            healthy = srv.wait_healthy()
            load0 = os.getloadavg()[0]
            with chromium() as b:
                tab = b.new_page(viewport={"width": 1440, "height": 1000})
                started = time.perf_counter()
                tab.goto(f"{srv.url}/{page}?model={model}", wait_until="commit")
                tab.wait_for_function(DRAWN[page], timeout=timeout * 1000, polling=100)
                took = time.perf_counter() - started
            return {"model": model, "page": page, "seconds": took, "healthy_after": healthy,
                    "rss_mb": srv.rss_mb(), "load_before": load0,
                    "load_after": os.getloadavg()[0]}
        finally:
            srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["imdb-lstm", "mnist-lstm"])
    ap.add_argument("--page", default="coverage", choices=sorted(DRAWN))
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--cache", choices=CACHES, default="setup",
                    help="setup: the profiles a fresh clone's set-up builds (default); none: "
                         "no profile at all; kept: .cache as it is (a second start)")
    args = ap.parse_args()
    print(f"first open of /{args.page}?model=M on a fresh server, "
          f"{CACHES[args.cache]} "
          f"(target <= {TARGET:g} s on an idle 2-core machine); {os.cpu_count()} CPUs")
    for m in args.models:
        r = first_open(m, args.page, args.timeout, args.cache)
        print(f"{m:>20}: {r['seconds']:6.1f} s to the main view · server healthy after "
              f"{r['healthy_after']:.1f} s · RSS {r['rss_mb']:.0f} MB · load average "
              f"{r['load_before']:.1f} -> {r['load_after']:.1f}"
              + ("" if r["seconds"] <= TARGET else "  (over the target)"), flush=True)


if __name__ == "__main__":
    main()
