"""The two checks fitted on a data set's training split, for images and real-valued sequences.

- ``Distribution`` (distribution-aware validity, Dola et al. ICSE 2021 / TOSEM 2023: an input
  the training distribution would not produce is no test of the model): a small dense
  autoencoder of the training split; an input is out of distribution when its reconstruction
  error exceeds the threshold set on held-out clean training inputs so that ``flag_rate`` of
  them (1 % by default) are flagged.
- ``Reference`` (label preservation): an independent classifier of another architecture than
  the models under test (a convolutional net with global pooling, trained with rotation, shift
  and zoom augmentation for images, Gaussian noise for sequences) must read the seed's label.

Both are Keras models saved in a folder with a JSON card (threshold, held-out figures, the
training split's digest); they are loaded with ``zoo.load_model`` (no code runs from a file).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io import atomic_save_keras, atomic_write_json
from ..lazy import keras, tf
from ..zoo import load_model
from .base import Validator, Verdict

HELD_OUT = 0.1            # share of the training split kept out of fitting, for thresholds
SPLIT_SEED = 7
MIN_STEPS = 1500          # the reference classifier's least training steps (small data sets)
MAX_EPOCHS = 150          # ... within at most this many epochs


def held_out_split(n: int, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(fit, held-out) indices of a training split of n inputs (fixed)."""
    order = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(n * HELD_OUT)))
    return np.sort(order[k:]), np.sort(order[:k])


