"""Every bad input the CLI knows of, in one table: exit code 2, one line `error: ...` on stderr
naming the problem, no traceback, and no file changed outside a run (docs/errors.md documents
the same table; a test keeps the two in step). Then what is not a refusal: a read-only run
store listed, a float64 model's PGD run on a float32 copy, exit codes 1 and 3 and the JUnit file
that records them, and the checks that come before TensorFlow is imported (issue 42)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "errors.md"
IDS: dict = {}          # run ids the fixture makes, for the command lines ({damaged}, ...)


def _read_only(path: Path) -> bool:
    """Make ``path`` (a folder, its files) unwritable for this process: permissions, and for
    root, whom permissions do not stop, the immutable flag. False where neither works."""
    for p in [*path.rglob("*"), path]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    if os.geteuid() != 0:
        return True
    done = subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True)
    return done.returncode == 0


def _writable_again(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
    for p in [path, *path.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Tiny models and data files of every kind the table needs."""
    d = tmp_path_factory.mktemp("cli-errors")
    _make(d)
    yield d
    for folder in ("ro", "ro_store"):
        _writable_again(d / folder)


def _make(d: Path) -> None:
    import keras
    keras.utils.set_random_seed(0)
    L = keras.layers

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
    _make_issue_42(d, keras, img, rng)


