"""docs/extending.md's worked example: its toy strategy and toy criterion, registered by running
the page's code blocks, are picked up by the CLI (options, listings, checks) and by the
dashboard's Generate form, with nothing else edited."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.test_coverage import _cli  # the CLI through its real entry point

DOC = Path(__file__).resolve().parent.parent / "docs" / "extending.md"


@pytest.fixture(scope="module")
def toys():
    """Run the page's python blocks (the strategy, the criterion); unregister them after."""
    from rnncon_core import generate
    from rnncon_core.coverage import CRITERIA
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 2
    spaces = [{"__name__": f"docs_extending_{i}"} for i in range(2)]
    for code, space in zip(blocks, spaces):
        exec(compile(code, str(DOC), "exec"), space)
    yield spaces[0]["Shift"], spaces[1]["ActiveCoverage"]
    generate._REGISTRY.pop("shift", None)
    CRITERIA.pop("active", None)


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_lstm, tiny_x):
    d = tmp_path_factory.mktemp("extending")
    tiny_lstm.save(d / "tiny.keras")
    x = np.clip(tiny_x, 0, 1).astype("float32")
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", np.asarray(tiny_lstm(x)).argmax(1))
    return d


def test_the_toy_strategy_is_a_method_everywhere(toys, files, capsys, monkeypatch):
    from rnncon_core.generate import get_generator, list_generators
    shift, _ = toys
    assert list_generators()["shift"] == "image"
    code, out, err = _cli(capsys, monkeypatch, "methods", "shift", "--json")
    assert code == 0, err
    (amount,) = json.loads(out)["shift"]["params"]
    assert amount["name"] == "amount" and amount["default"] == 0.1 and amount["type"] == "float"
    assert amount["allowed"] == "a number in [-1, 1]"
    base = ["generate", "--model", str(files / "tiny.keras"), "--method", "shift", "--inputs",
            str(files / "x.npy"), "--labels", str(files / "y.npy"), "--runs-dir",
            str(files / "runs"), "--json"]
    code, _, err = _cli(capsys, monkeypatch, *base, "--amount", "2")
    assert code == 2 and "amount must be a number in [-1, 1], got 2.0" in err
    code, out, err = _cli(capsys, monkeypatch, *base, "--amount", "0.5")
    assert code == 0, err
    run = json.loads(out)
    from rnncon_core.runs import RunStore
    config = RunStore(files / "runs").get(run["run_id"]).config["generator"]
    assert config["amount"] == 0.5 and config["method"] == "shift"
    again = get_generator("shift", __import__("keras").models.load_model(files / "tiny.keras"),
                          **config)
    assert again.get_config() == config


def test_the_toy_strategy_is_in_the_generate_form(toys):
    from streamlit.testing.v1 import AppTest

    def page():
        from dashboard import forms
        from rnncon_core.generate import generator_class
        import streamlit as st
        with st.form("f"):
            st.session_state["values"] = forms.draw(generator_class("shift"), "image", {}, {},
                                                    {})
            st.form_submit_button("Start")

    at = AppTest.from_function(page, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (box,) = at.number_input
    assert box.label == "Amount" and box.value == 0.1
    assert (box.proto.min, box.proto.max) == (-1.0, 1.0)
    assert box.help == "Added to every pixel (then clipped to [0, 1])."
    from dashboard import forms
    shift, _ = toys
    assert forms.generation_params(shift, {"amount": 0.25}) == {"amount": 0.25}


def test_the_toy_criterion_is_a_criterion_everywhere(toys, files, tiny_lstm, tiny_x, capsys,
                                                     monkeypatch):
    from rnncon_core.coverage import get_criterion
    _, active = toys
    cov = get_criterion("active", tiny_lstm, margin=0.1).update(tiny_x)
    assert 0 < cov.rate() <= 1 and cov.get_config() == {"name": "active", "margin": 0.1}
    code, out, err = _cli(capsys, monkeypatch, "criteria", "active", "--json")
    assert code == 0 and json.loads(out)["active"]["params"][0]["name"] == "margin", err
    code, out, err = _cli(capsys, monkeypatch, "coverage", "--model", str(files / "tiny.keras"),
                          "--inputs", str(files / "x.npy"), "--criterion", "active",
                          "--margin", "0.1", "--json")
    assert code == 0, err
    assert json.loads(out)["rate"] == pytest.approx(cov.rate())
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", str(files / "tiny.keras"),
                        "--inputs", str(files / "x.npy"), "--criterion", "active",
                        "--margin", "11")
    assert code == 2 and "margin must be a number in [-10, 10], got 11.0" in err
