"""The eight models of the paper's Table 1: build, train, save with a model card, load safely."""
from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .data import (INPUT_SHAPES, VOCAB_FILE, dataset_kind, datasets_fitting, default_dataset,
                   load_dataset)
from .errors import InputError, ModelLoadError, UnsupportedModelError, did_you_mean
from .io import atomic_save_keras, atomic_write_json, atomic_write_text, versions
from .lazy import keras, tf
from .onnx_import import load_onnx
from .paths import MODELS_DIR, ensure_dir


@dataclass(frozen=True)
class Architecture:
    name: str
    dataset: str            # the built-in data set it trains on (rnncon_core.data.DATA_SETS)
    cell: str               # "lstm" or "gru"
    stacked: bool
    # the paper's Table 1 figures, for the side-by-side view only (never reported as ours)
    paper_params: int
    paper_neurons: int
    paper_cons: int
    paper_accuracy: float | None

    @property
    def text(self) -> bool:
        """Whether it reads word ids (an Embedding first, one sigmoid unit) or images."""
        return dataset_kind(self.dataset) == "text"

    @property
    def layers_text(self) -> str:
        cell = self.cell.upper()
        rnn = f"{cell}(128, seq) -> {cell}(128)" if self.stacked else f"{cell}(128)"
        head = "Dense(1, sigmoid)" if self.text else "Dense(10, softmax)"
        emb = "Embedding(50000, 32) -> " if self.text else ""
        return f"{emb}{rnn} -> Dense(32) -> {head}"


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in [
    Architecture("mnist-lstm", "mnist", "lstm", False, 84_842, 170, 29_848, 98.76),
    Architecture("stacked-mnist-lstm", "mnist", "lstm", True, 216_426, 3_754, 58_520, 99.01),
    Architecture("mnist-gru", "mnist", "gru", False, 65_130, 170, 22_680, 98.53),
    Architecture("stacked-mnist-gru", "mnist", "gru", True, 164_202, 3_754, 44_184, 98.90),
    Architecture("imdb-lstm", "imdb", "lstm", False, 1_686_593, 161, 33_824, 87.24),
    Architecture("stacked-imdb-lstm", "imdb", "lstm", True, 1_818_177, 64_161, 66_592, 84.68),
    Architecture("imdb-gru", "imdb", "gru", False, 1_666_369, 161, 25_632, 86.59),
    Architecture("stacked-imdb-gru", "imdb", "gru", True, 1_765_441, 64_161, 50_208, 86.21),
]}
FEATURE_NET = "mnist-features"   # the small CNN whose features give FID and IS
MNIST_STEPS, MNIST_FEATURES = 28, 28
IMDB_STEPS, IMDB_VOCAB, IMDB_EMBED = 500, 50_000, 32
PAPER_IMDB_STEPS = 32            # the paper multiplies IMDB contributions by 32 (see PAPER_FACTS)
# IMDB models train on the last 200 ids of each review (2.5x faster on 2 CPU cores; the
# weights do not depend on the length) and are saved, and evaluated, with 500-id inputs.
IMDB_TRAIN_STEPS = 200


def build_model(name: str, seed: int | None = None, steps: int | None = None):
    """An untrained Table 1 architecture with named layers (lstm_1, dense_32, output, ...).

    ``steps`` changes the IMDB input length (training on shorter reviews); the parameters
    do not depend on it."""
    if name == FEATURE_NET:
        return _build_feature_net(seed)
    if name not in ARCHITECTURES:
        raise InputError(f"unknown architecture {name!r}; choose one of "
                         f"{', '.join(ARCHITECTURES)} (or {FEATURE_NET})")
    if seed is not None:
        keras.utils.set_random_seed(seed)
    a = ARCHITECTURES[name]
    Cell = keras.layers.LSTM if a.cell == "lstm" else keras.layers.GRU
    layers: list = []
    if not a.text:
        layers.append(keras.Input((MNIST_STEPS, MNIST_FEATURES), name="pixels"))
    else:
        layers.append(keras.Input((steps or IMDB_STEPS,), dtype="int32", name="words"))
        layers.append(keras.layers.Embedding(IMDB_VOCAB, IMDB_EMBED, name="embedding"))
    if a.stacked:
        layers.append(Cell(128, return_sequences=True, name=f"{a.cell}_1"))
        layers.append(Cell(128, name=f"{a.cell}_2"))
    else:
        layers.append(Cell(128, name=f"{a.cell}_1"))
    layers.append(keras.layers.Dense(32, activation="relu", name="dense_32"))
    if not a.text:
        layers.append(keras.layers.Dense(10, activation="softmax", name="output"))
    else:
        layers.append(keras.layers.Dense(1, activation="sigmoid", name="output"))
    model = keras.Sequential(layers, name=name.replace("-", "_"))
    loss = "binary_crossentropy" if a.text else "sparse_categorical_crossentropy"
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss, metrics=["accuracy"])
    return model


