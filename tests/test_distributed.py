"""Scale-out on a local Ray runtime with 2 workers: the results equal one process's."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.coverage import get_criterion

ray = pytest.importorskip("ray", reason="Ray is not installed")


@pytest.fixture(scope="module")
def local_ray():
    from rnncon_core.distributed import runtime
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
    from rnncon_core.distributed import coverage
    from rnncon_core.zoo import load_model
    x = np.random.default_rng(5).random((23, 5, 3)).astype("float32")
    seen = []
    got = coverage(model_file, x, name, workers=2, shard_size=5,
                   progress=lambda d, t: seen.append((d, t)), **params)
    want = get_criterion(name, load_model(model_file), **params).update(x)
    np.testing.assert_allclose(got._max_values(), want._max_values(), atol=1e-6)
    assert got.n_inputs == 23 and got.covered == want.covered
    np.testing.assert_array_equal(got.curve(), want.curve())
    assert seen[-1] == (5, 5)


@pytest.mark.parametrize("method,params", [
    ("pgd", {"eps": 0.2, "step": 0.05, "iterations": 3}),
    ("rconc", {"threshold": 0.9, "step": 0.05, "iterations": 3})])
def test_generation_on_ray_equals_one_process(local_ray, model_file, method, params):
    from rnncon_core.distributed import generate
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
