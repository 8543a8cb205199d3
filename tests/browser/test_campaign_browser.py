"""The Campaign page in a real headless Chromium, as a user drives it: start a campaign, watch
its curves grow while it runs, cancel it, resume it with a larger budget, see the fault
gallery; then Ctrl-C to the server during a campaign leaves a run that resumes."""
import os
import signal
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
from harness import (CHROMIUM, Server, chromium, no_traceback, settle,  # noqa: E402
                     wait_chart, wait_images)
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                       reason="needs the shipped mnist-lstm (assets/models)"),
]


def _fill(page, label: str, value) -> None:
    box = page.get_by_role("textbox", name=label, exact=True) if isinstance(value, str) else \
        page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Tab")


def _calls(page) -> int:
    """The "Model calls" metric as the page shows it (0 before the first batch)."""
    metric = page.locator('[data-testid="stMetric"]', has_text="Model calls")
    if not metric.count():
        return 0
    text = metric.first.locator('[data-testid="stMetricValue"]').inner_text()
    return int(text.replace(",", "")) if text.replace(",", "").isdigit() else 0


@pytest.mark.timeout(600)
def test_start_watch_cancel_resume_and_ctrl_c(tmp_path):
    runs = tmp_path / "runs"
    srv = Server(runs, tmp_path / "streamlit.log")
    store = RunStore(runs)
    try:
        srv.wait_healthy()
        with chromium() as b:
            page = b.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(240_000)
            page.goto(f"{srv.url}/campaign")
            settle(page, "Campaign", timeout=240)
            _fill(page, "Budget", "10m")
            _fill(page, "Seeds", 20)
            page.get_by_role("button", name="Start").click()
            wait_chart(page, "camp_curves")               # drawn live, while it runs
            first = _calls(page)
            deadline = time.time() + 60
            while _calls(page) <= first and time.time() < deadline:
                time.sleep(0.5)
            assert _calls(page) > first, "the metrics follow the running campaign"
            page.get_by_role("button", name="Cancel").click()
            page.get_by_role("button", name="Resume").wait_for()
            cancelled = store.list(kind="campaign")[0]
            assert cancelled.status == "cancelled"
            spent = cancelled.summary["calls"]
            _fill(page, "Total budget", f"{spent + 600}calls")
            page.get_by_role("button", name="Resume").click()
            deadline = time.time() + 180
            while time.time() < deadline:
                done = [r for r in store.list(kind="campaign", status="finished")
                        if (r.summary or {}).get("resumed_from") == cancelled.run_id]
                if done:
                    break
                time.sleep(1)
            assert done and done[0].summary["calls"] >= spent + 600
            page.reload()
            settle(page, "Campaign", timeout=240)
            wait_images(page, "camp_gallery")      # the first group's faults beside their seeds
            no_traceback(page, "Campaign")
            # Ctrl-C to the server while a campaign runs: its run stops resumable
            _fill(page, "Budget", "10m")
            page.get_by_role("button", name="Start").click()
            page.get_by_role("button", name="Cancel").wait_for()
            time.sleep(2)
            os.killpg(srv.proc.pid, signal.SIGINT)
            srv.proc.wait(30)
        last = store.list(kind="campaign")[0]
        assert last.status == "cancelled", (last.status, last.error)
        from rnncon_core.campaign import run_campaign
        calls = (last.summary or {}).get("calls") or 0
        again = run_campaign(None, resume=last.run_id, budget=f"{calls + 100}calls",
                             store=store)
        assert again["resumed_from"] == last.run_id and again["calls"] >= calls + 100
    finally:
        srv.stop()