def _build_feature_net(seed: int | None):
    if seed is not None:
        keras.utils.set_random_seed(seed)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((MNIST_STEPS, MNIST_FEATURES), name="pixels"),
        L.Reshape((MNIST_STEPS, MNIST_FEATURES, 1)),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(),
        L.Flatten(), L.Dropout(0.3),
        L.Dense(128, activation="relu", name="features"),
        L.Dense(10, activation="softmax", name="output"),
    ], name="mnist_features")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


# ---------------------------------------------------------------- counts (Table 1)

def _rnn_gates(layer) -> int:
    return {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}.get(type(layer).__name__, 0)


def _steps(layer) -> int:
    return int(layer.input.shape[1])


def count_neurons(model) -> int:
    """#Neurons of Table 1: elements of every recurrent and Dense layer's output, per step
    for a layer that returns sequences (the input and the Embedding are not neurons)."""
    total = 0
    for layer in model.layers:
        if _rnn_gates(layer):
            total += layer.units * (_steps(layer) if layer.return_sequences else 1)
        elif type(layer).__name__ == "Dense":
            total += layer.units
    return total


def contributions_per_step(model) -> int:
    """Unit contributions of one time step by the paper's convention: x.U and h.W of every
    gate unit of every recurrent layer, plus every Dense unit."""
    total = 0
    for layer in model.layers:
        g = _rnn_gates(layer)
        if g:
            total += 2 * g * layer.units
        elif type(layer).__name__ == "Dense":
            total += layer.units
    return total


def contributions_total(model) -> int:
    """Unit contributions of the real structure: recurrent parts at every step, Dense once."""
    total = 0
    for layer in model.layers:
        g = _rnn_gates(layer)
        if g:
            total += 2 * g * layer.units * _steps(layer)
        elif type(layer).__name__ == "Dense":
            total += layer.units
    return total


def paper_convention_steps(name: str) -> int:
    return PAPER_IMDB_STEPS if ARCHITECTURES[name].text else MNIST_STEPS


# ---------------------------------------------------------------- safe loading

def model_path(name: str) -> Path:
    return MODELS_DIR / f"{name}.keras"


def card_path(name: str) -> Path:
    return MODELS_DIR / f"{name}.card.json"


def read_card(name: str) -> dict | None:
    p = card_path(name)
    return json.loads(p.read_text()) if p.exists() else None


def model_datasets(name_or_path: str | os.PathLike | None = None, model=None,
                   load: Callable | None = None) -> list[str]:
    """The data sets a model reads, its own first: its architecture's or its model card's,
    then the others whose inputs fit its input shape (``data.datasets_fitting``). The model
    (``model``, else ``load(name_or_path)``, default :func:`load_model`) is read only when its
    own data set is not known. Empty when nothing fits."""
    name = None if name_or_path is None else Path(str(name_or_path)).name.removesuffix(".keras")
    own = ARCHITECTURES[name].dataset if name in ARCHITECTURES else \
        (read_card(name) or {}).get("dataset") if name else None
    if own in INPUT_SHAPES:
        shape = INPUT_SHAPES[own]
    else:
        model = model if model is not None else (load or load_model)(name_or_path)
        shape = model.input_shape[1:]
    return ([own] if own else []) + [d for d in datasets_fitting(shape) if d != own]


def shipped_models() -> list[str]:
    names = list(ARCHITECTURES) + [FEATURE_NET]
    return [n for n in names if model_path(n).exists()]


_REFUSED = {"Lambda": "a Lambda layer runs arbitrary Python code",
            "TFSMLayer": "a TFSMLayer loads a SavedModel with its own code"}


