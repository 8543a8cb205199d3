"""Common checks over every registered criterion, counts vs the zoo, CLI JSON, errors."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from rnncon_core.coverage import (CRITERIA, ContributionCoverage, NeuronCoverage, get_criterion,
                                  select_threshold)
from rnncon_core.errors import InputError, UnsupportedModelError

VARIANTS = [("rconc", {}), ("rconc", {"granularity": "edge"}), ("rconc", {"normalize": "layer"}),
            ("rconc", {"granularity": "edge", "normalize": "layer", "threshold": 0.6}),
            ("rconc", {"normalize": "model", "values": "signed"}),
            ("rconc", {"granularity": "edge", "normalize": "model", "values": "signed"}),
            ("nc", {}), ("nc", {"include_input": True, "threshold": 0.5}), ("hsc", {}),
            ("hsc", {"k": 2}), ("csc", {}),
            # profile-based (the module's tiny_profile fixture builds the profile)
            ("bc", {}), ("bc", {"threshold": 0.5}), ("sc", {}), ("tc", {"symbols": 2, "length": 3}),
            ("state", {}), ("state-boundary", {"boundary_steps": 2}), ("state-weighted", {}),
            ("transition", {"components": 2, "cells": 4}), ("transition-weighted", {}),
            ("kmnc", {"k": 3}), ("nbc", {}), ("snac", {}), ("tknc", {}), ("tknp", {"k": 1}),
            ("rconc-kmnc", {}), ("rconc-nbc", {}), ("rconc-snac", {})]


@pytest.fixture(scope="module", autouse=True)
def tiny_profile(tiny_lstm, tmp_path_factory):
    """The tiny LSTM's training profile, in a temporary cache."""
    from rnncon_core import paths
    from rnncon_core.coverage import build_profile
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paths, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        x = np.random.default_rng(7).random((30, 5, 3)).astype("float32")
        build_profile(tiny_lstm, x)
        build_profile(tiny_lstm, x, y=np.asarray(tiny_lstm(x)).argmax(1), inputs="correct")
        yield


def test_every_registered_criterion_is_checked():
    assert {name for name, _ in VARIANTS} == set(CRITERIA)


@pytest.mark.parametrize("name,params", VARIANTS)
def test_common_criterion_checks(name, params, tiny_lstm, tiny_x):
    cov = get_criterion(name, tiny_lstm, **params)
    assert cov.total > 0 and cov.rate() == 0.0 and cov.covered == 0
    rates = []
    for a, b in ((0, 1), (1, 4), (4, 9)):
        cov.update(tiny_x[a:b])
        rates.append(cov.rate())
        assert 0.0 <= rates[-1] <= 1.0
    assert rates == sorted(rates), "coverage must not fall under update"
    assert cov.n_inputs == 9
    df = cov.by_layer()
    assert list(df.columns) == ["layer", "kind", "total", "covered", "rate"]
    assert df["total"].sum() == cov.total and df["covered"].sum() == cov.covered
    curve = cov.curve()
    assert len(curve) == 9 and np.all(np.diff(curve) >= 0)
    assert curve[-1] == pytest.approx(cov.rate())
    unc = cov.report.uncovered()
    assert len(unc) == cov.total - cov.covered
    if len(unc):
        d = cov.describe(int(unc[0]))
        assert {"layer", "kind", "step", "unit"} <= set(d)
    config = cov.get_config()
    again = type(cov).from_config(tiny_lstm, json.loads(json.dumps(config)))
    assert again.get_config() == config
    cov.reset()
    assert cov.rate() == 0.0 and cov.n_inputs == 0 and len(cov.curve()) == 0


