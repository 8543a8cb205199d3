"""`rnncon report generation`: end to end on a shipped model (slow: run with -m slow), and
which stored runs it reuses."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rnncon_core.zoo import shipped_models


@pytest.mark.slow
@pytest.mark.skipif("mnist-lstm" not in shipped_models(), reason="mnist-lstm is not trained")
def test_report_generation_small(tmp_path):
    from rnncon_core.reports.generation import build_generation
    from rnncon_core.runs import RunStore
    store = RunStore(tmp_path / "runs")
    rep = build_generation(n_seeds=6, models=["mnist-lstm"], out_dir=tmp_path / "out",
                           iterations=3, store=store, log=lambda m: None)
    rows = {r["row"]: r for r in rep["table2"]}
    # the minimal-perturbation stage ran on every gradient row: its raw figures beside
    for name in ("random", "rnntest", "pgd", "fgsm", "constraint:light"):
        assert rows[name]["avg_l2_unminimized"] is not None
        if rows[name]["avg_l2"] is not None:
            assert rows[name]["avg_l2"] <= rows[name]["avg_l2_unminimized"] + 1e-6
    assert rows["noise (same L2)"]["avg_l2_unminimized"] is None
    assert {"random", "lstm_1", "dense", "constraint:light", "constraint:occlusion",
            "constraint:blackout", "nc", "rnntest", "fgsm", "pgd", "noise (same L2)"} <= set(rows)
    assert rows["random"]["paper_adv_rate"] == 84.40 and rows["pgd"]["paper_adv_rate"] is None
    for r in rep["table2"]:
        assert r["seeds"] == 6 and 0 <= r["adv_rate"] <= 1
        info = store.get(r["run_id"])
        assert info.status == "finished"
        z = info.load_npz("outputs")
        assert r["n_adversarial"] == int(z["adversarial"].sum())
    # every strategy saw the same seeds
    seeds = {tuple(store.get(r["run_id"]).load_npz("outputs")["seed_index"])
             for r in rep["table2"]}
    assert len(seeds) == 1
    # noise matched the RNNCon-Test perturbation's L2 per seed
    z_rc = store.get(rows["random"]["run_id"]).load_npz("outputs")
    z_no = store.get(rows["noise (same L2)"]["run_id"]).load_npz("outputs")
    l2 = lambda z: np.linalg.norm((z["x_gen"] - z["x_seed"]).reshape(6, -1), axis=1)  # noqa
    np.testing.assert_allclose(l2(z_no), l2(z_rc), rtol=1e-3, atol=1e-4)
    with open(tmp_path / "out" / "figure10_tsne.csv") as f:
        tsne = list(csv.DictReader(f))
    assert sorted({int(r["k"]) for r in tsne}) == [1, 2, 3] and len(tsne) == 18
    assert json.loads((tmp_path / "out" / "generation.json").read_text())["n_seeds"] == 6
    assert "Table 3" in (tmp_path / "out" / "README.md").read_text()


# which stored run a report may reuse: tests/test_run_matching.py (one rule for every caller)