def _check_config(node, where: str = "model") -> None:
    """Walk the saved config; refuse code-carrying layers and anything not built into Keras."""
    if isinstance(node, dict):
        cls = node.get("class_name")
        module = node.get("module")
        if isinstance(cls, str):
            if cls in _REFUSED:
                raise ModelLoadError(f"refused to load: the {where} holds a {cls} layer "
                                     f"({_REFUSED[cls]}). Replace it with built-in Keras layers "
                                     f"and save again.")
            # Keras' own classes have no registered name, except its model classes, which
            # register under their own name ("Functional") from a keras module
            registered = node.get("registered_name")
            keras_module = isinstance(module, str) and module.split(".")[0] == "keras"
            custom = registered if registered and not (keras_module and registered == cls) \
                else None
            if keras_module and not _serializable(module):
                custom = cls            # e.g. keras.utils.get_file named as an initializer
            if (isinstance(module, str) and not keras_module) or custom:
                raise ModelLoadError(
                    f"refused to load: the {where} uses {custom or cls!r} from module "
                    f"{module!r}, which is custom code. Only models made of built-in Keras "
                    f"layers are loaded.")
        for key, value in node.items():
            _check_config(value, f"layer {node.get('config', {}).get('name', where)}"
                          if key == "config" and isinstance(node.get("config"), dict) else where)
    elif isinstance(node, list):
        for item in node:
            _check_config(item, where)


# the Keras modules a saved model's config may name a class from (what Keras serializes:
# layers, models, initializers, regularizers, constraints, activations, optimizers, losses,
# metrics, dtype policies); any other (keras.utils.get_file, keras.src.saving...) is code
# that loading would run, refused as custom code
_SERIALIZABLE = ("keras", "keras.layers", "keras.models", "keras.initializers",
                 "keras.regularizers", "keras.constraints", "keras.activations",
                 "keras.optimizers", "keras.optimizers.schedules", "keras.losses",
                 "keras.metrics", "keras.dtype_policies")
_SERIALIZABLE_PREFIXES = ("keras.src.models.", "keras.src.layers.", "keras.src.ops.")


def _serializable(module: str) -> bool:
    return module in _SERIALIZABLE or module.startswith(_SERIALIZABLE_PREFIXES)


MAX_CONFIG_DEPTH = 200     # a saved Keras config nests a few dozen levels; deeper is not one


def _depth(node) -> int:
    """How deeply a loaded JSON value nests (without recursion: any depth is measured)."""
    deepest, todo = 0, [(node, 1)]
    while todo:
        item, d = todo.pop()
        deepest = max(deepest, d)
        if isinstance(item, dict):
            todo.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            todo.extend((v, d + 1) for v in item)
    return deepest


def load_model(name_or_path: str | os.PathLike, compile: bool = False):
    """A shipped model by name (``mnist-lstm``), any ``.keras`` file, or an ``.onnx`` file of a
    recurrent model (imported as the equivalent Keras model: ``onnx_import``), loaded safely.

    The file's config is read and checked before Keras sees it (:func:`check_model_file`):
    Lambda layers and custom (non-Keras) classes are refused, so no code from the file is
    executed; Keras' own ``safe_mode`` stays on as a second guard.
    """
    path = check_model_file(name_or_path)
    if path.suffix.lower() == ".onnx":
        return load_onnx(path)
    try:
        model = keras.saving.load_model(path, compile=compile, safe_mode=True)
    except Exception as e:  # Keras raises many kinds here; all mean "this file won't load"
        raise ModelLoadError(_load_failure(path, e)) from None
    return model


def check_architecture(name: str) -> None:
    """An architecture ``rnncon train`` builds (Table 1's, or the feature net), or an
    InputError listing them (with the nearest name)."""
    if name in ARCHITECTURES or name == FEATURE_NET:
        return
    raise InputError(f"unknown architecture {name!r}"
                     f"{did_you_mean(name, [*ARCHITECTURES, FEATURE_NET])}; choose one of "
                     f"{', '.join(ARCHITECTURES)} or {FEATURE_NET}")


