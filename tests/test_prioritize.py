"""Test prioritization on tiny models: every signal against a brute-force NumPy oracle, APFD
on hand examples, the CLI's errors and ranking-only mode, the campaign guides beyond coverage."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.errors import InputError
from rnncon_core.prioritize import prioritize, signals


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from rnncon_core import paths
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(paths, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        yield paths.CACHE_DIR


@pytest.fixture(scope="module")
def net():
    """Input(6, 3) -> LSTM(5) -> Dense(4, relu) -> Dense(3, softmax), random weights."""
    import keras
    keras.utils.set_random_seed(1)
    L = keras.layers
    wide = keras.initializers.RandomNormal(0, 2)         # every class predicted for some
    return keras.Sequential([keras.Input((6, 3)), L.LSTM(5, name="lstm"),
                             L.Dense(4, activation="relu", name="dense"),
                             L.Dense(3, activation="softmax", name="output",
                                     kernel_initializer=wide)], name="prio_net")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return (rng.normal(0, 1, (40, 6, 3)).astype("float32"), rng.integers(0, 3, 40),
            rng.normal(0, 1, (150, 6, 3)).astype("float32"))


# ---------------------------------------------------------------- uncertainty

def test_uncertainty_signals_are_exact(net, data):
    x, y, _ = data
    p = np.asarray(net.predict(x, verbose=0), np.float64)
    res = prioritize(net, x, y, "gini,margin,entropy")
    s = np.sort(p, axis=1)
    oracle = {"gini": 1 - (p ** 2).sum(1), "margin": 1 - (s[:, -1] - s[:, -2]),
              "entropy": -(p * np.log(p)).sum(1)}
    for name, want in oracle.items():
        np.testing.assert_allclose(res.scores[name], want, rtol=1e-5, atol=1e-6)
        ranked = want[res.orders[name]]                      # highest first (ties: any order)
        assert sorted(res.orders[name]) == list(range(len(x)))
        assert np.all(np.diff(ranked) <= 1e-9)
    # a one-unit sigmoid is two classes
    q = np.array([[0.9], [0.5], [0.0]])
    np.testing.assert_allclose(signals.gini(q), [1 - 0.81 - 0.01, 0.5, 0.0])
    np.testing.assert_allclose(signals.margin(q), [0.2, 1.0, 0.0])
    np.testing.assert_allclose(signals.entropy(q), [-(0.9 * np.log(.9) + .1 * np.log(.1)),
                                                    np.log(2), 0.0])


# ---------------------------------------------------------------- surprise adequacy

def _kde_logpdf(points, at):
    """Scott's-rule Gaussian KDE, written out: covariance of the points times n^(-2/(d+4))."""
    n, d = points.shape
    cov = np.cov(points, rowvar=False) * n ** (-2.0 / (d + 4))
    inv, (_, logdet) = np.linalg.inv(cov), np.linalg.slogdet(2 * np.pi * cov)
    diff = at[:, None, :] - points[None]
    q = np.einsum("nmi,ij,nmj->nm", diff, inv, diff)
    m = (-0.5 * q).max(1, keepdims=True)
    return (m[:, 0] + np.log(np.exp(-0.5 * q - m).sum(1))) - np.log(n) - 0.5 * logdet


def _oracle_sa(at_train, pred_train, at, pred):
    keep = np.ones(at_train.shape[1], bool)
    for c in np.unique(pred_train):
        if (pred_train == c).sum() > 1:
            keep &= at_train[pred_train == c].var(0) >= signals.VAR_THRESHOLD
    lsa, dsa = [], []
    for a, c in zip(at, pred):
        own = at_train[pred_train == c]
        lsa.append(-_kde_logpdf(own[:, keep], a[None, keep])[0])
        d = [np.linalg.norm(a - t) for t in own]
        xa = own[int(np.argmin(d))]
        db = min(np.linalg.norm(xa - t) for t in at_train[pred_train != c])
        dsa.append(min(d) / db)
    return np.array(lsa), np.array(dsa)


