"""A bounded load test in headless Chromium (localhost only): on a warm server, one session runs
a small generation job while four more open the Coverage page at once; each must show its
per-layer chart and no exception box, then a threshold move must reach all of them; then eight
clients that speak Streamlit's protocol (the server alone) do the same while the job runs. The
times are printed, not asserted (benchmarks/bench_dashboard_load.py measures 6/8/12 sessions against
the targets); every wait is bounded, and the sessions and the server are closed at the end.
"""
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
from harness import (CHROMIUM, Server, chart_drawn, chart_title_has, chromium,  # noqa: E402
                     close_sessions, exceptions, move_threshold, open_sessions,
                     protocol_round, settle, wait_all, watch)
from rnncon_core import zoo  # noqa: E402

SESSIONS = 4
BOUND = 120             # seconds any one wait may take before the test fails

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="Debian's chromium is not installed (scripts/setup.sh installs it)"),
    pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                       reason="needs the shipped mnist-lstm (assets/models)"),
]


def test_sessions_at_once_with_a_job_running(tmp_path):
    server = Server(tmp_path / "runs", tmp_path / "streamlit.log")
    try:
        server.wait_healthy()
        with chromium() as browser:
            warm = open_sessions(browser, server.url, "coverage", 1)     # warms the server
            wait_all(warm, chart_drawn("cov_by_layer"), BOUND)
            close_sessions(warm)
            rss_warm = server.rss_mb()

            job = open_sessions(browser, server.url, "generate", 1)
            page = job[0][1]
            settle(page, "Generate", timeout=BOUND)
            for label, value in (("Seeds", 20), ("Iterations", 10)):
                box = page.get_by_label(label, exact=True)
                box.fill(str(value))
                box.press("Tab")
            page.get_by_role("button", name="Start").click()
            page.get_by_text(re.compile(r"^(starting|running)")).first.wait_for(
                timeout=BOUND * 1000)

            viewers = open_sessions(browser, server.url, "coverage", SESSIONS)
            shown = wait_all(viewers, chart_drawn("cov_by_layer"), BOUND)
            wait_all(viewers, "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                     BOUND)
            moved_on = chart_title_has("cov_by_layer", "threshold 0.3")
            watcher = watch(viewers, moved_on)                        # before the first press
            moved = move_threshold(viewers)                           # 0.25 -> 0.3
            settled = wait_all(moved, moved_on, BOUND, name=watcher)
            assert sum(exceptions(p) for _, p, _ in viewers) == 0
            job_alive = page.get_by_text(re.compile(r"^(starting|running|finished in)")).count()
            assert exceptions(page) == 0 and job_alive
            print(f"\n{SESSIONS} sessions on Coverage while a job runs: charts after "
                  f"{min(shown):.1f}–{max(shown):.1f} s, threshold settled after "
                  f"{max(settled):.2f} s; server memory {rss_warm:.0f} MB warm, "
                  f"{server.rss_mb():.0f} MB now")
            close_sessions(viewers)
            # the server's own share while the job still runs: 8 clients that speak its
            # protocol and draw nothing open Coverage and move the threshold
            alone = protocol_round(server.url, "coverage", "cov_by_layer", 8, threshold=0.35,
                                   timeout=BOUND)
            print(f"8 protocol clients while the job runs (the server alone): chart data "
                  f"after {max(o['shown'] for o in alone):.2f} s, threshold settled after "
                  f"{max(o['settled'] for o in alone):.2f} s")
            cancel = page.get_by_role("button", name="Cancel")
            if cancel.count():                                        # stop the job early
                cancel.first.click()
            close_sessions(job)
        assert "Traceback" not in server.log()
    finally:
        server.stop()
