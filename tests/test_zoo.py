"""Table 1 architectures, safe loading, and the `rnncon models` table."""
import json
import zipfile

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

    from rnncon_core.cli import _load_commands, app
    _load_commands()
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