def _make_issue_42(d: Path, keras, img, rng) -> None:
    """The files of issue 42's cases: data sets bad in their training split or their declared
    kind, a config naming keras.utils.get_file, a profile of all inputs, campaign runs with a
    damaged checkpoint, a read-only folder and a read-only run store."""
    from rnncon_core.coverage.profile import build_profile
    from rnncon_core.runs import RunStore
    y = np.array([0, 1, 2, 1])

    def dataset(name, **changes):
        np.savez(d / f"{name}.npz", **{"x_train": img, "y_train": y, "x_test": img,
                                       "y_test": y, **changes})
    nan = img.copy()
    nan[2, 3, 4] = np.nan
    dataset("ds_nan_train", x_train=nan)
    inf = img.copy()
    inf[1, 0, 0] = np.inf
    dataset("ds_inf_train", x_train=inf)
    dataset("ds_image_ok")
    dataset("ds_image5", x_train=img * 5, kind=np.array("image"))
    dataset("ds_neg_labels", y_train=np.array([0, -1, 2, 1]))
    dataset("ds_kind_audio", kind=np.array("audio"))
    np.savez(d / "ds_objects.npz", x_train=np.array([{"a": 1}] * 4, dtype=object),
             y_train=y, x_test=img, y_test=y, allow_pickle=True)
    (d / "ds_text.npz").write_bytes(b"this is not an archive at all\n" * 4)
    with zipfile.ZipFile(d / "image.keras") as src, \
            zipfile.ZipFile(d / "getfile.keras", "w") as dst:
        for item in src.infolist():      # an initializer that would fetch a URL
            data = src.read(item.filename)
            if item.filename == "config.json":
                config = __import__("json").loads(data)
                config["config"]["layers"][-1]["config"]["kernel_initializer"] = {
                    "module": "keras.utils", "class_name": "get_file", "registered_name": None,
                    "config": {"origin": "http://127.0.0.1:9/x", "fname": "x"}}
                data = __import__("json").dumps(config).encode()
            dst.writestr(item, data)
    model = keras.saving.load_model(d / "image.keras")
    build_profile(model, img, path=d / "prof_all.npz")              # all training inputs
    RunStore(d / "runs")                                            # opened once, made here
    campaigns = RunStore(d / "campaigns")
    config = {"model": str(d / "image.keras"), "dataset": "inputs", "guide": "none",
              "guide_params": {}, "budget": "20 calls", "seeds": 4, "seed": 0, "params": {},
              "kind": "image", "workers": 0, "resumed_from": None}
    ids = {}
    for key, resumed_from, checkpoint in (("good", None, True), ("damaged_child", "good", False),
                                          ("damaged", None, False)):
        with campaigns.start("campaign", model=config["model"], method="none",
                             config={**config, "resumed_from": ids.get(resumed_from)}) as run:
            if checkpoint:       # a readable snapshot (counters only)
                np.savez(run.path / "checkpoint.npz", batches=np.int64(3))
            else:                # bytes that are no archive: numpy would call them a pickle
                (run.path / "checkpoint.npz").write_bytes(b"\x00garbage" * 64)
            run.finish({"partial": False})
        ids[key] = run.run_id
    ro_store = RunStore(d / "ro_store")
    with ro_store.start("generate", model="m", method="fgsm", config={}) as run:
        run.finish({"n_seeds": 4, "n_adversarial": 1})
    ids["ro_run"] = run.run_id
    IDS.update(ids)
    (d / "ro").mkdir()
    (d / "ro" / "kept.txt").write_text("a file in a folder that cannot be written")
    IDS["read_only"] = _read_only(d / "ro") and _read_only(d / "ro_store")


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
    # issue 42: checked before the work, not after it
    ("junit-folder", "check --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--max-faults 0 --junit {d}", "--junit {d} is a folder"),
    ("junit-under-a-file", "check --model {d}/image.keras --inputs {d}/img.npy --labels "
     "{d}/y.npy --max-faults 0 --junit {d}/blocker/out.xml", "cannot create the folder"),
    ("junit-unwritable", "check --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--max-faults 0 --junit {d}/ro/out.xml", "--junit {d}/ro/out.xml cannot be written"),
    ("html-unwritable", "check --model {d}/image.keras --inputs {d}/img.npy --labels {d}/y.npy "
     "--max-faults 0 --html {d}/ro/sub/out.html", "--html {d}/ro/sub/out.html cannot be written"),
    ("save-state-in-unwritable-folder", "coverage --model {d}/image.keras --inputs {d}/img.npy "
     "--save-state {d}/ro/s.state", "--save-state {d}/ro/s.state cannot be written"),
    ("profile-path-unwritable", "profile --model {d}/image.keras --dataset {d}/ds_image_ok.npz "
     "--profile-path {d}/ro/p.npz", "--profile-path {d}/ro/p.npz cannot be written"),
    ("out-dir-under-a-file", "report campaign --models {d}/image.keras --out-dir "
     "{d}/blocker/report", "cannot create the folder"),
    ("report-html-out-dir-unwritable", "report html --model {d}/image.keras --dataset digits "
     "--out-dir {d}/ro/report", "--out-dir {d}/ro/report cannot be written"),
    ("train-out-dir-under-a-file", "train mnist-lstm --out-dir {d}/blocker/models",
     "cannot create the folder"),
    ("resume-damaged-checkpoint", "campaign --resume {damaged} --runs-dir {d}/campaigns",
     "its checkpoint is damaged"),
    ("resume-damaged-checkpoint-start-afresh", "campaign --resume {damaged} --runs-dir "
     "{d}/campaigns", "start afresh: rnncon campaign --model {d}/image.keras"),
    ("resume-damaged-checkpoint-last-good", "campaign --resume {damaged_child} --runs-dir "
     "{d}/campaigns", "rnncon campaign --resume {good}"),
    ("dataset-nan-in-x-train", "retrain --model {d}/image.keras --from-run nope --dataset "
     "{d}/ds_nan_train.npz --runs-dir {d}/runs", "ds_nan_train.npz x_train holds 1 NaN"),
    ("dataset-inf-in-x-train", "coverage --model {d}/image.keras --dataset {d}/ds_inf_train.npz",
     "x_train holds 1 NaN or infinite"),
    ("dataset-image-out-of-range", "coverage --model {d}/image.keras --dataset "
     "{d}/ds_image5.npz", "declared kind='image', so its values must lie in [0, 1]"),
    ("dataset-negative-labels", "coverage --model {d}/image.keras --dataset "
     "{d}/ds_neg_labels.npz", "negative labels"),
    ("dataset-kind-unknown", "coverage --model {d}/image.keras --dataset {d}/ds_kind_audio.npz",
     "kind must be image, sequence or text"),
    ("dataset-npz-not-an-archive", "coverage --model {d}/image.keras --dataset {d}/ds_text.npz",
     "it is not an archive"),
    ("dataset-npz-python-objects", "coverage --model {d}/image.keras --dataset "
     "{d}/ds_objects.npz", "Python objects"),
    ("model-initializer-get-file", "coverage --model {d}/getfile.keras --inputs {d}/series.npy",
     "custom code"),
    ("model-name-misspelt", "coverage --model mnist-lstn --dataset mnist",
     "did you mean mnist-lstm?"),
    ("dataset-name-misspelt", "generate --model {d}/image.keras --dataset mnsit --runs-dir "
     "{d}/runs", "did you mean mnist?"),
    ("architecture-misspelt", "train mnist-lstn --out-dir {d}/trained", "did you mean mnist-lstm?"),
    ("vocabulary-missing", "generate --model {d}/text.keras --method eda --inputs {d}/ids.npy "
     "--labels {d}/y_text.npy --vocab {d}/none.json --runs-dir {d}/runs", "no such file"),
    ("profile-of-other-inputs", "coverage --model {d}/image.keras --inputs {d}/img.npy "
     "--criterion state --profile-path {d}/prof_all.npz", "was built from all the training inputs"),
    ("profile-missing", "coverage --model {d}/image.keras --inputs {d}/img.npy --criterion state "
     "--profile-path {d}/none.npz", "no training profile at"),
    ("read-only-store-write", "runs --cancel {ro_run} --runs-dir {d}/ro_store", "cannot be written"),
    ("runs-kind-misspelt", "runs --kind generat --runs-dir {d}/runs", "did you mean generate?"),
    ("campaign-seed-negative", "campaign --model {d}/image.keras --inputs {d}/img.npy --labels "
     "{d}/y.npy --seed -1 --runs-dir {d}/runs", "--seed must be an integer of at least 0"),
    ("campaign-mutation-unknown", "campaign --model {d}/image.keras --inputs {d}/img.npy "
     "--labels {d}/y.npy --mutations pixel,blurr --runs-dir {d}/runs",
     "no mutation family 'blurr'"),
    ("report-text-max-fraction", "report text --max-fraction 5 --out-dir {d}/report",
     "--max-fraction must be a number in (0, 1]"),
    ("report-criteria-sizes", "report criteria --sizes 0,25 --out-dir {d}/report",
     "--sizes must be suite sizes of at least 1"),
    ("report-coverage-n-negative", "report coverage --n-mnist -1 --out-dir {d}/report",
     "--n-mnist must be an integer of at least 0"),
    ("report-retraining-epochs-zero", "report retraining --epochs 0 --out-dir {d}/report",
     "--epochs must be an integer of at least 1"),
    ("report-generation-iterations-zero", "report generation --iterations 0 --out-dir "
     "{d}/report", "--iterations must be an integer of at least 1"),
]
READ_ONLY_CASES = {"junit-unwritable", "html-unwritable", "save-state-in-unwritable-folder",
                   "profile-path-unwritable", "report-html-out-dir-unwritable",
                   "read-only-store-write"}


