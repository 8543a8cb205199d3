"""Campaigns on tiny models: the loop, distinct faults, mutations within bounds, exact resume."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.campaign import (CAMPAIGN_PARAMS, Campaign, Mutator, make_guide,
                                  parse_budget, run_campaign)
from rnncon_core.campaign.prepare import make_abstraction
from rnncon_core.errors import InputError, JobCancelled


@pytest.fixture(scope="module")
def seeds(tiny_lstm):
    from rnncon_core.coverage import build_profile
    x = np.random.default_rng(11).random((24, 5, 3)).astype("float32")
    build_profile(tiny_lstm, x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    return x, y


def _values(**kw):
    return CAMPAIGN_PARAMS.check("test", {"parents": 4, "mutants": 4, "max_linf": 0.5,
                                          "noise": 0.3, **kw})


def _campaign(model, x, y, guide="rconc", seed=3, **kw):
    values = _values(**kw)
    return Campaign(model, x, y, make_guide(guide, model, {}), values, seed, "sequence",
                    make_abstraction(model, values))


def test_budget_forms():
    assert parse_budget("10m").seconds == 600
    assert parse_budget("1m30s").seconds == 90
    assert parse_budget(45).seconds == 45
    assert parse_budget("5000calls").calls == 5000
    for bad in ("", "ten minutes", "0s", "-3m", "5 parsecs"):
        with pytest.raises(InputError, match="budget"):
            parse_budget(bad)


def test_loop_finds_distinct_faults_and_grows_the_queue(tiny_lstm, seeds):
    x, y = seeds
    camp = _campaign(tiny_lstm, x, y)
    camp.start()
    cov0 = camp.coverage()
    for _ in range(15):
        camp.step()
    f = camp.faults.rows
    assert len(camp.faults) > 0
    assert np.all(f["pred"] != f["label"])
    # a fault's label is its root seed's
    np.testing.assert_array_equal(f["label"], y[f["root"]])
    keys = list(zip(f["label"], f["pred"], f["state"]))
    assert len(set(keys)) == len(keys)                       # distinct by (true, pred, state)
    again = np.asarray(tiny_lstm(f["x"])).argmax(1)
    np.testing.assert_array_equal(again, f["pred"])          # re-predicted as saved
    assert camp.coverage() >= cov0
    assert len(camp.queue) > len(x)                          # kept what raised coverage
    rows = camp.queue.rows                                   # or was a new distinct fault
    fault = np.asarray(tiny_lstm(rows["x"])).argmax(1) != rows["label"]
    assert np.all(rows["gain"][len(x):][~fault[len(x):]] > 0)
    assert {r.tobytes() for r in rows["x"][fault]} <= {r.tobytes() for r in f["x"]}
    curve = np.array(camp.curve)
    assert np.all(np.diff(curve[:, 1]) > 0)                  # model calls grow
    assert np.all(np.diff(curve[:, 3]) >= 0)                 # distinct faults never drop


def test_unguided_keeps_every_valid_non_fault(tiny_lstm, seeds):
    x, y = seeds
    camp = _campaign(tiny_lstm, x, y, guide="none")
    camp.start()
    added = camp.step()
    q0, q1 = added["queue"]
    assert q1 - q0 > 0 and np.all(camp.queue.rows["gain"] == 0)
    assert np.isnan(camp.coverage())


def test_sequence_mutations_stay_within_bounds(tiny_lstm, seeds):
    x, _ = seeds
    m = Mutator("sequence", _values(max_linf=0.1, noise=0.5, mutations="noise"))
    rng = np.random.default_rng(0)
    new, ref, shifted, ops, pos = m.mutate(x, x, np.zeros(len(x), bool), None, rng)
    assert len(new) and set(ops) == {"noise"}
    assert np.abs(new - x[pos]).max() <= 0.1 + 1e-6


def test_image_mutations_respect_deephunter_bounds():
    rng = np.random.default_rng(1)
    img = (rng.random((16, 28, 28)) > 0.7).astype("float32")
    m = Mutator("image", _values(mutations="pixel,affine", max_linf=0.1, max_changed=0.05,
                                 validity="both"))
    new, ref, shifted, ops, pos = m.mutate(img, img, np.zeros(16, bool), None, rng)
    assert len(new)
    for i in range(len(new)):
        if shifted[i]:                        # an affine mutation moves the reference too
            np.testing.assert_array_equal(new[i], ref[i])
        else:
            d = np.abs(new[i] - ref[i])
            assert d.max() <= 0.1 + 1e-6 and np.mean(d > 1e-6) <= 0.05
    # a lineage that used its affine mutation gets pixel mutations only
    again = m.mutate(new, ref, np.ones(len(new), bool), None, rng)
    assert not set(again[3]) & {"translation", "scale", "shear", "rotation"}
    with pytest.raises(InputError, match="mutations"):
        Mutator("image", _values(mutations="shift"))


def test_resume_continues_exactly(tiny_lstm, seeds):
    """(stale_picks off: with it these seeds give no fault in 8 batches; the yield options'
    own exact resume is in test_campaign_yield.py)"""
    x, y = seeds
    whole = _campaign(tiny_lstm, x, y, stale_picks=0.0)
    whole.start()
    for _ in range(8):
        whole.step()
    assert len(whole.faults)
    first = _campaign(tiny_lstm, x, y, stale_picks=0.0)
    first.start()
    for _ in range(4):
        first.step()
    state = first.state()
    rows_q, rows_f = first.queue.rows.arrays(), first.faults.rows.arrays()
    second = _campaign(tiny_lstm, x, y, stale_picks=0.0)
    second.restore(state, rows_q, rows_f)
    for _ in range(4):
        second.step()
    for key in ("x", "ref", "root", "gain", "parent"):
        np.testing.assert_array_equal(second.queue.rows[key], whole.queue.rows[key])
    np.testing.assert_array_equal(second.queue.picks, whole.queue.picks)
    for key in ("x", "label", "pred", "state", "calls"):
        np.testing.assert_array_equal(second.faults.rows[key], whole.faults.rows[key])
    a, b = np.array(second.curve), np.array(whole.curve)
    np.testing.assert_array_equal(a[:, [1, 2, 3, 4, 5, 6]], b[:, [1, 2, 3, 4, 5, 6]])


def _guides():
    from rnncon_core.coverage import CRITERIA
    fast = ("rconc", "nc", "kmnc", "state", "bc")
    return [g if g in fast else pytest.param(g, marks=pytest.mark.slow) for g in CRITERIA]


@pytest.mark.parametrize("guide", _guides())
def test_every_guide_runs(tiny_lstm, seeds, guide):
    x, y = seeds
    camp = _campaign(tiny_lstm, x, y, guide=guide)
    camp.start()
    camp.step()
    assert 0.0 <= camp.coverage() <= 1.0


def test_stored_campaign_resumes_after_a_stop(tiny_lstm, seeds, tmp_path):
    from rnncon_core.runs import RunStore
    x, y = seeds
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide="rconc", store=store, seed=5,
              parents=4, mutants=4, max_linf=0.5, noise=0.3)
    whole = run_campaign(tiny_lstm, budget="400calls", **kw)
    stops = iter([False] * 5 + [True] * 100)
    with pytest.raises(JobCancelled, match="resume"):
        run_campaign(tiny_lstm, budget="400calls", should_stop=lambda: next(stops), **kw)
    cut = store.list(kind="campaign", status="cancelled")[0]
    assert cut.summary["partial"] and cut.summary["calls"] < 400
    resumed = run_campaign(tiny_lstm, budget="400calls", resume=cut.run_id, store=store)
    assert resumed["resumed_from"] == cut.run_id
    for key in ("calls", "batches", "distinct_faults", "distinct_pairs", "queue", "coverage"):
        assert resumed[key] == whole[key], key
    a = store.get(resumed["run_id"]).load_npz("faults")
    b = store.get(whole["run_id"]).load_npz("faults")
    np.testing.assert_array_equal(a["x"], b["x"])
    curve = store.get(resumed["run_id"]).load_npz("curve")
    assert np.all(np.diff(curve["calls"]) > 0)


def test_a_killed_campaign_loses_at_most_its_last_batch(tiny_lstm, seeds, tmp_path):
    """Killed while writing a batch: its rows record is cut short (or complete while the
    checkpoint is the previous batch's); the resumed campaign still equals the whole one."""
    import struct

    from rnncon_core.campaign.record import read_rows
    from rnncon_core.runs import RunStore
    x, y = seeds
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide="nc", store=store, seed=8,
              parents=4, mutants=4, max_linf=0.5, noise=0.3)
    whole = run_campaign(tiny_lstm, budget="300calls", **kw)
    stops = iter([False] * 4 + [True] * 100)
    with pytest.raises(JobCancelled):
        run_campaign(tiny_lstm, budget="300calls", should_stop=lambda: next(stops), **kw)
    cut = store.list(kind="campaign", status="cancelled")[0]
    log = cut.path / "rows.log"
    assert log.exists() and not list(cut.path.glob("rows.part*"))
    n_queue = len(read_rows(cut, "queue")["x"])
    good = log.read_bytes()
    first = good[:12 + struct.unpack("<Q", good[4:12])[0]]
    with open(log, "ab") as f:          # a whole record the checkpoint never counted, then
        f.write(first)                  # one cut short
        f.write(first[:40])
    assert len(read_rows(cut, "queue")["x"]) > n_queue
    with np.load(cut.path / "checkpoint.npz") as z:      # the curve is in curve.log
        assert "curve" not in z.files
        n_curve = int(z["n_curve"])
    with open(cut.path / "curve.log", "ab") as f:          # one row too many, one cut short
        f.write(b"\0" * 70)
    from rnncon_core.campaign import load_campaign
    assert len(load_campaign(cut)["curve"]["calls"]) == n_curve
    resumed = run_campaign(tiny_lstm, budget="300calls", resume=cut.run_id, store=store)
    for key in ("calls", "batches", "distinct_faults", "queue", "coverage"):
        assert resumed[key] == whole[key], key
    done = store.get(resumed["run_id"])
    assert not (done.path / "rows.log").exists() and done.load_npz("queue") is not None