def check_model_file(name_or_path: str | os.PathLike) -> Path:
    """The file of a shipped model name, a ``.keras`` or an ``.onnx`` path, checked without
    TensorFlow (fast: a command calls it before any other work): it exists; a ``.keras``
    archive's config.json is sane and names only built-in Keras classes (an ``.onnx`` file is
    checked when ``onnx_import`` reads it). A ModelLoadError (one line) otherwise."""
    text = str(name_or_path)
    path = model_path(text) if text in ARCHITECTURES or text == FEATURE_NET else Path(text)
    if not path.exists():
        if text in ARCHITECTURES or text == FEATURE_NET:
            raise ModelLoadError(f"model {text!r} is not shipped in {MODELS_DIR}: train it with "
                                 f"`rnncon train {text}`")
        near = did_you_mean(text, [*ARCHITECTURES, FEATURE_NET])
        raise ModelLoadError(f"no such model file: {path}{near}. Give a shipped model name "
                             f"({', '.join(ARCHITECTURES)}) or the path of a .keras or .onnx "
                             f"file.")
    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder: give a Keras 3 '.keras' file (a SavedModel "
                             f"folder is not read; in Keras, model.save('model.keras') writes "
                             f"one) or an '.onnx' file")
    if path.suffix.lower() == ".onnx":
        return path                     # read by onnx_import when loaded (no code runs)
    if path.suffix != ".keras":
        raise ModelLoadError(f"{path.name}: only Keras 3 '.keras' files and ONNX files of "
                             f"recurrent models ('.onnx', docs/onnx.md) are supported (in "
                             f"Keras, model.save('model.keras') writes one)")
    try:
        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, OSError) as e:
        raise ModelLoadError(f"{path.name} is not a valid .keras file (corrupt or not a Keras "
                             f"model: {type(e).__name__}: {e}). Save the model again with "
                             f"model.save('model.keras').") from None
    except RecursionError:
        config = None
    if config is None or _depth(config) > MAX_CONFIG_DEPTH:
        raise ModelLoadError(f"{path.name} is not a valid .keras file: its config.json is "
                             f"nested more than {MAX_CONFIG_DEPTH} levels deep (a Keras model's "
                             f"is a few dozen). Save the model again with "
                             f"model.save('model.keras').")
    _check_config(config)
    return path


def _load_failure(path: Path, e: Exception) -> str:
    """One line saying why Keras could not load a file whose config passed the check."""
    text = str(e)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if isinstance(e, OSError) or any(w in text.lower() for w in ("hdf5", "h5py", ".h5",
                                                                 "truncated", "signature")):
        return (f"could not read the weights of {path.name}: the file is damaged or truncated "
                f"({type(e).__name__}). Save the model again with model.save('model.keras').")
    return (f"could not load {path.name}: {type(e).__name__}: {first[:300]}. Save it again with "
            f"model.save('model.keras') from the Keras version that built it.")


def with_steps(model, steps: int):
    """The model itself, or, when its input leaves the number of time steps open (keras.Input
    ((None, F)) as in keras.io's examples), a copy with ``steps`` fixed and the same weights
    (the trace and coverage need a fixed number of steps)."""
    shape = tuple(model.input_shape)
    if len(shape) < 2 or shape[1] is not None:
        return model
    if isinstance(model, keras.Model) and len(getattr(model, "inputs", None) or []) > 1:
        return model
    dtype = model.inputs[0].dtype if getattr(model, "inputs", None) else "float32"
    inp = keras.Input((int(steps),) + shape[2:], dtype=dtype)
    try:
        copy = keras.models.clone_model(model, input_tensors=inp)
        copy.set_weights(model.get_weights())
    except Exception as e:   # a structure clone_model cannot rebuild: the trace will say why
        raise ModelLoadError(f"could not fix the model's time steps to {steps} "
                             f"({type(e).__name__}); give keras.Input a fixed number of steps "
                             f"and save it again") from None
    return copy


# ---------------------------------------------------------------- what a model outputs

def class_probabilities(p):
    """One column per class. The one rule for a one-unit output: a sigmoid unit p (N, 1) is a
    two-class classifier, P(class 1) = p, so it becomes [1 - p, p]; wider outputs are returned as
    they are. Takes NumPy arrays and TensorFlow tensors (differentiable)."""
    if p.shape[-1] != 1:
        return p
    if isinstance(p, np.ndarray):
        return np.concatenate([1.0 - p, p], axis=-1)
    return tf.concat([1.0 - p, p], axis=-1)


def class_labels(p) -> np.ndarray:
    """Predicted classes of classifier outputs (N, C) or a sigmoid unit (N, 1) (class 1 above
    one half), as int64."""
    return class_probabilities(np.asarray(p)).argmax(-1).astype(np.int64)