def _snapshot(*roots) -> dict:
    """Every file under ``roots``: (size, modification time) by path (SQLite's -wal/-shm
    side files, which come and go with a connection, left out)."""
    out = {}
    for root in roots:
        for p in Path(root).rglob("*"):
            if p.is_file() and not p.name.endswith(("-wal", "-shm")):
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def _main(argv, capsys) -> tuple[int, str, str]:
    from rnncon_core.cli import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert lines and lines[-1].startswith("error: "), err
    assert len([line for line in lines if line.startswith("error")]) == 1, err
    return lines[-1]


@pytest.mark.parametrize("case, line, says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(files, case, line, says, capsys, monkeypatch, tmp_path):
    """Exit code 2, one line naming the problem, nothing on stdout, and no file changed in the
    fixture's folder or the working directory (no run, no report, no probe left)."""
    if case in READ_ONLY_CASES and not IDS["read_only"]:
        pytest.skip("this process can write whatever it may (root without chattr)")
    monkeypatch.setenv("RNNCON_RUNS", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    before = _snapshot(files, tmp_path)
    code, out, err = _main(line.format(d=files, **IDS).split(), capsys)
    assert code == 2, (case, err)
    assert says.format(d=files, **IDS) in _one_line(err), err
    assert out == ""
    assert _snapshot(files, tmp_path) == before, "a file changed"




def test_the_table_is_documented():
    text = DOC.read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M))
    assert documented == {c[0] for c in CASES}