def test_more_workers_than_seeds_is_refused_before_ray_starts(tiny_lstm, seeds, tmp_path,
                                                              monkeypatch):
    from rnncon_core.campaign import prepare
    from rnncon_core.runs import RunStore
    x, y = seeds
    monkeypatch.setattr(prepare, "load_seeds",
                        lambda *a, **k: (tiny_lstm, x[:3], y[:3], x, "inputs"))

    def no_ray(*a, **k):
        raise AssertionError("Ray must not start")
    with pytest.raises(InputError, match="5 workers for 3 seeds.*--workers 3 or fewer"):
        run_campaign("tiny.keras", budget="100calls", workers=5, ray_runtime=no_ray,
                     store=RunStore(tmp_path))


def test_default_seed_count_follows_the_input_kind(tiny_lstm, seeds, tmp_path, monkeypatch):
    """seeds=None: DEFAULT_SEEDS of the model's kind (1,000 for images and sequences, 100 for
    text); the count taken is stored, so a resumed campaign starts from the same seeds."""
    from rnncon_core.campaign import DEFAULT_SEEDS, prepare
    from rnncon_core.runs import RunStore
    assert DEFAULT_SEEDS == {"image": 1000, "sequence": 1000, "text": 100}
    x, y = seeds
    monkeypatch.setitem(prepare.DEFAULT_SEEDS, "sequence", 7)
    store = RunStore(tmp_path / "runs")
    out = run_campaign(tiny_lstm, inputs=x, labels=y, guide="nc", budget="40calls",
                       store=store, parents=2, mutants=2, max_linf=0.5, noise=0.3)
    info = store.get(out["run_id"])
    assert info.config["seeds"] == 7 and len(info.load_npz("seeds")["x"]) == 7


def test_a_finished_campaign_extended_keeps_its_whole_curve(tiny_lstm, seeds, tmp_path):
    """Resuming a finished campaign with a larger budget (its curve log is gone by then): the
    new run's curve is the uninterrupted campaign's, from its first batch."""
    from rnncon_core.runs import RunStore
    x, y = seeds
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide="rconc", store=store, seed=5,
              parents=4, mutants=4, max_linf=0.5, noise=0.3)
    whole = run_campaign(tiny_lstm, budget="400calls", **kw)
    first = run_campaign(tiny_lstm, budget="200calls", **kw)
    assert not (store.get(first["run_id"]).path / "curve.log").exists()
    more = run_campaign(tiny_lstm, budget="400calls", resume=first["run_id"], store=store)
    a = store.get(more["run_id"]).load_npz("curve")
    b = store.get(whole["run_id"]).load_npz("curve")
    np.testing.assert_array_equal(a["calls"], b["calls"])
    np.testing.assert_array_equal(a["distinct_faults"], b["distinct_faults"])
