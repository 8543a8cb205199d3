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


@pytest.mark.parametrize("fixture", ["tiny_lstm", "tiny_gru"])
def test_gradients_equal_keras(request, fixture, tiny_x):
    """The step loop reads its inputs from TensorArrays (a cheap backward pass): the gradient
    of the traced output w.r.t. the input is the model's."""
    import tensorflow as tf
    model = request.getfixturevalue(fixture)
    tracer = Tracer(model)
    x = tf.convert_to_tensor(tiny_x)
    w = tf.range(1.0, 1.0 + model.output_shape[-1])
    grads = []
    for out in (lambda v: tracer.forward_steps(v, ("xU", "hW"))[1], model):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(out(x) * w)
        grads.append(tape.gradient(loss, x).numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    assert np.abs(grads[0]).max() > 0


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
    yield "conv2d", keras.Sequential([keras.Input((6, 4)), L.Reshape((6, 4, 1)),
                                      L.Conv2D(2, 2, name="conv2d"), L.Reshape((5, 6)), L.LSTM(2)])
    yield "several", keras.Sequential([keras.Input((5, 3)),
                                       L.Bidirectional(L.LSTM(2), merge_mode=None, name="several")])
    yield "td_conv", keras.Sequential([keras.Input((5, 4)), L.Reshape((5, 4, 1)),
                                       L.TimeDistributed(L.Conv1D(2, 2), name="td_conv")])
    yield "state", keras.Sequential([keras.Input((5, 3)), L.LSTM(2, return_state=True, name="state")])
    yield "variable", keras.Sequential([keras.Input((None, 3)), L.LSTM(2, name="variable")])
    inp = keras.Input((5, 3))
    a = L.LSTM(2, name="branch_a")(inp)
    b = L.GRU(2, name="branch_b")(inp)
    yield "branch_b", keras.Model(inp, L.Add(name="add")([a, b]))
    i1, i2 = keras.Input((5, 3)), keras.Input((5, 3))
    yield "inputs", keras.Model([i1, i2], L.Dense(1)(L.LSTM(2)(L.Concatenate()([i1, i2]))))
    yield "attention", keras.Model(inp, L.Dense(1)(L.Flatten()(
        L.MultiHeadAttention(1, 2, name="attention")(inp, inp))))


@pytest.mark.parametrize("case", range(8))
def test_unsupported_layers_are_named(case):
    name, model = list(_unsupported_models())[case]
    with pytest.raises(UnsupportedModelError) as e:
        Tracer(model)
    msg = str(e.value)
    assert name in msg or "add" in msg or "2 inputs" in msg or "attention" in msg.lower() \
        or "Concatenate" in msg
    assert "supported" in msg and "LSTM" in msg and "\n" not in msg


# ---------------------------------------------------------------- user-style layers, exactly

def _all_outputs(model, x):
    """Keras' own output of every layer (by name), at inference."""
    import keras
    layers = [l for l in model.layers if type(l).__name__ != "InputLayer"]
    sub = keras.Model(model.inputs, [l.output for l in layers])
    outs = sub(x, training=False)
    return {l.name: np.asarray(o) for l, o in zip(layers, outs if isinstance(outs, (list, tuple))
                                                  else [outs])}


def _check_all_layers(model, x):
    tr = Tracer(model)(x)
    for name, ref in _all_outputs(model, x).items():
        got = np.asarray(tr.outputs[name])
        assert got.shape == ref.shape, name
        np.testing.assert_allclose(got, ref, atol=TOL, rtol=0, err_msg=name)
    np.testing.assert_allclose(tr.output.numpy(), np.asarray(model(x)), atol=TOL, rtol=0)
    return tr


def _user_models():
    import keras
    L = keras.layers
    inp = lambda: keras.Input((6, 4))   # noqa: E731
    yield "backwards", keras.Sequential([inp(), L.LSTM(3, go_backwards=True, return_sequences=True),
                                         L.GRU(2, go_backwards=True), L.Dense(2)])
    for mode in ("concat", "sum", "mul", "ave"):
        yield f"bidi-{mode}", keras.Sequential([
            inp(), L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode=mode),
            L.Bidirectional(L.GRU(2, reset_after=False), merge_mode=mode),
            L.Dense(2, activation="softmax")])
    yield "bidi-simple", keras.Sequential([inp(), L.Bidirectional(L.SimpleRNN(3)), L.Dense(1)])
    yield "masking", keras.Sequential([inp(), L.Masking(0.0), L.LSTM(3, return_sequences=True),
                                       L.Bidirectional(L.GRU(2, return_sequences=True)),
                                       L.TimeDistributed(L.Dense(2)), L.SimpleRNN(2)])
    yield "time-distributed", keras.Sequential([inp(), L.LSTM(3, return_sequences=True),
                                                L.TimeDistributed(L.Dense(4, activation="relu")),
                                                L.Dense(2), L.Flatten(), L.Dense(3)])
    yield "conv-front", keras.Sequential([inp(), L.Conv1D(5, 3, padding="valid", activation="relu"),
                                          L.MaxPooling1D(2, padding="same"), L.LSTM(3), L.Dense(2)])
    yield "norms", keras.Sequential([
        inp(), L.LayerNormalization(), L.LSTM(4, return_sequences=True), L.BatchNormalization(),
        L.Activation("tanh"), L.SpatialDropout1D(0.2), L.GRU(3, return_sequences=True),
        L.GlobalAveragePooling1D(), L.Dropout(0.3), L.GaussianNoise(0.1), L.Dense(4),
        L.LeakyReLU(), L.Dense(2), L.Softmax()])
    yield "pool-reshape", keras.Sequential([inp(), L.AveragePooling1D(2), L.Reshape((6, 2)),
                                            L.GRU(3, return_sequences=True),
                                            L.GlobalMaxPooling1D(), L.Dense(2)])


