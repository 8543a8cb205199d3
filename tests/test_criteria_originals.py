"""Port tests: testRNN's, DeepStellar's and DeepGauge's criteria at their defaults (and each
switch) against NumPy oracles that follow each original's own code path, on the tiny LSTM and
GRU stacks (float64 forward pass: tests/test_criteria_oracle.np_forward). Each oracle names
the repository, file and function it follows. The profiles are built on demand from the
training data given to the criteria (x_train, y_train)."""
from __future__ import annotations

import itertools
from statistics import NormalDist

import numpy as np
import pytest

from rnncon_core.coverage import get_criterion, load_profile
from tests.test_criteria_oracle import TOL, _check, _rec, _update, np_forward


@pytest.fixture(scope="module", params=["tiny_lstm", "tiny_gru"])
def orig(request, tmp_path_factory):
    from rnncon_core import paths
    model = request.getfixturevalue(request.param)
    rng = np.random.default_rng(5)
    x_train = rng.random((60, 5, 3)).astype("float32")
    x_test = np.clip(np.concatenate([rng.random((20, 5, 3)), 1.6 * rng.random((10, 5, 3)) - 0.3]),
                     0, 1).astype("float32")
    tr = np_forward(model, x_train)
    out = tr[model.layers[-1].name]["neurons"]
    pred = out.argmax(1)
    y_train = np.where(rng.random(60) < 0.7, pred, (pred + 1) % out.shape[1])  # 70 % correct
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paths, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        yield {"model": model, "x_train": x_train, "y_train": y_train, "x": x_test, "tr": tr,
               "te": np_forward(model, x_test), "correct": pred == y_train}


def _crit(o, name, **params):
    """The criterion with its profile built on demand from the fixture's training data."""
    return _update(get_criterion(name, o["model"], x_train=o["x_train"], y_train=o["y_train"],
                                 **params), o["x"])


# ---------------------------------------------------------------- testRNN (TrustAI/testRNN)

def trnn_alphas(h):
    """testRNN src/utils.py aggregate_inf (and testObjective.py get_activations): alpha_TC =
    |Σ h+ + Σ h−|, alpha_SC = |Σh+ − Σh+_prev + Σh− − Σh−_prev| with a zero before step 0."""
    alpha1 = np.sum(np.where(h > 0, h, 0), axis=2)
    alpha2 = np.sum(np.where(h < 0, h, 0), axis=2)
    alpha11 = np.insert(np.delete(alpha1, -1, axis=1), 0, 0, axis=1)
    alpha22 = np.insert(np.delete(alpha2, -1, axis=1), 0, 0, axis=1)
    return np.abs(alpha1 + alpha2), np.abs(alpha1 - alpha11 + alpha2 - alpha22)


def trnn_step_cover(act_train, act_test, indices, threshold):
    """testRNN src/testObjective.py BCTestObjectiveEvaluation.update_features (SC's is the
    same): one min / max over the window of the training values; a step is covered when
    threshold − (act − min)/(max − min) <= 0 for some test input. Returns (covered, score)."""
    lo, hi = act_train[:, indices].min(), act_train[:, indices].max()
    act = (act_test[:, indices] - lo) / (hi - lo)
    fitness = np.min(threshold - act, axis=0)
    return fitness <= 0, act.max(0)