def test_lsa_dsa_match_their_definition():
    rng = np.random.default_rng(1)
    at_train = rng.normal(size=(90, 4))
    at_train[:, 3] = 0.5                                   # constant: dropped by LSA only
    pred_train = np.repeat([0, 1, 2], 30)
    at_train[pred_train == 1] += 2.0
    at, pred = rng.normal(size=(12, 4)), rng.integers(0, 3, 12)
    sa = signals.Surprise(at_train, pred_train)
    assert sa.keep.tolist() == [True, True, True, False]
    lsa, dsa = _oracle_sa(at_train, pred_train, at, pred)
    np.testing.assert_allclose(sa.lsa(at, pred), lsa, rtol=1e-6)
    np.testing.assert_allclose(sa.dsa(at, pred), dsa, rtol=1e-6)
    assert np.isinf(sa.lsa(at[:1], [5])).all()             # a class no training input has


def test_lsa_dsa_read_the_last_hidden_state(net, data):
    import keras
    x, y, x_train = data
    res = prioritize(net, x, y, "lsa,dsa", x_train=x_train, n_profile=0)
    hid = keras.Model(net.inputs, net.get_layer("lstm").output)
    h_tr, h = (np.asarray(hid(v), np.float64) for v in (x_train, x))
    p_tr, p = (np.asarray(net(v)).argmax(1) for v in (x_train, x))
    lsa, dsa = _oracle_sa(h_tr, p_tr, h, p)
    finite = np.isfinite(lsa)
    np.testing.assert_allclose(res.scores["lsa"][finite], lsa[finite], rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(res.scores["dsa"], dsa, rtol=2e-3, atol=1e-4)
    with pytest.raises(InputError, match="training split"):
        prioritize(net, x, y, "lsa")


# ---------------------------------------------------------------- DeepState

def test_step_probabilities_apply_the_head_to_every_step(net, data):
    import keras
    x = data[0][:7]
    steps = signals.step_probabilities(net, x)
    lstm = net.get_layer("lstm")
    seq = keras.layers.LSTM(5, return_sequences=True)
    seq.build((None, 6, 3))
    seq.set_weights(lstm.get_weights())
    h = np.asarray(seq(x))                                        # (N, T, 5)
    want = net.get_layer("output")(net.get_layer("dense")(h.reshape(-1, 5)))
    np.testing.assert_allclose(steps, np.asarray(want).reshape(7, 6, 3), atol=1e-5)
    np.testing.assert_allclose(steps[:, -1], net.predict(x, verbose=0), atol=1e-5)


def test_deepstate_rate_and_order_by_hand():
    # labels 0 0 1 1 2: changes at i = 2 and 4, weights i^2 over 1..4
    assert signals.change_rate([0, 0, 1, 1, 2]) == pytest.approx((4 + 16) / 30)
    assert signals.change_rate([3]) == 0.0
    probs = np.array([[[.4, .6], [.55, .45], [.2, .8]]])            # step 0 below 0.5? no:
    assert signals.step_labels(probs)[0].tolist() == [1, 0, 1]      # 0.6, 0.55, last always
    assert signals.step_labels(np.array([[[.3, .3, .4], [.1, .1, .8]]]))[0].tolist() == [2]
    t = signals.transitions
    rates = [0.5, 0.9, 0.5, 0.5, 0.1]
    trends = [t([0, 1]), t([1, 0, 1]), t([0, 1]), t([2, 1]), t([1, 1])]
    # 1 first; within 0.5: 0 kept, 2 aside (same transitions as 0), 3 kept; then 4; 2 last
    assert signals.deepstate_order(rates, trends).tolist() == [1, 0, 3, 4, 2]


# ---------------------------------------------------------------- coverage

def _greedy(mask, weights=None):
    """Brute-force additional greedy: max gain, ties by lower index, reset when none adds."""
    w = np.ones(mask.shape[1]) if weights is None else weights
    left, covered, order = list(range(len(mask))), np.zeros(mask.shape[1], bool), []
    while left:
        gains = [float(w[mask[i] & ~covered].sum()) for i in left]
        best = max(gains)
        if best <= 0:
            if covered.any():
                covered[:] = False
                continue
            return order + left
        i = left[gains.index(best)]
        order.append(i)
        left.remove(i)
        covered |= mask[i]
    return order


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_additional_order_is_the_greedy_one(seed):
    rng = np.random.default_rng(seed)
    mask = rng.random((30, 13)) < 0.2
    mask[5] = False                                        # covers nothing: last
    bits = np.packbits(mask, axis=1)
    assert signals.additional_order(bits, 13).tolist() == _greedy(mask)
    w = rng.integers(1, 4, 13).astype(float)
    assert signals.additional_order(bits, 13, w).tolist() == _greedy(mask, w)
    np.testing.assert_array_equal(signals.total_scores(bits, 13), mask.sum(1))
    shuffled = signals.additional_order(bits, 13, rng=np.random.default_rng(3))
    assert sorted(shuffled.tolist()) == list(range(30))
    wide = rng.random((30, 2100)) < 0.01                   # many items, few each
    wide[7] = False
    assert signals.additional_order(np.packbits(wide, axis=1), 2100).tolist() == _greedy(wide)


def test_coverage_signals_read_each_inputs_items(net, data, cache):
    from rnncon_core.coverage import get_criterion
    x, y, x_train = data
    y_train = np.asarray(net(x_train)).argmax(1)
    res = prioritize(net, x, y, "nc-total,nc-additional,state-additional,tknp-total",
                     x_train=x_train, y_train=y_train, repeats=3)
    nc = get_criterion("nc", net)
    mask = nc.profile(x) > nc.threshold
    np.testing.assert_array_equal(res.scores["nc-total"], mask.sum(1))
    assert res.orders["nc-additional"].tolist() == _greedy(mask) or \
        res.metrics.set_index("signal").loc["nc-additional", "repeats"] == 3
    assert res.orders["state-additional"].shape == (len(x),)
    assert (res.scores["tknp-total"] == 1).all()           # one pattern per input


# ---------------------------------------------------------------- metrics

def test_apfd_and_found_within_by_hand():
    order, faults = np.arange(4), np.array([1, 0, 1, 0], bool)
    assert signals.apfd(order, faults) == pytest.approx(1 - (1 + 3) / 8 + 1 / 8)
    assert signals.apfd(order[::-1], faults) == pytest.approx(1 - (2 + 4) / 8 + 1 / 8)
    assert np.isnan(signals.apfd(order, np.zeros(4, bool)))
    f10 = np.zeros(10, bool)
    f10[[0, 5]] = True
    assert signals.found_within(np.arange(10), f10, 0.10) == 0.5      # the first 1 of 10
    assert signals.found_within(np.arange(10), f10, 0.01) == 0.5      # ceil: at least one
    x, share = signals.detection_curve(np.arange(10), f10)
    assert x[0] == 0 and share[0] == 0 and share[-1] == 1 and share[5] == 0.5


def test_random_and_ties_are_repeated(net, data):
    x, y, _ = data
    res = prioritize(net, x, y, "gini,random", repeats=5)
    m = res.metrics.set_index("signal")
    tied = len(np.unique(res.scores["gini"])) < len(x)
    assert m.loc["random", "repeats"] == 5 and m.loc["gini", "repeats"] == (5 if tied else 1)
    assert m.loc["random", "apfd_lo"] <= m.loc["random", "apfd"] <= m.loc["random", "apfd_hi"]
    with pytest.raises(InputError, match="unknown signal 'nope'"):
        prioritize(net, x, y, "gini,nope")


# ---------------------------------------------------------------- CLI

def test_cli_errors_and_ranking_without_labels(net, data, tmp_path, capsys, monkeypatch):
    from rnncon_core.cli import main
    from rnncon_core.prioritize import load_ranking
    from rnncon_core.runs import RunStore
    model = tmp_path / "net.keras"
    net.save(model)
    np.save(tmp_path / "x.npy", data[0])
    np.save(tmp_path / "y.npy", data[1][:5])

    def run(*argv):
        with pytest.raises(SystemExit) as e:
            main(list(argv) + ["--runs-dir", str(tmp_path / "runs")])
        return e.value.code, capsys.readouterr()
    base = ("prioritize", "--model", str(model), "--inputs", str(tmp_path / "x.npy"))
    code, out = run(*base, "--by", "gini,banana")
    assert code == 2 and "error: unknown signal 'banana'" in out.err and "Traceback" not in out.err
    code, out = run(*base, "--labels", str(tmp_path / "y.npy"))
    assert code == 2 and out.err.startswith("error:") and "labels" in out.err
    code, out = run("prioritize", "--model", str(model), "--labels", str(tmp_path / "y.npy"))
    assert code == 2 and "error:" in out.err
    code, out = run(*base, "--by", "gini,margin", "--json")
    assert code == 0 and "no labels" in out.err
    import json
    got = json.loads(out.out)
    assert "metrics" not in got and len(got["top10"]["gini"]) == 10
    info = RunStore(tmp_path / "runs").get(got["run_id"])
    assert info.kind == "prioritize" and info.status == "finished"
    assert (info.path / "ranking.csv").is_file() and not (info.path / "metrics.csv").exists()
    back = load_ranking(info)
    np.testing.assert_array_equal(back.orders["gini"][:10], got["top10"]["gini"])


# ---------------------------------------------------------------- campaign guides

@pytest.mark.parametrize("guide", ["gini", "margin", "diversity"])
def test_signal_guides_are_declared_and_run(tiny_lstm, guide, cache):
    from rnncon_core.campaign import CAMPAIGN_PARAMS, Campaign, guide_names, make_guide
    from rnncon_core.campaign.prepare import make_abstraction
    from rnncon_core.coverage import build_profile
    x = np.random.default_rng(11).random((24, 5, 3)).astype("float32")
    build_profile(tiny_lstm, x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    assert guide in guide_names()
    values = CAMPAIGN_PARAMS.check("test", {"parents": 4, "mutants": 4, "max_linf": 0.5,
                                            "noise": 0.3})
    camp = Campaign(tiny_lstm, x, y, make_guide(guide, tiny_lstm, {}), values, 3, "sequence",
                    make_abstraction(tiny_lstm, values))
    camp.start()
    for _ in range(3):
        camp.step()
    g = camp.guide
    assert 0 < g.rate() <= 1 and g.n_inputs > len(x)       # the seeds, then the mutants
    rows = camp.queue.rows
    assert np.all(rows["gain"][len(x):] >= 0)
    # the state as a value: save, load into a new guide, merge two halves equal to the whole
    twin = type(g).from_config(tiny_lstm, g.get_config())
    twin.load_state(g.state())
    assert twin.rate() == g.rate()
    a, b, whole = (make_guide(guide, tiny_lstm, {}) for _ in range(3))
    a.update(x[:12])
    b.update(x[12:])
    whole.update(x)
    np.testing.assert_array_equal(a.merge(b).state()["first"],
                                  whole.state()["first"])
    with pytest.raises(InputError, match="no guide parameters"):
        make_guide(guide, tiny_lstm, {"k": 3})


def test_text_model_steps_and_ranking_without_labels(tiny_text, tiny_ids):
    steps = signals.step_probabilities(tiny_text, tiny_ids)        # (N, T, 2): sigmoid as two
    np.testing.assert_allclose(steps[:, -1, 1], np.asarray(tiny_text(tiny_ids))[:, 0],
                               atol=1e-5)
    res = prioritize(tiny_text, tiny_ids, None, "gini,deepstate")
    assert res.metrics is None and sorted(res.orders["deepstate"]) == list(range(len(tiny_ids)))


def test_report_summary_reads_the_metrics():
    import pandas as pd
    from rnncon_core.prioritize import metrics_of
    from rnncon_core.reports.prioritization import best_signals, markdown
    rng = np.random.default_rng(0)
    faults = np.zeros(200, bool)
    faults[:10] = True                                    # inputs 0..9 are the faults
    good = np.arange(200)                                 # faults first
    orders = {"gini": [good], "nc-total": [rng.permutation(200)],
              "random": [rng.permutation(200) for _ in range(5)]}
    rows = [metrics_of(orders, faults).assign(model=m, pool="test", seconds=0.0)
            for m in ("mnist-lstm", "imdb-lstm")]
    table = pd.concat(rows, ignore_index=True)
    best = best_signals(table, "test")
    assert best["best_apfd"].tolist() == ["gini", "gini"]
    assert (best["found_10pct"] == 1.0).all()
    config = {"repeats": 5, "n_gen_imdb": 0,
              "models": {m: {"test_inputs": 200, "test_faults": 10, "generated": "none",
                             "seconds": {"test": 1.0}} for m in ("mnist-lstm", "imdb-lstm")}}
    text = markdown(table, config)
    assert "gini finds 100.0% of the faults" in text and "No mixed pool for" in text
    assert "On 2 of 2 models every uncertainty" in text
