"""Test generation on tiny models: valid outputs, the oracle, constraints, seeds, errors, store."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rnncon_core.errors import InputError
from rnncon_core.generate import get_generator
from rnncon_core.jobs import run_generation
from rnncon_core.generate.baselines import clipped_to_l2
from rnncon_core.generate.differential import Differential
from rnncon_core.runs import RunStore

N_SEEDS = 12


def _tiny(seed: int, cell: str = "lstm"):
    import keras
    keras.utils.set_random_seed(seed)
    Cell = keras.layers.LSTM if cell == "lstm" else keras.layers.GRU
    return keras.Sequential([keras.Input((8, 8)), Cell(6, name=f"{cell}_1"),
                             keras.layers.Dense(5, activation="relu", name="dense_32"),
                             keras.layers.Dense(10, activation="softmax", name="output")])


@pytest.fixture(scope="module")
def tiny():
    return _tiny(0)


@pytest.fixture(scope="module")
def seeds(tiny):
    """Digits and the tiny model's own predictions as labels, so every seed starts right."""
    from rnncon_core.data import load_dataset
    x = load_dataset("digits").x_test[:N_SEEDS]
    return x, _predict(tiny, x)


def _predict(model, x):
    return np.asarray(model(x, training=False)).argmax(1)


# one cheap configuration per strategy (coverage thresholds high: a tiny model's 12 seeds
# cover most items at 0.25)
STRATEGIES = {
    "rconc": dict(threshold=0.9, step=0.05, iterations=4),
    "rconc-edge": dict(method="rconc", granularity="edge", threshold=0.9, step=0.05,
                       iterations=4),
    "nc": dict(threshold=0.9, step=0.05, iterations=4),
    "rnntest": dict(step=0.05, iterations=4),
    "fgsm": dict(eps=0.1),
    "pgd": dict(eps=0.2, step=0.05, iterations=4),
    "noise": dict(l2=1.0),
}


def _gen(name, model, **extra):
    params = dict(STRATEGIES[name])
    method = params.pop("method", name)
    return get_generator(method, model, **{**params, **extra})


@pytest.fixture(scope="module")
def results(tiny, seeds):
    x, y = seeds
    return {name: _gen(name, tiny).generate(x, y) for name in STRATEGIES}


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_outputs_valid_and_oracle_agrees(name, results, tiny, seeds):
    x, y = seeds
    r = results[name]
    assert r.x_gen.shape == x.shape and r.x_gen.dtype == np.float32
    assert r.x_gen.min() >= 0.0 and r.x_gen.max() <= 1.0
    np.testing.assert_array_equal(r.x_seed, x)
    # the adversarial flag agrees with re-running the model on what came back
    again = _predict(tiny, r.x_gen)
    np.testing.assert_array_equal(r.adversarial, (_predict(tiny, x) == y) & (again != y))
    np.testing.assert_array_equal(r.pred_gen, again)
    budget = STRATEGIES[name].get("iterations", 1)
    assert ((r.iterations >= 0) & (r.iterations <= budget)).all()
    norms = r.norms()
    np.testing.assert_allclose(norms["l2"], np.linalg.norm((r.x_gen - x).reshape(len(x), -1),
                                                           axis=1), rtol=1e-5, atol=1e-6)
    s = r.summary("tiny")
    assert s["n_seeds"] == N_SEEDS and s["n_adversarial"] == int(r.adversarial.sum())
    assert {"adv_rate", "avg_l2", "avg_l1", "avg_linf", "seconds"} <= set(s)
    # a seed that was stopped early is adversarial, one that ran the budget out may be either
    assert not (~r.adversarial & (r.iterations < budget) & (r.iterations > 0)).any() \
        or name == "noise"


@pytest.mark.parametrize("name", ["rconc", "rconc-edge", "nc", "rnntest"])
def test_coverage_targets(name, results):
    r = results[name]
    assert r.targets.shape == (N_SEEDS, 1)
    assert all(len(t) == 1 and "layer" in t[0] for t in r.target_info)
    assert ((r.n_activated >= 0) & (r.n_activated <= 1)).all()


def test_fgsm_is_one_signed_step(tiny, seeds):
    x, y = seeds
    r = _gen("fgsm", tiny, minimize=False).generate(x, y)
    p = r.x_gen - x
    inside = (r.x_gen > 0) & (r.x_gen < 1)
    np.testing.assert_allclose(np.abs(p[inside]), 0.1, atol=1e-6)