def saxpy_paa(series, segments):
    """saxpy paa.py paa (the 'odd' branch covers the even one too)."""
    n = len(series)
    if n == segments:
        return np.copy(series)
    res = np.zeros(segments)
    for i in range(segments * n):
        res[i // n] += series[i // segments]
    return res / n


def saxpy_ts_to_string(series, cuts):
    """saxpy sax.py ts_to_string: letter indices of a series at cuts (cuts[0] = −inf)."""
    out = []
    for num in series:
        if num >= 0:
            j = len(cuts) - 1
            while j > 0 and cuts[j] >= num:
                j -= 1
        else:
            j = 1
            while j < len(cuts) and cuts[j] <= num:
                j += 1
            j -= 1
        out.append(j)
    return out


def trnn_tc_words(act_train, act_test, indices, symbols, seq_len):
    """testRNN src/testObjective.py TCTestObjectiveEvaluation.update_features with
    aggregate_inf's mean_TC / std_TC: z-normalize, PAA, SAX; the words seen (letter 0 = a)."""
    mean, std = np.mean(act_train[:, indices]), np.std(act_train[:, indices])
    cuts = [-np.inf] + [NormalDist().inv_cdf(i / symbols) for i in range(1, symbols)]
    words, near = set(), False
    for series in (act_test[:, indices] - mean) / std:
        p = saxpy_paa(series, seq_len)
        near |= bool(np.abs(p[:, None] - np.array(cuts[1:])).min() < TOL)
        words.add(tuple(saxpy_ts_to_string(p, cuts)))
    return words, near


@pytest.mark.parametrize("threshold", [0.3, 0.8])
def test_testrnn_bc_sc_defaults(orig, threshold):
    """bc / sc at their defaults: the last recurrent layer, every step, one global range."""
    lay = _rec(orig["model"])[-1]
    (tc_tr, sc_tr), (tc_te, sc_te) = (trnn_alphas(orig[k][lay]["h"]) for k in ("tr", "te"))
    every = slice(0, tc_tr.shape[1])
    for name, a_tr, a_te in (("bc", tc_tr, tc_te), ("sc", sc_tr, sc_te)):
        cov = _crit(orig, name, threshold=threshold)
        want, score = trnn_step_cover(a_tr, a_te, every, threshold)
        assert cov.total == a_tr.shape[1]
        _check(cov, want, score, threshold)


def test_testrnn_window_layer_and_switches(orig):
    """steps = testRNN's --seq window, layer = one named layer; our earlier per-step ranges
    and both sides (for bc) against the same views."""
    first = _rec(orig["model"])[0]
    (tc_tr, sc_tr), (tc_te, sc_te) = (trnn_alphas(orig[k][first]["h"]) for k in ("tr", "te"))
    win = slice(1, 4)
    bc = _crit(orig, "bc", threshold=0.5, layer=first, steps="1:3")
    want, score = trnn_step_cover(tc_tr, tc_te, win, 0.5)
    _check(bc, want, score, 0.5)
    assert [bc.describe(i)["step"] for i in range(bc.total)] == [1, 2, 3]
    sc = _crit(orig, "sc", threshold=0.5, layer=first, steps="1:3")
    want, score = trnn_step_cover(sc_tr, sc_te, win, 0.5)
    _check(sc, want, score, 0.5)
    # per-step ranges, both sides, every layer
    both = _crit(orig, "bc", threshold=0.6, ranges="per-step", sides="both", layer="all")
    scores = []
    for lay in _rec(orig["model"]):
        a_tr, a_te = trnn_alphas(orig["tr"][lay]["h"])[0], trnn_alphas(orig["te"][lay]["h"])[0]
        lo, hi = a_tr.min(0), a_tr.max(0)
        r = np.where(hi > lo, hi - lo, np.inf)
        scores.append(np.stack([(hi - a_te) / r, (a_te - lo) / r], 2).max(0).ravel())
    s = np.concatenate(scores)
    _check(both, s > 0.6, s, 0.6)


def test_testrnn_tc(orig):
    lay = _rec(orig["model"])[-1]
    a_tr, a_te = trnn_alphas(orig["tr"][lay]["h"])[0], trnn_alphas(orig["te"][lay]["h"])[0]
    for symbols, length, steps in ((3, 5, None), (2, 3, "1:4")):
        win = slice(0, 5) if steps is None else slice(1, 5)
        words, near = trnn_tc_words(a_tr, a_te, win, symbols, length)
        if near:
            continue                       # a PAA value on a SAX cut (float32 vs float64)
        cov = _crit(orig, "tc", symbols=symbols, length=length, steps=steps)
        got = {cov.describe(i)["pattern"] for i in np.flatnonzero(cov.report.covered_mask())}
        assert got == {"".join(chr(97 + c) for c in w) for w in words}
        assert cov.total == symbols ** length


def test_testrnn_bad_window(orig):
    from rnncon_core.errors import InputError
    with pytest.raises(InputError, match="steps 2:9 go past"):
        _crit(orig, "sc", steps="2:9")
    with pytest.raises(InputError, match="FIRST:LAST"):
        _crit(orig, "sc", steps="3:1")
    with pytest.raises(InputError, match="no a recurrent layer 'dense'|choose one of"):
        _crit(orig, "bc", layer="dense")


# ---------------------------------------------------------------- DeepStellar

def ds_pca(states, k):
    """DeepStellar Abstraction/StateAbstraction.py pca_fit: scikit-learn's PCA (centred SVD,
    each component signed so that its largest-magnitude entry is positive: svd_flip as
    scikit-learn >= 1.5 calls it)."""
    mean = states.mean(0)
    _, _, vt = np.linalg.svd(states - mean, full_matrices=False)
    vt = vt[:k]
    vt *= np.sign(vt[np.arange(k), np.abs(vt).argmax(1)])[:, None]
    return mean, vt


def ds_abstract(proj_train, proj_test, m, n_step):
    """StateAbstraction.get_quantization_matrix / data_transform: floor((p − min)·(m/range))
    + n_step, in its float32 / float64 arithmetic; a state is the tuple of cells."""
    p_tr = proj_train.astype(np.float32)
    lo = p_tr.reshape(-1, p_tr.shape[-1]).min(0)
    hi = p_tr.reshape(-1, p_tr.shape[-1]).max(0)
    scale = (np.float32(1) / (hi - lo)).astype(np.float64) * m

    def cells(p):
        c = np.floor((p.astype(np.float32) - lo).astype(np.float64) * scale).astype(int)
        return [[tuple(v) for v in seq + n_step] for seq in c]
    return cells(p_tr), cells(proj_test)


class DTMC:
    """DeepStellar Abstraction/DTMCGraph.py DTMCGraph with GraphWrapper.build_model /
    extend_to_k_step: states (the fake initial -1 first), transitions (from the fake one to
    every sequence's first state too), frequencies, k-step states."""

    def __init__(self, seqs, n_step):
        self.states = {-1: 0}                         # name -> freq
        self.trans = {}                               # (src, dst) -> freq
        for seq in seqs:                              # add_ordered_transitions
            for src, dst in zip([-1] + seq[:-1], seq):
                self.states[dst] = self.states.get(dst, 0) + 1
                self.trans[(src, dst)] = self.trans.get((src, dst), 0) + 1
        self.other = {}                               # extend_to_k_step
        moves = [mv for mv in itertools.product(range(-n_step, n_step + 1),
                                                repeat=len(seqs[0][0]))
                 if 0 < sum(map(abs, mv)) <= n_step]
        for s in self.states:
            if s != -1:
                for mv in moves:
                    out = tuple(np.add(s, mv))
                    if out not in self.states:
                        self.other[out] = min(self.other.get(out, 99), sum(map(abs, mv)))

    def cover(self, seqs, mode, k=0):
        """coverage.py Coverage.get_coverage_criteria: the items covered (to_cover_*: states
        from each sequence's second one; transitions between consecutive states)."""
        got = set()
        for seq in seqs:
            for a, b in zip(seq[:-1], seq[1:]):
                if mode == "state" and b in self.states:
                    got.add(b)
                elif mode == "k-step" and self.other.get(b, 99) <= k:
                    got.add(b)
                elif mode == "transition" and (a, b) in self.trans:
                    got.add((a, b))
        return got

    def weight(self, items, mode):
        """get_index_weight_dic: frequency over the summed frequencies (fake ones included)."""
        d = self.states if mode == "state" else self.trans
        return sum(d[i] for i in items) / sum(d.values())


def _ds_setup(o, inputs, k, m, b):
    """The DTMC of the profiled inputs and the test inputs' states. The cells are cut from the
    profile's own float32 projections (the cell of a training extreme turns on its last bit);
    the profile's PCA is checked against ds_pca here."""
    lay = _rec(o["model"])[-1]
    keep = o["correct"] if inputs == "correct" else np.ones(len(o["x_train"]), bool)
    h_tr = o["tr"][lay]["h"][keep]
    mean, axes = ds_pca(h_tr.reshape(-1, h_tr.shape[-1]), k)
    _crit(o, "state", profile_inputs=inputs)              # the profile, built on demand
    prof = load_profile(o["model"], inputs=inputs)
    np.testing.assert_allclose(prof[f"pca_axes@{lay}"][:k], axes, atol=2e-3)
    np.testing.assert_allclose(prof[f"pca_mean@{lay}"], mean, atol=1e-5)
    p_tr = prof[f"proj@{lay}"][:, :, :k]
    p_te = ((o["te"][lay]["h"] - mean) @ axes.T).astype(np.float32)
    seq_tr, seq_te = ds_abstract(p_tr, p_te, m, b)
    lo, r = p_tr.reshape(-1, k).min(0), np.ptp(p_tr.reshape(-1, k), 0)
    edge = (p_te - lo) / r * m
    near = np.abs(edge - np.round(edge)).min() < 1e-4
    return DTMC(seq_tr, b), seq_te, near


@pytest.mark.parametrize("inputs", ["correct", "all"])
def test_deepstellar_defaults(orig, inputs):
    """state, state-boundary, state-weighted, transition, transition-weighted at DeepStellar's
    settings (fake initial state counted, the test inputs' first state not)."""
    k, m, b = 2, 4, 1
    g, seq_te, near = _ds_setup(orig, inputs, k, m, b)
    if near:
        pytest.skip("a test state on a cell edge (float32 projections vs float64)")
    kw = {"components": k, "cells": m, "profile_inputs": inputs}
    st = _crit(orig, "state", **kw)
    assert (st.total, st.covered) == (len(g.states), len(g.cover(seq_te, "state")))
    sw = _crit(orig, "state-weighted", **kw)
    assert sw.rate() == pytest.approx(g.weight(g.cover(seq_te, "state"), "state"))
    tr = _crit(orig, "transition", **kw)
    assert (tr.total, tr.covered) == (len(g.trans), len(g.cover(seq_te, "transition")))
    tw = _crit(orig, "transition-weighted", **kw)
    assert tw.rate() == pytest.approx(g.weight(g.cover(seq_te, "transition"), "transition"))
    assert tw.curve()[-1] == pytest.approx(tw.rate())
    bd = _crit(orig, "state-boundary", boundary_steps=b, **kw)
    assert (bd.total, bd.covered) == (len(g.other), len(g.cover(seq_te, "k-step", b)))
    assert len(st.targets.dead_items()) == 1 and st.describe(int(st.targets.dead_items()[0]))["cells"] == \
        "fake initial"


def test_deepstellar_switches(orig):
    """fake_initial=False and first_state=True (our earlier choices) move the counts as said."""
    k, m = 2, 4
    g, seq_te, near = _ds_setup(orig, "correct", k, m, 1)
    if near:
        pytest.skip("a test state on a cell edge (float32 projections vs float64)")
    kw = {"components": k, "cells": m}
    st = _crit(orig, "state", fake_initial=False, first_state=True, **kw)
    visited = {s for seq in seq_te for s in seq}
    assert st.total == len(g.states) - 1 and st.covered == len(visited & set(g.states))
    tw = _crit(orig, "transition-weighted", fake_initial=False, **kw)
    real = {t: f for t, f in g.trans.items() if t[0] != -1}
    got = g.cover(seq_te, "transition")
    assert tw.rate() == pytest.approx(sum(real[t] for t in got) / sum(real.values()))


# ---------------------------------------------------------------- DeepGauge

def nlc_layers(o, which, groups="step"):
    """NeuraL-Coverage tool.py get_layer_output: every layer's output, a recurrent layer's
    sequence unrolled into one layer per step (groups="layer": not unrolled)."""
    out = []
    for layer in o["model"].layers:
        v = o[which][layer.name]["neurons"]
        if v.ndim == 3 and groups == "step":
            out += [v[:, t] for t in range(v.shape[1])]
        else:
            out.append(v.reshape(len(v), -1))
    return out


def nlc_kmnc(train, test, k):
    """NeuraL-Coverage coverage.py KMNC.set_range / calculate / coverage: per layer the
    covered (neuron, section) pairs, section ceil((v − lo)/(hi − lo)·k) in 1..k, 0: none."""
    lo, hi = train.min(0), train.max(0)
    ok = (hi > lo) & (test >= lo) & (test <= hi)
    div = np.where(hi > lo, hi - lo, 1e-6)
    sec = np.ceil((test - lo) / div * k).astype(int) * ok
    cov = np.zeros((train.shape[1], k + 1), bool)
    for row in sec:
        cov[np.arange(len(row)), row] = True
    pos = (test - lo) / div * k
    return cov[:, 1:], (np.abs(pos - np.round(pos)) < TOL).any(0)


def deephunter_kmnc(train, test, k):
    """DeepHunter deephunter/coverage.py Coverage.kmnc_update_coverage (Shimmer93/Deephunter-
    backup): unit = (hi − lo)/k, skip unit 0 and values outside, int((v − lo)/unit), k → k − 1."""
    lo, hi = train.min(0), train.max(0)
    unit = (hi - lo) / k
    cov = np.zeros((train.shape[1], k), bool)
    for row in test:
        for j, v in enumerate(row):
            if unit[j] == 0 or v > hi[j] or v < lo[j]:
                continue
            cov[j, min(int((v - lo[j]) / unit[j]), k - 1)] = True
    pos = np.where(unit > 0, (test - lo) / np.where(unit > 0, unit, 1), 0)
    return cov, (np.abs(pos - np.round(pos)) < TOL).any(0)


@pytest.mark.parametrize("rule", ["nlc", "deephunter"])
def test_deepgauge_kmnc(orig, rule):
    k = 4
    train = np.concatenate(nlc_layers(orig, "tr", "layer"), 1)
    test = np.concatenate(nlc_layers(orig, "te", "layer"), 1)
    want, near = (nlc_kmnc if rule == "nlc" else deephunter_kmnc)(train, test, k)
    cov = _crit(orig, "kmnc", k=k, rule=rule)
    got = cov.report.covered_mask().reshape(-1, k)
    assert not ((got != want).any(1) & ~near).any()
    const = train.min(0) == train.max(0)
    assert not got[const].any() and cov.total == train.shape[1] * k
    # contributions: the same rule over RConC's unit contributions
    c_tr = np.concatenate([orig["tr"][l.name]["contrib"].reshape(60, -1)
                           for l in orig["model"].layers], 1)
    c_te = np.concatenate([orig["te"][l.name]["contrib"].reshape(30, -1)
                           for l in orig["model"].layers], 1)
    want, near = (nlc_kmnc if rule == "nlc" else deephunter_kmnc)(c_tr, c_te, k)
    rk = _crit(orig, "rconc-kmnc", k=k, rule=rule)
    got = rk.report.covered_mask().reshape(-1, k)
    assert not ((got != want).any(1) & ~near).any()


def test_deepgauge_nbc_snac(orig):
    """NeuraL-Coverage coverage.py NBC / SNAC: v < lo, v > hi per neuron."""
    train = np.concatenate(nlc_layers(orig, "tr", "layer"), 1)
    test = np.concatenate(nlc_layers(orig, "te", "layer"), 1)
    lo, hi = train.min(0), train.max(0)
    nbc = _crit(orig, "nbc")
    lower, upper = (test < lo).any(0), (test > hi).any(0)
    _check(nbc, np.stack([lower, upper], 1).ravel(),
           np.stack([(lo - test).max(0), (test - hi).max(0)], 1).ravel(), 0.0)
    assert nbc.rate() == pytest.approx((lower.mean() + upper.mean()) / 2, abs=1.0 / nbc.total)
    _check(_crit(orig, "snac"), upper, (test - hi).max(0), 0.0)


def nlc_topk(v, k):
    """torch.topk(k, largest=True, sorted=True) with ties broken by the lower index."""
    return np.argsort(-v, axis=1, kind="stable")[:, :min(k, v.shape[1])]


@pytest.mark.parametrize("groups", ["step", "layer"])
def test_deepgauge_tknc(orig, groups):
    """NeuraL-Coverage coverage.py TKNC.calculate: per (unrolled) layer and input its top-k."""
    k = 2
    cov = _crit(orig, "tknc", k=k, groups=groups)
    want = []
    for v in nlc_layers(orig, "te", groups):
        hit = np.zeros(v.shape, bool)
        np.put_along_axis(hit, nlc_topk(v, k), True, axis=1)
        want.append(hit.any(0))
    _check(cov, np.concatenate(want))


@pytest.mark.parametrize("groups,patterns", [("step", "ordered"), ("layer", "ordered"),
                                             ("step", "set")])
def test_deepgauge_tknp(orig, groups, patterns):
    """NeuraL-Coverage coverage.py TKNP.calculate (network mode): the concatenated top-k
    indices of every (unrolled) layer, in order of value; patterns="set": sorted."""
    k = 2
    tops = [nlc_topk(v, k) for v in nlc_layers(orig, "te", groups)]
    if patterns == "set":
        tops = [np.sort(t, 1) for t in tops]
    seen = {str(np.concatenate([t[i] for t in tops]).tolist()) for i in range(len(orig["x"]))}
    pat = _crit(orig, "tknp", k=k, groups=groups, patterns=patterns)
    assert pat.covered == pat.patterns_seen() == len(seen)
    layers = nlc_layers(orig, "te", groups)
    from math import comb, perm
    count = perm if patterns == "ordered" else comb
    assert pat.total == int(np.prod([count(v.shape[1], min(k, v.shape[1])) for v in layers],
                                    dtype=object))
    d = pat.describe(int(pat.profile(orig["x"][:1])[0]))
    assert str(sum(d["pattern"].values(), [])) in seen


def test_profile_on_demand_and_its_key(orig, monkeypatch):
    """A criterion given x_train builds the profile once (keyed by weights, inputs and
    data), reuses it, rebuilds it for other data; without data the error says what to pass."""
    from rnncon_core.coverage import profile as prof_mod
    from rnncon_core.errors import InputError
    calls = []
    real = prof_mod.build_profile
    monkeypatch.setattr(prof_mod, "build_profile",
                        lambda *a, **kw: calls.append(kw.get("inputs")) or real(*a, **kw))
    o = orig
    _crit(o, "sc")                                       # built by an earlier test: reused
    assert calls == []
    get_criterion("sc", o["model"], x_train=o["x_train"][:40])
    assert calls == ["all"]
    p = load_profile(o["model"], inputs="all")
    assert p.meta["n_inputs"] == 40 and p.meta["inputs"] == "all"
    c = load_profile(o["model"], inputs="correct")
    assert c.meta["n_inputs"] == int(o["correct"].sum())
    with pytest.raises(InputError, match="y_train"):
        get_criterion("state", o["model"], x_train=o["x_train"][:30])
    other = __import__("keras").models.clone_model(o["model"])
    with pytest.raises(InputError, match="--dataset NAME.*x_train.*rnncon profile") as e:
        get_criterion("state", other)
    assert "/" not in str(e.value).split("`")[0]          # no server path in the message
