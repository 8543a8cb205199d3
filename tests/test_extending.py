"""docs/extending.md's toy plugin, a package of its own (tests/plugins/rnncon_toy) with a
strategy, a criterion and a constraint: installed into a temporary folder with its entry
points (no pip, no network), it is found by the registries and picked up by the CLI (options,
listings, checks), by the dashboard's Generate form and by the common checks, with nothing
else edited. The page shows the package's own files."""
from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tests.test_coverage import _cli  # the CLI through its real entry point

DOC = Path(__file__).resolve().parent.parent / "docs" / "extending.md"
PLUGIN = Path(__file__).resolve().parent / "plugins" / "rnncon_toy"


def install(plugin: Path, into: Path) -> None:
    """What `pip install` leaves for importlib.metadata: a dist-info folder with METADATA and
    entry_points.txt, written from the plugin's pyproject.toml (its code stays where it is)."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
    info = into / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in project["entry-points"].items()))


@pytest.fixture(scope="module")
def toys(tmp_path_factory):
    """The plugin installed (its dist-info and its code on sys.path); removed after."""
    from rnncon_core.registry import CONSTRAINTS, CRITERIA, GENERATORS
    site = tmp_path_factory.mktemp("site")
    install(PLUGIN, site)
    sys.path[:0] = [str(site), str(PLUGIN)]
    try:
        yield GENERATORS.load("shift"), CRITERIA.load("active"), CONSTRAINTS.load("border")
    finally:
        sys.path.remove(str(site))
        sys.path.remove(str(PLUGIN))
        for reg, name in ((GENERATORS, "shift"), (CRITERIA, "active"), (CONSTRAINTS, "border")):
            reg.remove(name)
        sys.modules.pop("rnncon_toy", None)


def test_the_page_shows_the_plugin_as_it_is():
    page = DOC.read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert code == (PLUGIN / "rnncon_toy" / "__init__.py").read_text()
    (toml,) = re.findall(r"```toml\n(.*?)```", page, flags=re.S)
    assert toml in (PLUGIN / "pyproject.toml").read_text()


def test_the_registries_find_the_plugin_by_its_entry_points(toys):
    from rnncon_core.coverage import CRITERIA
    from rnncon_core.generate import GENERATORS, generator_class, get_constraint
    shift, active, border = toys
    assert "shift" in GENERATORS.names() and generator_class("shift") is shift
    assert CRITERIA["active"] is active
    assert get_constraint("border", width=2).get_config() == {"name": "border", "width": 2}
    from rnncon_core.errors import InputError
    with pytest.raises(InputError, match="width must be an integer in \\[1, 10\\], got 0"):
        get_constraint("border", width=0)


def test_constraint_parameters_are_options_checked_by_their_declaration(toys, files, capsys,
                                                                       monkeypatch):
    """`--constraint NAME` brings that constraint's declared parameters as options (a plugin's
    too), each checked before anything runs."""
    base = ["generate", "--model", str(files / "tiny.keras"), "--method", "pgd", "--inputs",
            str(files / "x.npy"), "--labels", str(files / "y.npy"), "--runs-dir",
            str(files / "runs")]
    code, _, err = _cli(capsys, monkeypatch, *base, "--constraint", "border", "--width", "0")
    assert code == 2 and "width must be an integer in [1, 10], got 0" in err
    code, _, err = _cli(capsys, monkeypatch, *base, "--constraint", "occlusion", "--size",
                        "1,2,3")
    assert code == 2 and "size must be two integers ROWS,COLUMNS of at least 1" in err
    code, _, err = _cli(capsys, monkeypatch, *base, "--size", "3")      # no occlusion chosen
    assert code == 2 and "--size" in err
    code, out, _ = _cli(capsys, monkeypatch, "methods", "pgd")
    assert "constraint border" in out and "--width" in out


def test_the_plugin_passes_the_common_checks(toys):
    from rnncon_core.checks import check_criterion, check_generator
    shift, active, _ = toys
    check_generator(shift)
    check_generator("pgd", iterations=2, constraint="border", width=2)   # its constraint
    check_criterion(active)


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
    shift, _, _ = toys
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
    shift, _, _ = toys
    assert forms.generation_params(shift, {"amount": 0.25}) == {"amount": 0.25}


def test_the_toy_criterion_is_a_criterion_everywhere(toys, files, tiny_lstm, tiny_x, capsys,
                                                     monkeypatch):
    from rnncon_core.coverage import get_criterion
    _, active, _ = toys
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


def test_the_checks_name_an_undeclared_keyword_and_a_bad_default():
    """check_generator / check_criterion start with the declaration: an __init__ keyword that
    params does not declare, or a default its own check refuses, fails before anything runs."""
    from rnncon_core.checks import check_criterion, check_generator
    from rnncon_core.coverage import Criterion
    from rnncon_core.errors import InputError
    from rnncon_core.generate import Generator
    from rnncon_core.params import IntRange, Interval, Param, Params

    class Sloppy(Generator):
        method = "sloppy"
        params = Params(Param("amount", 0.1, Interval(0.0, 1.0)))

        def __init__(self, model, *, amount, wobble=3, **kw):
            super().__init__(model, **kw)

    with pytest.raises(AssertionError, match="'wobble', which is not declared in params"):
        check_generator(Sloppy)

    class BadDefault(Criterion):
        name = "bad-default"
        params = Params(Param("k", 0, IntRange(1), "Sections."))

    with pytest.raises(InputError, match="k must be an integer of at least 1, got 0"):
        check_criterion(BadDefault)


@pytest.mark.parametrize("kind,name,params", [
    ("generator", "pgd", {"iterations": 2}), ("generator", "fgsm", {}),
    ("generator", "noise", {}), ("criterion", "rconc", {}), ("criterion", "nc", {}),
    ("criterion", "hsc", {}), ("criterion", "csc", {})])
def test_shipped_ones_pass_the_public_checks(kind, name, params):
    """The checks a plugin author runs are the ones the shipped strategies and criteria pass
    (the profile-based criteria need a profile first: tests/test_criteria.py checks them)."""
    from rnncon_core.checks import check_criterion, check_generator
    if kind == "generator":
        check_generator(name, **params)
    else:
        check_criterion(name)
