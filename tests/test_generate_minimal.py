"""The minimal-perturbation stage (GradientGenerator's ``minimize``) on a tiny model: it never
loses an adversarial input, never grows the perturbation, keeps the activated targets, keeps
the constraint's shape, and is declared, configured and summarized."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.errors import InputError
from rnncon_core.generate import get_generator
from rnncon_core.generate.base import _along, _bisect, _inside, _nearest, margin_term
from tests.test_generate import _image, _predict, _tiny

# every gradient method, at settings that turn most tiny seeds adversarial in a few steps
METHODS = {"rconc": dict(threshold=0.9, step=0.1, iterations=6),
           "nc": dict(threshold=0.9, step=0.1, iterations=6),
           "rnntest": dict(step=0.1, iterations=6),
           "pgd": dict(eps=0.3, step=0.05, iterations=6),
           "fgsm": dict(eps=0.2, min_steps=3),
           "differential": dict(step=0.2, iterations=8)}


@pytest.fixture(scope="module")
def tiny():
    return _tiny(0)


@pytest.fixture(scope="module")
def other(tiny):
    import keras
    m = keras.models.clone_model(tiny)
    m.set_weights([w * 0.8 for w in tiny.get_weights()])
    return m


@pytest.fixture(scope="module")
def seeds(tiny):
    from rnncon_core.data import load_dataset
    x = load_dataset("digits").x_test[:10]
    return x, _predict(tiny, x)


_RUNS: dict = {}


def _pair(method, tiny, other, seeds, **extra):
    """The same run without and with the stage (each made once per module)."""
    key = (method, tuple(sorted(extra.items())))
    if key not in _RUNS:
        x, y = seeds
        kw = {**METHODS[method], **extra,
              **({"others": [other]} if method == "differential" else {})}
        _RUNS[key] = [get_generator(method, tiny, minimize=m, **kw).generate(x, y)
                      for m in (False, True)]
    return _RUNS[key]


# differential predicts with every model at every step: the slowest here
@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.slow)
                                    if m == "differential" else m for m in sorted(METHODS)])
def test_stage_keeps_every_adversarial_input_and_never_grows_it(method, tiny, other, seeds):
    raw, small = _pair(method, tiny, other, seeds)
    assert raw.adversarial.sum() >= (1 if method == "differential" else 3)   # something to check
    # no adversarial input is lost, and the oracle agrees with the model on what came back
    assert (small.adversarial | ~raw.adversarial).all()
    if method != "differential":
        np.testing.assert_array_equal(small.adversarial,
                                      (_predict(tiny, seeds[0]) == seeds[1])
                                      & (_predict(tiny, small.x_gen) != seeds[1]))
    before, after = raw.norms(), small.norms()
    assert (after["l2"] <= before["l2"] + 1e-5).all()
    # the ascent is the same: the stage's record of the norms before it is the raw run's
    np.testing.assert_allclose(small.extras["pre_l2"], before["l2"], rtol=1e-5, atol=1e-6)
    adv = raw.adversarial
    assert (after["l2"][adv] < before["l2"][adv] - 1e-6).any()     # it does shrink something
    assert small.x_gen.min() >= 0 and small.x_gen.max() <= 1
    if method in ("pgd", "fgsm"):                                   # inside the eps ball
        assert np.abs(small.x_gen - seeds[0]).max() <= METHODS[method]["eps"] + 1e-6
    s = small.summary("tiny")
    assert s["avg_l2_unminimized"] >= s["avg_l2"] and s["minimize_seconds"] >= 0


@pytest.mark.parametrize("method", ["rconc", "nc", "rnntest"])
def test_activated_targets_stay_activated(method, tiny, other, seeds):
    raw, small = _pair(method, tiny, other, seeds)
    np.testing.assert_array_equal(small.extras["pre_activated"], raw.n_activated)
    adv = small.adversarial
    assert (small.n_activated[adv] >= raw.n_activated[adv]).all()
    assert "mean_activated_unminimized" in small.summary("tiny")


def test_scale_only_constraints_keep_their_shape(tiny, other, seeds):
    x, _ = seeds
    # light: still one brightness shift per image, never a larger one
    raw, small = _pair("rconc", tiny, other, seeds, constraint="light", step=0.05,
                       iterations=12)
    assert small.adversarial.sum() >= 1
    for xs, xr, xg in zip(x, raw.x_gen, small.x_gen):
        free = (xg > 0) & (xg < 1)
        d = (xg - xs)[free]
        if len(d):
            np.testing.assert_allclose(d, d[0], atol=1e-6)
        assert np.abs(xg - xs).max() <= np.abs(xr - xs).max() + 1e-6
    # blackout: only darker, and never darker than without the stage
    raw, small = _pair("rconc", tiny, other, seeds, constraint="blackout", size=2, patches=2)
    assert (small.x_gen <= x + 1e-7).all() and (small.x_gen >= raw.x_gen - 1e-6).all()
    assert (small.norms()["l1"] <= raw.norms()["l1"] + 1e-5).all()


def test_occlusion_stays_in_its_rectangle(tiny, other, seeds):
    raw, small = _pair("pgd", tiny, other, seeds, constraint="occlusion", size=(4, 3),
                       position=(2, 3), iterations=10)
    assert small.adversarial.sum() >= 1
    diff = _image(small.x_gen - seeds[0])
    outside = np.ones(diff.shape[1:], bool)
    outside[2:6, 3:6] = False
    assert np.abs(diff[:, outside]).max() == 0.0
    assert (small.norms()["l2"] <= raw.norms()["l2"] + 1e-5).all()


def test_declared_and_in_the_config(tiny):
    gen = get_generator("rconc", tiny, threshold=0.9)
    config = gen.get_config()
    assert config["minimize"] is True and config["min_steps"] == 8
    again = get_generator("rconc", tiny, **config)
    assert again.get_config() == config
    off = get_generator("pgd", tiny, minimize=False).get_config()
    assert off["minimize"] is False
    assert get_generator("fgsm", tiny).get_config()["min_steps"] == 0   # ART's minimal FGSM
    with pytest.raises(InputError, match="minimize"):
        get_generator("rnntest", tiny, minimize="yes")
    with pytest.raises(InputError, match="min_steps"):
        get_generator("nc", tiny, min_steps=-1)


def test_bisect_answers_only_scales_that_passed():
    # a pass region that is not an interval: the answer must still be a passing scale
    hi = np.array([1.0, 1.0, 0.5])
    passes = [lambda s: s > 0.3, lambda s: (s > 0.6) or (0.2 < s < 0.3), lambda s: True]
    seen = []

    def ok(s):
        seen.append(s.copy())
        return np.array([f(v) for f, v in zip(passes, s)])
    s = _bisect(lambda s: s, ok, hi, 10)
    assert all(f(v) for f, v in zip(passes, s))
    assert abs(s[0] - 0.3) < 1e-3 and s[2] < 1e-3


def test_nearest_is_the_smallest_point_of_the_half_spaces():
    from scipy.optimize import minimize
    rng = np.random.default_rng(0)
    B, n = 6, 7
    g1, g2 = rng.normal(size=(2, B, n))
    b1, b2 = rng.normal(size=(2, B))
    b1[0], b2[0] = -1.0, -0.5          # the origin already satisfies both: d = 0
    g2[1] = 2 * g1[1]                  # parallel constraints (a singular pair)
    d = _nearest([g1, g2], [b1, b2]).astype(np.float64)
    assert np.abs(d[0]).max() == 0.0
    for i in range(B):
        G, b = np.stack([g1[i], g2[i]]), np.array([b1[i], b2[i]])
        assert (G @ d[i] >= b - 1e-5 * (1 + np.abs(b))).all()      # satisfies both
        best = minimize(lambda z: z @ z, np.zeros(n), jac=lambda z: 2 * z, method="SLSQP",
                        constraints=[{"type": "ineq", "fun": lambda z: G @ z - b}])
        assert np.linalg.norm(d[i]) <= np.linalg.norm(best.x) + 1e-4   # and nothing smaller


def test_nearest_holds_an_equality_with_either_sign():
    rng = np.random.default_rng(1)
    g, d = rng.normal(size=(2, 4, 5))
    b = np.einsum("bn,bn->b", g, d)             # "hold": g . d' = g . d, whatever its sign
    b[0] = -abs(b[0])
    out = _nearest([g], [b], equal=(True,)).astype(np.float64)
    np.testing.assert_allclose(np.einsum("bn,bn->b", g, out), b, rtol=1e-5, atol=1e-6)
    # the smallest such vector: d's projection onto g (never longer than d)
    proj = (b / np.einsum("bn,bn->b", g, g))[:, None] * g
    np.testing.assert_allclose(out, proj, rtol=1e-4, atol=1e-6)
    # as an inequality, a negative bound is met by 0
    assert np.abs(_nearest([g[:1]], [b[:1]])).max() == 0.0


def test_along_and_inside_shape_the_gradient():
    g = np.array([[[1.0, -2.0], [3.0, -4.0]]], np.float32)
    mask = np.array([[[1.0, 0.0], [1.0, 0.0]]], np.float32)
    # along a masked, rescaled direction: g inside the mask, nothing outside
    np.testing.assert_allclose(_along(g, mask * g * 5), mask * g, rtol=1e-6)
    # inside: a pixel at 0 may not be pushed down, a pixel at 1 not up; the rest unchanged
    x0 = np.array([[[0.0, 0.0], [1.0, 0.5]]], np.float32)
    np.testing.assert_array_equal(_inside(g, x0), [[[1.0, 0.0], [0.0, -4.0]]])


def test_margin_term_is_positive_exactly_when_predicted_wrong():
    import tensorflow as tf
    p = tf.constant([[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.5, 0.0]], tf.float32)
    y = tf.constant([0, 0, 1], tf.int64)
    m = margin_term(p, y).numpy()
    np.testing.assert_allclose(m, [np.log(0.2 / 0.7), np.log(0.6 / 0.3), 0.0], atol=1e-5)


# ---- the polishing descents (polish_steps): same guarantees, never worse than without them
@pytest.mark.parametrize("method", ["rconc", "rnntest", "pgd"])
def test_polish_keeps_guarantees_and_never_raises_l2(method, tiny, other, seeds):
    x, y = seeds
    _, plain = _pair(method, tiny, other, seeds, polish_steps=0)
    _, polished = _pair(method, tiny, other, seeds, polish_steps=6)
    # same ascent, same adversarial inputs (the stage never changes which seeds flip)
    np.testing.assert_array_equal(polished.adversarial, plain.adversarial)
    np.testing.assert_allclose(polished.extras["pre_l2"], plain.extras["pre_l2"], rtol=1e-5)
    assert (polished.norms()["l2"] <= plain.norms()["l2"] + 1e-5).all()
    assert (_predict(tiny, polished.x_gen)[polished.adversarial]
            != y[polished.adversarial]).all()
    assert polished.x_gen.min() >= 0 and polished.x_gen.max() <= 1
    if method == "rconc":       # where a target's floor binds it finds smaller passing points
        assert (polished.norms()["l2"] < plain.norms()["l2"] - 1e-4).any()
    if method == "pgd":
        assert np.abs(polished.x_gen - x).max() <= METHODS["pgd"]["eps"] + 1e-6
    else:
        adv = polished.adversarial
        assert (polished.n_activated[adv] >= polished.extras["pre_activated"][adv]).all()
    assert get_generator(method, tiny, polish_steps=6, **({"eps": 0.3} if method == "pgd"
                                                          else {})).get_config()[
        "polish_steps"] == 6


def test_polish_steps_declared_and_on_by_default(tiny):
    assert get_generator("rconc", tiny, threshold=0.9).get_config()["polish_steps"] == 30
    assert get_generator("fgsm", tiny).get_config()["polish_steps"] == 30   # no refine: unused
    with pytest.raises(InputError, match="polish_steps"):
        get_generator("rconc", tiny, polish_steps=-1)


def test_fab_step_reaches_a_linear_boundary_and_adam_lowers_the_norm(tiny):
    """On a linear constraint g.d >= c the FAB step from an infeasible point lands on the
    feasible side (overshoot 1.05), and from a feasible point it moves toward the seed; one
    Adam step from a point far inside the floor shortens d."""
    from rnncon_core.generate import base
    gen = get_generator("pgd", tiny, eps=1.0)
    rng = np.random.default_rng(0)
    x0 = np.full((3, 8, 8), 0.5, np.float32)
    g = rng.normal(size=(3, 8, 8)).astype(np.float32)
    w = np.zeros_like(x0)
    c = np.array([0.3, 0.1, 0.2])
    vals = [np.sum(base._flat(g) * base._flat(w), axis=1) - c]       # v = g.w - c < 0
    new = gen._fab_step(w, x0, vals, [g], ("floor",), np.zeros(3, bool))
    assert (np.sum(base._flat(g) * base._flat(new), axis=1) >= c - 1e-6).all()
    # from a passing point: the backward step shrinks it toward the seed
    inside = new * 1.5
    vals = [np.sum(base._flat(g) * base._flat(inside), axis=1) - c]
    back = gen._fab_step(inside, x0, vals, [g], ("floor",), np.ones(3, bool))
    assert (base._l2(back) < base._l2(inside)).all()
    moments = (np.zeros_like(x0), np.zeros_like(x0))
    far = [np.full(3, 100.0)]                       # far above the floor: the norm term alone
    big = (0.1 * np.sign(g)).astype(np.float32)
    step = gen._adam_step(0, np.arange(3), big, x0, far, [g], ("floor",), moments)
    assert (base._l2(step) < base._l2(big)).all()
