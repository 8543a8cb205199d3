"""The campaign's checkpoint as a snapshot plus a log of per-batch changes: exact replay, and
a campaign killed with changes in the log resumes to what the whole one finds."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.campaign import run_campaign
from rnncon_core.campaign.statelog import (LOG, StateLog, apply, decode, diff, encode,
                                           latest, load_state, records)


def _state(rng, n_picks):
    return {"max": rng.random(50).astype(np.float32),
            "first": rng.integers(-1, 9, (4, 50)),
            "picks": rng.integers(0, 5, n_picks),
            "nan": np.array([np.nan, -0.0, 1.0]),
            "flag": rng.random(7) > 0.5,
            "counters": np.array('{"calls": %d}' % n_picks)}


def test_records_round_trip_every_dtype_and_shape():
    arrays = {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "s": np.array("text é"),
              "b": np.array([True, False]), "e": np.zeros((0, 4), np.float32),
              "f": np.float64(2.5)}
    (magic, body), = records_of(encode(arrays))
    got = decode(body)
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == np.asarray(v).dtype and got[k].shape == np.shape(v)
        np.testing.assert_array_equal(got[k], v)
    assert set(decode(body, {"s"})) == {"s"}


def records_of(data):
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp()) / "x.log"
    path.write_bytes(data)
    return list(records(path))


def test_diff_then_apply_gives_the_new_state():
    rng = np.random.default_rng(0)
    old = _state(rng, 10)
    new = {k: v.copy() for k, v in old.items()}
    new["max"][[3, 7]] += 1
    new["first"][2, 5] = 8
    new["picks"] = np.concatenate([new["picks"], [1, 2, 3]])        # grown
    new["picks"][0] += 1
    new["nan"][1] = 0.0                                             # -0.0 -> 0.0: bits differ
    new["counters"] = np.array('{"calls": 13}')
    change = diff(new, old)
    assert set(change) == {"max|i", "max|v", "first|i", "first|v", "picks|i", "picks|v",
                           "picks|t", "nan|i", "nan|v", "counters"}
    np.testing.assert_array_equal(change["max|i"], [3, 7])
    base = {k: v.copy() for k, v in old.items()}
    apply(base, change)
    for k in new:
        assert base[k].tobytes() == new[k].tobytes() and base[k].shape == new[k].shape, k
    assert diff(new, base) == {}                                    # NaN equals itself


def test_log_replays_exactly_and_a_cut_record_loses_one_save(tmp_path):
    rng = np.random.default_rng(1)
    log = StateLog(tmp_path)
    states = []
    for i in range(6):
        st = _state(rng, 10 + i)
        log.save(st, durable=(i == 0))          # a snapshot, then five records
        states.append({k: v.copy() for k, v in st.items()})
        got = load_state(tmp_path)
        for k in st:
            np.testing.assert_array_equal(got[k], st[k])
    assert (tmp_path / LOG).stat().st_size > 0
    assert str(latest(tmp_path, ("counters",))["counters"]) == str(states[-1]["counters"])
    data = (tmp_path / LOG).read_bytes()
    (tmp_path / LOG).write_bytes(data[:-5])     # killed while writing the last record
    got = load_state(tmp_path)
    for k in states[-2]:
        np.testing.assert_array_equal(got[k], states[-2][k])
    log.close()


def test_snapshot_empties_the_log_and_old_records_are_skipped(tmp_path):
    rng = np.random.default_rng(2)
    log = StateLog(tmp_path)
    log.save(_state(rng, 4), durable=True)
    log.save(_state(rng, 5), durable=False)
    stale = (tmp_path / LOG).read_bytes()
    last = _state(rng, 6)
    log.save(last, durable=True)                # a new snapshot: the log emptied
    assert (tmp_path / LOG).stat().st_size == 0
    (tmp_path / LOG).write_bytes(stale)         # killed before the log was emptied
    got = load_state(tmp_path)
    for k in last:
        np.testing.assert_array_equal(got[k], last[k])
    log.close()


def _batches(state):
    import json
    return json.loads(str(state["counters"]))["batches"]


class Killed(BaseException):
    pass


@pytest.mark.parametrize("guide", ["rconc", "none", "faults"])
def test_killed_campaign_with_logged_changes_resumes_exactly(tiny_lstm, tmp_path, guide):
    """Killed (no clean stop: the state is a snapshot plus logged changes, the last record
    cut short) and resumed: the same queue, faults, curve and guide state as the whole."""
    from rnncon_core.coverage import build_profile
    from rnncon_core.runs import RunStore
    x = np.random.default_rng(11).random((24, 5, 3)).astype("float32")
    build_profile(tiny_lstm, x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    store = RunStore(tmp_path / "runs")
    kw = dict(inputs=x, labels=y, seeds=len(x), guide=guide, store=store, seed=7,
              parents=4, mutants=4, max_linf=0.5, noise=0.3)
    whole = run_campaign(tiny_lstm, budget="400calls", **kw)
    asked = iter(range(1000))

    def kill():
        if next(asked) == 9:
            raise Killed
        return False
    with pytest.raises(Killed):
        run_campaign(tiny_lstm, budget="400calls", should_stop=kill, **kw)
    cut = next(r for r in store.list(kind="campaign") if r.run_id != whole["run_id"])
    log = cut.path / LOG
    data = log.read_bytes()
    assert len(list(records(log))) >= 5         # the changes of several batches logged
    batches = _batches(load_state(cut.path))
    assert batches == 9                         # the batch killed at is not counted
    log.write_bytes(data[:-3])                  # the last record cut short
    assert _batches(load_state(cut.path)) == batches - 1
    resumed = run_campaign(tiny_lstm, budget="400calls", resume=cut.run_id, store=store)
    for key in ("calls", "batches", "distinct_faults", "distinct_pairs", "queue", "coverage",
                "faults_total"):
        assert resumed[key] == whole[key] or np.isnan(whole[key]) and np.isnan(resumed[key]), key
    a, b = (store.get(r["run_id"]) for r in (resumed, whole))
    for name in ("queue", "faults"):
        for k, v in b.load_npz(name).items():
            if k == "seconds":                  # wall time differs between runs
                continue
            np.testing.assert_array_equal(a.load_npz(name)[k], v, f"{name}/{k}")
    ca, cb = a.load_npz("curve"), b.load_npz("curve")
    np.testing.assert_array_equal(ca["calls"], cb["calls"])
    np.testing.assert_array_equal(ca["distinct_faults"], cb["distinct_faults"])
    assert not (a.path / LOG).exists()          # a finished run keeps one snapshot