def test_minimal_fgsm_is_the_signed_step_scaled_down(tiny, results, seeds):
    # ART's minimal FGSM: the same signed step (as it reaches the image), one scale per seed
    x, y = seeds
    r, full = results["fgsm"], _gen("fgsm", tiny, minimize=False).generate(x, y)
    np.testing.assert_array_equal(r.adversarial, full.adversarial)
    assert r.adversarial.any()
    for b in np.flatnonzero(full.adversarial):
        step, small = full.x_gen[b] - x[b], r.x_gen[b] - x[b]
        scale = np.abs(small).sum() / np.abs(step).sum()
        assert 0 < scale <= 1
        np.testing.assert_allclose(small, scale * step, atol=1e-6)


def test_noise_has_the_l2_asked(tiny, seeds):
    x, y = seeds
    target = np.linspace(0.2, 1.5, len(x)).astype(np.float32)
    r = get_generator("noise", tiny, l2=target).generate(x, y)
    np.testing.assert_allclose(r.norms()["l2"], target, rtol=1e-3)
    # bisection against a brute-force scan of the scale
    rng = np.random.default_rng(0)
    d = rng.standard_normal((1, 8, 8)).astype(np.float32)
    out = clipped_to_l2(x[:1], d, np.array([0.7], np.float32))
    assert abs(np.linalg.norm(out - x[:1]) - 0.7) < 1e-3


def test_k_targets_distinct(tiny, seeds):
    x, y = seeds
    r = _gen("rconc", tiny, k=3, iterations=2).generate(x, y)
    assert r.targets.shape == (N_SEEDS, 3)
    assert all(len(set(row)) == 3 for row in r.targets.tolist())
    assert ((r.n_activated >= 0) & (r.n_activated <= 3)).all()


def test_dense_and_layer_targets(tiny, seeds):
    x, y = seeds
    r = _gen("rconc", tiny, target="dense", iterations=2).generate(x, y)
    assert {t[0]["kind"] for t in r.target_info} == {"dense"}
    r = _gen("rconc", tiny, target="lstm_1", iterations=2).generate(x, y)
    assert {t[0]["layer"] for t in r.target_info} == {"lstm_1"}


def test_same_seed_same_run(tiny, seeds):
    x, y = seeds
    a = _gen("rconc", tiny, seed=3, batch_size=5).generate(x, y)
    gen = _gen("rconc", tiny, seed=3, batch_size=5)       # a fresh generator, same seed
    b = gen.generate(x, y)
    np.testing.assert_array_equal(a.targets, b.targets)
    np.testing.assert_array_equal(a.x_gen, b.x_gen)
    gen.seed = 4
    c = gen.generate(x, y)
    assert not np.array_equal(a.targets, c.targets)


# ---------------------------------------------------------------- the joint objective

def test_prediction_term_is_the_logit_margin():
    """Mean of the top-4 other classes' logits minus the seed class's logit, read from the
    softmax's probabilities (the normalizer cancels); a sigmoid counts as two classes."""
    import tensorflow as tf
    from rnncon_core.generate.guided import prediction_term
    z = np.array([[3.0, 1.0, -2.0, 0.5, 0.0, -1.0], [-1.0, 2.0, 0.0, 4.0, 1.5, -3.0]], np.float32)
    y = np.array([0, 3])
    got = np.asarray(prediction_term(tf.nn.softmax(z), tf.constant(y)))
    expect = [np.mean(sorted(np.delete(row, c))[-4:]) - row[c] for row, c in zip(z, y)]
    np.testing.assert_allclose(got, expect, rtol=1e-5)
    p = tf.constant([[0.9], [0.2]])                     # sigmoid: class 1's probability
    got = np.asarray(prediction_term(p, tf.constant([1, 1])))
    np.testing.assert_allclose(got, [np.log(0.1 / 0.9), np.log(0.8 / 0.2)], rtol=1e-5)


