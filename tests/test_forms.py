"""The Generate form built from the declarations: the main fields are the ones the hand-kept
form showed per method (the rest under More settings), and a default the data set chooses
fills only the parameters declared as "chosen for you"."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dashboard import forms  # noqa: E402
from rnncon_core.generate import generator_class  # noqa: E402

# what the form asked per method before it was built from the declarations
MAIN = {"rconc": ["target", "k", "step", "iterations", "constraint", "threshold", "granularity"],
        "nc": ["target", "k", "step", "iterations", "constraint", "threshold"],
        "rnntest": ["target", "k", "step", "iterations", "constraint"],
        "differential": ["step", "iterations", "constraint"],
        "fgsm": ["eps", "constraint"], "pgd": ["eps", "step", "iterations", "constraint"],
        "noise": ["l2"]}


@pytest.mark.parametrize("method", sorted(MAIN))
def test_main_fields_are_the_forms_before(method):
    cls = generator_class(method)
    shown = forms.fields(cls, "image", {})
    assert [p.name for p in shown if p.level == "form"] == MAIN[method]
    assert {p.name for p in shown} == {p.name for p in cls.params if p.level != "cli"}


def test_widgets_ranges_and_prefilled_defaults():
    from streamlit.testing.v1 import AppTest

    def page():
        import streamlit as st

        from dashboard import forms
        from rnncon_core.generate import generator_class
        layers = {"all": ["lstm_1", "output"], "recurrent": ["lstm_1"]}
        for method in ("rconc", "differential"):
            with st.form(method):
                forms.draw(generator_class(method), "image", {}, {"threshold": 0.3}, layers,
                           prefix=f"{method}_")
                st.form_submit_button("Start")

    at = AppTest.from_function(page, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="rconc_threshold").value == 0.3       # the data set's
    assert at.number_input(key="differential_threshold").value == 0.0  # its own default
    k = at.number_input(key="rconc_k")
    assert (k.value, k.proto.min, k.proto.max) == (1, 1, 1000)
    assert at.selectbox(key="rconc_target").options == ["random", "dense", "lstm_1", "output"]
    assert at.radio(key="rconc_granularity").options == ["unit", "edge"]
    assert at.checkbox(key="rconc_stop_on_target").value is False
    settings = "Constraint settings (used by the chosen constraint only)"
    assert [e.label for e in at.expander] == ["More settings", settings] * 2
    assert at.text_input(key="rconc_occlusion_size").value == "10,10"
    position = at.text_input(key="rconc_occlusion_position")       # default None: empty,
    assert position.value == "" and position.placeholder.startswith("empty: the default")
    assert not at.text_input(key="rconc_occlusion_size").placeholder   # a default: none
    assert at.number_input(key="rconc_blackout_size").value == 6


def test_constraint_settings_reach_only_the_chosen_constraint():
    from rnncon_core.errors import InputError
    rconc = generator_class("rconc")
    values = {"constraint": "occlusion", "occlusion.size": "4,5", "occlusion.position": None,
              "blackout.size": 3, "blackout.patches": 2, "blackout.scale": 10.0}
    assert forms.generation_params(rconc, values) == {"constraint": "occlusion",
                                                      "size": [4, 5], "position": None}
    got = forms.generation_params(rconc, {**values, "constraint": "blackout"})
    assert got == {"constraint": "blackout", "size": 3, "patches": 2, "scale": 10.0}
    with pytest.raises(InputError, match="size"):
        forms.generation_params(rconc, {**values, "occlusion.size": "0,3"})
    with pytest.raises(InputError, match="size"):
        forms.generation_params(rconc, {**values, "occlusion.size": "ten"})
    assert forms.constraint_fields(generator_class("noise"), "image") == {}
