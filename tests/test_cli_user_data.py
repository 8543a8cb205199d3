"""A user's own model and data set end to end through the CLI (coverage -> generate -> retrain
-> report), and what the CLI does with the user's files and keys: coverage states saved and
loaded under any name, --kind, one-hot labels, Ctrl-C during generate, a run made from
--inputs/--labels that retraining cannot use alone. Tiny models, a few seconds each."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def _cli(args, capsys, code=0):
    from rnncon_core.cli import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert e.value.code == code, out.err
    return out


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A user's LSTM on 6 x 3 sensor series (values in [0, 1], 3 classes), briefly trained,
    and their data set as one .npz (kind "sequence")."""
    import keras
    keras.utils.set_random_seed(4)
    d = tmp_path_factory.mktemp("own")
    rng = np.random.default_rng(4)

    def series(n):
        y = rng.integers(0, 3, n)
        t = np.linspace(0, 3, 6)[None, :, None]
        x = 0.5 + 0.3 * np.sin(t * (y[:, None, None] + 1)) + 0.05 * rng.normal(size=(n, 6, 3))
        return np.clip(x, 0, 1).astype(np.float32), y

    (xtr, ytr), (xte, yte) = series(90), series(40)
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(5),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy")
    model.fit(xtr, ytr, epochs=4, verbose=0)
    model.save(d / "mine.keras")
    np.savez(d / "mine.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte,
             kind=np.array("sequence"), class_names=np.array(["rest", "walk", "run"]))
    np.save(d / "x.npy", xte)
    np.save(d / "y.npy", yte)
    np.save(d / "y_onehot.npy", np.eye(3)[yte])
    return d


def test_own_model_and_data_set_end_to_end(own, tmp_path, capsys):
    """coverage -> generate -> retrain -> report html, all from `--dataset mine.npz`."""
    m, ds, runs = own / "mine.keras", own / "mine.npz", tmp_path / "runs"
    cov = json.loads(_cli(["coverage", "--model", m, "--dataset", ds, "--json"], capsys).out)
    assert cov["n_inputs"] == 40 and 0 < cov["rate"] <= 1
    _cli(["report", "html", "--model", m, "--dataset", ds, "--n", 10, "--out-dir", tmp_path],
         capsys)
    assert (tmp_path / "report-coverage-mine.html").stat().st_size > 10_000
    gen = json.loads(_cli(["generate", "--model", m, "--dataset", ds, "--method", "fgsm",
                           "--eps", "0.3", "--seeds", 12, "--runs-dir", runs, "--json"],
                          capsys).out)
    assert gen["n_adversarial"] >= 1, gen
    from rnncon_core.runs import RunStore
    assert RunStore(runs).get(gen["run_id"]).config["dataset"] == str(ds.resolve())
    ret = json.loads(_cli(["retrain", "--model", m, "--from-run", gen["run_id"], "--dataset", ds,
                           "--epochs", 1, "--repeats", 1, "--transfer-seeds", 0, "--no-control",
                           "--runs-dir", runs, "--json"], capsys).out)
    assert ret["repeats_done"] == 1 and Path(ret["best_model"]).exists()
    for run_id in (gen["run_id"], ret["run_id"]):
        _cli(["report", "html", "--run", run_id, "--runs-dir", runs, "--out-dir", tmp_path],
             capsys)
        assert (tmp_path / f"report-{run_id}.html").stat().st_size > 10_000


