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
    assert ("Fault classes" in labels or "Distinct faults" in labels) and "Model calls" in labels
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


def test_campaign_page_on_an_uploaded_sequence_model(runs_dir, tmp_path):
    """A user's own series (an .npz of real-valued sequences) and model: the form offers the
    sequence mutations (noise, time shift), not the image ones, and the faults are drawn over
    their seeds, not as images."""
    import io

    import keras
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8, 3)).astype("float32")
    inp = keras.Input((8, 3))
    h = keras.layers.Conv1D(4, 3, padding="same")(inp)
    out = keras.layers.Dense(2, activation="softmax")(keras.layers.GRU(5)(h))
    model = keras.Model(inp, out)
    model.save(tmp_path / "series.keras")
    y = np.asarray(model(x)).argmax(1)          # every seed predicted right
    buf = io.BytesIO()
    np.savez(buf, x_train=x, y_train=y, x_test=x, y_test=y)
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.radio(key="models_source").set_value("Upload a .keras file").run()
    at.file_uploader(key="models_upload").set_value(
        ("series.keras", (tmp_path / "series.keras").read_bytes(), "application/zip")).run()
    at.file_uploader(key="models_own_npz").set_value(
        ("series.npz", buf.getvalue(), "application/octet-stream")).run()
    at.switch_page("views/campaign.py").run()
    _clean(at)
    labels = {w.label for w in at.number_input}
    assert "Changed-pixel share" not in labels and "Noise" in labels, labels
    at.text_input(key="camp_budget").set_value("600calls")
    at.number_input(key="camp_noise").set_value(1.0)
    at.number_input(key="camp_max_linf").set_value(3.0)
    at = next(b for b in at.button if b.label == "Start").click().run()
    at = _until(at, lambda a: any("finished" in s.value for s in a.success))
    _clean(at)
    assert not at.error, [e.value for e in at.error]
    if any("No fault found" in i.value for i in at.info):
        pytest.skip("this campaign found no fault (nothing to draw)")
    assert at.selectbox(key="camp_fault").options, "a fault to pick"
    assert at.get("plotly_chart")[-1].proto.id, "the series over its seed"


def test_fault_table_names_replaced_words_and_distances():
    import numpy as np

    from rnncon_core.data import Vocabulary
    from rnncon_core.reports.campaign import fault_table
    vocab = Vocabulary(["good", "fine", "film"])
    seeds = {"x": np.array([[1, 3, 4, 5], [1, 5, 5, 3]])}
    faults = {"x": np.array([[1, 4, 4, 5], [1, 5, 3, 3]]), "root": np.array([0, 1]),
              "label": np.array([1, 0]), "pred": np.array([0, 1]), "state": np.array([2, 7]),
              "op": np.array(["substitution", "substitution"])}
    t = fault_table(faults, seeds, vocab)
    by_seed = dict(zip(t.seed, t["words replaced"]))
    assert by_seed == {0: "good → fine", 1: "film → good"}
    real = {"x": seeds["x"].astype(float)}
    t = fault_table({**faults, "x": faults["x"].astype(float)}, real)
    assert sorted(t["L∞"]) == [1.0, 2.0] and sorted(t["L2"]) == [1.0, 2.0]


def test_cancel_from_the_page_leaves_a_resumable_campaign(runs_dir):
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("views/campaign.py").run()
    at.text_input(key="camp_budget").set_value("10m")
    at.number_input(key="camp_seeds").set_value(10)
    at = next(b for b in at.button if b.label == "Start").click().run()
    at = _until(at, lambda a: any(b.label == "Cancel" for b in a.button) and any(
        m.label == "Model calls" and str(m.value) not in ("—", "0") for m in a.metric))
    at = next(b for b in at.button if b.label == "Cancel").click().run()
    at = _until(at, lambda a: any(b.label == "Resume" for b in a.button), timeout=60)
    _clean(at)
    note = " ".join(w.value for w in at.warning)
    assert "cancelled after" in note and "resume it from its last checkpoint" in note, note
    assert "distinct faults" in note, "the card says what the campaign had found"
