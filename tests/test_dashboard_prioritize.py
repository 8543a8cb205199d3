"""The Prioritize page in Streamlit's AppTest: the curves, the metrics, the top-ranked inputs
and the download, for the default signals and after picking others."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))                   # the dashboard package
os.environ.setdefault("RNNCON_DASHBOARD_WARMUP", "0")
from streamlit.testing.v1 import AppTest  # noqa: E402

from rnncon_core import zoo  # noqa: E402

APP = str(ROOT / "dashboard" / "app.py")
pytestmark = pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                                reason="needs the shipped mnist-lstm (assets/models)")


def test_prioritize_page_ranks_draws_and_downloads():
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["prio_n"] = 200
    at.run()
    at.switch_page("views/prioritize.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Prioritize"
    text = " ".join(m.value for m in at.markdown)
    assert "misclassified" in text and "<img" in text           # the top inputs as images
    charts = at.get("plotly_chart")
    assert len(charts) == 1                                     # the fault-detection curves
    import json
    fig = json.loads(charts[0].proto.spec)
    names = [t["name"] for t in fig["data"]]
    assert names == ["gini", "margin", "entropy", "random"]
    assert fig["layout"]["xaxis"]["range"][0] == 0 and fig["layout"]["yaxis"]["range"][0] == 0
    table = at.dataframe[0].value
    assert list(table.index) == names and (table["apfd"] > 0).all()
    assert at.get("download_button")
    at.multiselect(key="prio_signals").set_value(["margin", "nc-total"]).run()
    assert not at.exception, at.exception
    at.selectbox(key="prio_top").set_value("nc-total").run()
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in fig["data"]] == ["margin", "nc-total"]
    at.multiselect(key="prio_signals").set_value([]).run()
    assert not at.exception and "at least one signal" in at.info[0].value
