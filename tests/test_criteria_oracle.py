"""testRNN, DeepStellar and DeepGauge criteria under their declared switches to our earlier
definitions (per-step ranges, the forget gate, both sides, sets, ...) against brute-force NumPy
oracles of those definitions (float64 forward pass of the tiny models; docs/criteria.md).
The originals' own code paths (the defaults) are in tests/test_criteria_originals.py."""
from __future__ import annotations

from itertools import product
from math import comb
from statistics import NormalDist

import numpy as np
import pytest

from rnncon_core.coverage import build_profile, get_criterion, load_profile

TOL = 1e-4          # items whose score lies this close to a cut may differ (float32 vs 64)


def _sig(z):
    return 1 / (1 + np.exp(-z))


def np_forward(model, x):
    """Per layer name: dict with h, f (keep gate), contributions (N, T*J) in RConC's unit
    layout, and the neuron outputs (N, ...)."""
    out, h_in = {}, x.astype(np.float64)
    for layer in model.layers:
        cls = type(layer).__name__
        if cls == "Dense":
            k, b = (w.numpy().astype(np.float64) for w in (layer.kernel, layer.bias))
            pre = h_in @ k
            z = pre + b
            act = layer.activation.__name__
            h_in = np.maximum(z, 0) if act == "relu" else np.exp(z) / np.exp(z).sum(1, keepdims=True)
            out[layer.name] = {"contrib": pre, "neurons": h_in}
            continue
        cell = layer.cell
        U, W = (w.numpy().astype(np.float64) for w in (cell.kernel, cell.recurrent_kernel))
        bias = cell.bias.numpy().astype(np.float64)
        n, T, _ = h_in.shape
        u = layer.units
        h, c = np.zeros((n, u)), np.zeros((n, u))
        hs, keep, xus, hws = [], [], [], []
        for t in range(T):
            xt = h_in[:, t]
            xu, hw = xt @ U, h @ W
            xus.append(xu)
            hws.append(hw)
            if cls == "LSTM":
                zz = xu + hw + bias
                i, f, cc, o = (_sig(zz[:, :u]), _sig(zz[:, u:2 * u]), np.tanh(zz[:, 2 * u:3 * u]),
                               _sig(zz[:, 3 * u:]))
                c = f * c + i * cc
                h = o * np.tanh(c)
                keep.append(f)
            elif cell.reset_after:
                xz, inner = xu + bias[0], hw + bias[1]
                zg = _sig(xz[:, :u] + inner[:, :u])
                r = _sig(xz[:, u:2 * u] + inner[:, u:2 * u])
                hh = np.tanh(xz[:, 2 * u:] + r * inner[:, 2 * u:])
            else:                      # the candidate's recurrent part reads r * h^(t-1)
                xz = xu + bias
                zg = _sig(xz[:, :u] + hw[:, :u])
                r = _sig(xz[:, u:2 * u] + hw[:, u:2 * u])
                hws[-1] = (hw[:, :2 * u], (r * h) @ W[:, 2 * u:])
                hh = np.tanh(xz[:, 2 * u:] + hws[-1][1])
            if cls == "GRU":
                h = zg * h + (1 - zg) * hh
                keep.append(zg)
            hs.append(h)
        hs = np.stack(hs, 1)
        if isinstance(hws[0], tuple):          # two blocks: (z, r) from h, (h) from r * h
            hblocks = [np.stack([p[i] for p in hws], 1).reshape(n, -1) for i in (0, 1)]
        else:
            hblocks = [np.stack(hws, 1).reshape(n, -1)]
        contrib = np.concatenate([np.stack(xus, 1).reshape(n, -1)] + hblocks, axis=1)
        out[layer.name] = {"h": hs, "f": np.stack(keep, 1), "contrib": contrib,
                           "neurons": hs if layer.return_sequences else hs[:, -1]}
        h_in = hs if layer.return_sequences else hs[:, -1]
    return out


