"""Table 1 architectures, safe loading, and the `rnncon models` table."""
import json
import zipfile

import numpy as np

import pytest

from rnncon_core import zoo
from rnncon_core.errors import ModelLoadError


@pytest.mark.parametrize("name", list(zoo.ARCHITECTURES))
def test_counts_match_table_1(name):
    a = zoo.ARCHITECTURES[name]
    model = zoo.build_model(name)
    assert model.count_params() == a.paper_params
    assert zoo.count_neurons(model) == a.paper_neurons
    # the paper's #Cons convention: steps (28, or 32 for IMDB) x contributions per step
    assert zoo.paper_convention_steps(name) * zoo.contributions_per_step(model) == a.paper_cons


def test_real_contribution_count():
    model = zoo.build_model("stacked-mnist-gru")
    # two GRU(128) layers: 2 parts x 3 gates x 128 units x 28 steps each; Dense once
    assert zoo.contributions_total(model) == 2 * (2 * 3 * 128 * 28) + 32 + 10


def test_unknown_architecture():
    with pytest.raises(Exception, match="choose one of"):
        zoo.build_model("mnist-transformer")


def _tiny(keras, extra=None):
    layers = [keras.Input((4, 3)), keras.layers.LSTM(2)]
    if extra is not None:
        layers.append(extra)
    layers.append(keras.layers.Dense(2, activation="softmax"))
    return keras.Sequential(layers)


def test_load_roundtrip(tmp_path):
    import keras
    import numpy as np
    m = _tiny(keras)
    p = tmp_path / "ok.keras"
    m.save(p)
    loaded = zoo.load_model(p)
    x = np.random.default_rng(0).random((2, 4, 3), dtype=np.float32)
    assert np.allclose(loaded.predict(x, verbose=0), m.predict(x, verbose=0))


def test_lambda_layer_is_refused(tmp_path):
    import keras
    m = _tiny(keras, keras.layers.Lambda(lambda t: t * 2))
    p = tmp_path / "lambda.keras"
    m.save(p)
    with pytest.raises(ModelLoadError, match="Lambda"):
        zoo.load_model(p)


def test_custom_class_is_refused(tmp_path):
    import keras

    @keras.saving.register_keras_serializable(package="evil")
    class Doubler(keras.layers.Layer):
        def call(self, x):
            return x * 2

    m = _tiny(keras, Doubler())
    p = tmp_path / "custom.keras"
    m.save(p)
    with pytest.raises(ModelLoadError, match="custom"):
        zoo.load_model(p)


def test_corrupt_and_wrong_files(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(ModelLoadError, match="not a valid .keras file"):
        zoo.load_model(bad)
    empty_zip = tmp_path / "empty.keras"
    with zipfile.ZipFile(empty_zip, "w") as z:
        z.writestr("something.txt", "hello")
    with pytest.raises(ModelLoadError, match="not a valid .keras file"):
        zoo.load_model(empty_zip)
    h5 = tmp_path / "model.h5"
    h5.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match=".keras"):
        zoo.load_model(h5)
    with pytest.raises(ModelLoadError, match="no such model file"):
        zoo.load_model(tmp_path / "missing.keras")


