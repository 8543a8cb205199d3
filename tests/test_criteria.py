"""The profile-based criteria: the profile's life cycle and errors, save/merge, the CLI, and
the criteria report's statistics."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rnncon_core.coverage import CRITERIA, build_profile, fingerprint, get_criterion, statefile
from rnncon_core.errors import InputError, UnsupportedModelError
from tests.test_coverage import _cli  # the CLI through its real entry point

PROFILED = [n for n, c in CRITERIA.items() if "profile_path" in c.params]


def profiles(model, x):
    """Both profiles: of all inputs, and of those classified as labelled (labels: the
    model's own predictions, so every input is kept)."""
    y = np.asarray(model(x)).argmax(1)
    build_profile(model, x, y=y, inputs="correct")
    return build_profile(model, x)


@pytest.fixture(scope="module")
def cache(tmp_path_factory, tiny_lstm):
    from rnncon_core import paths
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paths, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        yield paths.CACHE_DIR


def test_missing_profile_says_what_to_run(cache, tiny_gru):
    for name in PROFILED:
        with pytest.raises(InputError, match="rnncon profile"):
            get_criterion(name, tiny_gru)


def test_profile_is_found_by_fingerprint_and_checked(cache, tiny_lstm, tiny_gru, tiny_x):
    path = build_profile(tiny_lstm, tiny_x)
    assert path.name == f"{fingerprint(tiny_lstm)}-all.npz" and path.parent.parent == cache
    assert get_criterion("kmnc", tiny_lstm).total > 0
    with pytest.raises(InputError, match="another model"):
        get_criterion("nbc", tiny_gru, profile_path=str(path))
    with pytest.raises(InputError, match="profile_path"):
        get_criterion("snac", tiny_lstm, profile_path=3)


def test_parameters_and_models(cache, tiny_lstm, tiny_x):
    import keras
    profiles(tiny_lstm, tiny_x)
    with pytest.raises(InputError, match="k must be"):
        get_criterion("kmnc", tiny_lstm, k=0)
    with pytest.raises(InputError, match="no recurrent layer 'dense'"):
        get_criterion("state", tiny_lstm, layer="dense")
    with pytest.raises(InputError, match="length"):
        get_criterion("tc", tiny_lstm, length=9)
    with pytest.raises(InputError, match="no threshold"):
        get_criterion("state", tiny_lstm).rate(0.5)
    rnn = keras.Sequential([keras.Input((5, 3)), keras.layers.SimpleRNN(3),
                            keras.layers.Dense(2)])
    build_profile(rnn, tiny_x)
    with pytest.raises(UnsupportedModelError, match="forget"):
        get_criterion("bc", rnn, view="forget")
    # on the very inputs the ranges come from, the step holding the largest value scores
    # (max - min) / (max - min) = 1 >= the threshold: at least one step is covered
    for name in ("bc", "sc"):
        crit = get_criterion(name, rnn).update(tiny_x)
        assert 1 <= crit.covered <= crit.total and crit.rate() == crit.covered / crit.total


@pytest.mark.parametrize("name", ["bc", "state-weighted", "transition", "rconc-nbc", "tknp"])
def test_merge_and_save_are_exact(cache, tiny_lstm, tiny_x, name, tmp_path):
    profiles(tiny_lstm, np.random.default_rng(4).random((20, 5, 3)).astype("float32"))
    whole = get_criterion(name, tiny_lstm).update(tiny_x)
    a = get_criterion(name, tiny_lstm).update(tiny_x[:4])
    b = get_criterion(name, tiny_lstm).update(tiny_x[4:])
    a.merge(b)
    assert a.covered == whole.covered and a.rate() == pytest.approx(whole.rate())
    np.testing.assert_allclose(a.curve(), whole.curve())
    again = statefile.load(tiny_lstm, statefile.save(whole, tmp_path / name), type(whole))
    assert again.covered == whole.covered and again.n_inputs == whole.n_inputs


def test_size_controlled_tau_and_interval():
    from rnncon_core.reports.criteria import _fisher_ci, _tau, stratified_tau
    rng = np.random.default_rng(0)
    size = rng.choice([25, 50, 100, 200], 800).astype(float)
    faults = size * 0.3 + rng.normal(0, 2, 800)
    cov = size * 0.01 + rng.normal(0, 0.01, 800)      # grows with size only
    assert _tau(cov, faults) > 0.5                      # size alone makes them agree
    tau, lo, hi = stratified_tau(cov, faults, size)
    assert lo < 0 < hi and abs(tau) < 0.1
    cov2 = cov + faults * 0.005                          # carries faults beyond size
    tau, lo, hi = stratified_tau(cov2, faults, size)
    assert tau > 0.2 and lo > 0
    lo, hi = _fisher_ci(0.3, 200)
    assert lo < 0.3 < hi and hi - lo < 0.2


def test_cli_profile_coverage_sweep(cache, tiny_lstm, tiny_x, tmp_path, capsys, monkeypatch):
    tiny_lstm.save(tmp_path / "tiny.keras")
    np.save(tmp_path / "x.npy", tiny_x)
    model, x = str(tmp_path / "tiny.keras"), str(tmp_path / "x.npy")
    prof = tmp_path / "prof.npz"
    monkeypatch.setattr("rnncon_core.cli.coverage._load_inputs",
                        lambda d, s, n, i: (tiny_x, None, "x"))
    code, out, err = _cli(capsys, monkeypatch, "profile", "--model", model, "--dataset", "mnist",
                          "--out", str(prof), "--json")
    assert code == 0, err
    assert json.loads(out)["profile"] == str(prof) and prof.is_file()
    code, out, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs", x,
                          "--criterion", "state", "--params",
                          f"components=2,cells=4,profile_inputs=all,profile_path={prof}", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["criterion"] == "state" and res["threshold"] is None and res["n_inputs"] == 9
    code, out, err = _cli(capsys, monkeypatch, "sweep", "--model", model, "--inputs", x,
                          "--criterion", "bc", "--thresholds", "0.5,1",
                          "--params", f"profile_path={prof}", "--json")
    assert code == 0, err
    sweep = json.loads(out)["sweep"]
    assert sweep[0]["rate"] >= sweep[1]["rate"]
    code, _, err = _cli(capsys, monkeypatch, "sweep", "--model", model, "--inputs", x,
                        "--criterion", "tknc", "--json")
    assert code == 2 and "no threshold" in err
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs", x,
                        "--criterion", "kmnc", "--params", "k", "--json")
    assert code == 2 and "NAME=VALUE" in err and "--params is deprecated" in err