def flows(lay):
    h = lay["h"]
    pos, neg = np.where(h > 0, h, 0).sum(2), np.where(h < 0, h, 0).sum(2)
    prev = lambda v: np.pad(v[:, :-1], ((0, 0), (1, 0)))      # noqa: E731
    return lay["f"].mean(2), pos + neg, np.abs(pos - prev(pos)) + np.abs(neg - prev(neg))


@pytest.fixture(scope="module", params=["tiny_lstm", "tiny_gru"])
def setup(request, tmp_path_factory):
    model = request.getfixturevalue(request.param)
    rng = np.random.default_rng(11)
    x_train = rng.random((60, 5, 3)).astype("float32")
    x_test = np.concatenate([rng.random((20, 5, 3)), 1.6 * rng.random((10, 5, 3)) - 0.3])
    x_test = np.clip(x_test, 0, 1).astype("float32")
    path = build_profile(model, x_train, path=tmp_path_factory.mktemp("prof") / "p.npz")
    return model, x_train, x_test, str(path), np_forward(model, x_train), np_forward(model, x_test)


def _rec(model):
    return [l.name for l in model.layers if type(l).__name__ in ("LSTM", "GRU")]


def _check(cov, want, score=None, cut=None):
    got = cov.report.covered_mask()
    bad = got != want
    if score is not None:
        bad &= np.abs(score - cut) > TOL
    assert not bad.any(), f"{cov.name}: {int(bad.sum())} items differ from the oracle"


def _update(cov, x):
    cov.update(x[:7])
    cov.update(x[7:])
    return cov


def test_profile_matches_numpy(setup):
    model, x_train, _, path, tr, _ = setup
    prof = load_profile(model, path)
    neurons = np.concatenate([tr[l.name]["neurons"].reshape(len(x_train), -1) for l in model.layers],
                             axis=1)
    np.testing.assert_allclose(prof["neuron_lo"], neurons.min(0), atol=1e-5)
    np.testing.assert_allclose(prof["neuron_hi"], neurons.max(0), atol=1e-5)
    contrib = np.concatenate([tr[l.name]["contrib"].reshape(len(x_train), -1)
                              for l in model.layers], axis=1)
    np.testing.assert_allclose(prof["contrib_hi"], contrib.max(0), atol=1e-5)
    for name in _rec(model):
        xif, xih, dxih = flows(tr[name])
        np.testing.assert_allclose(prof[f"xif_lo@{name}"], xif.min(0), atol=1e-5)
        np.testing.assert_allclose(prof[f"dparts_hi@{name}"], dxih.max(0), atol=1e-5)
        np.testing.assert_allclose(prof[f"axih_hi@{name}"], np.abs(xih).max(0), atol=1e-5)
        np.testing.assert_allclose(prof[f"xih_s1@{name}"], xih.sum(0), atol=1e-4)
        np.testing.assert_allclose(prof[f"xih_s2@{name}"], (xih ** 2).sum(0), atol=1e-4)
        assert float(prof[f"count@{name}"]) == len(x_train)
        h = tr[name]["h"].reshape(-1, tr[name]["h"].shape[-1])
        w, v = np.linalg.eigh(np.cov(h.T, bias=True))
        axes = prof[f"pca_axes@{name}"]
        top = v[:, ::-1][:, :len(axes)]
        np.testing.assert_allclose(np.abs(axes @ top), np.eye(len(axes)), atol=2e-3)
        proj = (tr[name]["h"] - prof[f"pca_mean@{name}"]) @ axes.T
        np.testing.assert_allclose(prof[f"proj@{name}"], proj, atol=1e-5)


@pytest.mark.parametrize("threshold", [0.3, 0.8, 1.0])
def test_bc_sc(setup, threshold):
    model, _, x, path, _, te = setup
    prof = load_profile(model, path)
    earlier = {"bc": {"view": "forget", "sides": "both"}, "sc": {"change": "parts"}}
    for name, view in (("bc", 0), ("sc", 2)):
        cov = _update(get_criterion(name, model, threshold=threshold, profile_path=path,
                                    ranges="per-step", layer="all", **earlier[name]), x)
        scores = []
        for lay in _rec(model):
            v = flows(te[lay])[view]
            key = "xif" if view == 0 else "dparts"
            lo, hi = prof[f"{key}_lo@{lay}"], prof[f"{key}_hi@{lay}"]
            r = np.where(hi > lo, hi - lo, np.inf)
            s = np.stack([(hi - v) / r, (v - lo) / r], 2).max(0).ravel() if view == 0 else \
                ((v - lo) / r).max(0)
            scores.append(s)
        s = np.concatenate(scores)
        _check(cov, s > threshold, s, threshold)