@pytest.mark.parametrize("method", ["rconc", "nc", "rnntest"])
def test_objective_is_prediction_plus_coverage(method, tiny, seeds):
    """The three coverage-guided strategies ascend lambda_pred * prediction term + coverage
    weight * their targets' values; lambda_pred=0 leaves the coverage term alone."""
    import tensorflow as tf
    from rnncon_core.generate.guided import prediction_term
    x, y = seeds
    params = {k: v for k, v in STRATEGIES[method].items() if k != "method"}
    xs, ys = tf.constant(x[:4]), tf.constant(y[:4])
    values = {}
    for lam in (0.0, 0.5):
        gen = get_generator(method, tiny, lambda_pred=lam, **params)
        gen._prepare(x, y)
        ctx = {k: tf.constant(v) for k, v in gen._context(x[:4], y[:4],
                                                          np.random.default_rng(0)).items()}
        values[lam] = np.asarray(gen._objective(xs, ys, ctx))
        cov = np.asarray(tf.reduce_sum(gen._target_values(xs, ctx), axis=1)) * gen.lambda_cov
        pred = np.asarray(prediction_term(gen.forward(xs), ys))
        np.testing.assert_allclose(values[lam], cov + lam * pred, rtol=1e-5, atol=1e-6)
    assert get_generator(method, tiny).lambda_pred == (1.0 if method == "rnntest" else 0.03)


def test_prediction_term_makes_rconc_adversarial(tiny, seeds):
    """On the same seeds and budget, adding the prediction term turns at least as many seeds
    adversarial as the coverage term alone, and more with a large weight."""
    x, y = seeds
    rate = {lam: _gen("rconc", tiny, lambda_pred=lam).generate(x, y).adversarial.mean()
            for lam in (0.0, 10.0)}
    assert rate[10.0] > rate[0.0]


# ---------------------------------------------------------------- constraints

def _image(a):
    from rnncon_core.data import to_images
    return to_images(a)


def test_occlusion_changes_only_its_rectangle(tiny, seeds):
    x, y = seeds
    r = _gen("pgd", tiny, constraint="occlusion", size=(3, 2), position=(1, 4)).generate(x, y)
    diff = _image(r.x_gen - x)                     # (N, rows, cols)
    outside = np.ones(diff.shape[1:], bool)
    outside[1:4, 4:6] = False
    assert np.abs(diff[:, outside]).max() == 0.0
    assert np.abs(diff).max() > 0
    # random position: the changed pixels of each seed fit in one 3 x 2 rectangle
    r = _gen("rconc", tiny, constraint="occlusion", size=(3, 2)).generate(x, y)
    for d in _image(r.x_gen - x):
        rows, cols = np.nonzero(d)
        if len(rows):
            assert rows.max() - rows.min() < 3 and cols.max() - cols.min() < 2


def test_blackout_only_darkens(tiny, seeds):
    x, y = seeds
    for name in ("pgd", "rconc"):
        r = _gen(name, tiny, constraint="blackout", size=2, patches=2).generate(x, y)
        assert (r.x_gen <= x + 1e-7).all()
        assert (r.x_gen < x).any()


def test_light_shifts_every_pixel_by_one_amount(tiny, seeds):
    x, y = seeds
    r = _gen("rconc", tiny, constraint="light").generate(x, y)
    shifted = 0
    for xs, xg in zip(x, r.x_gen):
        free = (xg > 0) & (xg < 1)
        d = (xg - xs)[free]
        if len(d):
            np.testing.assert_allclose(d, d[0], atol=1e-6)
            shifted += abs(d[0]) > 0
    assert shifted > 0


# ---------------------------------------------------------------- differential

def test_majority_vote_against_brute_force():
    rng = np.random.default_rng(1)
    votes = rng.integers(0, 4, (5, 200))
    got = Differential.majority(votes)
    for col, g in zip(votes.T, got):
        counts = np.bincount(col, minlength=4)
        assert g == np.flatnonzero(counts == counts.max()).min()


def test_differential_finds_disagreements(tiny, seeds):
    x, _ = seeds
    other = _tiny(0)
    rng = np.random.default_rng(0)
    other.set_weights([w + 0.3 * rng.standard_normal(w.shape).astype(w.dtype)
                       for w in tiny.get_weights()])
    gen = get_generator("differential", tiny, others=[other], step=0.05, iterations=4,
                        threshold=0.5)
    r = gen.generate(x, np.zeros(len(x), int))     # labels are the models' vote, not these
    v_seed = np.stack([_predict(m, x) for m in (tiny, other)])
    v_gen = np.stack([_predict(m, r.x_gen) for m in (tiny, other)])
    expect = (v_seed[0] == v_seed[1]) & (v_gen[0] != v_gen[1])
    np.testing.assert_array_equal(r.adversarial, expect)
    np.testing.assert_array_equal(r.extras["label_vote"][v_seed[0] == v_seed[1]],
                                  v_seed[0][v_seed[0] == v_seed[1]])
    assert r.x_gen.min() >= 0 and r.x_gen.max() <= 1


