"""A campaign on Ray with one worker finds what one process finds (same seed, budget in calls);
with two workers the guide states are merged and faults stay distinct across workers."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray is not installed")
pytestmark = pytest.mark.slow          # a Ray runtime takes tens of seconds to start here


@pytest.fixture(scope="module")
def model_file(tiny_lstm, tmp_path_factory):
    from rnncon_core.coverage import build_profile
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    tiny_lstm.save(path)
    from rnncon_core.zoo import load_model
    x = np.random.default_rng(11).random((24, 5, 3)).astype("float32")
    build_profile(load_model(str(path)), x)
    return str(path), x


@pytest.fixture(autouse=True)
def short_rounds(monkeypatch):
    """Rounds of 10 batches (the default is 40): these tiny budgets still make several rounds,
    so stopping after a round and resuming is exercised."""
    from rnncon_core.campaign import distributed
    monkeypatch.setattr(distributed, "SYNC_EVERY", 10)


@pytest.fixture
def seeded(model_file):
    """model_file's inputs labelled by the model, given as the user's own seeds (the Ray path
    must take them as one process does): (path, run_campaign's seed arguments)."""
    from rnncon_core.zoo import load_model
    path, x = model_file
    y = np.asarray(load_model(path)(x)).argmax(1)
    return path, dict(inputs=x, labels=y, seeds=len(x))


def _whole(path, kw) -> dict:
    """The uninterrupted campaign (skipped where Ray cannot start)."""
    from rnncon_core.campaign import run_campaign
    from rnncon_core.errors import RNNConError
    try:
        return run_campaign(path, **kw)
    except RNNConError as e:
        pytest.skip(f"Ray cannot start here: {e}")


def _stopped_and_resumed(path, kw, whole, rounds: int, keys, match=None, **resume_kw) -> None:
    """The same campaign stopped after ``rounds`` rounds and resumed with its budget ends as
    ``whole`` did: the summary's ``keys`` and the faults' inputs."""
    from rnncon_core.campaign import run_campaign
    from rnncon_core.errors import JobCancelled
    store = kw["store"]
    stops = iter([False] * rounds + [True] * 100)
    with pytest.raises(JobCancelled, match=match):
        run_campaign(path, should_stop=lambda: next(stops), **kw)
    cut = store.list(kind="campaign", status="cancelled")[0]
    resumed = run_campaign(path, budget=kw["budget"], resume=cut.run_id, store=store,
                           ray_runtime=kw["ray_runtime"], **resume_kw)
    for key in keys:
        assert resumed[key] == whole[key], key
    a = store.get(resumed["run_id"]).load_npz("faults")
    b = store.get(whole["run_id"]).load_npz("faults")
    np.testing.assert_array_equal(a["x"], b["x"])


@pytest.mark.parametrize("guide", ["rconc", "faults"])
def test_one_worker_equals_one_process(seeded, tmp_path, guide):
    from rnncon_core.campaign import run_campaign
    from rnncon_core.jobs.distributed import runtime
    from rnncon_core.runs import RunStore
    path, own = seeded
    store = RunStore(tmp_path / "runs")
    kw = dict(guide=guide, budget="300calls", seed=4, store=store, parents=4, mutants=4,
              max_linf=0.5, noise=0.3, **own)
    local = run_campaign(path, **kw)
    ray = _whole(path, {**kw, "workers": 1, "ray_runtime": runtime})
    for key in ("calls", "distinct_faults", "distinct_pairs", "queue"):
        assert ray[key] == local[key], key
    assert ray["coverage"] == local["coverage"] or guide == "faults" and \
        np.isnan([ray["coverage"], local["coverage"]]).all()
    if guide == "faults":                    # the queue grew by its distinct faults only
        assert local["distinct_faults"] > 0
        assert local["queue"] == len(own["inputs"]) + local["distinct_faults"]
    assert ray["worker_faults"] == ray["distinct_faults"] and ray["duplicate_faults"] == 0
    a = store.get(ray["run_id"]).load_npz("faults")
    b = store.get(local["run_id"]).load_npz("faults")
    np.testing.assert_array_equal(a["x"], b["x"])
    np.testing.assert_array_equal(a["pred"], b["pred"])
    np.testing.assert_array_equal(store.get(ray["run_id"]).load_npz("seeds")["x"], own["inputs"])


def test_one_worker_resumes_exactly(seeded, tmp_path):
    from rnncon_core.jobs.distributed import runtime
    from rnncon_core.runs import RunStore
    path, own = seeded
    kw = dict(guide="rconc", budget="400calls", seed=6, store=RunStore(tmp_path / "runs"),
              parents=4, mutants=4, max_linf=0.5, noise=0.3, workers=1, ray_runtime=runtime,
              **own)
    _stopped_and_resumed(path, kw, _whole(path, kw), 1,
                         ("calls", "distinct_faults", "distinct_pairs", "queue", "coverage"))


def test_two_workers_share_faults_and_resume_exactly(seeded, tmp_path, monkeypatch):
    """Each round's new distinct faults reach every worker (``_share_faults``); a stopped
    two-worker campaign resumed goes on as the uninterrupted one (each worker's known keys
    rebuilt from the checkpoint)."""
    from rnncon_core.campaign import distributed
    from rnncon_core.jobs.distributed import runtime
    from rnncon_core.runs import RunStore
    path, own = seeded
    sent = []
    share = distributed._share_faults
    monkeypatch.setattr(distributed, "_share_faults",
                        lambda view, f0, actors, ray: (sent.append(len(view.faults) - f0),
                                                       share(view, f0, actors, ray)))
    kw = dict(guide="none", budget="1200calls", seed=6, store=RunStore(tmp_path / "runs"),
              parents=4, mutants=4, max_linf=1.0, noise=1.0, workers=2, ray_runtime=runtime,
              **own)
    whole = _whole(path, kw)
    assert whole["distinct_faults"] > 0 and sum(sent) == whole["distinct_faults"]
    _stopped_and_resumed(path, kw, whole, 2,
                         ("calls", "distinct_faults", "distinct_pairs", "queue", "worker_faults"),
                         match="--resume .* --workers 2", workers=2)