def test_report_skips_what_a_model_lacks(cache, tiny_gru, tiny_x):
    import pandas as pd

    from rnncon_core.reports.criteria import _criteria, correlations
    profiles(tiny_gru, tiny_x)
    names = [n for n, _ in _criteria(tiny_gru)]
    assert "csc" not in names and {"rconc", "rconc-eq3", "state", "tknp"} <= set(names)
    rng = np.random.default_rng(1)
    t = pd.DataFrame({"model": ["a"] * 40 + ["b"] * 40, "size": [10, 20] * 40,
                      "faults": rng.integers(0, 9, 80), "fault_pairs": rng.integers(0, 5, 80),
                      "csc": [*rng.random(40), *[np.nan] * 40], "nc": rng.random(80)})
    corr = correlations(t, ["csc", "nc"])
    assert set(corr[corr["model"] == "b"]["criterion"]) == {"nc"}
    assert set(corr["size"]) == {10, 20, "stratified", "partial", "pooled"}


def test_composition_controlled_tau():
    """Coverage that only follows how many generated inputs a suite holds (and faults that
    follow the same count) has no signal once that count is held fixed."""
    import pandas as pd

    from rnncon_core.reports.criteria import correlations
    rng = np.random.default_rng(0)
    size = rng.choice([25, 50], 800)
    gen = (size * rng.random(800) * 0.4).astype(int)
    faults = gen * 0.9 + rng.normal(0, 1, 800)
    t = pd.DataFrame({"model": "a", "size": size, "n_clean": size - gen, "faults": faults,
                      "fault_pairs": faults, "c": gen * 0.01 + rng.normal(0, 0.05, 800)})
    c = correlations(t, ["c"]).set_index(["faults", "size"])
    assert c.loc[("faults", "stratified"), "tau"] > 0.4
    assert c.loc[("faults", "generated"), "tau"] < 0.15