def _env() -> dict:
    """The environment of a real `rnncon` process on this checkout's code."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_a_real_process_prints_one_line(files):
    """The installed entry point, in its own process: exactly one line on stderr and exit
    code 2 (TensorFlow's start-up lines are silenced before it loads, without
    TF_CPP_MIN_LOG_LEVEL set by the caller)."""
    for args in (["coverage", "--model", str(files / "image.keras"), "--inputs",
                  str(files / "img255.npy")],
                 ["coverage", "--model", str(files / "float64.keras"), "--inputs",
                  str(files / "img.npy")]):
        out = subprocess.run([sys.executable, "-m", "rnncon_core", *args], capture_output=True,
                             text=True, env=_env(), cwd=ROOT)
        assert out.returncode == 2 and out.stderr.startswith("error: "), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


FAST = """
import sys, time
from rnncon_core.cli import main
for line in sys.argv[1:]:
    t0 = time.perf_counter()
    try:
        main(line.split())
    except SystemExit as e:
        print(e.code, round(time.perf_counter() - t0, 2), line, flush=True)
print("tensorflow" in sys.modules, "keras" in sys.modules)
"""


def test_names_and_paths_fail_before_tensorflow(files, tmp_path):
    """A misspelt model or data set, a missing file and a bad --junit path: exit 2 in < 5 s
    each, TensorFlow and Keras never imported (one process runs them all in turn)."""
    d = files
    lines = ["coverage --model mnist-lstn --dataset mnist",
             "generate --model mnist-lstn --method pgd",
             "campaign --model mnist-lstn --budget 100calls",
             f"check --model mnist-lstn --max-faults 0 --junit {tmp_path}/out.xml",
             f"check --model {d}/image.keras --max-faults 0 --junit {d}",
             f"coverage --model mnist-lstm --dataset mnsit",
             f"generate --model mnist-lstm --dataset mnsit",
             f"coverage --model {d}/image.keras --inputs {d}/none.npy",
             f"coverage --model {d}/none.keras --inputs {d}/img.npy",
             f"retrain --model {d}/image.keras --from-run nope --dataset {d}/none.npz",
             f"retrain --model {d}/image.keras --from-run nope --dataset {d}/ds_nan_train.npz"]
    out = subprocess.run([sys.executable, "-c", FAST, *lines], capture_output=True, text=True,
                         env=_env(), cwd=tmp_path, timeout=120)
    rows = out.stdout.strip().splitlines()
    assert rows[-1] == "False False", out.stdout + out.stderr   # tensorflow, keras
    assert len(rows) == len(lines) + 1, out.stdout + out.stderr
    for row in rows[:-1]:
        code, seconds, line = row.split(" ", 2)
        assert code == "2" and float(seconds) < 5, row
    # the JUnit file of the check whose --junit was good records exit code 2, nothing else
    assert [p.name for p in tmp_path.iterdir()] == ["out.xml"]
    assert '<property name="exit_code" value="2" />' in (tmp_path / "out.xml").read_text()


def test_read_only_store_is_listed_and_reported(files, capsys, monkeypatch, tmp_path):
    """A run store this process cannot write is listed (`rnncon runs`, --json too) and its runs
    reported; changing it is one line (the table's read-only-store-write)."""
    if not IDS["read_only"]:
        pytest.skip("this process can write whatever it may (root without chattr)")
    before = _snapshot(files / "ro_store")
    code, out, err = _main(["runs", "--runs-dir", str(files / "ro_store"), "--json"], capsys)
    assert code == 0, err
    assert [r["run_id"] for r in __import__("json").loads(out)["runs"]] == [IDS["ro_run"]]
    code, out, err = _main(["runs", "--runs-dir", str(files / "ro_store")], capsys)
    assert code == 0 and IDS["ro_run"] in out, err
    from rnncon_core.runs import RunStore
    store = RunStore.for_reading(files / "ro_store")
    assert store.read_only and store.get(IDS["ro_run"]).summary["n_seeds"] == 4
    assert _snapshot(files / "ro_store") == before


def test_float64_model_pgd_runs_on_a_float32_copy(files, capsys, tmp_path):
    """PGD reads no trace: a float64 model runs as a float32 copy (a note says so, the run's
    config records it), where the trace-guided methods still refuse it (table:
    model-float64-generate)."""
    import json

    import keras
    model = keras.saving.load_model(files / "float64.keras")
    x = np.load(files / "img.npy")
    np.save(tmp_path / "y.npy", np.asarray(model(x.astype("float64"))).argmax(1))
    code, out, err = _main(["generate", "--model", str(files / "float64.keras"), "--inputs",
                            str(files / "img.npy"), "--labels", str(tmp_path / "y.npy"),
                            "--method", "pgd", "--iterations", "2", "--runs-dir",
                            str(tmp_path / "runs"), "--json"], capsys)
    assert code == 0, err
    assert "note: the model computes in float64" in err and "float32 copy" in err
    run = json.loads(out)
    assert run["n_seeds"] == 4
    config = json.loads((tmp_path / "runs" / run["run_id"] / "config.json").read_text())
    assert config["model_dtype"] == "float64, run as a float32 copy"


def test_internal_error_is_exit_3_with_the_log(files, capsys, monkeypatch, tmp_path):
    """A bug (here: an exception the code does not expect, raised where the coverage is
    computed) is one line naming the log with its traceback, exit code 3, never 1 or 2."""
    import rnncon_core.cli.common as cli       # (its internal-error log)

    def broken(*args, **kw):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr("rnncon_core.cli.coverage._model_and_inputs", broken)
    monkeypatch.setattr(cli, "_LOG", [tmp_path / "rnncon-error.log"])
    code, out, err = _main(["coverage", "--model", str(files / "image.keras"), "--inputs",
                            str(files / "img.npy")], capsys)
    assert code == 3
    line = _one_line(err)
    assert "internal error (ZeroDivisionError: a bug)" in line
    assert str(tmp_path / "rnncon-error.log") in line
    log = (tmp_path / "rnncon-error.log").read_text()
    assert "Traceback" in log and "ZeroDivisionError: a bug" in log


def test_check_records_its_exit_code_in_junit(files, capsys, monkeypatch, tmp_path):
    """`check`: an input error found after --junit was checked is exit 2, and the JUnit file
    says so (an error element, property exit_code 2); an internal error: 3, named likewise."""
    import xml.etree.ElementTree as ET

    import rnncon_core.cli.common as cli       # (its internal-error log)
    monkeypatch.chdir(tmp_path)
    junit = tmp_path / "ci" / "rnncon.xml"
    base = ["check", "--model", str(files / "image.keras"), "--max-faults", "0", "--junit",
            str(junit), "--runs-dir", str(files / "runs")]
    code, _, err = _main([*base, "--dataset", str(files / "ds_image5.npz")], capsys)
    assert code == 2 and "declared kind='image'" in _one_line(err)
    suite = ET.parse(junit).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["exit_code"] == "2" and suite.get("errors") == "1"
    assert "declared kind='image'" in suite.find("testcase/error").get("message")

    def broken(*args, **kw):
        raise KeyError("a bug")
    monkeypatch.setattr("rnncon_core.campaign.run_campaign", broken)
    monkeypatch.setattr(cli, "_LOG", [tmp_path / "rnncon-error.log"])
    code, _, err = _main([*base, "--inputs", str(files / "img.npy"), "--labels",
                          str(files / "y.npy")], capsys)
    assert code == 3 and "internal error (KeyError" in _one_line(err)
    suite = ET.parse(junit).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["exit_code"] == "3"
    assert str(tmp_path / "rnncon-error.log") in suite.find("testcase/error").get("message")


def test_readme_check_example_says_what_it_does():
    """The README's `rnncon check` example says when it exits 1, and the text after it names
    the HTML report it writes beside the XML and which bound would fail by design."""
    text = (ROOT / "README.md").read_text()
    start = text.index("rnncon check --model mnist-lstm")
    example = text[start:text.index("\n", text.index("--junit", start))]
    assert "exit 1" in example, example
    after = text[start:text.index("\n## ", start)]
    assert "out.html" in after and "by design" in after, after
