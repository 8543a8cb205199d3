"""RConC tells test sets apart (issue: a criterion that reads 100 % after ten inputs measures
nothing). A small LSTM trained on the 8x8 digits; its test inputs, and PGD's adversarial
versions of held-out ones."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.coverage import ContributionCoverage, select_threshold


@pytest.fixture(scope="module")
def trained():
    import keras
    from rnncon_core.data import load_dataset
    keras.utils.set_random_seed(7)
    ds = load_dataset("digits")
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(16, name="lstm_1"),
                              keras.layers.Dense(16, activation="relu", name="dense_16"),
                              keras.layers.Dense(10, activation="softmax", name="output")])
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(ds.x_train, ds.y_train, epochs=12, batch_size=32, verbose=0)
    acc = model.evaluate(ds.x_test, ds.y_test, verbose=0)[1]
    assert acc > 0.8, f"the small model should learn the digits (accuracy {acc:.2f})"
    return model, ds


def test_rconc_grows_with_inputs_and_stays_below_full(trained):
    model, ds = trained
    cov = ContributionCoverage(model).update(ds.x_test[:300])   # defaults: step, abs, 0.25
    curve = cov.curve()
    assert curve[9] < curve[99] < curve[299] < 1.0
    # Eq. 3 as written saturates: it cannot tell 10 inputs from 300
    eq3 = ContributionCoverage(model, normalize="model", values="signed").update(ds.x_test[:300])
    assert eq3.rate() - eq3.curve()[9] < curve[299] - curve[9]


def test_adversarial_inputs_raise_rconc_more_than_clean_ones(trained):
    from rnncon_core.generate import get_generator
    model, ds = trained
    base, held_x, held_y = ds.x_test[:200], ds.x_test[200:], ds.y_test[200:]
    pred = np.asarray(model(held_x, training=False)).argmax(1)
    right = np.flatnonzero(pred == held_y)[:60]
    res = get_generator("pgd", model, eps=0.3, step=0.03, iterations=20).generate(
        held_x[right], held_y[right])
    adv = np.flatnonzero(res.adversarial)
    assert len(adv) >= 20
    before = ContributionCoverage(model).update(base).rate()
    clean = ContributionCoverage(model).update(base).update(res.x_seed[adv]).rate()
    attacked = ContributionCoverage(model).update(base).update(res.x_gen[adv]).rate()
    assert attacked - before > clean - before >= 0


def test_threshold_selection_is_not_degenerate(trained):
    """§5.2's rule: at 0 and 0.25 labels differ (Eq. 3 as written made both differences 0)."""
    model, ds = trained
    best, table = select_threshold(model, ds.x_test[:300], ds.y_test[:300],
                                   candidates=(0.0, 0.25, 0.5))
    assert (table["max_difference"] > 0).all()
    assert best in (0.0, 0.25, 0.5)
