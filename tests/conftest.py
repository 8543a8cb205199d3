"""Shared tiny models for fast tests (a few units, a few steps). Others may add fixtures."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest


def _seeded(seed: int):
    import keras
    keras.utils.set_random_seed(seed)
    return keras


@pytest.fixture(scope="session")
def tiny_lstm():
    """Input(5, 3) -> LSTM(4, seq) -> LSTM(3) -> Dense(4, relu) -> Dense(2, softmax)."""
    keras = _seeded(1)
    L = keras.layers
    return keras.Sequential([keras.Input((5, 3)), L.LSTM(4, return_sequences=True, name="lstm_1"),
                             L.LSTM(3, name="lstm_2"), L.Dense(4, activation="relu", name="dense"),
                             L.Dense(2, activation="softmax", name="output")], name="tiny_lstm")


@pytest.fixture(scope="session")
def tiny_gru():
    """Input(5, 3) -> GRU(4, seq, reset_after=True) -> GRU(3, reset_after=False) -> Dense(3)."""
    keras = _seeded(2)
    L = keras.layers
    return keras.Sequential([keras.Input((5, 3)),
                             L.GRU(4, return_sequences=True, reset_after=True, name="gru_1"),
                             L.GRU(3, reset_after=False, name="gru_2"),
                             L.Dense(3, activation="softmax", name="output")], name="tiny_gru")


@pytest.fixture(scope="session")
def tiny_text():
    """Input((6,), int32) -> Embedding(20, 3) -> LSTM(4) -> Dense(1, sigmoid)."""
    keras = _seeded(3)
    L = keras.layers
    return keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(20, 3, name="embedding"),
                             L.LSTM(4, name="lstm_1"), L.Dense(1, activation="sigmoid",
                                                               name="output")], name="tiny_text")


@pytest.fixture(scope="session")
def tiny_x():
    return np.random.default_rng(0).random((9, 5, 3)).astype("float32")


@pytest.fixture(scope="session")
def tiny_ids():
    return np.random.default_rng(0).integers(0, 20, (7, 6)).astype("int32")