@dataclass(frozen=True)
class Head:
    """What a model's output is: ``kind`` softmax | sigmoid (one unit, two classes) | logits
    (no activation, two or more units) | regression (one linear unit) | multilabel (several
    sigmoid units) | sequence (one output per step) | multi (several outputs) | other."""
    kind: str
    classes: int | None      # number of classes of a classifier head, else None
    detail: str              # how the model ends, for messages

    @property
    def classifier(self) -> bool:
        return self.kind in ("softmax", "sigmoid", "logits")

    def require_classifier(self, what: str) -> "Head":
        """Self, or UnsupportedModelError saying why ``what`` needs a classifier head."""
        if self.classifier:
            return self
        why = {"regression": "it ends in one linear unit, a regression head (a binary "
                             "classifier's logit? add a sigmoid: activation='sigmoid')",
               "multilabel": "it ends in several sigmoid units (multi-label), not one class "
                             "per input",
               "sequence": "it outputs one value per time step, not one class per input",
               "multi": "it has several outputs"}.get(self.kind, "its output is not a class "
                                                                 "score")
        raise UnsupportedModelError(f"{what} needs a classifier (softmax, sigmoid or logits "
                                    f"output): this model is not one, {why} ({self.detail}). "
                                    f"Coverage works on any traced model.")

    def check_labels(self, y) -> np.ndarray:
        """Labels as int64 class indices within the head's classes, or InputError."""
        y = np.asarray(y).reshape(-1)
        if y.size and not np.issubdtype(y.dtype, np.integer):
            if not np.issubdtype(y.dtype, np.number) or not np.all(np.mod(y, 1) == 0):
                raise InputError(f"labels must be class indices (integers), got dtype "
                                 f"{y.dtype}")
        y = y.astype(np.int64)
        if self.classes and y.size and (y.min() < 0 or y.max() >= self.classes):
            raise InputError(f"labels must be class indices in [0, {self.classes}) for this "
                             f"model ({self.detail}); got values from {y.min()} to {y.max()}")
        return y

    def probabilities(self, out):
        """Class probabilities (N, C >= 2) from the model's output tensor: softmax of logits,
        a sigmoid unit as two classes (``class_probabilities``), else as is."""
        if self.kind == "logits":
            return tf.nn.softmax(out, axis=-1)
        return class_probabilities(out)


def output_head(model) -> Head:
    """The head of a Keras model, read from its last layer and output shape."""
    if len(getattr(model, "outputs", None) or [None]) > 1:
        return Head("multi", None, f"{len(model.outputs)} outputs")
    shape = tuple(model.output_shape)
    # the last layer that computes something (inference-time identities are looked through)
    layers = [l for l in model.layers if type(l).__name__ != "InputLayer"
              and not any(w in type(l).__name__ for w in ("Dropout", "Noise"))]
    last = layers[-1] if layers else None
    act = ""
    name = type(last).__name__ if last is not None else "none"
    if name == "Softmax":
        act = "softmax"
    elif last is not None and hasattr(last, "activation"):
        act = getattr(last.activation, "__name__", str(last.activation))
    elif name == "TimeDistributed" and hasattr(last.layer, "activation"):
        act = getattr(last.layer.activation, "__name__", "")
    units = shape[-1]
    detail = f"last layer {name}, activation {act or 'none'}, output shape {shape[1:]}"
    if len(shape) != 2:
        return Head("sequence" if len(shape) > 2 else "other", None, detail)
    if units == 1:
        kind = {"sigmoid": "sigmoid", "linear": "regression"}.get(act, "other")
        return Head(kind, 2 if kind == "sigmoid" else None, detail)
    kind = {"softmax": "softmax", "linear": "logits", "sigmoid": "multilabel"}.get(act, "other")
    return Head(kind, int(units) if kind in ("softmax", "logits") else None, detail)


# ---------------------------------------------------------------- training

ProgressFn = Callable[[dict], None]


def _stderr_progress(event: dict) -> None:
    if event.get("event") == "epoch":
        logs = " ".join(f"{k}={v:.4f}" for k, v in event["logs"].items())
        print(f"[{event['model']}] epoch {event['epoch']}/{event['epochs']} "
              f"({event['seconds']:.0f}s) {logs}", file=sys.stderr, flush=True)
    elif event.get("event") == "done":
        print(f"[{event['model']}] test accuracy {event['test_accuracy']:.4f}", file=sys.stderr,
              flush=True)