@pytest.fixture(scope="module")
def profiled(cache, tiny_lstm, tiny_x):
    profiles(tiny_lstm, tiny_x)
    return tiny_lstm


@pytest.mark.parametrize("name", sorted(CRITERIA))
def test_every_criterion_config_round_trip_and_declared_checks(profiled, name):
    """get_config() -> get_criterion(name, model, **config) is an equal criterion; every
    declared number outside its range is an InputError naming the parameter and the value."""
    from rnncon_core.params import IntRange, Interval
    cov = get_criterion(name, profiled)
    config = json.loads(json.dumps(cov.get_config()))
    again = get_criterion(name, profiled, **{k: v for k, v in config.items() if k != "name"})
    assert again.get_config() == cov.get_config()
    for p in CRITERIA[name].params:
        if isinstance(p.check, (Interval, IntRange)):
            bad = p.check.lo - 1
            with pytest.raises(InputError, match=rf"^{p.name} must be .*got {bad}"):
                get_criterion(name, profiled, **{p.name: bad})
    with pytest.raises(InputError, match=rf"criterion '{name}' has no parameter 'wobble'"):
        get_criterion(name, profiled, wobble=1)


def test_cli_builds_the_profile_on_demand(cache, tiny_gru, tiny_x, tmp_path, capsys, monkeypatch):
    """`rnncon coverage --dataset D --criterion state` builds the missing profile from D's
    training split (with a progress line); with --inputs only, one line says what to pass."""
    from rnncon_core import paths
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "cache")     # no profile yet
    tiny_gru.save(tmp_path / "gru.keras")
    np.save(tmp_path / "x.npy", tiny_x)
    labels = np.asarray(tiny_gru(tiny_x)).argmax(1)
    seen = []

    def fake_inputs(d, split, n, i):
        if i is not None:
            return tiny_x, None, "x"
        seen.append((split, n))
        return (tiny_x[:n] if n else tiny_x), (labels[:n] if n else labels), f"{d} {split}"
    monkeypatch.setattr("rnncon_core.cli.coverage._load_inputs", fake_inputs)
    model = str(tmp_path / "gru.keras")
    code, _, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--inputs",
                        str(tmp_path / "x.npy"), "--criterion", "transition", "--json")
    assert code == 2 and "--dataset NAME" in err and len(err.strip().splitlines()) == 1
    code, out, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--dataset", "mnist",
                          "--criterion", "transition", "--n-profile", "8", "--json")
    assert code == 0, err
    assert ("train", 8) in seen and "building the training profile from 8" in err
    assert json.loads(out)["n_inputs"] == len(tiny_x)
    code, out, err = _cli(capsys, monkeypatch, "coverage", "--model", model, "--dataset", "mnist",
                          "--criterion", "transition", "--n-profile", "8", "--json")
    assert code == 0 and "building the training profile" not in err      # cached


def test_deepstellar_keeps_far_states_apart(cache, tiny_lstm, tiny_x):
    """Cells far outside the training range are not clipped to one cell beyond it (issue 42):
    two hidden states 5 and 20 training ranges out get two keys, each decoding to its own
    cells; a far state is no boundary item (nor major), so coverage does not change."""
    profiles(tiny_lstm, tiny_x)
    sc = get_criterion("state", tiny_lstm, components=2, cells=4)
    units = int(sc._spec.units)
    span = sc._hi - sc._lo
    keys = []
    for ranges in (5, 20):
        p = sc._lo - ranges * span                        # that many ranges below, each axis
        h = sc._mean + p @ sc._axes                       # a hidden state projecting there
        keys.append(int(sc.states_of_hidden(h[None].astype(np.float32))[0]))
        cells = sc.decode_state(keys[-1])
        assert all(-4 * ranges - 1 <= c <= -4 * ranges for c in cells), (ranges, cells)
    assert keys[0] != keys[1] and units == 3
    far = np.stack([sc._mean + (sc._lo - r * span) @ sc._axes for r in (5, 20)])
    regions = sc.regions_of_hidden(far.astype(np.float32))   # a guide's finite regions:
    assert regions[0] == regions[1] == 0 < sc.region_count()  # both in the cell below
    boundary = get_criterion("state-boundary", tiny_lstm, components=2, cells=4)
    assert not np.isin(keys, boundary._items).any() and not np.isin(keys, sc._items).any()