def test_tc(setup):
    model, _, x, path, _, te = setup
    prof = load_profile(model, path)
    a, L = 3, 4
    cov = _update(get_criterion("tc", model, symbols=a, length=L, profile_path=path,
                                view="signed", layer="all"), x)
    cuts = [NormalDist().inv_cdf(i / a) for i in range(1, a)]
    want, near = [], []
    for lay in _rec(model):
        n = float(prof[f"count@{lay}"]) * len(prof[f"xih_s1@{lay}"])
        mean = prof[f"xih_s1@{lay}"].sum() / n
        std = np.sqrt(prof[f"xih_s2@{lay}"].sum() / n - mean ** 2)
        z = (flows(te[lay])[1] - mean) / std
        paa = np.array([np.repeat(s, L).reshape(L, -1).mean(1) for s in z])
        sym = np.searchsorted(cuts, paa, side="right")
        words = (sym * a ** np.arange(L - 1, -1, -1)).sum(1)
        m = np.zeros(a ** L, bool)
        m[words] = True
        want.append(m)
        near.append(np.abs(paa[..., None] - np.array(cuts)).min() < TOL)
    if any(near):
        pytest.skip("a PAA value lies on a SAX cut (float32 vs float64)")
    _check(cov, np.concatenate(want))


def _cells(p, lo, hi, m):
    """DeepStellar's cells (StateAbstraction.data_transform): floor((p − lo) · (m / range)),
    in its float32 / float64 arithmetic; the training maximum may get a cell of its own."""
    p, lo, hi = (np.asarray(a, np.float32) for a in (p, lo, hi))
    scale = (np.float32(1) / (hi - lo)).astype(np.float64) * m
    return np.floor((p - lo).astype(np.float64) * scale).astype(int)


@pytest.mark.parametrize("components,cells", [(2, 4), (3, 6)])
def test_deepstellar(setup, components, cells):
    model, x_train, x, path, tr, te = setup
    prof = load_profile(model, path)
    lay = _rec(model)[-1]
    mean, axes = prof[f"pca_mean@{lay}"], prof[f"pca_axes@{lay}"][:components]
    ptrain = prof[f"proj@{lay}"][:, :, :components]
    lo, hi = ptrain.min((0, 1)), ptrain.max((0, 1))
    train = _cells(ptrain, lo, hi, cells)
    ptest = (te[lay]["h"] - mean) @ axes.T.astype(np.float64)
    test = _cells(ptest, lo, hi, cells)
    edge = np.abs((ptest - lo) / (hi - lo) * cells - np.round((ptest - lo) / (hi - lo) * cells))
    if edge.min() < TOL:
        pytest.skip("a test state lies on a cell edge (float32 vs float64)")
    states = sorted({tuple(s) for s in train.reshape(-1, components)})
    freq = {s: 0 for s in states}
    for s in train.reshape(-1, components):
        freq[tuple(s)] += 1
    visited = {tuple(s) for s in test.reshape(-1, components)}
    trans = sorted({(tuple(a), tuple(b)) for seq in train for a, b in zip(seq[:-1], seq[1:])})
    tfreq = {t: 0 for t in trans}
    for seq in train:
        for a, b in zip(seq[:-1], seq[1:]):
            tfreq[(tuple(a), tuple(b))] += 1
    made = {(tuple(a), tuple(b)) for seq in test for a, b in zip(seq[:-1], seq[1:])}
    kw = {"components": components, "cells": cells, "profile_path": path,
          "profile_inputs": "all", "fake_initial": False, "first_state": True}

    cov = _update(get_criterion("state", model, **kw), x)
    assert cov.total == len(states)
    assert cov.covered == sum(s in visited for s in states)
    w = _update(get_criterion("state-weighted", model, **kw), x)
    want = sum(freq[s] for s in states if s in visited) / sum(freq.values())
    assert w.rate() == pytest.approx(want) and w.curve()[-1] == pytest.approx(want)
    t = _update(get_criterion("transition", model, **kw), x)
    assert t.total == len(trans) and t.covered == sum(p in made for p in trans)
    tw = _update(get_criterion("transition-weighted", model, **kw), x)
    assert tw.rate() == pytest.approx(sum(tfreq[p] for p in trans if p in made)
                                      / sum(tfreq.values()))
    for b in (1, 2):
        major = set(states)
        near = {tuple(np.add(s, mv)) for s in states
                for mv in product(range(-b, b + 1), repeat=components)
                if 0 < sum(map(abs, mv)) <= b} - major
        bc = _update(get_criterion("state-boundary", model, boundary_steps=b, **kw), x)
        assert bc.total == len(near)
        assert bc.covered == len(near & visited)