def default_epochs(name: str) -> int:
    return 2 if name in ARCHITECTURES and ARCHITECTURES[name].text else 80


SHIFT_PIXELS = 2   # image models train on digits moved by up to 2 pixels (8,000 digits only)


def shifted_batches(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int):
    """tf.data of (x, y) where each image moves by up to SHIFT_PIXELS in both directions."""
    p = SHIFT_PIXELS
    steps, feats = x.shape[1:]

    def shift(img, label):
        padded = tf.pad(img, [[p, p], [p, p]])
        return tf.image.random_crop(padded, [steps, feats], seed=seed), label

    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=seed)
            .map(shift, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
            .prefetch(tf.data.AUTOTUNE))


def train_model(name: str, epochs: int | None = None, batch_size: int = 128, seed: int = 0,
                validation_split: float = 0.1, patience: int | None = None, out_dir: Path | None = None,
                progress: ProgressFn = _stderr_progress, resume: bool = False,
                learning_rate: float = 1e-3) -> dict:
    """Train one architecture on our split, save ``<name>.keras`` and its model card.

    ``learning_rate`` is Adam's (1e-3 by default; lower it to go on from shipped weights)."""

    epochs = epochs or default_epochs(name)
    is_imdb = name in ARCHITECTURES and ARCHITECTURES[name].text
    patience = patience or (1 if is_imdb else 10)
    dataset = default_dataset("image") if name == FEATURE_NET else ARCHITECTURES[name].dataset
    ds = load_dataset(dataset)
    train_steps = IMDB_TRAIN_STEPS if is_imdb else None
    model = build_model(name, seed=seed, steps=train_steps)
    if learning_rate != 1e-3:
        model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=model.loss,
                      metrics=["accuracy"])
    previous = read_card(name) if resume else None
    if resume:   # go on from the shipped weights (the card keeps the earlier history)
        if previous is None:
            raise ModelLoadError(f"cannot resume {name}: it is not shipped yet")
        model.set_weights(load_model(name).get_weights())
    started = time.time()
    model, history = _fit(model, ds, name, epochs, batch_size, seed, validation_split,
                          patience, progress, started, train_steps)
    train_seconds = time.time() - started
    if previous and max(history.history["val_accuracy"]) <= max(previous["history"]["val_accuracy"]):
        progress({"event": "done", "model": name, "test_accuracy": previous["test_accuracy"]})
        return previous   # no better on validation: the shipped model stays as it is
    _, test_acc = model.evaluate(ds.x_test, ds.y_test, batch_size=512, verbose=0)
    out_dir = ensure_dir(Path(out_dir or MODELS_DIR))
    atomic_save_keras(model, out_dir / f"{name}.keras")
    if ds.vocab is not None and out_dir == MODELS_DIR and not VOCAB_FILE.exists():
        ds.vocab.save(VOCAB_FILE)
    card = _model_card(name, model, ds, dataset, history, previous, epochs, patience,
                       batch_size, seed, validation_split, learning_rate, train_seconds,
                       test_acc)
    atomic_write_json(out_dir / f"{name}.card.json", card)
    atomic_write_text(out_dir / f"{name}.md", _card_markdown(card))
    progress({"event": "done", "model": name, "test_accuracy": card["test_accuracy"]})
    return card


