"""Scale-out on a local Ray runtime with 2 workers: the results equal one process's."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.coverage import get_criterion

ray = pytest.importorskip("ray", reason="Ray is not installed")


@pytest.fixture(scope="module")
def local_ray():
    from rnncon_core.jobs.distributed import runtime
    from rnncon_core.errors import RNNConError
    try:
        with runtime(workers=2) as r:
            yield r
    except RNNConError as e:           # e.g. a sandbox without shared memory
        pytest.skip(f"Ray cannot start here: {e}")


@pytest.fixture(scope="module")
def model_file(tiny_lstm, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    tiny_lstm.save(path)
    return str(path)


@pytest.mark.parametrize("name,params", [("rconc", {}), ("rconc", {"granularity": "edge"}),
                                         ("nc", {})])
def test_coverage_on_ray_equals_one_process(local_ray, model_file, name, params):
    from rnncon_core.jobs.distributed import coverage
    from rnncon_core.zoo import load_model
    x = np.random.default_rng(5).random((23, 5, 3)).astype("float32")
    seen = []
    got = coverage(model_file, x, name, workers=2, shard_size=5,
                   progress=lambda d, t: seen.append((d, t)), **params)
    want = get_criterion(name, load_model(model_file), **params).update(x)
    np.testing.assert_allclose(got._state.max_values(), want._state.max_values(), atol=1e-6)
    assert got.n_inputs == 23 and got.covered == want.covered
    np.testing.assert_array_equal(got.curve(), want.curve())
    assert seen[-1] == (5, 5)


@pytest.mark.parametrize("method,params", [
    ("pgd", {"eps": 0.2, "step": 0.05, "iterations": 3}),
    ("rconc", {"threshold": 0.9, "step": 0.05, "iterations": 3})])
def test_generation_on_ray_equals_one_process(local_ray, model_file, method, params):
    from rnncon_core.jobs.distributed import generate
    from rnncon_core.generate import get_generator
    from rnncon_core.zoo import load_model
    model = load_model(model_file)
    x = np.random.default_rng(6).random((10, 5, 3)).astype("float32")
    y = np.asarray(model(x)).argmax(1)
    got = generate(model_file, x, y, method, workers=2, batch_size=4, **params)
    want = get_generator(method, model, batch_size=4, **params).generate(x, y)
    np.testing.assert_allclose(got.x_gen, want.x_gen, atol=1e-5)
    np.testing.assert_array_equal(got.adversarial, want.adversarial)
    np.testing.assert_array_equal(got.targets, want.targets)


def test_run_generation_on_ray_writes_one_run(local_ray, model_file, tmp_path):
    """`rnncon generate --workers 2`: one run in the store, the same outputs as one process."""
    from rnncon_core.jobs import run_generation
    from rnncon_core.runs import RunStore
    from rnncon_core.zoo import load_model
    x = np.random.default_rng(7).random((8, 5, 3)).astype("float32")
    y = np.asarray(load_model(model_file)(x)).argmax(1)
    store = RunStore(tmp_path / "runs")
    common = dict(inputs=x, labels=y, store=store, batch_size=4, eps=0.2, step=0.05,
                  iterations=2)
    on_ray = run_generation(model_file, "pgd", 8, workers=2, **common)
    alone = run_generation(model_file, "pgd", 8, **common)
    a, b = (store.get(r["run_id"]).load_npz("outputs") for r in (on_ray, alone))
    np.testing.assert_allclose(a["x_gen"], b["x_gen"], atol=1e-5)
    assert on_ray["n_seeds"] == alone["n_seeds"] and len(store.list()) == 2


def test_an_address_nobody_listens_at_fails_at_once():
    import socket
    import time

    from rnncon_core.errors import InputError
    from rnncon_core.jobs.distributed import runtime
    with socket.socket() as s:                 # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    up = ray.is_initialized()              # earlier tests may have left a runtime up
    t = time.perf_counter()
    with pytest.raises(InputError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        with runtime(address=f"127.0.0.1:{port}"):
            pass
    assert time.perf_counter() - t < 30
    assert ray.is_initialized() == up


def _free_port() -> int:
    import socket
    with socket.socket() as s:                 # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_generation_at_a_silent_address_leaves_no_run(model_file, tmp_path):
    from rnncon_core.errors import InputError
    from rnncon_core.jobs import run_generation
    from rnncon_core.runs import RunStore
    from rnncon_core.zoo import load_model
    x = np.random.default_rng(7).random((4, 5, 3)).astype("float32")
    y = np.asarray(load_model(model_file)(x)).argmax(1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(InputError, match="no Ray cluster answers"):
        run_generation(model_file, "pgd", 4, inputs=x, labels=y, store=store, workers=2,
                       ray_address=f"127.0.0.1:{_free_port()}", eps=0.2, step=0.05,
                       iterations=2)
    assert store.list() == []


def test_a_campaign_at_a_silent_address_leaves_no_run(model_file, tmp_path, monkeypatch):
    """A wrong --ray-address is an argument error: no failed campaign in the store."""
    from rnncon_core.campaign import run_campaign
    from rnncon_core.campaign import prepare as campaign_run
    from rnncon_core.errors import InputError
    from rnncon_core.jobs.distributed import runtime
    from rnncon_core.runs import RunStore
    from rnncon_core.zoo import load_model
    path = model_file
    x = np.random.default_rng(7).random((4, 5, 3)).astype("float32")
    y = np.asarray(load_model(path)(x)).argmax(1)

    def seeds(model_ref, dataset=None, n_seeds=100, inputs=None, labels=None):
        return campaign_run._loaded(model_ref, load_model), x, y, x, "inputs"
    monkeypatch.setattr(campaign_run, "load_seeds", seeds)
    monkeypatch.setattr("rnncon_core.campaign.run.load_seeds", seeds)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(InputError, match="no Ray cluster answers"):
        run_campaign(path, guide="rconc", budget="100calls", store=store, workers=2,
                     ray_address=f"127.0.0.1:{_free_port()}", ray_runtime=runtime)
    assert store.list() == []
