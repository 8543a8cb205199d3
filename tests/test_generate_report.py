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


def test_reuse_only_a_run_of_the_same_request(tmp_path):
    """A stored run with another pool (here "seed") is not the answer to a default request,
    and is to a request that names that pool."""
    from rnncon_core.reports.generation import _reusable
    from rnncon_core.generate.guided import DEFAULT_LAMBDA_PRED
    from rnncon_core.runs import RunStore
    store = RunStore(tmp_path / "runs")
    generator = {"method": "rconc", "target": "random", "k": 1, "pool": "seed",
                 "short": "error", "iterations": 50, "window": 128, "constraint": "none",
                 "lambda_pred": DEFAULT_LAMBDA_PRED, "minimize": True, "min_steps": 8}

    def stored(**changes):
        with store.start("generate", model="mnist-lstm", method="rconc",
                         config={"method": "rconc", "n_seeds": 4, "seed": 0,
                                 "generator": {**generator, **changes}}) as run:
            run.save_npz("outputs", adversarial=np.ones(4, dtype=bool))
            run.finish({"n_seeds": 4, "n_adversarial": 4})
        return run.run_id

    run_id = stored()
    assert _reusable(store, "mnist-lstm", "rconc", 4, {"target": "random"}) is None
    got = _reusable(store, "mnist-lstm", "rconc", 4, {"target": "random", "pool": "seed"})
    assert got is not None and got["run_id"] == run_id
    # a run made before the joint objective (no lambda_pred, the coverage term alone), with
    # its constraint stored the older way, is not the answer to a default request
    old = {k: v for k, v in generator.items() if k != "lambda_pred"}
    with store.start("generate", model="mnist-lstm", method="rconc",
                     config={"method": "rconc", "n_seeds": 5, "seed": 0,
                             "generator": {**old, "pool": "auto",
                                           "constraint": {"name": "none"}}}) as run:
        run.save_npz("outputs", adversarial=np.ones(5, dtype=bool))
        run.finish({"n_seeds": 5, "n_adversarial": 5})
    assert _reusable(store, "mnist-lstm", "rconc", 5, {"target": "random"}) is None
    # a run without the minimal-perturbation stage answers only a request without it
    raw = stored(pool="auto", minimize=False)
    assert _reusable(store, "mnist-lstm", "rconc", 4, {"target": "random"}) is None
    assert _reusable(store, "mnist-lstm", "rconc", 4,
                     {"target": "random", "minimize": False})["run_id"] == raw
    new = stored(pool="auto", lambda_pred=DEFAULT_LAMBDA_PRED)
    assert _reusable(store, "mnist-lstm", "rconc", 4, {"target": "random"})["run_id"] == new


def test_reuse_tells_deepxplore_settings_from_ours(tmp_path):
    """A run at DeepXplore's occlusion settings (its own patch position and step) is not the
    answer to the Constraint row's request at our defaults, and the other way round (a report
    had read the DeepXplore run back into the Constraint row)."""
    from rnncon_core.generate.guided import DEFAULT_LAMBDA_PRED
    from rnncon_core.reports.generation import DEEPXPLORE, _reusable
    from rnncon_core.runs import RunStore
    store = RunStore(tmp_path / "runs")
    base = {"method": "rconc", "target": "random", "k": 1, "pool": "auto", "short": "error",
            "iterations": 50, "window": 128, "step": 0.02, "constraint": "occlusion",
            "size": [10, 10], "position": None, "lambda_pred": DEFAULT_LAMBDA_PRED,
            "minimize": True, "min_steps": 8}

    def stored(generator):
        with store.start("generate", model="mnist-lstm", method="rconc",
                         config={"method": "rconc", "n_seeds": 4, "seed": 0,
                                 "generator": generator}) as run:
            run.save_npz("outputs", adversarial=np.ones(4, dtype=bool))
            run.finish({"n_seeds": 4, "n_adversarial": 4})
        return run.run_id

    theirs = stored({**base, **DEEPXPLORE["occlusion"]})
    ask = {"target": "random", "constraint": "occlusion"}
    assert _reusable(store, "mnist-lstm", "rconc", 4, ask) is None
    assert _reusable(store, "mnist-lstm", "rconc", 4,
                     {**ask, **DEEPXPLORE["occlusion"]})["run_id"] == theirs
    ours = stored(base)
    assert _reusable(store, "mnist-lstm", "rconc", 4, ask)["run_id"] == ours
