"""The ascent's compiled step runs the model once (its output serves the objective's prediction
term and the predictions): the same gradient and predictions as the separate computation."""
import numpy as np
import pytest

from rnncon_core.generate import get_generator


@pytest.mark.parametrize("method,params", [("rconc", {"lambda_pred": 0.5}), ("pgd", {})])
def test_step_equals_separate_forward(tiny_lstm, tiny_x, method, params):
    import tensorflow as tf
    from rnncon_core.zoo import class_labels
    y = np.arange(len(tiny_x)) % 2
    gen = get_generator(method, tiny_lstm, **params)
    if hasattr(gen, "_prepare"):
        gen._prepare(tiny_x, y)
    ctx = gen._context(tiny_x, y, np.random.default_rng(0))
    grad, pred = gen._gradient_and_prediction(tiny_x, y, ctx)
    xt = tf.convert_to_tensor(tiny_x)
    with tf.GradientTape() as tape:         # eager, the model run separately
        tape.watch(xt)
        obj = gen._objective(xt, tf.convert_to_tensor(y, tf.int64),
                             {k: tf.convert_to_tensor(v) for k, v in ctx.items()})
    np.testing.assert_allclose(grad, tape.gradient(obj, xt).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(pred, class_labels(gen.forward(xt).numpy()))
    assert np.abs(grad).max() > 0 and gen._step_out is None