def test_deepgauge_ranges(setup):
    model, _, x, path, _, te = setup
    prof = load_profile(model, path)
    n = len(x)
    for on, key, prefix in (("neurons", "neuron", ""), ("contrib", "contrib", "rconc-")):
        v = np.concatenate([te[l.name]["neurons" if on == "neurons" else "contrib"].reshape(n, -1)
                            for l in model.layers], axis=1)
        lo, hi = prof[f"{key}_lo"].astype(np.float64), prof[f"{key}_hi"].astype(np.float64)
        k = 4
        cov = _update(get_criterion(prefix + "kmnc", model, k=k, profile_path=path,
                                    rule="deephunter"), x)
        w = (hi - lo) / k
        pos = np.where(w > 0, (v - lo) / np.where(w > 0, w, 1), 0)
        sec = np.clip(np.floor(pos), 0, k - 1).astype(int)
        inside = (v >= lo) & (v <= hi) & (w > 0)       # a constant item covers no section
        want = np.zeros((v.shape[1], k), bool)
        for i in range(n):
            want[np.flatnonzero(inside[i]), sec[i][inside[i]]] = True
        near = (np.abs(pos - np.round(pos)) < TOL).any(0)      # on a section edge somewhere
        got = cov.report.covered_mask().reshape(-1, k)
        assert not ((got != want).any(1) & ~near).any()
        nbc = _update(get_criterion(prefix + "nbc", model, profile_path=path), x)
        want = np.stack([(v < lo).any(0), (v > hi).any(0)], 1).ravel()
        score = np.stack([(lo - v).max(0), (v - hi).max(0)], 1).ravel()
        _check(nbc, want, score, 0.0)
        snac = _update(get_criterion(prefix + "snac", model, profile_path=path), x)
        _check(snac, (v > hi).any(0), (v - hi).max(0), 0.0)


def test_top_k(setup):
    model, _, x, _, _, te = setup
    n = len(x)
    layers = [te[l.name]["neurons"].reshape(n, -1) for l in model.layers]
    for k in (1, 2):
        cov = _update(get_criterion("tknc", model, k=k, groups="layer", ties="all"), x)
        want = np.concatenate([(v >= np.sort(v, 1)[:, -min(k, v.shape[1])][:, None]).any(0)
                               for v in layers])
        _check(cov, want)
        pat = _update(get_criterion("tknp", model, k=k, groups="layer", patterns="set"), x)
        seen = {tuple(tuple(sorted(np.argsort(-v[i], kind="stable")[:min(k, v.shape[1])]))
                      for v in layers) for i in range(n)}
        assert pat.covered == len(seen)
        total = np.prod([comb(v.shape[1], min(k, v.shape[1])) for v in layers])
        assert pat.total == total and pat.rate() == pytest.approx(len(seen) / total)
        d = pat.describe(int(pat.profile(x[:1])[0]))
        assert tuple(tuple(d["pattern"][l.name]) for l in model.layers) in seen
