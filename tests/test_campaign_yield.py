"""The loop's yield options: faults explored as parents (``explore_faults``) and the pick weight
of lineages that stopped finding new faults (``stale_picks``); both resume exactly."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.campaign import (CAMPAIGN_PARAMS, Campaign, faults_only, make_guide,
                                  run_campaign)
from rnncon_core.campaign.prepare import make_abstraction
from rnncon_core.campaign.queue import SeedQueue


@pytest.fixture(scope="module")
def seeds(tiny_lstm):
    from rnncon_core.coverage import build_profile
    pool = np.random.default_rng(11).random((4000, 5, 3)).astype("float32")
    p = np.asarray(tiny_lstm(pool))
    x = pool[np.argsort(np.abs(p[:, 1] - p[:, 0]))[:24]]      # near the decision boundary
    build_profile(tiny_lstm, x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    return x, y


def _campaign(model, x, y, guide="none", seed=3, **kw):
    values = CAMPAIGN_PARAMS.check("test", {"parents": 4, "mutants": 4, "max_linf": 0.5,
                                            "noise": 0.3, "mutations": "noise", **kw})
    return Campaign(model, x, y, make_guide(guide, model, {}), values, seed, "sequence",
                    make_abstraction(model, values), faults_only=faults_only(guide))


def _run(camp, steps):
    camp.start()
    for _ in range(steps):
        camp.step()
    return camp


def _fault_rows(model, camp):
    """Queue rows the model predicts wrong (faults kept as parents)."""
    rows = camp.queue.rows
    pred = np.asarray(model(rows["x"])).argmax(1)
    return np.flatnonzero(pred != rows["label"])


@pytest.mark.parametrize("guide", ["none", "rconc"])
def test_explored_faults_enter_the_queue_with_their_parent(tiny_lstm, seeds, guide):
    x, y = seeds
    plain = _run(_campaign(tiny_lstm, x, y, guide=guide, explore_faults=False), 12)
    assert len(plain.faults) and not len(_fault_rows(tiny_lstm, plain))   # faults not queued
    camp = _run(_campaign(tiny_lstm, x, y, guide=guide, explore_faults=True), 12)
    rows, f = camp.queue.rows, camp.faults.rows
    bad = _fault_rows(tiny_lstm, camp)
    assert len(bad) > 0
    fault_x = {r.tobytes() for r in f["x"]}
    assert all(rows["x"][i].tobytes() in fault_x for i in bad)   # each one a kept fault
    parent = rows["parent"][bad]
    assert np.all((parent >= 0) & (parent < bad))                # its parent came before it
    np.testing.assert_array_equal(rows["root"][bad], rows["root"][parent])
    np.testing.assert_array_equal(rows["depth"][bad], rows["depth"][parent] + 1)
    np.testing.assert_array_equal(rows["label"], y[rows["root"]])     # the root's label


def test_mutants_of_faults_stay_within_the_roots_bounds(tiny_lstm, seeds):
    """Noise only: every lineage's reference is its root seed, so every queue entry and
    every fault (mutants of faults included) is within max_linf of its root seed."""
    x, y = seeds
    camp = _run(_campaign(tiny_lstm, x, y, guide="rconc", explore_faults=True, max_linf=0.4),
                30)
    rows, f = camp.queue.rows, camp.faults.rows
    bad = set(_fault_rows(tiny_lstm, camp).tolist())
    of_faults = [i for i in range(len(rows)) if rows["parent"][i] in bad]
    assert of_faults                                  # mutants of faults were made and kept
    np.testing.assert_array_equal(rows["ref"], x[rows["root"]])
    assert np.abs(rows["x"] - x[rows["root"]]).max() <= 0.4 + 1e-6
    assert np.abs(f["x"] - x[f["root"]]).max() <= 0.4 + 1e-6
    np.testing.assert_array_equal(f["label"], y[f["root"]])
    assert np.all(f["pred"] != f["label"])


def test_stale_counts_and_pick_weights(tiny_lstm, seeds):
    x, y = seeds
    camp = _run(_campaign(tiny_lstm, x, y, stale_picks=2.0), 10)
    assert camp.stale.sum() > 0                       # roots picked without a new fault
    last = camp.faults.rows["batch"] == camp.batches - 1
    assert np.all(camp.stale[camp.faults.rows["root"][last]] == 0)   # reset by a new fault
    camp.stale[:] = 0
    camp.stale[:12] = 4                               # two halvings for roots 0-11
    scale = camp._pick_scale()
    roots = camp.queue.rows["root"]
    np.testing.assert_allclose(scale[roots < 12], 0.25)
    np.testing.assert_allclose(scale[roots >= 12], 1.0)
    off = _campaign(tiny_lstm, x, y, stale_picks=0.0)
    assert off._pick_scale() is None


def test_pick_scale_steers_the_draws():
    q = SeedQueue()
    q.add(x=np.zeros((100, 1)), gain=np.zeros(100))
    scale = np.where(np.arange(100) < 50, 2.0 ** -30, 1.0)
    got = np.concatenate([q.pick(np.random.default_rng(i), 8, scale) for i in range(20)])
    assert np.mean(got >= 50) > 0.99


@pytest.mark.parametrize("guide", ["none", "rconc", "faults"])
def test_resume_with_the_yield_options_is_exact(tiny_lstm, seeds, guide):
    x, y = seeds
    kw = dict(guide=guide, explore_faults=True, stale_picks=2.0)
    whole = _run(_campaign(tiny_lstm, x, y, **kw), 10)
    first = _run(_campaign(tiny_lstm, x, y, **kw), 5)
    assert len(first.faults) < len(whole.faults) and whole.stale.any()
    state = first.state()
    assert "stale" in state
    second = _campaign(tiny_lstm, x, y, **kw)
    second.restore(state, first.queue.rows.arrays(), first.faults.rows.arrays())
    for _ in range(5):
        second.step()
    for key in ("x", "ref", "root", "parent", "depth"):
        np.testing.assert_array_equal(second.queue.rows[key], whole.queue.rows[key])
    np.testing.assert_array_equal(second.queue.picks, whole.queue.picks)
    np.testing.assert_array_equal(second.stale, whole.stale)
    for key in ("x", "pred", "state", "calls"):
        np.testing.assert_array_equal(second.faults.rows[key], whole.faults.rows[key])


def test_stored_campaign_with_the_options_resumes_after_a_stop(tiny_lstm, seeds, tmp_path):
    """Through the run store's append-only checkpoint (the stale counts in state.log)."""
    from rnncon_core.errors import JobCancelled
    from rnncon_core.runs import RunStore
    x, y = seeds
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide="rconc", store=store, seed=5,
              parents=4, mutants=4, max_linf=0.5, noise=0.3, explore_faults=True,
              stale_picks=2.0)
    whole = run_campaign(tiny_lstm, budget="240calls", **kw)
    stops = iter([False] * 3 + [True] * 100)
    with pytest.raises(JobCancelled):
        run_campaign(tiny_lstm, budget="240calls", should_stop=lambda: next(stops), **kw)
    cut = store.list(kind="campaign", status="cancelled")[0]
    resumed = run_campaign(tiny_lstm, budget="240calls", resume=cut.run_id, store=store)
    for key in ("calls", "batches", "distinct_faults", "distinct_pairs", "queue", "coverage"):
        assert resumed[key] == whole[key], key
    a = store.get(resumed["run_id"]).load_npz("faults")
    b = store.get(whole["run_id"]).load_npz("faults")
    np.testing.assert_array_equal(a["x"], b["x"])


