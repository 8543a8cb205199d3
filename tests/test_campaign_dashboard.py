"""The Campaign page in Streamlit's AppTest: it starts a campaign from the form, follows it to
the end, shows its curves and faults, and resumes it with a larger budget."""
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RNNCON_DASHBOARD_WARMUP", "0")
from streamlit.testing.v1 import AppTest  # noqa: E402

from rnncon_core import zoo  # noqa: E402

APP = str(ROOT / "dashboard" / "app.py")
pytestmark = pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                                reason="needs the shipped mnist-lstm (assets/models)")


@pytest.fixture()
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setattr("rnncon_core.runs.RUNS_DIR", tmp_path)
    return tmp_path


def _until(at, done, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        at.run()
        if done(at):
            return at
        time.sleep(0.5)
    raise AssertionError("timed out: " + str([m.value for m in at.markdown][:8]))


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_campaign_page_starts_shows_and_resumes(runs_dir):
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("views/campaign.py").run()
    _clean(at)
    assert any("No campaign" in i.value for i in at.info)
    at.text_input(key="camp_budget").set_value("120calls")
    at.number_input(key="camp_seeds").set_value(10)
    at = next(b for b in at.button if b.label == "Start").click().run()
    _clean(at)
    at = _until(at, lambda a: any("finished" in s.value for s in a.success))
    _clean(at)
    labels = [m.label for m in at.metric]
    assert "Distinct faults" in labels and "Model calls" in labels
    assert at.get("plotly_chart"), "the curves"
    first = at.selectbox(key="camp_show").value
    # resume with a larger total budget: a new run goes on from the checkpoint
    at.text_input(key="camp_resume_budget").set_value("240calls")
    at = next(b for b in at.button if b.label == "Resume").click().run()
    from rnncon_core.runs import RunStore
    store = RunStore(runs_dir)
    deadline = time.time() + 180
    while time.time() < deadline:
        done = [r for r in store.list(kind="campaign", status="finished")
                if (r.summary or {}).get("resumed_from") == first]
        if done:
            break
        time.sleep(1)
    assert done and done[0].summary["calls"] >= 240
    assert done[0].summary["calls"] > store.get(first).summary["calls"]
