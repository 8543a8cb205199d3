"""The server's memory after a full walk of every page, on mnist-lstm and imdb-lstm.

Starts `streamlit run dashboard/app.py` (a fresh run store), then in one headless Chromium
session: every page on mnist-lstm, the Coverage page again with the edge granularity (a link
with ?granularity=edge), then imdb-lstm picked on the Models page and every page again, unit
then edge. After each step it prints the server's resident memory (VmRSS, MB) and at the end
the largest, beside the issue's bound (2 GB). Each view is opened through its URL (the view
is in the query), so the walk needs no clicks beyond the model pick.

    .venv/bin/python benchmarks/bench_dashboard_memory.py [--models mnist-lstm imdb-lstm]

A measurement on this machine (nothing asserted); several minutes on 2 busy cores.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
sys.path.insert(0, str(ROOT))
from harness import Server, chromium, settle  # noqa: E402

PAGES = [("", "Models"), ("coverage", "Coverage"), ("gates", "Gates"),
         ("generate", "Generate"), ("perturbations", "Perturbations"), ("retrain", "Retrain"),
         ("runs", "Runs")]
BOUND_MB = 2048


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mnist-lstm", "imdb-lstm"])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rnncon-mem-"))
    srv = Server(tmp / "runs", tmp / "streamlit.log")
    srv.wait_healthy()
    peak, rows = 0.0, []
    try:
        with chromium() as b:
            page = b.new_page(viewport={"width": 1440, "height": 1000})
            page.set_default_timeout(600_000)
            for model in args.models:
                views = [(p, t, "") for p, t in PAGES] + [("coverage", "Coverage",
                                                            "&granularity=edge")]
                for path, title, extra in views:
                    t = time.perf_counter()
                    page.goto(f"{srv.url}/{path}?model={model}{extra}")
                    settle(page, title, timeout=600)
                    rss = srv.rss_mb()
                    peak = max(peak, rss)
                    what = f"{model} {title}{' (edge)' if extra else ''}"
                    rows.append((what, time.perf_counter() - t, rss))
                    print(f"{what:<36} {rows[-1][1]:6.1f} s   server {rss:7.0f} MB", flush=True)
    finally:
        srv.stop()
    print(f"\nlargest server memory over the walk: {peak:.0f} MB (bound {BOUND_MB} MB: "
          f"{'within' if peak <= BOUND_MB else 'OVER'})")


if __name__ == "__main__":
    main()