def _standardizer(x: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and scale (images: none, pixels stay in [0, 1])."""
    feat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    if kind == "image":
        return np.zeros(x.shape[-1]), np.ones(x.shape[-1])
    return feat.mean(0), np.maximum(feat.std(0), 1e-6)


class _Fitted(Validator):
    """A check with a Keras model and a card in ``folder`` (``FILE``.keras, ``FILE``.json)."""
    FILE = ""

    def __init__(self, model, card: dict):
        self.model, self.card = model, card
        self.mean = np.asarray(card["mean"], np.float32)
        self.scale = np.asarray(card["scale"], np.float32)
        self._fn = None

    def _input(self, x) -> np.ndarray:
        x = np.asarray(x, np.float32)
        if x.shape[1:] != tuple(self.card["input_shape"]):
            raise InputError(f"validity check {self.name}: inputs of shape {x.shape[1:]}, "
                             f"fitted on {tuple(self.card['input_shape'])}: fit it on this "
                             f"data set (rnncon validity train --dataset ...)")
        return (x - self.mean) / self.scale

    def _run(self, x) -> np.ndarray:
        if self._fn is None:            # one trace for every batch size
            spec = tf.TensorSpec([None, *self.card["input_shape"]], tf.float32)
            self._fn = tf.function(lambda t: self.model(t, training=False),
                                   input_signature=[spec])
        x = self._input(x)
        return np.concatenate([np.asarray(self._fn(tf.constant(x[i:i + 1024])))
                               for i in range(0, len(x), 1024)]) if len(x) else \
            np.zeros((0,) + tuple(self.model.output_shape[1:]), np.float32)

    def get_config(self) -> dict:
        return {"name": self.name, **{k: v for k, v in self.card.items()
                                      if k not in ("mean", "scale")}}

    @classmethod
    def load(cls, folder: Path) -> "_Fitted":
        folder = Path(folder)
        card_path, model_path = folder / f"{cls.FILE}.json", folder / f"{cls.FILE}.keras"
        if not card_path.exists() or not model_path.exists():
            raise InputError(f"no fitted {cls.name} check in {folder}")
        try:
            card = json.loads(card_path.read_text())
        except (OSError, ValueError) as e:
            raise InputError(f"{card_path} is damaged ({e}): fit the check again with "
                             f"rnncon validity train") from None
        return cls(load_model(model_path), card)

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        atomic_save_keras(self.model, folder / f"{self.FILE}.keras")
        atomic_write_json(folder / f"{self.FILE}.json", self.card)


class Distribution(_Fitted):
    name = "distribution"
    kinds = ("image", "sequence")
    title = "autoencoder reconstruction error within what clean training inputs reach"
    FILE = "autoencoder"

    def errors(self, x) -> np.ndarray:
        """Per input: mean squared reconstruction error (in the standardized space)."""
        z = self._input(x)
        rec = self._run(x)
        return ((rec - z) ** 2).reshape(len(z), -1).mean(1) if len(z) else np.zeros(0)

    def check(self, x, labels, roots=None) -> Verdict:
        err = self.errors(x)
        thr = float(self.card["threshold"])
        ok = err <= thr
        reason = np.array(["" if o else f"unlike the training data (reconstruction error "
                           f"{e:.3g} > {thr:.3g})" for o, e in zip(ok, err)])
        return Verdict(ok, reason, {"distribution": err})

    def describe(self) -> str:
        c = self.card
        return (f"reconstruction error <= {c['threshold']:.4g} (the {100 * (1 - c['flag_rate']):g}"
                f"th percentile of {c['held_out']:,} held-out clean training inputs)")

    @classmethod
    def fit(cls, x_train, kind: str, flag_rate: float = 0.01, seed: int = 0,
            epochs: int = 40, log=None, should_stop=None) -> "Distribution":
        if not 0 < flag_rate < 0.5:
            raise InputError(f"flag_rate {flag_rate}: give a share of clean inputs to flag "
                             f"in (0, 0.5), e.g. 0.01")
        x_train = np.asarray(x_train, np.float32)
        fit_idx, held = held_out_split(len(x_train))
        mean, scale = _standardizer(x_train[fit_idx], kind)
        z = (x_train - mean) / scale
        keras.utils.set_random_seed(seed)
        shape, size = x_train.shape[1:], int(np.prod(x_train.shape[1:]))
        L = keras.layers
        model = keras.Sequential([
            keras.Input(shape), L.Flatten(), L.Dense(256, activation="relu"),
            L.Dense(64, activation="relu"), L.Dense(32, activation="relu", name="code"),
            L.Dense(64, activation="relu"), L.Dense(256, activation="relu"),
            L.Dense(size, activation="sigmoid" if kind == "image" else None),
            L.Reshape(shape)], name="validity_autoencoder")
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        t0 = time.perf_counter()
        model.fit(z[fit_idx], z[fit_idx], epochs=epochs, batch_size=128, verbose=0,
                  callbacks=_callbacks(log, "autoencoder", epochs, should_stop))
        check = cls(model, {"mean": mean.tolist(), "scale": scale.tolist(),
                            "input_shape": list(shape), "kind": kind, "threshold": 0.0,
                            "flag_rate": flag_rate, "held_out": int(len(held))})
        err = check.errors(x_train[held])
        check.card["threshold"] = float(np.quantile(err, 1 - flag_rate))
        check.card["fit_seconds"] = round(time.perf_counter() - t0, 1)
        return check


class Reference(_Fitted):
    name = "reference"
    kinds = ("image", "sequence")
    title = "an independent classifier reads the seed's label"
    FILE = "reference"

    MIN_CONFIDENCE = 0.95

    def check(self, x, labels, roots=None) -> Verdict:
        """Label preservation as the reference reads it. With the root seeds: valid when the
        reference reads the input as it reads its root, with a probability at least
        ``min_confidence`` (the card's; 0.95 by default) or, where it reads the root itself
        less surely, at least as surely as the root. So an input unchanged from its root
        always passes (the reference's own errors on clean inputs are no verdict on a
        mutation), and a fault a reader would have to squint at to see its seed's class is
        not counted. Without roots: the reference must read the label itself that surely."""
        p = self._run(x)
        labels = np.asarray(labels, np.int64)
        read = p.argmax(1) if len(p) else np.zeros(0, np.int64)
        least = np.full(len(p), float(self.card.get("min_confidence", self.MIN_CONFIDENCE)))
        want = labels
        if roots is not None and len(p):
            want, conf_root = self._root_reading(np.asarray(roots))
            least = np.minimum(least, conf_root)
        conf = p[np.arange(len(p)), want] if len(p) else np.zeros(0)
        ok = (read == want) & (conf >= least - 1e-6)
        names = self.card.get("class_names")

        def said(k):
            return names[k] if names and k < len(names) else str(int(k))
        reason = np.array(["" if o else f"the reference classifier reads {said(r)}, not "
                           f"{said(w)}" if r != w else f"the reference classifier reads "
                           f"{said(w)} with only {c:.0%} (< {m:.0%})"
                           for o, r, w, c, m in zip(ok, read, want, conf, least)])
        return Verdict(ok, reason, {"reference": conf})

    def _root_reading(self, roots) -> tuple[np.ndarray, np.ndarray]:
        """How the reference reads each root (class, probability), remembered per root (a
        campaign's roots are its few seeds, checked again and again)."""
        memo = self.__dict__.setdefault("_memo", {})
        keys = [r.tobytes() for r in roots]
        todo = [i for i, k in enumerate(keys) if k not in memo]
        if todo:
            p = self._run(roots[todo])
            for j, i in enumerate(todo):
                memo[keys[i]] = (int(p[j].argmax()), float(p[j].max()))
        got = [memo[k] for k in keys]
        return np.array([g[0] for g in got], np.int64), np.array([g[1] for g in got])

    def describe(self) -> str:
        c = self.card
        return (f"an independent {c['architecture']} ({c['test_accuracy']:.2%} on the clean "
                f"test split) reads the input as it reads its root seed, with probability >= "
                f"{c.get('min_confidence', self.MIN_CONFIDENCE):g} (or as surely as the root)")

    @classmethod
    def fit(cls, x_train, y_train, kind: str, num_classes: int, x_test=None, y_test=None,
            seed: int = 0, epochs: int = 30, class_names=None, log=None,
            should_stop=None) -> "Reference":
        x_train = np.asarray(x_train, np.float32)
        y_train = np.asarray(y_train, np.int64)
        mean, scale = _standardizer(x_train, kind)
        z = (x_train - mean) / scale
        keras.utils.set_random_seed(seed)
        L = keras.layers
        shape = x_train.shape[1:]
        if kind == "image":        # (T, F) sequences whose image is the transpose
            body = [L.Permute((2, 1)), L.Reshape((shape[1], shape[0], 1)),
                    L.Conv2D(32, 5, padding="same"), L.BatchNormalization(), L.ReLU(),
                    L.MaxPooling2D(padding="same"), L.Conv2D(64, 3, padding="same"),
                    L.BatchNormalization(), L.ReLU(), L.MaxPooling2D(padding="same"),
                    L.Conv2D(128, 3, padding="same", activation="relu"),
                    L.GlobalAveragePooling2D(), L.Dense(128, activation="relu"),
                    L.Dropout(0.3)]
            augment = [L.Permute((2, 1)), L.Reshape((shape[1], shape[0], 1)),
                       L.RandomRotation(5 / 360, fill_mode="constant", seed=seed),
                       L.RandomTranslation(0.08, 0.08, fill_mode="constant", seed=seed),
                       L.Reshape((shape[1], shape[0])), L.Permute((2, 1))]
            arch = "convolutional net (3 conv layers, global pooling; shift and small " \
                   "rotation augmentation)"
        else:
            body = [L.Conv1D(64, 3, padding="same", activation="relu"),
                    L.Conv1D(64, 3, padding="same", activation="relu"),
                    L.GlobalAveragePooling1D(), L.Dropout(0.3)]
            augment = [L.GaussianNoise(0.1, seed=seed)]
            arch = "1-D convolutional net (2 conv layers, global pooling; noise augmentation)"
        clf = keras.Sequential([keras.Input(shape), *body,
                                L.Dense(num_classes, activation="softmax")],
                               name="validity_reference")
        trainer = keras.Sequential([keras.Input(shape), *augment, clf])
        per_epoch = -(-len(z) // 128)
        epochs = max(epochs, min(MAX_EPOCHS, -(-MIN_STEPS // per_epoch)))   # small data sets
        steps = epochs * per_epoch
        trainer.compile(optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.CosineDecay(2e-3, steps)),
            loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        t0 = time.perf_counter()
        trainer.fit(z, y_train, epochs=epochs, batch_size=128, verbose=0,
                    callbacks=_callbacks(log, "reference classifier", epochs,
                                         should_stop))
        check = cls(clf, {"mean": mean.tolist(), "scale": scale.tolist(),
                          "input_shape": list(shape), "kind": kind, "architecture": arch,
                          "num_classes": int(num_classes), "class_names": class_names,
                          "min_confidence": cls.MIN_CONFIDENCE,
                          "test_accuracy": float("nan"),
                          "fit_seconds": round(time.perf_counter() - t0, 1)})
        if x_test is not None:
            pred = check._run(x_test).argmax(1)
            check.card["test_accuracy"] = float(np.mean(pred == np.asarray(y_test)))
        return check


def _callbacks(log, what: str, epochs: int, should_stop=None):
    """Keras callbacks of a fit: one that reports every fifth epoch and the last to ``log``
    (a function of one line), and one that ends the fit at the next batch once
    ``should_stop()`` is true (Ctrl-C: the caller then raises ``JobCancelled``)."""

    class LogEpochs(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if (epoch + 1) % 5 == 0 or epoch + 1 == epochs:
                log(f"validity: {what} epoch {epoch + 1}/{epochs}, loss "
                    f"{(logs or {}).get('loss', float('nan')):.4f}")

    class StopWhenAsked(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if should_stop():
                self.model.stop_training = True
    return ([LogEpochs()] if log is not None else []) + \
        ([StopWhenAsked()] if should_stop is not None else [])