# ---------------------------------------------------------------- bad arguments

def test_unknown_layer(tiny):
    with pytest.raises(InputError, match="unknown target layer 'lstm_9'.*lstm_1"):
        get_generator("rconc", tiny, target="lstm_9")


def test_k_larger_than_inactivated(tiny, seeds):
    from rnncon_core.coverage import ContributionCoverage
    x, y = seeds
    gen = _gen("rconc", tiny, threshold=0.5, iterations=1)
    with pytest.raises(InputError, match=r"k=100000 targets asked but all layers holds only "
                                         r"\d+ items"):
        gen.k = 100_000
        gen.generate(x, y)
    # brute force: the seed with the fewest inactivated contributions at 0.5 (leaving out the
    # recurrent part of the first step, which no input can activate)
    cov = ContributionCoverage(tiny, threshold=0.5)
    live = np.setdiff1d(np.arange(cov.total), cov.targets.dead_items())
    inactive = (cov.profile(x)[:, live] <= 0.5).sum(axis=1)
    gen.k = int(inactive.min()) + 1
    with pytest.raises(InputError, match=f"seed {int(inactive.argmin())} of this batch leaves "
                                         f"only {int(inactive.min())} items"):
        gen.generate(x, y)
    # short="lowest": such a seed targets the layer's least activated items instead
    gen.short = "lowest"
    r = gen.generate(x, y)
    assert r.extras["short_pool"][int(inactive.argmin())]
    assert r.targets.shape == (N_SEEDS, gen.k)


def test_empty_seed_set(tiny):
    with pytest.raises(InputError, match="empty"):
        get_generator("fgsm", tiny).generate(np.zeros((0, 8, 8), np.float32), np.zeros(0, int))


@pytest.mark.parametrize("method, params, match", [
    ("nope", {}, "unknown generation method 'nope'"),
    ("pgd", {"constraint": "fog"},
     "constraint must be one of 'none', 'light', 'occlusion', 'blackout', got 'fog'"),
    ("pgd", {"wobble": 1}, "method 'pgd' has no parameter 'wobble'; it takes eps, step"),
    ("pgd", {"step": -1}, r"step must be a number in \(0, 1\], got -1"),
    ("rconc", {"k": 0}, r"k must be an integer in \[1, 1000\], got 0"),
])
def test_bad_parameters(tiny, method, params, match):
    with pytest.raises(InputError, match=match):
        get_generator(method, tiny, **params)


def test_bad_inputs(tiny):
    gen = get_generator("fgsm", tiny)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        gen.generate(np.full((2, 8, 8), 255.0, np.float32), [0, 1])
    with pytest.raises(InputError, match="do not fit"):
        gen.generate(np.zeros((2, 28, 28), np.float32), [0, 1])
    with pytest.raises(InputError, match="labels"):
        gen.generate(np.zeros((2, 8, 8), np.float32), [0])


# ---------------------------------------------------------------- run store

@pytest.fixture(scope="module")
def model_file(tmp_path_factory, tiny):
    path = tmp_path_factory.mktemp("model") / "tiny-lstm.keras"
    tiny.save(path)
    return path


def test_run_generation_stores_a_finished_run(model_file, tmp_path):
    store = RunStore(tmp_path)
    out = run_generation(str(model_file), "fgsm", 6, store=store, batch_size=4)
    info = store.get(out["run_id"])
    assert info.status == "finished" and info.kind == "generate" and info.method == "fgsm"
    z = np.load(out["outputs"])
    assert {"seed_index", "x_seed", "y_seed", "x_gen", "adversarial"} <= set(z.files)
    assert z["adversarial"].dtype == bool and len(z["seed_index"]) == 6
    assert out["n_adversarial"] == int(z["adversarial"].sum())
    # the seeds are the first inputs of the test split the model predicts right
    from rnncon_core.data import load_dataset
    from rnncon_core.zoo import load_model
    ds = load_dataset("digits")
    right = np.flatnonzero(_predict(load_model(model_file), ds.x_test) == ds.y_test)[:6]
    np.testing.assert_array_equal(z["seed_index"], right)
    assert info.summary["n_seeds"] == 6 and info.config["dataset"] == "digits"


