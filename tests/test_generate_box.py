"""Gradient methods on real-valued sequences (z-scores, sensor readings): the generated inputs
stay within each feature's range over the seeds instead of being refused (they used to need
inputs in [0, 1]); images keep [0, 1]."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.errors import InputError
from rnncon_core.generate import get_generator
from rnncon_core.generate.base import data_box


def _wide(model, n=12):
    x = (np.random.default_rng(3).normal(size=(n, 5, 3)) * 3).astype(np.float32)
    return x, np.asarray(model(x)).argmax(1)


def test_data_box_is_unit_inside_and_per_feature_outside():
    assert data_box(np.random.default_rng(0).random((4, 5, 3))) == (0.0, 1.0)
    x = np.zeros((2, 4, 3), np.float32)
    x[0, 1] = [-2.0, 5.0, 0.5]
    lo, hi = data_box(x)
    np.testing.assert_array_equal(lo, [-2.0, 0.0, 0.0])
    np.testing.assert_array_equal(hi, [0.0, 5.0, 0.5])


@pytest.mark.parametrize("method,params", [
    ("pgd", dict(eps=1.0, step=0.5, iterations=10)),
    ("rconc", dict(iterations=15, step=0.5)),
    ("noise", dict(l2=4.0)),
])
def test_real_valued_seeds_stay_in_each_features_range(tiny_lstm, method, params):
    x, y = _wide(tiny_lstm)
    gen = get_generator(method, tiny_lstm, batch_size=6, **params)
    res = gen.generate(x, y)
    lo, hi = x.min(axis=(0, 1)), x.max(axis=(0, 1))
    assert np.all(res.x_gen >= lo - 1e-6) and np.all(res.x_gen <= hi + 1e-6)
    assert res.x_gen.min() < -1 and res.x_gen.max() > 2      # not squeezed into [0, 1]
    assert np.abs(res.x_gen - x).max() > 0                   # something moved
    again = get_generator(method, tiny_lstm, batch_size=6, **params).generate(x, y)
    np.testing.assert_array_equal(res.x_gen, again.x_gen)


def test_images_outside_0_1_are_still_refused():
    import keras
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.LSTM(2),
                              keras.layers.Dense(2, activation="softmax")])
    x = np.full((2, 28, 28), 3.0, np.float32)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        get_generator("pgd", model).generate(x, np.zeros(2, np.int64))