def test_retraining_a_run_of_own_inputs_says_what_to_pass(own, tmp_path, capsys):
    """A run made from --inputs/--labels records those files; retrain names them and says to
    pass --dataset DATA.npz (before: "unknown data set 'inputs'")."""
    m, runs = own / "mine.keras", tmp_path / "runs"
    out = _cli(["generate", "--model", m, "--inputs", own / "x.npy", "--labels",
                own / "y_onehot.npy", "--method", "fgsm", "--eps", "0.3", "--seeds", 12,
                "--runs-dir", runs, "--json"], capsys)
    assert "one-hot rows (40 x 3): read as class indices" in out.err
    gen = json.loads(out.out)
    from rnncon_core.runs import RunStore
    config = RunStore(runs).get(gen["run_id"]).config
    assert config["inputs_source"]["inputs"] == str((own / "x.npy").resolve())
    err = _cli(["retrain", "--model", m, "--from-run", gen["run_id"], "--runs-dir", runs],
               capsys, code=2).err
    assert "--dataset data.npz" in err and str(own / "x.npy") in err
    assert len(err.strip().splitlines()) == 1


def test_a_coverage_state_round_trips_under_any_name(own, tmp_path, capsys):
    """--save-state x.state writes x.state (not x.npz) and --state x.state goes on from it."""
    m, x = own / "mine.keras", own / "x.npy"
    state = tmp_path / "sub" / "x.state"
    first = json.loads(_cli(["coverage", "--model", m, "--inputs", x, "--n", 10,
                             "--save-state", state, "--json"], capsys).out)
    assert state.is_file() and not state.with_suffix(".npz").exists()
    both = json.loads(_cli(["coverage", "--model", m, "--inputs", x, "--state", state,
                            "--json"], capsys).out)
    assert first["n_inputs"] == 10 and both["n_inputs"] == 50
    from rnncon_core.coverage import get_criterion, statefile
    from rnncon_core.zoo import load_model
    model = load_model(m)
    cov = get_criterion("nc", model)
    cov.update(np.load(x)[:5])
    p = statefile.save(cov, tmp_path / "nc-state")  # no suffix: written as given
    assert p == tmp_path / "nc-state" and statefile.load(model, p).n_inputs == 5


def test_kind_sequence_lets_z_scored_data_through_a_28x28_model(tmp_path, capsys):
    import keras
    keras.utils.set_random_seed(0)
    keras.Sequential([keras.Input((28, 28)), keras.layers.GRU(2),
                      keras.layers.Dense(2, activation="softmax")]).save(tmp_path / "m.keras")
    z = np.random.default_rng(0).normal(size=(3, 28, 28)).astype(np.float32)
    np.save(tmp_path / "z.npy", z)
    args = ["coverage", "--model", tmp_path / "m.keras", "--inputs", tmp_path / "z.npy"]
    err = _cli(args, capsys, code=2).err
    assert "must lie in [0, 1]" in err and "--kind sequence" in err
    cov = json.loads(_cli(args + ["--kind", "sequence", "--json"], capsys).out)
    assert cov["n_inputs"] == 3


def test_ctrl_c_during_generate_cancels_the_run_and_keeps_its_outputs(own, tmp_path, capsys,
                                                                     monkeypatch):
    """A KeyboardInterrupt after the first batch: one line naming the run, status cancelled,
    the first batch's outputs kept."""
    from rnncon_core.generate import generator_class
    cls = generator_class("fgsm")
    calls = []
    original = cls._generate_batch

    def interrupted(self, x, y, rng):
        calls.append(len(x))
        if len(calls) > 1:
            raise KeyboardInterrupt
        return original(self, x, y, rng)

    monkeypatch.setattr(cls, "_generate_batch", interrupted)
    runs = tmp_path / "runs"
    err = _cli(["generate", "--model", own / "mine.keras", "--dataset", own / "mine.npz",
                "--method", "fgsm", "--seeds", 10, "--batch-size", 4, "--runs-dir", runs],
               capsys, code=130).err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines[-1].startswith("error: interrupted: run ") and "marked cancelled" in lines[-1]
    assert not any(line.startswith("error") for line in lines[:-1]) and "Traceback" not in err
    from rnncon_core.runs import RunStore
    info = RunStore(runs).list()[0]
    assert info.status == "cancelled"
    assert len(info.load_npz("outputs")["x_gen"]) == calls[0]