def test_cancelled_run_keeps_finished_seeds(model_file, tmp_path):
    store = RunStore(tmp_path)
    calls = []

    def stop():                # asked before each batch: let one batch through, then stop
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(Exception) as err:
        run_generation(str(model_file), "fgsm", 8, store=store, batch_size=4, should_stop=stop)
    assert type(err.value).__name__ == "JobCancelled"
    (info,) = store.list()
    assert info.status == "cancelled"
    z = info.load_npz("outputs")
    assert len(z["seed_index"]) == 4 and info.summary["n_seeds"] == 4


def test_cancel_from_the_store(model_file, tmp_path):
    store = RunStore(tmp_path)

    def progress(done, total):     # another handle (e.g. the dashboard) asks to cancel
        other = RunStore(tmp_path)
        other.request_cancel(other.list(status="running")[0].run_id)

    with pytest.raises(Exception):
        run_generation(str(model_file), "fgsm", 8, store=store, batch_size=4, progress=progress)
    (info,) = store.list()
    assert info.status == "cancelled" and len(info.load_npz("outputs")["x_gen"]) == 4


def test_crash_mid_run_keeps_finished_seeds(model_file, tmp_path, monkeypatch):
    from rnncon_core.generate.baselines import FGSM
    real = FGSM._generate_batch
    calls = []

    def flaky(self, x, y, rng):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(self, x, y, rng)

    monkeypatch.setattr(FGSM, "_generate_batch", flaky)
    store = RunStore(tmp_path)
    with pytest.raises(RuntimeError):
        run_generation(str(model_file), "fgsm", 8, store=store, batch_size=4)
    (info,) = store.list()
    assert info.status == "failed" and "disk on fire" in info.error
    assert len(info.load_npz("outputs")["seed_index"]) == 4


def test_cli_generate_json(model_file, tmp_path):
    from typer.testing import CliRunner
    from rnncon_core.cli import app
    res = CliRunner().invoke(app, ["generate", "--model", str(model_file), "--method", "pgd",
                                   "--seeds", "4", "--iterations", "3", "--json",
                                   "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(obj) >= {"run_id", "method", "model", "n_seeds", "n_adversarial", "adv_rate",
                        "avg_l2", "avg_l1", "avg_linf", "seconds", "outputs"}
    assert obj["n_seeds"] == 4 and obj["method"] == "pgd"
    assert np.load(obj["outputs"])["x_gen"].shape == (4, 8, 8)


# ---------------------------------------------------------------- progress per seed

def test_progress_per_seed_inside_one_batch(tiny, seeds):
    """One batch of 12 seeds: progress moves as seeds leave the ascent (not 0 -> 12 at the
    batch's end), never goes back, and ends at n."""
    x, y = seeds
    calls = []
    _gen("pgd", tiny, eps=0.3, step=0.01, iterations=40, minimize=False,
         batch_size=N_SEEDS).generate(x, y, progress=lambda d, t: calls.append((d, t)))
    done = [d for d, _ in calls]
    assert {t for _, t in calls} == {N_SEEDS} and done[-1] == N_SEEDS
    assert done == sorted(done), done
    assert any(0 < d < N_SEEDS for d in done), done      # reported inside the batch


def test_finished_hook_reports_only_growth(tiny, seeds):
    """The engine hook: in-batch counts are offset by the batch's start, capped at its size,
    and reported only when they grow; each batch's end is reported too."""
    from rnncon_core.generate import BatchOutput, Generator

    class Ticks(Generator):
        method, input_kind = "ticks", "image"

        def _generate_batch(self, x, y, rng):
            for n in (1, 1, 0, 2, 9):
                self._finished(n)
            return BatchOutput(x_gen=x.astype(np.float32), iterations=np.ones(len(x), np.int64))

    calls = []
    x, y = seeds
    Ticks(tiny, batch_size=4).generate(x[:6], y[:6], progress=lambda d, t: calls.append(d))
    assert calls == [1, 2, 4, 4, 5, 6, 6]       # batch 1: 1, 2, 4 (capped), end 4; batch 2


def test_run_generation_progress_per_seed(model_file, tmp_path):
    """Through the job runner: the callback and the run's progress.json move seed by seed."""
    store = RunStore(tmp_path)
    calls = []
    run_generation(str(model_file), "pgd", 6, store=store, batch_size=6, eps=0.3, step=0.01,
                   iterations=40, progress=lambda d, t: calls.append((d, t)))
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == 6 and any(0 < d < 6 for d in done), done
    (info,) = store.list()
    assert info.progress()["done"] == 6 and info.progress()["unit"] == "seeds"
