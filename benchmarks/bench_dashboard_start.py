"""Cold start of the dashboard as a new user sees it, in headless Chromium on localhost.

Starts `python -m dashboard` (`make run`) (fresh process, empty run store), opens the Models page
as soon as the health endpoint answers and prints, in seconds from the start of the process:
the health endpoint, the Models heading, the first view (the data sample), the Models page
complete (the predictions and Table 1, from the background warm-up), then the Coverage page's
first per-layer chart (clicked in the sidebar, same session), the switch to edge granularity,
and a later switch back to Models and to Coverage (profile cached). ``--root`` measures another
checkout (e.g. an older commit unpacked with `git archive`) the same way.

    .venv/bin/python benchmarks/bench_dashboard_start.py [--repeat 1]

Figures are measured in this run on this machine (no timed assertion anywhere).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from harness import (Server, chart_drawn, chromium, exceptions, images_drawn,  # noqa: E402
                     settle, wait_chart)


def first_view(page) -> None:
    """The Models page's sample is drawn: inline images now, a Plotly figure in a checkout
    from before (``--root``), so the same run can measure both."""
    page.wait_for_function(f"{images_drawn('models_sample')} || {chart_drawn('models_sample')}",
                           timeout=180_000, polling=100)


def one_start(browser, tmp: Path, root: Path) -> dict:
    env = {"RNNCON_DEPS": str(ROOT / ".deps"), "RNNCON_CACHE": str(ROOT / ".cache")}
    server = Server(tmp / "runs", tmp / "streamlit.log", env=env, root=root)
    t = {}
    try:
        t["health"] = server.wait_healthy()
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(180_000)
        since = server.started

        def mark(name):
            t[name] = time.perf_counter() - since

        page.goto(server.url)
        page.get_by_role("heading", name="Models", exact=True).wait_for()
        mark("models heading")
        first_view(page)
        mark("first view (the sample)")
        # the warm-up's predictions and Table 1 (a checkout from before may show no notes)
        for note in ("the predictions appear as soon", "Table 1 builds the eight"):
            page.wait_for_function("t => !document.body.innerText.includes(t)", arg=note,
                                   timeout=240_000, polling=100)
        page.get_by_text("Table 1: the models").wait_for()
        page.locator('[data-testid="stTable"]').first.wait_for()
        mark("models complete (predictions, Table 1)")
        settle(page, "Models", timeout=180)

        t0 = time.perf_counter()
        page.get_by_role("link", name="Coverage").click()
        wait_chart(page, "cov_by_layer")
        t["coverage first visit"] = time.perf_counter() - t0
        settle(page, "Coverage", timeout=180)

        t0 = time.perf_counter()
        # the granularity sits in the profile's settings popover (its label starts "Settings:")
        page.get_by_role("button", name=re.compile(r"^Settings:")).click()
        page.locator(".st-key-cov_gran").get_by_text("edge", exact=True).click()
        page.get_by_text("edge granularity").wait_for()
        wait_chart(page, "cov_by_layer")
        t["switch to edge"] = time.perf_counter() - t0
        settle(page, "Coverage", timeout=180)

        t0 = time.perf_counter()
        page.get_by_role("link", name="Models").click()
        first_view(page)
        t["back to Models"] = time.perf_counter() - t0
        settle(page, "Models")
        t0 = time.perf_counter()
        page.get_by_role("link", name="Coverage").click()
        wait_chart(page, "cov_by_layer")
        t["Coverage again (cached)"] = time.perf_counter() - t0
        settle(page, "Coverage")
        t["exceptions"] = exceptions(page)
        t["server memory MB"] = server.rss_mb()
        ctx.close()
        if os.environ.get("RNNCON_DASHBOARD_DEBUG"):
            print("\n".join(ln for ln in server.log().splitlines() if "rnncon.dashboard" in ln))
    finally:
        server.stop()
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="cold starts to measure (each a new "
                                                          "server process)")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the checkout to serve (e.g. an older commit unpacked with "
                         "`git archive`, to measure the same way before a change)")
    args = ap.parse_args()
    with chromium() as browser:
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                t = one_start(browser, Path(tmp), args.root.resolve())
            print(f"cold start {i + 1} (machine load {os.getloadavg()[0]:.1f} after it):")
            for k, v in t.items():
                print(f"  {k:28s} {v:7.1f}" if isinstance(v, float) else f"  {k:28s} {v:>7}")


if __name__ == "__main__":
    main()
