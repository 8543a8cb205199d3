"""ContributionCoverage.targets.row_values (each input's own items, gathered from the scopes'
minima and ranges) against the values of every item gathered afterwards (Targets.row_values'
default), on tiny models: the same values, and the same gradients w.r.t. the input."""
import numpy as np
import pytest

from rnncon_core.coverage import get_criterion
from rnncon_core.coverage.targets import Targets


def _both(crit, x, union, pos, objective):
    import tensorflow as tf
    xt = tf.convert_to_tensor(x)
    out = []
    for fn in (crit.targets.row_values, lambda *a, **k: Targets.row_values(crit.targets, *a, **k)):
        @tf.function
        def grad(xt, fn=fn):
            with tf.GradientTape() as tape:
                tape.watch(xt)
                v = fn(xt, union, pos, objective=objective)
                s = tf.reduce_sum(v * tf.range(1.0, 1.0 + tf.cast(tf.shape(v)[1], v.dtype)))
            return v, tape.gradient(s, xt)
        out.append([np.asarray(a) for a in grad(xt)])
    return out


@pytest.mark.parametrize("fixture,normalize,values,objective", [
    ("tiny_lstm", "step", "abs", False), ("tiny_lstm", "step", "abs", True),
    ("tiny_gru", "layer", "signed", False), ("tiny_gru", "model", "abs", True)])
def test_row_values_equal_the_gathered_values(request, tiny_x, fixture, normalize, values,
                                              objective):
    model = request.getfixturevalue(fixture)
    crit = get_criterion("rconc", model, threshold=0.25, normalize=normalize, values=values)
    rng = np.random.default_rng(5)
    targets = rng.integers(0, crit.total, (len(tiny_x), 3))
    union, pos = np.unique(targets, return_inverse=True)
    pos = pos.reshape(targets.shape)
    (v_new, g_new), (v_old, g_old) = _both(crit, tiny_x, union, pos, objective)
    assert v_new.shape == (len(tiny_x), 3)
    np.testing.assert_array_equal(v_new, v_old)
    np.testing.assert_allclose(g_new, g_old, rtol=1e-5, atol=1e-7)
    assert np.abs(g_new).max() > 0
    # eagerly (inputs checked, as item_values): the same values
    np.testing.assert_array_equal(np.asarray(crit.targets.row_values(tiny_x, union, pos)),
                                  np.take_along_axis(np.asarray(crit.targets.item_values(tiny_x, union)),
                                                     pos, axis=1))
