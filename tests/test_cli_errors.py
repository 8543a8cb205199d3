"""Every bad input the CLI knows of, in one table: exit code 2, one line `error: ...` on stderr
naming the problem, no traceback. The same table is documented in docs/errors.md (a test keeps
the two in step)."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Tiny models and data files of every kind the table needs."""
    import keras
    keras.utils.set_random_seed(0)
    L = keras.layers
    d = tmp_path_factory.mktemp("cli-errors")

    def save(name, model):
        model.save(d / f"{name}.keras")

    save("image", keras.Sequential([keras.Input((8, 8)), L.LSTM(3), L.Dense(10, activation="softmax")]))
    save("text", keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(20, 3), L.LSTM(2),
                                   L.Dense(1, activation="sigmoid")]))
    save("series", keras.Sequential([keras.Input((5, 3)), L.LSTM(2), L.Dense(3, activation="softmax")]))
    save("regression", keras.Sequential([keras.Input((5, 3)), L.LSTM(2), L.Dense(1)]))
    save("per_step", keras.Sequential([keras.Input((5, 3)), L.LSTM(2, return_sequences=True),
                                       L.TimeDistributed(L.Dense(2, activation="softmax"))]))
    save("lambda", keras.Sequential([keras.Input((5, 3)), L.Lambda(lambda t: t * 2), L.LSTM(2)]))

    @keras.saving.register_keras_serializable(package="cli_errors")
    class Doubler(L.Layer):
        def call(self, x):
            return x * 2

    save("custom", keras.Sequential([keras.Input((5, 3)), Doubler(), L.LSTM(2)]))
    inp = keras.Input((5, 3))
    save("branches", keras.Model(inp, L.Add()([L.LSTM(2)(inp), L.GRU(2)(inp)])))
    i1, i2 = keras.Input((5, 3)), keras.Input((5, 3))
    save("two_inputs", keras.Model([i1, i2], L.Dense(1)(L.LSTM(2)(L.Concatenate()([i1, i2])))))
    save("attention", keras.Model(inp, L.Dense(1)(L.Flatten()(L.MultiHeadAttention(1, 2)(inp, inp)))))
    save("float64", keras.Sequential([keras.Input((8, 8), dtype="float64"),
                                      L.LSTM(3, dtype="float64"),
                                      L.Dense(10, activation="softmax", dtype="float64")]))
    save("stateful", keras.Sequential([keras.Input((8, 8), batch_size=4), L.LSTM(3, stateful=True),
                                       L.Dense(10, activation="softmax")]))
    with zipfile.ZipFile(d / "image.keras") as src, zipfile.ZipFile(d / "deep.keras", "w") as dst:
        for item in src.infolist():     # a config.json nested 200,000 levels deep
            dst.writestr(item, b"[" * 200_000 + b"]" * 200_000 if item.filename == "config.json"
                         else src.read(item.filename))
    (d / "corrupt.keras").write_bytes(b"not a zip at all")
    (d / "model.h5").write_bytes(b"\x89HDF")
    with zipfile.ZipFile(d / "image.keras") as src, zipfile.ZipFile(d / "truncated.keras", "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, data[: len(data) // 3] if item.filename.endswith(".h5") else data)
    rng = np.random.default_rng(0)
    img = rng.random((4, 8, 8)).astype(np.float32)
    np.save(d / "img.npy", img)
    np.save(d / "img255.npy", (img * 255).astype(np.uint8))
    np.save(d / "img255f.npy", img * 255)
    np.save(d / "img_range.npy", img * 2 - 0.5)
    nan = img.copy()
    nan[0, 0, 0] = np.nan
    np.save(d / "img_nan.npy", nan)
    np.save(d / "series.npy", rng.random((4, 5, 3)).astype(np.float32))
    np.save(d / "series_wide.npy", (rng.normal(size=(4, 5, 3)) * 3).astype(np.float32))
    np.save(d / "ids.npy", rng.integers(0, 20, (4, 6)).astype(np.int32))
    np.save(d / "ids_big.npy", rng.integers(0, 50_000, (4, 6)).astype(np.int32))
    np.save(d / "ids_float.npy", rng.random((4, 6)).astype(np.float32))
    np.save(d / "y.npy", np.array([0, 1, 2, 1]))
    np.save(d / "y_big.npy", np.array([0, 1, 12, 1]))
    np.save(d / "y_short.npy", np.array([0, 1]))
    np.save(d / "y_text.npy", np.array([0, 1, 1, 0]))
    np.save(d / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    (d / "table.csv").write_text("1,2,3\n4,5,6\n")
    np.save(d / "y_soft.npy", np.full((4, 10), 0.1))
    (d / "garbage.state").write_bytes(b"garbage" * 100)
    np.savez(d / "whole.npz", meta=np.array('{"criterion": "rconc"}'), big=rng.random(5000))
    (d / "truncated.state").write_bytes((d / "whole.npz").read_bytes()[:3000])
    np.savez(d / "no_meta.npz", a=np.zeros(3))
    np.savez(d / "meta_not_json.npz", meta=np.array("{not json"))
    np.savez(d / "meta_incomplete.npz", meta=np.array('{"criterion": "rconc"}'))
    np.savez(d / "ds_missing.npz", x_train=img, y_train=np.array([0, 1, 2, 1]))
    (d / "ds_garbage.npz").write_bytes(b"PK garbage")
    np.savez(d / "arrays.npz", x=img)
    (d / "blocker").write_text("a file where a folder should be")
    corrupt_store = d / "corrupt_store"
    corrupt_store.mkdir()
    (corrupt_store / "index.sqlite").write_bytes(b"garbage" * 500)
    return d


# (case id, command line with {d} for the fixture folder, what the message must say)
CASES = [
    # models
    ("model-missing", "coverage --model {d}/nope.keras --inputs {d}/img.npy", "no such model file"),
    ("model-not-keras-format", "coverage --model {d}/model.h5 --inputs {d}/img.npy", "'.keras' files"),
    ("model-corrupt", "coverage --model {d}/corrupt.keras --inputs {d}/img.npy", "not a valid .keras file"),
    ("model-truncated-weights", "coverage --model {d}/truncated.keras --inputs {d}/img.npy",
     "damaged or truncated"),
    ("model-lambda", "coverage --model {d}/lambda.keras --inputs {d}/series.npy", "Lambda layer"),
    ("model-custom-class", "coverage --model {d}/custom.keras --inputs {d}/series.npy", "custom code"),
    ("model-branches", "coverage --model {d}/branches.keras --inputs {d}/series.npy", "branches"),
    ("model-several-inputs", "coverage --model {d}/two_inputs.keras --inputs {d}/series.npy",
     "2 inputs"),
    ("model-attention", "coverage --model {d}/attention.keras --inputs {d}/series.npy",
     "multi_head_attention"),
    ("head-regression", "generate --model {d}/regression.keras --inputs {d}/series.npy "
     "--labels {d}/y.npy --method fgsm --runs-dir {d}/runs", "regression head"),
    ("head-per-step", "generate --model {d}/per_step.keras --inputs {d}/series.npy "
     "--labels {d}/y.npy --method fgsm --runs-dir {d}/runs", "one value per time step"),
    # inputs
    ("inputs-8bit-integers", "coverage --model {d}/image.keras --inputs {d}/img255.npy", "/ 255"),
    ("inputs-0-255-floats", "coverage --model {d}/image.keras --inputs {d}/img255f.npy",
     "divide 8-bit pixels by 255"),
    ("inputs-outside-0-1", "coverage --model {d}/image.keras --inputs {d}/img_range.npy",
     "must lie in [0, 1]"),
    ("inputs-nan", "coverage --model {d}/image.keras --inputs {d}/img_nan.npy", "NaN"),
    ("inputs-wrong-shape", "coverage --model {d}/image.keras --inputs {d}/series.npy",
     "do not fit this model"),
    ("ids-outside-vocabulary", "coverage --model {d}/text.keras --inputs {d}/ids_big.npy",
     "the model's Embedding has 20 words"),
    ("ids-not-integers", "coverage --model {d}/text.keras --inputs {d}/ids_float.npy",
     "must be integers"),
    ("generate-ids-outside-vocabulary", "generate --model {d}/text.keras --method eda --inputs "
     "{d}/ids_big.npy --labels {d}/y_text.npy --runs-dir {d}/runs", "own vocabulary"),
    ("file-missing", "coverage --model {d}/image.keras --inputs {d}/none.npy", "no such file"),
    ("file-not-npy", "coverage --model {d}/image.keras --inputs {d}/table.csv", "not a .npy file"),
    ("file-npz", "coverage --model {d}/image.keras --inputs {d}/arrays.npz", ".npz archive"),
    ("file-python-objects", "coverage --model {d}/image.keras --inputs {d}/objects.npy",
     "Python objects"),
    ("labels-missing", "generate --model {d}/image.keras --inputs {d}/img.npy --runs-dir {d}/runs",
     "together"),
    ("labels-outside-classes", "generate --model {d}/image.keras --inputs {d}/img.npy --labels "
     "{d}/y_big.npy --method fgsm --runs-dir {d}/runs", "class indices in [0, 10)"),
    ("labels-count", "generate --model {d}/image.keras --inputs {d}/img.npy --labels "
     "{d}/y_short.npy --method fgsm --runs-dir {d}/runs", "4 inputs but 2 labels"),
    ("dataset-and-inputs", "generate --model {d}/image.keras --dataset digits --inputs {d}/img.npy "
     "--labels {d}/y.npy --runs-dir {d}/runs", "not both"),
    ("coverage-dataset-and-inputs", "coverage --model {d}/image.keras --dataset digits --inputs "
     "{d}/img.npy", "one of them"),
    ("dataset-unknown", "coverage --model {d}/image.keras --dataset cifar", "unknown data set"),
    ("dataset-unknown-for-model", "generate --model {d}/series.keras --method fgsm --runs-dir "
     "{d}/runs", "--inputs X.npy --labels Y.npy"),
    ("vocabulary-not-one", "generate --model {d}/text.keras --method eda --inputs {d}/ids.npy "
     "--labels {d}/y_text.npy --vocab {d}/table.csv --runs-dir {d}/runs", "not a vocabulary"),
    ("method-unknown", "generate --model {d}/image.keras --method magic --runs-dir {d}/runs",
     "unknown generation method"),
    ("criterion-unknown", "coverage --model {d}/image.keras --inputs {d}/img.npy --criterion xyz",
     "unknown criterion"),
    # run store
    ("store-unwritable", "generate --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--runs-dir {d}/blocker/runs", "cannot be written"),
    ("store-corrupt", "runs --runs-dir {d}/corrupt_store", "runs --repair"),
    ("run-unknown", "runs --cancel nope --runs-dir {d}/runs", "no run 'nope'"),
    ("retrain-run-unknown", "retrain --model {d}/image.keras --from-run nope --runs-dir {d}/runs",
     "no run 'nope'"),
    # models the trace cannot run (were tracebacks)
    ("model-float64-coverage", "coverage --model {d}/float64.keras --inputs {d}/img.npy",
     "computes in float64"),
    ("model-float64-edge", "coverage --model {d}/float64.keras --inputs {d}/img.npy "
     "--granularity edge", "to_float32(model)"),
    ("model-float64-nc", "coverage --model {d}/float64.keras --inputs {d}/img.npy --criterion nc",
     "computes in float64"),
    ("model-float64-generate", "generate --model {d}/float64.keras --inputs {d}/img.npy --labels "
     "{d}/y.npy --method rconc --runs-dir {d}/runs", "computes in float64"),
    ("model-stateful-generate", "generate --model {d}/stateful.keras --inputs {d}/img.npy "
     "--labels {d}/y.npy --method fgsm --runs-dir {d}/runs", "stateful=True"),
    ("model-stateful-coverage", "coverage --model {d}/stateful.keras --inputs {d}/img.npy",
     "stateful=True"),
    ("model-config-too-deep", "coverage --model {d}/deep.keras --inputs {d}/img.npy",
     "nested more than"),
    # coverage states (were tracebacks)
    ("state-garbage", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/garbage.state", "not a coverage state"),
    ("state-truncated", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/truncated.state", "truncated or damaged"),
    ("state-no-meta", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/no_meta.npz", "no meta record"),
    ("state-meta-not-json", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/meta_not_json.npz", "JSONDecodeError"),
    ("state-meta-incomplete", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/meta_incomplete.npz", "lacks the criterion, config or fingerprint"),
    ("state-missing", "coverage --model {d}/image.keras --inputs {d}/img.npy --state "
     "{d}/none.state", "no coverage state file"),
    ("save-state-unwritable", "coverage --model {d}/image.keras --inputs {d}/img.npy "
     "--save-state {d}/blocker/s.state", "cannot create the folder"),
    ("save-state-folder", "coverage --model {d}/image.keras --inputs {d}/img.npy "
     "--save-state {d}", "is a folder"),
    # files and labels
    ("inputs-folder", "coverage --model {d}/image.keras --inputs {d}", "is a folder"),
    ("inputs-device", "coverage --model {d}/image.keras --inputs /dev/zero",
     "not a regular file"),
    ("labels-not-one-hot", "generate --model {d}/image.keras --inputs {d}/img.npy --labels "
     "{d}/y_soft.npy --method fgsm --runs-dir {d}/runs", "one-hot"),
    ("dataset-npz-lacks-keys", "coverage --model {d}/image.keras --dataset {d}/ds_missing.npz",
     "lacks x_test, y_test"),
    ("dataset-npz-damaged", "coverage --model {d}/image.keras --dataset {d}/ds_garbage.npz",
     "not a readable .npz data set"),
    ("kind-unknown", "coverage --model {d}/image.keras --inputs {d}/img.npy --kind audio",
     "--kind must be one of"),
    ("kind-text-on-float-model", "coverage --model {d}/image.keras --inputs {d}/img.npy "
     "--kind text", "does not fit this model"),
    # arguments, each checked from its declaration
    ("seed-negative", "generate --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--method fgsm --seed -1 --runs-dir {d}/runs", "--seed must be an integer of at least 0"),
    ("seeds-zero", "generate --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--method fgsm --seeds 0 --runs-dir {d}/runs", "--seeds must be an integer of at least 1"),
    ("n-zero", "coverage --model {d}/image.keras --inputs {d}/img.npy --n 0",
     "--n must be an integer of at least 1"),
    ("param-given-twice", "coverage --model {d}/image.keras --inputs {d}/img.npy --threshold 0.1 "
     "--param threshold=0.9", "--threshold 0.1 and --param threshold=0.9"),
    ("retrain-learning-rate-negative", "retrain --model {d}/image.keras --from-run nope "
     "--learning-rate -1 --runs-dir {d}/runs", "--learning-rate must be a number in (0, inf)"),
    ("retrain-learning-rate-zero", "retrain --model {d}/image.keras --from-run nope "
     "--learning-rate 0 --runs-dir {d}/runs", "--learning-rate must be a number in (0, inf)"),
    ("retrain-max-inputs-zero", "retrain --model {d}/image.keras --from-run nope --max-inputs 0 "
     "--runs-dir {d}/runs", "--max-inputs must be an integer of at least 1"),
    ("retrain-epochs-zero", "retrain --model {d}/image.keras --from-run nope --epochs 0 "
     "--runs-dir {d}/runs", "--epochs must be an integer of at least 1"),
    ("train-epochs-zero", "train mnist-lstm --epochs 0 --out-dir {d}/trained",
     "--epochs must be an integer of at least 1"),
    ("train-learning-rate-negative", "train mnist-lstm --learning-rate -0.1 --out-dir {d}/trained",
     "--learning-rate must be a number in (0, inf)"),
    ("runs-force-alone", "runs --force --runs-dir {d}/runs", "--force goes with"),
    # usage
    ("option-unknown", "coverage --model {d}/image.keras --wobble 3", "No such option"),
    ("option-missing", "generate --method fgsm", "Missing option"),
    ("option-not-a-number", "generate --model {d}/image.keras --seeds many", "Invalid value"),
]


@pytest.mark.parametrize("case, line, says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(files, case, line, says, capsys, monkeypatch, tmp_path):
    from rnncon_core.cli import main
    monkeypatch.setenv("RNNCON_RUNS", str(tmp_path / "runs"))
    with pytest.raises(SystemExit) as e:
        main(line.format(d=files).split())
    out = capsys.readouterr()
    assert e.value.code == 2, (case, out.err)
    lines = out.err.strip().splitlines()
    assert "Traceback" not in out.err and "Traceback" not in out.out
    assert lines and lines[-1].startswith("error: "), out.err
    assert len([l for l in lines if l.startswith("error")]) == 1
    assert says in lines[-1], lines[-1]
    assert out.out == ""


def test_the_table_is_documented():
    text = DOC.read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M))
    assert documented == {c[0] for c in CASES}


def test_a_real_process_prints_one_line(files):
    """The installed entry point, in its own process: exactly one line on stderr and exit
    code 2 (TensorFlow's start-up lines are silenced before it loads, without
    TF_CPP_MIN_LOG_LEVEL set by the caller)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    for args in (["coverage", "--model", str(files / "image.keras"), "--inputs",
                  str(files / "img255.npy")],
                 ["coverage", "--model", str(files / "float64.keras"), "--inputs",
                  str(files / "img.npy")]):
        out = subprocess.run([sys.executable, "-m", "rnncon_core", *args], capture_output=True,
                             text=True, env=env)
        assert out.returncode == 2 and out.stderr.startswith("error: "), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
