"""A Ray worker's round (campaign.distributed._Worker.rounds, run here without Ray): a fixed
number of batches with a budget in model calls (the same campaign every time), and at most
``seconds`` with a time budget (so a slow model's round does not hold up the budget's end, a
cancel or the live curve)."""
from __future__ import annotations

import numpy as np


def _worker(tiny_lstm, tmp_path):
    from rnncon_core.campaign import CAMPAIGN_PARAMS
    from rnncon_core.campaign.distributed import _Worker
    from rnncon_core.coverage import build_profile
    from rnncon_core.zoo import load_model
    path = tmp_path / "tiny.keras"
    tiny_lstm.save(path)
    x = np.random.default_rng(3).random((12, 5, 3)).astype("float32")
    build_profile(load_model(str(path)), x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    values = CAMPAIGN_PARAMS.check("a campaign", {"parents": 2, "mutants": 2})
    w = _Worker(str(path), x, y, "none", None, values, 0, "sequence", False)
    w.warm()
    w.start()
    return w


def test_rounds_in_batches_and_capped_in_seconds(tiny_lstm, tmp_path):
    w = _worker(tiny_lstm, tmp_path)
    assert w.rounds(3, None)["batches"] == 3                 # a budget in calls: 3 batches
    assert w.rounds(1000, None, seconds=0.0)["batches"] == 4     # time's up after one batch
    d = w.rounds(5, calls_left=0)                                # its share of calls spent
    assert d["batches"] == 4
