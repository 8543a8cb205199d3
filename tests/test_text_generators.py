"""The text generators on a tiny Embedding -> LSTM(4) -> Dense(1) model over a small vocabulary:
budgets, synonyms only from WordNet in the vocabulary, the oracle against the model itself,
seeded runs, the first-order gains against a brute-force loop, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.data import Vocabulary
from rnncon_core.errors import InputError
from rnncon_core.text.wordnet import WORDNET_DIR, wordnet_available

pytestmark = pytest.mark.skipif(
    not wordnet_available(),
    reason=f"WordNet data missing in {WORDNET_DIR}: run .venv/bin/python scripts/setup_wordnet.py")

T = 16
WORDS = ("the a and was is of it this but movie film picture flick good bad awful dreadful "
         "terrible great nice fine excellent story tale plot acting playing fun boring dull "
         "ending end sad happy glad love hate like enjoy watch see look").split()


@pytest.fixture(scope="module")
def setup():
    import keras
    from rnncon_core.text.eda import Lexicon
    from rnncon_core.text.wordnet import synonym_table
    vocab = Vocabulary(WORDS, num_words=len(WORDS) + 3)
    lex = Lexicon(vocab, synonym_table(vocab.words, cache=False))
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((T,), dtype="int32"),
                              keras.layers.Embedding(vocab.num_words, 8),
                              keras.layers.LSTM(4), keras.layers.Dense(1, activation="sigmoid")])
    rng = np.random.default_rng(0)
    content = [w for w in WORDS if lex.replaceable(w)]
    rows = []
    for n in range(8):
        length = int(rng.integers(8, T))
        words = [str(w) for w in rng.choice(content + ["the", "was", "and"], size=length)]
        rows.append(lex.ids_of(words, True, T))
    x = np.stack(rows)
    p = model.predict(x, verbose=0)[:, 0]
    y = (p > 0.5).astype(np.int64)          # every seed predicted right
    return model, lex, x, y


def _gen(method, setup, **kw):
    from rnncon_core.generate import get_generator
    model, lex, _, _ = setup
    return get_generator(method, model, lexicon=lex, threshold=0.5, batch_size=5, **kw)


def _oracle(model, x_seed, x_gen, y):
    p0 = (model.predict(x_seed, verbose=0)[:, 0] > 0.5).astype(int)
    p1 = (model.predict(x_gen, verbose=0)[:, 0] > 0.5).astype(int)
    return (p0 == y) & (p1 != y)


@pytest.fixture(scope="module")
def runs(setup):
    """One generator and one run per method (seed 4, a quarter of the words at most)."""
    _, _, x, y = setup
    out = {}
    for method in ("eda", "synonym-gradient"):
        gen = _gen(method, setup, max_fraction=0.25, seed=4)
        out[method] = (gen, gen.generate(x, y))
    return out


@pytest.mark.parametrize("method", ["eda", "synonym-gradient"])
def test_generation_respects_budget_and_oracle(setup, runs, method):
    from rnncon_core.textdiff import words_changed
    model, lex, x, y = setup
    _, res = runs[method]
    assert res.x_gen.shape == x.shape and res.x_gen.dtype == np.int32
    np.testing.assert_array_equal(res.adversarial, _oracle(model, x, res.x_gen, y))
    assert res.extras["words_changed"].sum() > 0
    for n in range(len(x)):
        a, _ = lex.words_of(x[n])
        b, _ = lex.words_of(res.x_gen[n])
        wc = words_changed(a, b)
        assert wc == res.extras["words_changed"][n]
        assert wc <= max(1, int(0.25 * len(a))) == res.extras["budget"][n]
        assert res.extras["n_words"][n] == len(a)
        if method == "synonym-gradient":     # only substitutions, each a reader's substitute
            assert len(a) == len(b)
            subs = lex.substitutes
            for k, (u, v, t) in enumerate(zip(a, b, lex.tags(a))):
                assert u == v or v in subs.words(u, t, subs.context(a, k))
    summary = res.summary("tiny")
    assert summary["n_seeds"] == len(x) and "avg_words_changed_all" in summary
    assert summary["n_adversarial"] == int(res.adversarial.sum())
    # every edit checked: the valid adversarial rate and the share passing each check
    from rnncon_core.text.lexical import CHECKS, check_edits
    for n in range(len(x)):
        chk = check_edits(lex.words_of(x[n])[0], lex.words_of(res.x_gen[n])[0])
        assert res.extras["valid"][n] == chk["valid"]
        for c in CHECKS:
            assert [res.extras[f"pass_{c}"][n], res.extras[f"checked_{c}"][n]] == chk["passed"][c]
    assert summary["valid_adv_rate"] == pytest.approx(np.mean(res.adversarial
                                                              & res.extras["valid"]))
    assert summary["valid_adv_rate"] <= summary["adv_rate"]
    assert set(summary["checks"]) == set(CHECKS)
    for c in ("antonym", "polarity", "number"):      # the reader constraints hold by design
        assert summary["checks"][c] in (None, 1.0), (c, summary["checks"])
    p = model.predict(x, verbose=0)[:, 0]
    np.testing.assert_allclose(res.extras["conf_seed"], np.maximum(p, 1 - p), rtol=1e-4)


@pytest.mark.parametrize("method", ["eda", "synonym-gradient"])
def test_same_seed_same_text(setup, runs, method):
    _, _, x, y = setup
    gen, a = runs[method]
    b = _gen(method, setup, max_fraction=0.25, seed=4).generate(x, y)
    np.testing.assert_array_equal(a.x_gen, b.x_gen)
    np.testing.assert_array_equal(a.targets, b.targets)
    c = gen.generate(x, y)              # the same generator again: the same run
    np.testing.assert_array_equal(a.x_gen, c.x_gen)


def test_eda_counts_activated_targets(setup, runs):
    _, _, x, _ = setup
    gen, res = runs["eda"]
    # n_activated agrees with the coverage values of the generated inputs
    vals = np.stack([np.asarray(gen.coverage.targets.item_values(res.x_gen[n:n + 1], res.targets[n]))[0]
                     for n in range(len(x))])
    np.testing.assert_array_equal(res.n_activated, (vals > 0.5).sum(axis=1))
    # the targets were uncovered by the seed set
    assert np.isin(res.targets, gen.coverage.report.uncovered()).all()


@pytest.mark.parametrize("constraints", ["none", "reader"])
def test_first_order_gains_match_a_loop(setup, constraints):
    model, lex, x, y = setup
    gen = _gen("synonym-gradient", setup, constraints=constraints)
    words = lex.words_of(x[0])[0]
    first = T - len(words)
    tags = dict(zip(range(first, T), lex.tags(words)))
    grad = gen._gradient(x[:1], y[:1], np.zeros((1, 0), np.int64))[0]
    frozen = np.zeros(T, bool)
    frozen[-3] = True
    pos, syn, gain = gen._candidates(x[0], grad, frozen)
    E = gen.E
    expect = []
    for t, i in enumerate(x[0].tolist()):
        w = lex.vocab.words[i - 3] if i >= 3 else None
        if w is None or frozen[t] or lex.is_stop(w):
            continue
        subs = lex.substitutes
        syns = lex.synonyms(w) if constraints == "none" else \
            subs.words(w, tags[t], subs.context(words, t - first))
        for s in syns:
            j = lex.vocab.word_id(s)
            expect.append((t, j, float(grad[t] @ (E[j] - E[i]))))
    assert sorted(zip(pos.tolist(), syn.tolist())) == sorted((t, j) for t, j, _ in expect)
    got = {(int(p), int(s)): g for p, s, g in zip(pos, syn, gain)}
    for t, j, g in expect:
        assert got[(t, j)] == pytest.approx(g, rel=1e-4, abs=1e-6)
    assert (np.diff(gain) <= 1e-12).all()           # best first
    # the gradient itself: against finite differences along one synonym direction
    if expect:
        t, j, g = max(expect, key=lambda e: abs(e[2]))
        emb = np.asarray(gen.tracer.embed(x[:1]))
        loss = lambda e: float(-np.log(np.clip(  # noqa: E731
            1 - abs(y[0] - np.asarray(gen.tracer(e, embedded=True).output)[0, 0]), 1e-7, 1)))
        d = np.zeros_like(emb)
        d[0, t] = E[j] - E[x[0, t]]
        h = 1e-3
        fd = (loss(emb + h * d) - loss(emb - h * d)) / (2 * h)
        assert fd == pytest.approx(g, rel=2e-2, abs=1e-5)


def test_one_substitution_with_full_rescoring_is_the_best_single_swap(setup):
    """Budget 1 and every pair tried for real: the result is the best single synonym
    substitution (brute force over the model; no reader filter) when it raises the loss, else
    the seed itself."""
    model, lex, x, y = setup
    gen = _gen("synonym-gradient", setup, max_changes=1, rescore=1000, constraints="none")
    res = gen.generate(x[:4], y[:4])
    for n in range(4):
        pos, syn = gen._pairs(x[n])
        assert len(pos) <= 1000
        if len(pos) == 0:
            np.testing.assert_array_equal(res.x_gen[n], x[n])
            continue
        trials = np.repeat(x[n:n + 1], len(pos) + 1, axis=0)     # every swap, then the seed
        trials[np.arange(len(pos)), pos] = syn
        p = model.predict(trials, verbose=0)[:, 0]
        loss = -np.log(np.clip(np.where(y[n] == 1, p, 1 - p), 1e-7, 1))
        got = model.predict(res.x_gen[n:n + 1], verbose=0)[0, 0]
        got = -np.log(np.clip(got if y[n] == 1 else 1 - got, 1e-7, 1))
        assert int((res.x_gen[n] != x[n]).sum()) <= 1
        if loss[-1] > np.log(2):                  # predicted wrong: no seed, left alone
            np.testing.assert_array_equal(res.x_gen[n], x[n])
            continue
        # the best swap's loss (swaps tied within float error are equally right), or the seed
        np.testing.assert_allclose(got, loss.max(), rtol=1e-4, atol=1e-6)


def test_adversarial_reviews_keep_only_the_edits_the_flip_needs(setup):
    """After a flip, substitutions the flip does not need are given back: undoing any one
    that is left brings the seed's label back (for reviews with two or more)."""
    model, lex, x, y = setup
    gen = _gen("synonym-gradient", setup, max_fraction=0.5, constraints="none")
    res = gen.generate(x, y)
    adv = _oracle(model, x, res.x_gen, y)
    assert adv.any()
    for n in np.flatnonzero(adv):
        pos = np.flatnonzero(res.x_gen[n] != x[n])
        assert len(pos) == res.extras["words_changed"][n]
        if len(pos) < 2:
            continue
        undo = np.repeat(res.x_gen[n:n + 1], len(pos), axis=0)
        undo[np.arange(len(pos)), pos] = x[n, pos]
        p = (gen.predict(undo).argmax(1))
        assert (p == y[n]).all(), n


