"""The server's memory after a full walk of every page, on mnist-lstm and imdb-lstm.

Starts `python -m dashboard` (`make run`) (a fresh run store), then in one headless Chromium
session: every page on mnist-lstm, the Coverage page again with the edge granularity (a link
with ?granularity=edge), then imdb-lstm picked on the Models page and every page again, unit
then edge. After each step it prints the server's resident memory (VmRSS, MB) and at the end
the largest, beside the issue's bound (2 GB), and the kernel's high-water mark of the
server's resident memory (VmHWM: the peak at any moment, between the samples too). Each view
is opened through its URL (the view is in the query), so the walk needs no clicks beyond the
model pick. By default the server gets a fresh cache folder (the data sets linked from the
repository's, no stored coverage profile), so every profile is computed as on a first start;
``--warm`` uses the repository's cache (profiles read from disk where stored).

    .venv/bin/python benchmarks/bench_dashboard_memory.py [--models mnist-lstm imdb-lstm]
        [--warm]

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


def status_mb(pid: int, key: str) -> float:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fresh_cache(tmp: Path) -> Path:
    """A cache folder with the repository's data files linked and no stored profile."""
    from rnncon_core.paths import CACHE_DIR
    cache = tmp / "cache"
    cache.mkdir()
    for f in CACHE_DIR.iterdir():
        if f.is_file():
            (cache / f.name).symlink_to(f.resolve())
    return cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mnist-lstm", "imdb-lstm"])
    ap.add_argument("--warm", action="store_true", help="use the repository's cache folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rnncon-mem-"))
    env = {} if args.warm else {"RNNCON_CACHE": str(fresh_cache(tmp))}
    srv = Server(tmp / "runs", tmp / "streamlit.log", env=env)
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
                    hwm = status_mb(srv.proc.pid, "VmHWM")
                    what = f"{model} {title}{' (edge)' if extra else ''}"
                    rows.append((what, time.perf_counter() - t, rss))
                    print(f"{what:<36} {rows[-1][1]:6.1f} s   server {rss:7.0f} MB   "
                          f"peak so far {hwm:7.0f} MB", flush=True)
        hwm = status_mb(srv.proc.pid, "VmHWM")
    finally:
        srv.stop()
    print(f"\nlargest server memory after a page: {peak:.0f} MB; peak at any moment (VmHWM) "
          f"{hwm:.0f} MB (bound {BOUND_MB} MB: {'within' if hwm <= BOUND_MB else 'OVER'}); "
          f"{'cache of the repository' if args.warm else 'fresh cache: every profile computed'}")


if __name__ == "__main__":
    main()
