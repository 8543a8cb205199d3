"""RConC against a brute-force NumPy oracle that materializes every product (float64)."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.coverage import ContributionCoverage

THRESHOLDS = (0.1, 0.37, 0.62, 0.9)
SPLITS = ((0, 2), (2, 5), (5, 9))          # three update batches of 9 inputs


def _sig(z):
    return 1 / (1 + np.exp(-z))


def _np_forward(model, x):
    """A NumPy re-implementation of the (default-activation) layers: per layer, its blocks of
    (part, source (N, T, K), weight (K, J)) in the coverage's order, and the layer's output."""
    blocks = []
    h_in = x.astype(np.float64)
    for layer in model.layers:
        cls = type(layer).__name__
        if cls == "Dense":
            k, b = (w.numpy().astype(np.float64) for w in (layer.kernel, layer.bias))
            blocks.append((layer.name, "x", h_in[:, None, :], k))
            z = h_in @ k + b
            h_in = {"relu": lambda v: np.maximum(v, 0), "linear": lambda v: v,
                    "softmax": lambda v: np.exp(v) / np.exp(v).sum(1, keepdims=True)}[
                layer.activation.__name__](z)
            continue
        cell = layer.cell
        U, W = cell.kernel.numpy().astype(np.float64), cell.recurrent_kernel.numpy().astype(np.float64)
        bias = cell.bias.numpy().astype(np.float64)
        n, T, _ = h_in.shape
        u = layer.units
        h = np.zeros((n, u))
        c = np.zeros((n, u))
        hs, hprev, hsrc = [], [], []
        for t in range(T):
            xt = h_in[:, t]
            hprev.append(h)
            if cls == "LSTM":
                z = xt @ U + h @ W + bias
                i, f, cc, o = _sig(z[:, :u]), _sig(z[:, u:2 * u]), np.tanh(z[:, 2 * u:3 * u]), _sig(z[:, 3 * u:])
                c = f * c + i * cc
                hn = o * np.tanh(c)
            else:
                if cell.reset_after:
                    xz = xt @ U + bias[0]
                    inner = h @ W + bias[1]
                    zg, r = _sig(xz[:, :u] + inner[:, :u]), _sig(xz[:, u:2 * u] + inner[:, u:2 * u])
                    hh = np.tanh(xz[:, 2 * u:] + r * inner[:, 2 * u:])
                else:
                    xz = xt @ U + bias
                    inner = h @ W[:, :2 * u]
                    zg, r = _sig(xz[:, :u] + inner[:, :u]), _sig(xz[:, u:2 * u] + inner[:, u:])
                    hsrc.append(r * h)
                    hh = np.tanh(xz[:, 2 * u:] + (r * h) @ W[:, 2 * u:])
                hn = zg * h + (1 - zg) * hh
            h = hn
            hs.append(h)
        hs, hprev = np.stack(hs, 1), np.stack(hprev, 1)
        blocks.append((layer.name, "x", h_in, U))
        if cls == "GRU" and not cell.reset_after:
            blocks.append((layer.name, "h", hprev, W[:, :2 * u]))
            blocks.append((layer.name, "h", np.stack(hsrc, 1), W[:, 2 * u:]))
        else:
            blocks.append((layer.name, "h", hprev, W))
        h_in = hs if layer.return_sequences else hs[:, -1]
    return blocks, h_in


def oracle(model, x, granularity, normalize, values="signed"):
    """(N, total) normalized contribution values, every product materialized; each value's
    normalization scope is named by a key: the model, its layer, or its (layer, part, step)."""
    blocks, _ = _np_forward(model, x)
    n = x.shape[0]
    flat, keys = [], []
    for layer, part, src, w in blocks:
        prod = src[:, :, :, None] * w[None, None]                   # (N, T, K, J)
        v = prod.sum(axis=2) if granularity == "unit" else prod
        v = np.abs(v) if values == "abs" else v
        steps = np.broadcast_to(np.arange(v.shape[1]).reshape((1, -1) + (1,) * (v.ndim - 2)),
                                v.shape)[0].ravel()
        flat.append(v.reshape(n, -1))
        keys += [{"model": "all", "layer": layer, "step": (layer, part, t)}[normalize]
                 for t in steps]
    flat = np.concatenate(flat, 1)
    out = np.zeros_like(flat)
    key_ids = np.array([hash(k) for k in keys])
    for k in np.unique(key_ids):
        cols = key_ids == k
        v = flat[:, cols]
        lo, hi = v.min(1, keepdims=True), v.max(1, keepdims=True)
        r = hi - lo
        out[:, cols] = np.where(r > 0, (v - lo) / np.where(r > 0, r, 1), 0)
    return out


def _assert_counts_match(got_max, want_max, t):
    """Covered sets equal, except items whose oracle maximum is within 1e-5 of t (ties)."""
    diff = (got_max > t) != (want_max > t)
    assert np.all(np.abs(want_max[diff] - t) < 1e-5), f"{diff.sum()} items differ at {t}"


@pytest.mark.parametrize("model_name", ["tiny_lstm", "tiny_gru"])
@pytest.mark.parametrize("granularity", ["unit", "edge"])
@pytest.mark.parametrize("normalize", ["step", "layer", "model"])
@pytest.mark.parametrize("values", ["abs", "signed"])
def test_rconc_matches_oracle(request, model_name, granularity, normalize, values, tiny_x):
    model = request.getfixturevalue(model_name)
    vals = oracle(model, tiny_x, granularity, normalize, values)      # (N, total)
    cov = ContributionCoverage(model, threshold=0.37, granularity=granularity, normalize=normalize,
                               values=values, curve_thresholds=THRESHOLDS)
    assert cov.total == vals.shape[1]
    for a, b in SPLITS:
        cov.update(tiny_x[a:b])
        want = vals[:b].max(axis=0)
        got = cov._state.max_values()
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
        for t in THRESHOLDS:
            _assert_counts_match(got, want, t)
            assert abs(cov.rate(t) - (want > t).mean()) <= (np.abs(want - t) < 1e-5).mean() + 1e-12
    # growth curves: coverage after 1..N inputs
    running = np.maximum.accumulate(vals, axis=0)
    for t in THRESHOLDS:
        want_curve = (running > t).mean(axis=1)
        slack = (np.abs(running - t) < 1e-5).mean(axis=1)
        assert np.all(np.abs(cov.curve(t) - want_curve) <= slack + 1e-12), t
    # one input's profile and the generator-facing values
    np.testing.assert_allclose(cov.profile(tiny_x[:2]), vals[:2], atol=2e-5)
    idx = np.random.default_rng(1).choice(cov.total, 12, replace=False)
    np.testing.assert_allclose(cov.targets.item_values(tiny_x[:3], idx).numpy(), vals[:3, idx], atol=2e-5)


@pytest.mark.parametrize("granularity", ["unit", "edge"])
def test_values_are_differentiable(tiny_lstm, tiny_x, granularity):
    import tensorflow as tf
    cov = ContributionCoverage(tiny_lstm, granularity=granularity)
    cov.update(tiny_x[:4])
    idx = cov.report.uncovered(threshold=0.9)[:5]
    x = tf.Variable(tiny_x[:2])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(cov.targets.item_values(x, idx))
    g = tape.gradient(loss, x).numpy()
    assert np.isfinite(g).all() and np.abs(g).sum() > 0


def test_values_with_embeddings(tiny_text, tiny_ids):
    import tensorflow as tf
    cov = ContributionCoverage(tiny_text, granularity="edge")
    idx = np.arange(0, cov.total, 37)
    emb = tf.Variable(cov.tracer.embed(tiny_ids[:2]))
    with tf.GradientTape() as tape:
        v = cov.targets.item_values(emb, idx, embedded=True)
        loss = tf.reduce_sum(v)
    np.testing.assert_allclose(v.numpy(), cov.targets.item_values(tiny_ids[:2], idx).numpy(), atol=1e-6)
    assert np.isfinite(tape.gradient(loss, emb).numpy()).all()


def test_generation_objective_has_a_gradient_where_values_are_flat(tiny_lstm, tiny_x):
    """graph_objective gives the same values as item_values, and a gradient also for a
    contribution of a blank step (flat scope, |0|), where the exact values have none; the
    recurrent part of the first step is dead (h^(-1) = 0)."""
    import tensorflow as tf
    cov = ContributionCoverage(tiny_lstm)
    x = tiny_x[:2].copy()
    x[:, 1] = 0.0                                        # a blank step
    seg = cov.segments[0]                                # lstm_1's x part, (T, J)
    idx = seg.offset + seg.shape[1] * 1 + np.arange(seg.shape[1])   # its step-1 items
    np.testing.assert_allclose(cov.targets.graph_objective(x, idx).numpy(),
                               cov.targets.item_values(x, idx).numpy(), atol=1e-6)
    xv = tf.Variable(x)
    with tf.GradientTape(persistent=True) as tape:          # one target, as a generator has
        exact = tf.reduce_sum(cov.targets.item_values(xv, idx[:1]))
        surrogate = tf.reduce_sum(cov.targets.graph_objective(xv, idx[:1]))
    assert not np.abs(tape.gradient(exact, xv).numpy()).sum()
    assert np.abs(tape.gradient(surrogate, xv).numpy()[:, 1]).sum() > 0
    dead = cov.targets.dead_items()
    h = cov.segments[1]
    assert set(dead) == set(h.offset + np.arange(h.shape[1])) | set(
        cov.segments[3].offset + np.arange(cov.segments[3].shape[1]))