def test_report_keeps_loop_versions_apart(tmp_path):
    """Rows without a loop column ran the old loop: a report of the new loop leaves them out
    (and the other way round), and says which loop it summarizes."""
    import pandas as pd

    from rnncon_core.campaign.loop import YIELD_BEFORE, loop_label
    from rnncon_core.reports.campaign import write_report
    old, new = loop_label(YIELD_BEFORE), loop_label({"explore_faults": True, "stale_picks": 4})
    assert old != new
    rows = pd.DataFrame({"model": "a", "guide": ["rconc", "rconc", "none", "none"] * 2,
                         "repeat": [0, 1] * 4, "budget": "100calls",
                         "distinct_faults": [5, 6, 3, 4, 50, 60, 30, 40], "distinct_pairs": 2,
                         "coverage": 0.5, "calls": 100, "overhead": 2.0,
                         "loop": [None] * 4 + [new] * 4})
    rows.to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame({"model": "a", "guide": "none", "repeat": 0, "budget": "100calls",
                  "axis": "calls", "at": 100, "faults": [3, 30],
                  "loop": [None, new]}).to_csv(tmp_path / "curves.csv", index=False)
    settings = {"budget": "100calls", "budgets": {"a": "100calls"}, "seeds": 10, "repeats": 2,
                "models": ["a"], "guides": ["rconc", "none"], "params": {}}
    for loop, rconc in ((None, 5.5), (new, 55.0)):
        rep = write_report(tmp_path, {**settings, **({"loop": loop} if loop else {})})
        got = {r["guide"]: r for r in rep["table"]}
        assert got["rconc"]["repeats"] == 2 and got["rconc"]["faults"] == rconc
        assert f"Loop: {loop or old}" in (tmp_path / "summary.md").read_text()