def test_truncated_weights_give_clear_error(tmp_path):
    import keras
    m = _tiny(keras)
    good = tmp_path / "good.keras"
    m.save(good)
    broken = tmp_path / "broken.keras"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, data[: len(data) // 3] if item.filename.endswith(".h5") else data)
    with pytest.raises(ModelLoadError):
        zoo.load_model(broken)


def test_models_json_matches_build_model():
    from typer.testing import CliRunner

    from rnncon_core.cli import app
    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["models"]
    assert [r["name"] for r in rows] == list(zoo.ARCHITECTURES)
    for r in rows:
        model = zoo.build_model(r["name"])
        assert r["params"] == model.count_params()
        assert r["neurons"] == zoo.count_neurons(model)
        assert r["contributions_per_step"] == zoo.contributions_per_step(model)
        card = zoo.read_card(r["name"])
        assert r["test_accuracy"] == (card["test_accuracy"] if card else None)


def test_shipped_cards_hold_measured_accuracy():
    for name in zoo.shipped_models():
        card = zoo.read_card(name)
        assert card is not None, f"{name} is shipped without a model card"
        assert 0.5 < card["test_accuracy"] <= 1.0
        assert card["test_size"] > 0 and card["training_seconds"] > 0


def test_functional_models_load_and_code_is_still_refused(tmp_path):
    """Keras' own "Functional" class is not custom code; a functional model with a Lambda or a
    custom layer is still refused."""
    import keras
    L = keras.layers
    inp = keras.Input((4, 3))
    chain = keras.Model(inp, L.Dense(2, activation="softmax")(L.LSTM(2)(inp)))
    chain.save(tmp_path / "chain.keras")
    assert type(zoo.load_model(tmp_path / "chain.keras")).__name__ == "Functional"
    two = keras.Model(inp, [L.Dense(2)(L.LSTM(2)(inp)), L.Dense(1)(L.GRU(2)(inp))])
    two.save(tmp_path / "two.keras")
    loaded = zoo.load_model(tmp_path / "two.keras")        # loads; the trace says why not
    from rnncon_core.errors import UnsupportedModelError
    from rnncon_core.trace import Tracer
    with pytest.raises(UnsupportedModelError, match="2 outputs"):
        Tracer(loaded)
    assert zoo.output_head(loaded).kind == "multi"
    lam = keras.Model(inp, L.Dense(1)(L.Lambda(lambda t: t * 2)(L.LSTM(2)(inp))))
    lam.save(tmp_path / "lam.keras")
    with pytest.raises(ModelLoadError, match="Lambda"):
        zoo.load_model(tmp_path / "lam.keras")


@pytest.mark.parametrize("tail, kind, classes", [
    (lambda L: [L.Dense(10, activation="softmax")], "softmax", 10),
    (lambda L: [L.Dense(1, activation="sigmoid")], "sigmoid", 2),
    (lambda L: [L.Dense(4)], "logits", 4),
    (lambda L: [L.Dense(4), L.Activation("softmax")], "softmax", 4),
    (lambda L: [L.Dense(4), L.Softmax(), L.Dropout(0.1)], "softmax", 4),
    (lambda L: [L.Dense(1)], "regression", None),
    (lambda L: [L.Dense(3, activation="sigmoid")], "multilabel", None),
    (lambda L: [L.Dense(3, activation="relu")], "other", None),
])
def test_output_head(tail, kind, classes):
    import keras
    L = keras.layers
    model = keras.Sequential([keras.Input((4, 3)), L.LSTM(2)] + tail(L))
    head = zoo.output_head(model)
    assert (head.kind, head.classes, head.classifier) == (kind, classes, classes is not None)
    seq = keras.Sequential([keras.Input((4, 3)), L.LSTM(2, return_sequences=True),
                            L.TimeDistributed(L.Dense(3, activation="softmax"))])
    assert zoo.output_head(seq).kind == "sequence"


def test_head_checks_labels_and_turns_logits_into_probabilities():
    import keras
    import numpy as np
    from rnncon_core.errors import InputError, UnsupportedModelError
    from rnncon_core.generate.base import predict_proba
    keras.utils.set_random_seed(0)
    L = keras.layers
    logits = keras.Sequential([keras.Input((4, 3)), L.LSTM(2), L.Dense(3)])
    x = np.random.default_rng(0).random((5, 4, 3)).astype("float32")
    p = predict_proba(logits, x)
    np.testing.assert_allclose(p.sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(p, keras.ops.softmax(logits(x)).numpy(), atol=1e-6)
    head = zoo.output_head(logits)
    assert head.check_labels([0, 2, 1]).tolist() == [0, 2, 1]
    with pytest.raises(InputError, match=r"\[0, 3\)"):
        head.check_labels([0, 3])
    with pytest.raises(InputError, match="integers"):
        head.check_labels([0.5])
    regression = keras.Sequential([keras.Input((4, 3)), L.LSTM(2), L.Dense(1)])
    with pytest.raises(UnsupportedModelError, match="regression"):
        predict_proba(regression, x)


def test_with_steps_fixes_an_open_number_of_steps():
    import keras
    import numpy as np
    keras.utils.set_random_seed(0)
    L = keras.layers
    inp = keras.Input((None,), dtype="int32")
    model = keras.Model(inp, L.Dense(1)(L.Bidirectional(L.GRU(2))(L.Embedding(9, 3)(inp))))
    fixed = zoo.with_steps(model, 7)
    assert fixed.input_shape == (None, 7)
    ids = np.random.default_rng(0).integers(0, 9, (2, 7))
    np.testing.assert_allclose(fixed(ids), model(ids), atol=1e-6)
    assert zoo.with_steps(fixed, 5) is fixed


def test_model_datasets_own_first_then_what_fits_the_input():
    """One data-set guess (zoo.model_datasets) for generation and the dashboard."""
    from types import SimpleNamespace

    from rnncon_core.errors import InputError
    from rnncon_core.jobs.runner import model_dataset

    def never(_):
        raise AssertionError("a shipped architecture's data sets need no model")
    assert zoo.model_datasets("mnist-lstm", load=never) == ["mnist", "fashion-mnist"]
    assert zoo.model_datasets("some/dir/imdb-gru.keras", load=never) == ["imdb"]
    shaped = lambda *s: SimpleNamespace(input_shape=(None, *s))    # noqa: E731
    assert zoo.model_datasets("/tmp/mine.keras", shaped(28, 28)) == ["mnist", "fashion-mnist"]
    assert zoo.model_datasets(None, shaped(8, 8)) == ["digits"]
    assert zoo.model_datasets(None, load=lambda _: shaped(200)) == ["imdb"]
    assert zoo.model_datasets(None, shaped(5, 5)) == []
    assert model_dataset(shaped(28, 28), "/tmp/mine.keras") == "mnist"
    assert model_dataset(shaped(5, 5), "mnist-gru.keras") == "mnist"      # its architecture's
    with pytest.raises(InputError, match="cannot tell which data set"):
        model_dataset(shaped(5, 5))


def test_one_sigmoid_unit_is_two_classes_everywhere():
    """zoo.class_probabilities is the one rule: (N, 1) sigmoid -> [1 - p, p], wider outputs as
    they are, for NumPy and TensorFlow alike; class_labels and predict_proba follow it."""
    import tensorflow as tf
    from rnncon_core.generate.base import predict_proba
    from rnncon_core.generate.baselines import loss_from_output
    from rnncon_core.zoo import class_labels, class_probabilities
    p = np.array([[0.2], [0.7], [0.5]], np.float32)
    np.testing.assert_allclose(class_probabilities(p), [[0.8, 0.2], [0.3, 0.7], [0.5, 0.5]])
    np.testing.assert_allclose(class_probabilities(tf.constant(p)).numpy(),
                               class_probabilities(p))
    soft = np.array([[0.1, 0.9], [0.6, 0.4]], np.float32)
    assert class_probabilities(soft) is soft
    assert class_labels(p).tolist() == [0, 1, 0] and class_labels(soft).tolist() == [1, 0]
    # the binary cross-entropy of a sigmoid unit = the two-class cross-entropy
    y = tf.constant([0, 1, 1], tf.int64)
    np.testing.assert_allclose(loss_from_output(tf.constant(p), y).numpy(),
                               -np.log([0.8, 0.7, 0.5]), rtol=1e-6)
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((3, 2)), keras.layers.LSTM(2),
                              keras.layers.Dense(1, activation="sigmoid")])
    x = np.random.default_rng(0).random((4, 3, 2)).astype(np.float32)
    probs = predict_proba(model, x)
    raw = model.predict(x, verbose=0)
    assert probs.shape == (4, 2)
    np.testing.assert_allclose(probs[:, 1], raw[:, 0], rtol=1e-5)
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-6)