def test_contribution_objective_and_stop_at_coverage(setup):
    _, lex, x, y = setup
    res = _gen("synonym-gradient", setup, objective="contribution", n_targets=3,
               max_fraction=0.2).generate(x, y)
    assert res.targets.shape == (len(x), 3) and (res.targets >= 0).all()
    assert (res.extras["words_changed"] <= res.extras["budget"]).all()
    res = _gen("eda", setup, stop_at_coverage=True, max_fraction=0.2).generate(x, y)
    assert (res.extras["words_changed"] <= res.extras["budget"]).all()


def test_bad_reviews_and_parameters(setup):
    model, lex, x, y = setup
    empty = x.copy()
    empty[2] = 0
    with pytest.raises(InputError, match="seed review 2 is empty"):
        _gen("eda", setup).generate(empty, y)
    unknown = x.copy()
    unknown[1, -5:] = 2
    unknown[1, :-5] = 0
    with pytest.raises(InputError, match="seed review 1 is made only of words outside"):
        _gen("synonym-gradient", setup).generate(unknown, y)
    with pytest.raises(InputError, match="max_changes"):
        _gen("eda", setup, max_changes=0)
    with pytest.raises(InputError, match="objective"):
        _gen("synonym-gradient", setup, objective="nope")
    with pytest.raises(InputError, match="word ids"):
        _gen("eda", setup).generate(x.astype(np.float32), y)
    import keras
    img = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(2),
                            keras.layers.Dense(1, activation="sigmoid")])
    from rnncon_core.errors import UnsupportedModelError
    from rnncon_core.generate import get_generator
    with pytest.raises(UnsupportedModelError, match="Embedding"):
        get_generator("eda", img, lexicon=lex)


