"""Coverage states as values: merge (A then B == merge(A, B)), save and load, refusals."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.coverage import get_criterion, statefile
from rnncon_core.errors import InputError

VARIANTS = [("rconc", {}), ("rconc", {"granularity": "edge"}),
            ("rconc", {"normalize": "model", "values": "signed"}),
            ("rconc", {"granularity": "edge", "normalize": "layer", "values": "signed"}),
            ("nc", {}), ("hsc", {}), ("csc", {})]


def _same(a, b):
    np.testing.assert_allclose(a._state.max_values(), b._state.max_values(), atol=1e-6)
    assert a.n_inputs == b.n_inputs and a.covered == b.covered
    if not a.uses_threshold:
        np.testing.assert_array_equal(a.curve(), b.curve())
        return
    grid = a._state.grid if not (a.name == "rconc" and a.granularity == "edge") else a._edge.grid
    for t in grid:
        np.testing.assert_array_equal(a.curve(t), b.curve(t))


@pytest.mark.parametrize("name,params", VARIANTS)
def test_update_then_update_equals_merge(name, params, tiny_lstm, tiny_x):
    whole = get_criterion(name, tiny_lstm, **params).update(tiny_x[:4]).update(tiny_x[4:])
    a = get_criterion(name, tiny_lstm, **params).update(tiny_x[:4])
    b = get_criterion(name, tiny_lstm, **params).update(tiny_x[4:])
    _same(whole, a.merge(b))
    # three shards, merged left to right
    parts = [get_criterion(name, tiny_lstm, **params).update(tiny_x[i:j])
             for i, j in ((0, 2), (2, 7), (7, 9))]
    merged = parts[0].merge(parts[1]).merge(parts[2])
    _same(whole, merged)


@pytest.mark.parametrize("name,params", VARIANTS)
def test_save_and_load(name, params, tiny_lstm, tiny_x, tmp_path):
    cov = get_criterion(name, tiny_lstm, **params).update(tiny_x[:5])
    path = statefile.save(cov, tmp_path / "state")
    again = statefile.load(tiny_lstm, path)
    assert type(again) is type(cov) and again.get_config() == cov.get_config()
    _same(cov, again)
    # go on from a saved state: the same as one criterion over everything
    _same(again.update(tiny_x[5:]), get_criterion(name, tiny_lstm, **params).update(tiny_x))


def test_refusals(tiny_lstm, tiny_gru, tiny_x, tmp_path):
    a = get_criterion("rconc", tiny_lstm).update(tiny_x)
    with pytest.raises(InputError, match="same configuration"):
        a.merge(get_criterion("rconc", tiny_lstm, normalize="layer"))
    with pytest.raises(InputError, match="same configuration"):
        a.merge(get_criterion("nc", tiny_lstm))
    path = statefile.save(a, tmp_path / "a.npz")
    with pytest.raises(InputError, match="another model"):
        statefile.load(tiny_gru, path)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a coverage state"):
        statefile.load(tiny_lstm, tmp_path / "bad.npz")
    with pytest.raises(InputError, match="no coverage state file"):
        statefile.load(tiny_lstm, tmp_path / "missing.npz")


@pytest.mark.parametrize("name,params", VARIANTS)
def test_pipelined_chunks_equal_one_chunk(name, params, tiny_lstm, tiny_x, monkeypatch):
    """update() runs chunk i+1's graph while it adds chunk i: the same state as one chunk."""
    whole = get_criterion(name, tiny_lstm, **params).update(tiny_x)
    chunked = get_criterion(name, tiny_lstm, **params)
    monkeypatch.setattr(chunked.engine, "chunk_size", lambda: 2)
    _same(whole, chunked.update(tiny_x))