def test_a_campaign_stored_before_the_options_resumes_with_the_old_loop(tiny_lstm, seeds,
                                                                        tmp_path):
    """Its config lacks explore_faults and stale_picks: resumed with them off (YIELD_BEFORE),
    whatever the defaults, so it goes on as the uninterrupted old-loop campaign."""
    import json

    from rnncon_core.campaign.loop import YIELD_BEFORE
    from rnncon_core.errors import JobCancelled
    from rnncon_core.runs import RunStore
    x, y = seeds
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide="rconc", store=store, seed=5,
              parents=4, mutants=4, max_linf=0.5, noise=0.3, **YIELD_BEFORE)
    whole = run_campaign(tiny_lstm, budget="240calls", **kw)
    stops = iter([False] * 3 + [True] * 100)
    with pytest.raises(JobCancelled):
        run_campaign(tiny_lstm, budget="240calls", should_stop=lambda: next(stops), **kw)
    cut = store.list(kind="campaign", status="cancelled")[0]
    cfg = json.loads((cut.path / "config.json").read_text())
    for k in YIELD_BEFORE:
        del cfg["params"][k]
    (cut.path / "config.json").write_text(json.dumps(cfg))
    resumed = run_campaign(tiny_lstm, budget="240calls", resume=cut.run_id, store=store)
    assert store.get(resumed["run_id"]).config["params"]["explore_faults"] is False
    for key in ("calls", "distinct_faults", "queue", "coverage"):
        assert resumed[key] == whole[key], key


@pytest.mark.parametrize("explore", [True, False])
def test_guide_faults_keeps_only_new_distinct_faults(tiny_lstm, seeds, explore):
    """Guide ``faults``: every queue entry beyond the seeds is a kept distinct fault (with
    explore_faults off too), one per fault re-predicted stable; coverage is not measured."""
    from rnncon_core.campaign import GUIDE_FAULTS
    x, y = seeds
    camp = _run(_campaign(tiny_lstm, x, y, guide=GUIDE_FAULTS, explore_faults=explore), 12)
    assert camp.faults_only and camp.guide is None
    rows, f = camp.queue.rows, camp.faults.rows
    assert len(f) > 0 and len(rows) == len(x) + len(f)
    pred = np.asarray(tiny_lstm(rows["x"][len(x):])).argmax(1)
    assert np.all(pred != rows["label"][len(x):])                   # all faults
    np.testing.assert_array_equal(rows["x"][len(x):], f["x"])        # the kept ones, in order
    assert np.isnan(camp.coverage()) and np.all(rows["gain"] == 0)
    none = _run(_campaign(tiny_lstm, x, y, guide="none", explore_faults=explore), 12)
    assert len(none.queue) - len(x) > len(none.faults)              # none keeps more