def test_unconstrained_runs_report_failed_checks(setup):
    """constraints='none' (EDA's synonyms): the same checks run, and the summary says how many
    substitutions failed them; the reader runs pass antonym, polarity and number."""
    _, _, x, y = setup
    res = _gen("eda", setup, constraints="none", max_fraction=0.25, seed=4).generate(x, y)
    s = res.summary("tiny")
    assert 0 <= s["valid_adv_rate"] <= s["adv_rate"]
    assert s["checks"]["polarity"] is None or 0 <= s["checks"]["polarity"] <= 1
    with pytest.raises(InputError, match="constraints"):
        _gen("eda", setup, constraints="loose")


def test_registered_in_the_generation_registry():
    from rnncon_core.generate import list_generators
    kinds = list_generators()
    assert kinds["eda"] == "text" and kinds["synonym-gradient"] == "text"


@pytest.mark.slow
def test_text_report_end_to_end(tmp_path):
    """`rnncon report text` on a tiny IMDB-shaped model (500 ids, the 50,000-id vocabulary)."""
    import json

    import keras
    from typer.testing import CliRunner

    from rnncon_core.cli import app
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((500,), dtype="int32"),
                              keras.layers.Embedding(50_000, 4), keras.layers.LSTM(2),
                              keras.layers.Dense(1, activation="sigmoid")])
    path = tmp_path / "tiny-imdb.keras"
    model.save(path)
    out = CliRunner().invoke(app, ["report", "text", "--models", str(path), "--seeds", "3",
                                   "--out-dir", str(tmp_path / "rep"), "--runs-dir",
                                   str(tmp_path / "runs"), "--json"])
    assert out.exit_code == 0, out.output
    rep = json.loads((tmp_path / "rep" / "text_report.json").read_text())
    assert [(r["method"], r["constraints"], r["params"]) for r in rep["rows"]] == [
        ("eda", "none", {}), ("eda", "reader", {}), ("synonym-gradient", "none", {}),
        ("synonym-gradient", "reader", {}),
        ("synonym-gradient", "reader", {"min_similarity": 0.0, "min_cosine": 0.3})]
    for r in rep["rows"]:
        assert r["n_seeds"] == 3 and 0 <= r["valid_adv_rate"] <= r["adv_rate"] <= 1
        assert set(r["checks"]) == {"antonym", "polarity", "number", "pos", "inflection"}
        assert r["avg_share_changed"] <= 0.10 + 1e-9
        assert r["rconc_after"] >= r["rconc_before"] and r["nc_after"] >= r["nc_before"]
    md = (tmp_path / "rep" / "text_report.md").read_text()
    assert md.startswith("# Text generation") and "valid adversarial" in md
    assert all(len(v) == 3 for v in rep["examples"].values())


@pytest.mark.parametrize("method", ["eda", "synonym-gradient"])
def test_progress_per_seed_inside_one_batch(setup, method):
    """One batch of 8 reviews: progress moves as reviews finish, never back, ends at 8."""
    from rnncon_core.generate import get_generator
    model, lex, x, y = setup
    calls = []
    get_generator(method, model, lexicon=lex, threshold=0.5, batch_size=len(x),
                  max_fraction=0.25, seed=4).generate(x, y, progress=lambda d, t: calls.append(d))
    assert calls == sorted(calls) and calls[-1] == len(x), calls
    assert any(0 < d < len(x) for d in calls), calls