def _fit(model, ds, name, epochs, batch_size, seed, validation_split, patience, progress,
         started, train_steps):
    """Fit with early stopping on validation accuracy (images: a fixed validation tail and
    random shifts of the rest; text: the last ids of each review, then the weights moved to
    the shipped 500-id model). Returns the fitted model and Keras' history."""

    class Report(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            progress({"event": "epoch", "model": name, "epoch": epoch + 1, "epochs": epochs,
                      "seconds": time.time() - started,
                      "logs": {k: float(v) for k, v in (logs or {}).items()}})

    stop = keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=patience,
                                         restore_best_weights=True)
    callbacks = [stop, Report()]
    if ds.kind == "image":
        # a fixed validation tail; the rest is fed with random shifts (augmentation)
        n_val = int(round(len(ds.y_train) * validation_split))
        x_fit, y_fit = ds.x_train[:-n_val], ds.y_train[:-n_val]
        val = (ds.x_train[-n_val:], ds.y_train[-n_val:])
        callbacks.append(keras.callbacks.ReduceLROnPlateau(monitor="val_accuracy", factor=0.5,
                                                           patience=max(1, (patience + 1) // 3)))
        history = model.fit(shifted_batches(x_fit, y_fit, batch_size, seed), epochs=epochs,
                            validation_data=val, callbacks=callbacks, verbose=0)
    else:
        history = model.fit(ds.x_train[:, -train_steps:], ds.y_train, epochs=epochs,
                            batch_size=batch_size, validation_split=validation_split,
                            callbacks=callbacks, verbose=0, shuffle=True)
        trained, model = model, build_model(name)     # the shipped model reads 500 ids
        model.set_weights(trained.get_weights())
    return model, history


def _model_card(name, model, ds, dataset, history, previous, epochs, patience, batch_size,
                seed, validation_split, learning_rate, train_seconds, test_acc) -> dict:
    """The model card: architecture, data, training settings and history (added to the
    earlier card's when training went on from shipped weights), test accuracy, versions."""
    return {
        "name": name,
        "architecture": ARCHITECTURES[name].layers_text if name in ARCHITECTURES
        else "CNN feature network for FID/IS",
        "params": int(model.count_params()),
        "dataset": dataset,
        "data_source": ds.source,
        "train_size": int(len(ds.y_train)), "test_size": int(len(ds.y_test)),
        "validation_split": validation_split,
        "epochs_requested": epochs + (previous["epochs_requested"] if previous else 0),
        "epochs_run": len(history.history["loss"]) + (previous["epochs_run"] if previous else 0),
        "early_stopping": f"val_accuracy, patience {patience}, best weights restored",
        "augmentation": (f"random shifts of up to {SHIFT_PIXELS} pixels in both directions"
                         if ds.kind == "image" else
                         f"none; trained on the last {IMDB_TRAIN_STEPS} ids of each review, "
                         f"evaluated and shipped with {IMDB_STEPS}-id inputs"),
        "batch_size": batch_size, "seed": seed,
        "optimizer": (f"{previous['optimizer']}, then " if previous else "")
        + f"Adam({learning_rate:g})",
        "training_seconds": round(train_seconds + (previous["training_seconds"] if previous
                                                   else 0), 1),
        "test_accuracy": round(float(test_acc), 4),
        "history": {k: (previous["history"].get(k, []) if previous else [])
                    + [float(x) if k == "learning_rate" else round(float(x), 4) for x in v]
                    for k, v in history.history.items()},
        "versions": versions(),
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _card_markdown(card: dict) -> str:
    paper = ARCHITECTURES.get(card["name"])
    lines = [f"# Model card: {card['name']}", "",
             f"- Architecture: {card['architecture']} ({card['params']:,} parameters)",
             f"- Data: {card['data_source']}",
             f"- Training: {card['epochs_run']} of {card['epochs_requested']} epochs "
             f"({card['early_stopping']}), batch {card['batch_size']}, {card['optimizer']}, "
             f"augmentation: {card['augmentation']}, "
             f"seed {card['seed']}, validation split {card['validation_split']}",
             f"- Training time: {card['training_seconds']:.0f} s on this project's CI machine "
             f"(2 CPU cores)",
             f"- Test accuracy (measured on our test split of {card['test_size']:,}): "
             f"**{100 * card['test_accuracy']:.2f} %**"]
    if paper is not None and paper.paper_accuracy is not None:
        lines.append(f"- The paper reports {paper.paper_accuracy:.2f} % (trained on the full data "
                     f"set; not comparable one to one with our split)")
    lines += [f"- Versions: {json.dumps(card['versions'])}", f"- Trained at {card['trained_at']}",
              ""]
    return "\n".join(lines)


def models_table() -> list[dict]:
    """Table 1 rows: our counts from the built architecture, accuracy from the model card."""
    rows = []
    for name, a in ARCHITECTURES.items():
        model = build_model(name)
        card = read_card(name)
        rows.append({
            "name": name,
            "architecture": a.layers_text,
            "params": int(model.count_params()),
            "neurons": count_neurons(model),
            "contributions_per_step": contributions_per_step(model),
            "cons_paper_convention": paper_convention_steps(name) * contributions_per_step(model),
            "contributions_total": contributions_total(model),
            "test_accuracy": card["test_accuracy"] if card else None,
            "paper": {"params": a.paper_params, "neurons": a.paper_neurons,
                      "cons": a.paper_cons, "accuracy": a.paper_accuracy},
        })
    return rows