def test_thresholds_read_without_forward_pass(tiny_lstm, tiny_x):
    cov = ContributionCoverage(tiny_lstm, threshold=0.25)
    cov.update(tiny_x)
    rates = [cov.rate(t) for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert rates == sorted(rates, reverse=True) and rates[-1] == 0.0
    assert cov.rate(0.5) == ContributionCoverage(tiny_lstm, threshold=0.5).update(tiny_x).rate()


@pytest.mark.parametrize("name", ["mnist-lstm", "stacked-mnist-lstm", "mnist-gru", "stacked-mnist-gru",
                                  "imdb-lstm", "stacked-imdb-lstm", "imdb-gru", "stacked-imdb-gru"])
def test_counts_agree_with_zoo(name):
    from rnncon_core.zoo import build_model, contributions_total, count_neurons
    model = build_model(name)
    assert ContributionCoverage(model).total == contributions_total(model)
    assert NeuronCoverage(model).total == count_neurons(model)
    steps = 28 if "mnist" in name else 500
    edge = ContributionCoverage(model, granularity="edge")
    in_dim = 28 if "mnist" in name else 32
    gates = 4 if "lstm" in name else 3
    expected = steps * gates * 128 * (in_dim + 128) + 128 * 32 + 32 * (10 if "mnist" in name else 1)
    if "stacked" in name:
        expected += steps * gates * 128 * (128 + 128)
    assert edge.total == expected


def test_parameters_are_validated(tiny_lstm, tiny_gru):
    with pytest.raises(InputError, match="threshold"):
        ContributionCoverage(tiny_lstm, threshold=1.5)
    with pytest.raises(InputError, match="granularity"):
        ContributionCoverage(tiny_lstm, granularity="neuron")
    with pytest.raises(InputError, match="no parameter"):
        ContributionCoverage(tiny_lstm, k=3)
    with pytest.raises(InputError, match="unknown criterion"):
        get_criterion("kmnc-typo", tiny_lstm)
    with pytest.raises(UnsupportedModelError, match="LSTM"):
        get_criterion("csc", tiny_gru)
    with pytest.raises(InputError, match="no threshold"):
        get_criterion("hsc", tiny_lstm).rate(0.3)


def test_bad_inputs_to_update(tiny_lstm, tiny_x):
    cov = ContributionCoverage(tiny_lstm)
    bad = tiny_x.copy()
    bad[2, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        cov.update(bad)
    with pytest.raises(InputError, match="shape"):
        cov.update(tiny_x[:, :, :2])
    assert cov.n_inputs == 0


def test_hidden_state_top_k(tiny_lstm, tiny_x):
    cov = get_criterion("hsc", tiny_lstm, k=1)
    cov.update(tiny_x[:1])
    from rnncon_core.trace import Tracer
    tr = Tracer(tiny_lstm)(tiny_x[:1])
    # exactly the argmax unit of every (layer, step) is covered
    want = np.concatenate([np.eye(s.units, dtype=bool)[tr.layers[s.name].h.numpy()[0].argmax(1)].ravel()
                           for s in cov.tracer.specs if s.kind != "dense"])
    np.testing.assert_array_equal(cov.report.covered_mask(), want)


def test_cell_state_sections(tiny_lstm, tiny_x):
    cov = get_criterion("csc", tiny_lstm)
    cov.update(tiny_x)
    from rnncon_core.trace import Tracer
    tr = Tracer(tiny_lstm)(tiny_x)
    tc = np.tanh(tr.layers["lstm_1"].c.numpy())
    sec = np.digitize(tc, [-0.8, -0.2, 0.2, 0.8])
    want = np.zeros(tc.shape[1:] + (5,), bool)
    for s in range(5):
        want[..., s] = (sec == s).any(axis=0)
    seg = cov.segments[0]
    np.testing.assert_array_equal(cov.report.covered_mask()[:seg.size].reshape(seg.shape), want)
    assert cov.sections()["cells"].iloc[0] == sum(s.size // 5 for s in cov.segments)


def test_nc_matches_scaled_outputs(tiny_gru, tiny_x):
    cov = NeuronCoverage(tiny_gru, threshold=0.4)
    cov.update(tiny_x)
    from rnncon_core.trace import Tracer
    tr = Tracer(tiny_gru)(tiny_x)
    parts = []
    for s in cov.tracer.specs:
        o = tr.layers[s.name].output.numpy().reshape(len(tiny_x), -1)
        lo, hi = o.min(1, keepdims=True), o.max(1, keepdims=True)
        parts.append(((o - lo) / (hi - lo)).max(0))
    np.testing.assert_allclose(cov._state.max_values(), np.concatenate(parts), atol=1e-6)


def test_by_gate_step_shapes(tiny_gru, tiny_x):
    cov = ContributionCoverage(tiny_gru, threshold=0.5)
    cov.update(tiny_x)
    df = cov.by_gate_step("gru_2")
    assert list(df.index) == ["z:x", "z:h", "r:x", "r:h", "h:x", "h:h"]
    assert list(df.columns) == list(range(5))
    one = cov.by_gate_step("gru_2", input_index=3)
    mine = cov.by_gate_step("gru_2", x=tiny_x[3:4])
    assert one.equals(mine) and (one.values <= df.values + 1e-12).all()
    with pytest.raises(InputError, match="recurrent"):
        cov.by_gate_step("output")


def test_select_threshold(tiny_lstm, tiny_x):
    y = np.array([0, 1, 0, 1, 2, 0, 1, 2, 2])
    best, table = select_threshold(tiny_lstm, tiny_x, y, candidates=(0.2, 0.5, 0.8))
    assert best in (0.2, 0.5, 0.8)
    assert table.loc[table["max_difference"].idxmax(), "threshold"] == best
    for lab in (0, 1, 2):
        want = ContributionCoverage(tiny_lstm, threshold=0.5).update(tiny_x[y == lab]).rate()
        assert table.loc[table["threshold"] == 0.5, f"label_{lab}"].item() == pytest.approx(want)


def _cli(capsys, monkeypatch, *args):
    """Run `rnncon ARGS` in this process through the real entry point; (code, stdout, stderr)."""
    from rnncon_core.cli import main
    monkeypatch.setattr(sys, "argv", ["rnncon", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def model_file(tmp_path_factory, tiny_lstm, tiny_x):
    d = tmp_path_factory.mktemp("cli")
    tiny_lstm.save(d / "tiny.keras")
    np.save(d / "x.npy", tiny_x)
    return d


def test_cli_coverage_json(model_file, capsys, monkeypatch):
    code, stdout, err = _cli(capsys, monkeypatch, "coverage", "--model", str(model_file / "tiny.keras"),
                             "--inputs", str(model_file / "x.npy"), "--criterion", "rconc",
                             "--threshold", "0.3", "--granularity", "edge", "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert set(out) >= {"criterion", "threshold", "granularity", "n_inputs", "total", "covered",
                        "rate", "by_layer"}
    assert out["criterion"] == "rconc" and out["threshold"] == 0.3 and out["n_inputs"] == 9
    assert out["granularity"] == "edge"
    assert [set(r) for r in out["by_layer"]] == [{"layer", "kind", "total", "covered", "rate"}] * 4
    assert sum(r["total"] for r in out["by_layer"]) == out["total"]
    code, stdout, err = _cli(capsys, monkeypatch, "sweep", "--model", str(model_file / "tiny.keras"),
                             "--inputs", str(model_file / "x.npy"), "--thresholds", "0,0.5", "--json")
    assert code == 0, err
    sweep = json.loads(stdout)["sweep"]
    assert [s["threshold"] for s in sweep] == [0.0, 0.5] and sweep[0]["rate"] >= sweep[1]["rate"]
    code, stdout, err = _cli(capsys, monkeypatch, "coverage", "--model", str(model_file / "tiny.keras"),
                             "--inputs", str(model_file / "x.npy"), "--criterion", "hsc", "--json")
    assert code == 0 and json.loads(stdout)["threshold"] is None


def test_cli_errors(model_file, capsys, monkeypatch):
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", str(model_file / "tiny.keras"))
    assert code == 2 and "--dataset" in err
    np.save(model_file / "bad.npy", np.zeros((2, 4, 3), "float32"))
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", str(model_file / "tiny.keras"),
                        "--inputs", str(model_file / "bad.npy"), "--json")
    assert code == 2 and "shape" in err and "Traceback" not in err


def test_rconc_defaults_and_config():
    """Defaults: per-step normalization of |contributions|; get_config reports both."""
    import keras
    model = keras.Sequential([keras.Input((3, 2)), keras.layers.LSTM(2), keras.layers.Dense(2)])
    config = ContributionCoverage(model).get_config()
    assert config["normalize"] == "step" and config["values"] == "abs"
    with pytest.raises(InputError, match="normalize must be one of 'step', 'layer', 'model'"):
        ContributionCoverage(model, normalize="global")
    with pytest.raises(InputError, match="values must be one of 'abs', 'signed'"):
        ContributionCoverage(model, values="square")


def test_default_threshold_per_data_set(tiny_lstm, tiny_text):
    from rnncon_core.coverage import default_threshold
    from rnncon_core.data import DATASETS
    assert {d: default_threshold(d) for d in DATASETS} == {
        "mnist": 0.25, "fashion-mnist": 0.25, "imdb": 0.5, "digits": 0.25}
    assert default_threshold(tiny_lstm) == 0.25 and default_threshold(tiny_text) == 0.5
    with pytest.raises(InputError, match="unknown data set 'cifar'"):
        default_threshold("cifar")


def test_step_scopes_give_zero_where_a_step_is_blank(tiny_lstm):
    """Per-step normalization: a step whose x^t is all zeros has no activated x contribution
    (Figure 12's empty columns), and every other step has its own maximum of 1."""
    x = np.random.default_rng(3).random((1, 5, 3)).astype("float32")
    x[:, 2] = 0.0
    cov = ContributionCoverage(tiny_lstm)
    v = cov.profile(x)[0]
    seg = cov.segments[0]                              # lstm_1's x part, (T, J)
    xpart = v[seg.offset:seg.offset + seg.size].reshape(seg.shape)
    assert np.all(xpart[2] == 0)
    assert np.allclose(np.delete(xpart, 2, axis=0).max(axis=1), 1.0)


@pytest.mark.parametrize("name,params", [("rconc", {}), ("rconc", {"granularity": "edge"}),
                                         ("nc", {}), ("hsc", {})])
def test_graphs_compiled_once_per_model_and_configuration(name, params, tiny_lstm, tiny_x):
    """A new criterion object of the same configuration reuses the compiled graphs (no
    retracing), in any thread, and gets the same result; another configuration does not."""
    import threading
    first = get_criterion(name, tiny_lstm, **params).update(tiny_x)
    second = get_criterion(name, tiny_lstm, threshold=0.6, **params) if name != "hsc" \
        else get_criterion(name, tiny_lstm, **params)
    fns = [k for k, v in vars(first).items() if callable(v) and k.startswith("_")]
    assert fns and all(getattr(second, k) is getattr(first, k) for k in fns)
    results = {}

    def work(i):
        results[i] = get_criterion(name, tiny_lstm, **params).update(tiny_x)._state.max_values()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v in results.values():
        np.testing.assert_allclose(v, first._state.max_values(), atol=1e-6)
    if name == "rconc":
        other = get_criterion(name, tiny_lstm, normalize="layer", **params)
        assert all(getattr(other, k) is not getattr(first, k) for k in fns)


def test_cli_state_saves_and_goes_on(model_file, capsys, monkeypatch, tiny_lstm, tiny_x):
    """--save-state then --state: the union of both runs, as one criterion over both."""
    model, x = str(model_file / "tiny.keras"), str(model_file / "x.npy")
    state = str(model_file / "state.npz")
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs", x,
                        "--n", "4", "--save-state", state, "--json")
    assert code == 0, err
    code, stdout, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs", x,
                             "--state", state, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    want = ContributionCoverage(tiny_lstm).update(tiny_x[:4]).update(tiny_x)
    assert out["n_inputs"] == 13 and out["covered"] == want.covered
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs", x,
                        "--state", state, "--normalize", "layer")
    assert code == 2 and "same criterion options" in err and "Traceback" not in err


def test_nc_reads_a_one_unit_sigmoid_output_as_its_probability(tiny_text, tiny_ids):
    """Min-max over one neuron is always 0: a binary classifier's sigmoid output is read as
    P(positive) instead, so NC covers it at t when some input gives P > t."""
    from rnncon_core.coverage import NeuronCoverage
    nc = NeuronCoverage(tiny_text, threshold=0.0)
    assert nc.one_unit_layers() == {"probability": ["output"], "unscaled": []}
    nc.update(tiny_ids)
    p = tiny_text.predict(tiny_ids, verbose=0)[:, 0]
    row = nc.by_layer(0.0).set_index("layer").loc["output"]
    assert (row["total"], row["covered"]) == (1, 1)
    below, above = float(p.max()) - 1e-3, float(p.max()) + 1e-3
    assert nc.by_layer(below).set_index("layer").loc["output", "covered"] == 1
    assert nc.by_layer(above).set_index("layer").loc["output", "covered"] == 0


@pytest.mark.parametrize("granularity", ["unit", "edge"])
def test_a_chunk_divisor_shrinks_the_update_chunks_not_the_result(monkeypatch, tiny_lstm,
                                                                  tiny_x, granularity):
    """RNNCON_CHUNK_DIVISOR (coverage.engine.CHUNK_DIVISOR; the dashboard server sets 4):
    smaller update chunks, the same coverage."""
    from rnncon_core.coverage import ContributionCoverage, engine
    whole = ContributionCoverage(tiny_lstm, granularity=granularity).update(tiny_x)
    monkeypatch.setattr(engine, "CHUNK_DIVISOR", 2 ** 22)
    assert engine.chunk_elements(2 ** 24) == 4
    small = ContributionCoverage(tiny_lstm, granularity=granularity)
    if granularity == "edge":
        assert small.engine.chunk_size() < len(tiny_x)
    small.update(tiny_x)
    assert small.rate(0.3) == whole.rate(0.3) and small.covered == whole.covered