USER = [name for name, _ in _user_models()]


@pytest.mark.parametrize("case", range(len(USER)), ids=USER)
def test_user_layers_equal_keras(case):
    import keras
    keras.utils.set_random_seed(20 + case)
    _, model = list(_user_models())[case]
    x = np.random.default_rng(case).normal(size=(5, 6, 4)).astype("float32")
    x[1, :2] = 0.0     # masked steps for the Masking model (zero vectors)
    x[3, -1] = 0.0
    for layer in model.layers:   # BatchNormalization with non-trivial statistics
        if type(layer).__name__ == "BatchNormalization":
            layer.moving_mean.assign(np.linspace(-0.2, 0.3, layer.moving_mean.shape[0]))
            layer.moving_variance.assign(np.linspace(0.5, 2.0, layer.moving_variance.shape[0]))
    _check_all_layers(model, x)


def test_mask_zero_embedding_and_embedded_inputs():
    import keras
    keras.utils.set_random_seed(5)
    L = keras.layers
    model = keras.Sequential([keras.Input((7,), dtype="int32"), L.Embedding(12, 3, mask_zero=True),
                              L.GRU(4, return_sequences=True), L.Bidirectional(L.LSTM(2)),
                              L.Dense(1, activation="sigmoid")])
    ids = np.random.default_rng(0).integers(1, 12, (4, 7)).astype("int32")
    ids[0, :3] = 0        # pre-padding
    ids[2, -2:] = 0       # post-padding: the final state is carried over
    tracer = Tracer(model)
    tr = _check_all_layers(model, ids)
    gru = tr.layers[tracer.specs[0].name]
    np.testing.assert_array_equal(gru.mask.numpy(), ids != 0)
    h = gru.h.numpy()
    np.testing.assert_array_equal(h[0, :3], 0)                 # nothing before the first word
    np.testing.assert_array_equal(h[2, -1], h[2, -3])          # carried over the padding
    emb = tracer.embed(ids)                                    # the same from the vectors
    np.testing.assert_allclose(tracer(emb, embedded=True).output.numpy(), tr.output.numpy(),
                               atol=1e-6)


def test_bidirectional_directions_are_their_own_layers():
    """Each direction is traced with its own weights and step order: the backward one's step 0
    reads the last input; its parts are the products of its own sources and kernels."""
    import keras
    keras.utils.set_random_seed(6)
    L = keras.layers
    model = keras.Sequential([keras.Input((5, 3)),
                              L.Bidirectional(L.LSTM(2, return_sequences=True), name="bi"),
                              L.Dense(2)])
    x = np.random.default_rng(2).random((3, 5, 3)).astype("float32")
    tracer = Tracer(model)
    assert [s.name for s in tracer.specs] == ["bi/forward", "bi/backward", "dense"] or \
        [s.name for s in tracer.specs][:2] == ["bi/forward", "bi/backward"]
    tr = tracer(x)
    fwd, bwd = tr.layers["bi/forward"], tr.layers["bi/backward"]
    np.testing.assert_array_equal(fwd.x.numpy(), x)
    np.testing.assert_array_equal(bwd.x.numpy(), x[:, ::-1])
    for name, lt in (("bi/forward", fwd), ("bi/backward", bwd)):
        w = tracer._weights[name]
        U, W = w["kernel"].numpy(), w["recurrent_kernel"].numpy()
        np.testing.assert_allclose(np.concatenate(list(lt.xU.values()), -1), lt.x.numpy() @ U,
                                   atol=TOL)
        np.testing.assert_allclose(np.concatenate(list(lt.hW.values()), -1),
                                   lt.h_prev.numpy() @ W, atol=TOL)
    merged = np.concatenate([fwd.h.numpy(), bwd.h.numpy()[:, ::-1]], -1)
    np.testing.assert_allclose(tr.outputs["bi"].numpy(), merged, atol=TOL)


def test_dense_on_a_sequence_has_one_set_per_step():
    import keras
    keras.utils.set_random_seed(7)
    L = keras.layers
    model = keras.Sequential([keras.Input((4, 3)), L.LSTM(2, return_sequences=True),
                              L.Dense(3, name="per_step"), L.Flatten(), L.Dense(2)])
    tracer = Tracer(model)
    spec = tracer.spec["per_step"]
    assert spec.kind == "dense" and spec.steps == 4 and spec.in_dim == 2
    x = np.random.default_rng(3).random((2, 4, 3)).astype("float32")
    lt = tracer(x).layers["per_step"]
    assert lt.pre.shape == (2, 4, 3)
    np.testing.assert_allclose(lt.pre.numpy(), lt.x.numpy() @ tracer._weights["per_step"]["kernel"].numpy(), atol=TOL)


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
