"""The trace equals Keras' own layer outputs; unsupported models and bad inputs are refused."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.errors import InputError, UnsupportedModelError
from rnncon_core.trace import Tracer

TOL = 1e-5


def _layer_outputs(model, x):
    import keras
    names = [l.name for l in model.layers if type(l).__name__ in ("LSTM", "GRU", "SimpleRNN", "Dense")]
    sub = keras.Model(model.inputs, [model.get_layer(n).output for n in names])
    outs = sub(x)
    return dict(zip(names, [np.asarray(o) for o in (outs if isinstance(outs, list) else [outs])]))


def _check_equal(model, x, **kw):
    tr = Tracer(model)(x, **kw)
    ref = _layer_outputs(model, x)
    for name, out in ref.items():
        got = tr.layers[name].output.numpy()
        assert got.shape == out.shape, name
        np.testing.assert_allclose(got, out, atol=TOL, rtol=0, err_msg=name)
    np.testing.assert_allclose(tr.output.numpy(), np.asarray(model(x)), atol=TOL, rtol=0)
    return tr


def _random_models():
    import keras
    L = keras.layers
    inp = lambda: keras.Input((6, 4))
    yield "lstm-gru-ra0", keras.Sequential([inp(), L.LSTM(5, return_sequences=True),
                                            L.GRU(4, reset_after=False), L.Dense(3)])
    yield "gru-ra1-simple", keras.Sequential([inp(), L.GRU(5, return_sequences=True, reset_after=True),
                                              L.SimpleRNN(3), L.Dropout(0.5),
                                              L.Dense(2, activation="softmax")])
    yield "seq-out", keras.Sequential([inp(), L.LSTM(3, return_sequences=True),
                                       L.GRU(2, return_sequences=True)])
    yield "activations", keras.Sequential([
        inp(), L.LSTM(4, activation="relu", recurrent_activation="hard_sigmoid",
                      return_sequences=True, use_bias=False),
        L.GRU(3, activation="softsign", recurrent_activation="tanh", reset_after=False),
        L.Dense(2, activation="tanh")])
    yield "gru-nobias", keras.Sequential([inp(), L.GRU(4, use_bias=False), L.Dense(2)])


@pytest.mark.parametrize("case", range(5))
def test_trace_equals_keras_on_random_models(case):
    import keras
    keras.utils.set_random_seed(10 + case)
    name, model = list(_random_models())[case]
    x = np.random.default_rng(case).normal(size=(4, 6, 4)).astype("float32")
    _check_equal(model, x)


def test_trace_parts_are_the_products(tiny_gru, tiny_lstm, tiny_x):
    """xU = x @ U_g and hW = h_src @ W_g (no bias); h_prev is h shifted with h^0 = 0."""
    for model in (tiny_lstm, tiny_gru):
        tracer = Tracer(model)
        tr = tracer(tiny_x)
        for spec in tracer.specs:
            lt = tr.layers[spec.name]
            if spec.kind == "dense":
                np.testing.assert_allclose(lt.pre.numpy(), lt.x.numpy() @ tracer._weights[spec.name]["kernel"].numpy(), atol=TOL)
                continue
            w = tracer._weights[spec.name]
            U, W = w["kernel"].numpy(), w["recurrent_kernel"].numpy()
            u = spec.units
            h = lt.h.numpy()
            np.testing.assert_array_equal(lt.h_prev.numpy()[:, 0], 0)
            np.testing.assert_allclose(lt.h_prev.numpy()[:, 1:], h[:, :-1], atol=0)
            for gi, g in enumerate(spec.gates):
                cols = slice(gi * u, (gi + 1) * u)
                np.testing.assert_allclose(lt.xU[g].numpy(), lt.x.numpy() @ U[:, cols], atol=TOL)
                np.testing.assert_allclose(lt.hW[g].numpy(), lt.h_src[g].numpy() @ W[:, cols], atol=TOL)
            if spec.kind == "gru" and not spec.reset_after:
                np.testing.assert_allclose(lt.h_src["h"].numpy(), lt.gates["r"].numpy() * lt.h_prev.numpy(), atol=TOL)
            if spec.kind == "lstm":
                g = {k: v.numpy() for k, v in lt.gates.items()}
                c = lt.c.numpy()
                c_prev = np.concatenate([np.zeros_like(c[:, :1]), c[:, :-1]], axis=1)
                np.testing.assert_allclose(c, g["f"] * c_prev + g["i"] * g["c"], atol=TOL)


def test_embedding_model_ids_and_embedded(tiny_text, tiny_ids):
    tracer = Tracer(tiny_text)
    tr = _check_equal(tiny_text, tiny_ids)
    emb = tracer.embed(tiny_ids)
    assert emb.shape == (7, 6, 3)
    tr2 = tracer(emb, embedded=True)
    np.testing.assert_allclose(tr2.output.numpy(), tr.output.numpy(), atol=1e-6)


def test_functional_chain_is_supported():
    import keras
    keras.utils.set_random_seed(4)
    inp = keras.Input((5, 3))
    out = keras.layers.Dense(2)(keras.layers.LSTM(3)(inp))
    model = keras.Model(inp, out)
    _check_equal(model, np.random.default_rng(1).random((3, 5, 3)).astype("float32"))


def test_differentiable(tiny_lstm, tiny_x):
    import tensorflow as tf
    tracer = Tracer(tiny_lstm)
    x = tf.Variable(tiny_x)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tracer(x).layers["lstm_2"].hW["f"])
    g = tape.gradient(loss, x)
    assert g is not None and np.isfinite(g.numpy()).all() and np.abs(g.numpy()).sum() > 0


SLOW = pytest.mark.slow       # 500 steps: ~40 s each on the 2-core machine


@pytest.mark.parametrize("name", ["mnist-lstm", "stacked-mnist-lstm", "mnist-gru", "stacked-mnist-gru",
                                  pytest.param("imdb-lstm", marks=SLOW),
                                  pytest.param("stacked-imdb-lstm", marks=SLOW),
                                  pytest.param("imdb-gru", marks=SLOW),
                                  pytest.param("stacked-imdb-gru", marks=SLOW)])
def test_trace_equals_keras_on_table1(name):
    from rnncon_core.zoo import build_model
    model = build_model(name, seed=0)
    rng = np.random.default_rng(0)
    if "imdb" in name:
        x = rng.integers(0, 50_000, (2, 500)).astype("int32")
    else:
        x = rng.random((2, 28, 28)).astype("float32")
    _check_equal(model, x)


def _unsupported_models():
    import keras
    L = keras.layers
    yield "bidir", keras.Sequential([keras.Input((5, 3)), L.Bidirectional(L.LSTM(2), name="bidir"), L.Dense(1)])
    yield "conv", keras.Sequential([keras.Input((5, 3)), L.Conv1D(2, 2, name="conv"), L.LSTM(2), L.Dense(1)])
    yield "mask", keras.Sequential([keras.Input((5, 3)), L.Masking(name="mask"), L.LSTM(2), L.Dense(1)])
    yield "maskzero", keras.Sequential([keras.Input((5,), dtype="int32"),
                                        L.Embedding(10, 2, mask_zero=True, name="maskzero"), L.LSTM(2)])
    yield "backwards", keras.Sequential([keras.Input((5, 3)), L.LSTM(2, go_backwards=True, name="backwards")])
    inp = keras.Input((5, 3))
    a = L.LSTM(2, name="branch_a")(inp)
    b = L.GRU(2, name="branch_b")(inp)
    yield "branch_b", keras.Model(inp, L.Add(name="add")([a, b]))


@pytest.mark.parametrize("case", range(6))
def test_unsupported_layers_are_named(case):
    name, model = list(_unsupported_models())[case]
    with pytest.raises(UnsupportedModelError) as e:
        Tracer(model)
    msg = str(e.value)
    assert name in msg or "add" in msg
    assert "supported" in msg and "LSTM" in msg


def test_bad_inputs(tiny_lstm, tiny_text, tiny_x):
    tracer = Tracer(tiny_lstm)
    bad = tiny_x.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        tracer(bad)
    bad[0, 1, 2] = np.inf
    with pytest.raises(InputError, match="NaN or infinite"):
        tracer(bad)
    with pytest.raises(InputError, match="shape"):
        tracer(tiny_x[:, :4])
    with pytest.raises(InputError, match="batch axis"):
        tracer(tiny_x[0])
    with pytest.raises(InputError, match="dtype"):
        tracer(np.array([["a"] * 3] * 5)[None])
    with pytest.raises(InputError, match="empty"):
        tracer(tiny_x[:0])
    text = Tracer(tiny_text)
    with pytest.raises(InputError, match="integers"):
        text(np.zeros((2, 6), "float32"))
    with pytest.raises(InputError, match=r"\[0, 20\)"):
        text(np.full((2, 6), 25, "int32"))
    with pytest.raises(InputError, match="Embedding"):
        tracer(tiny_x, embedded=True)
