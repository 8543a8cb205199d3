"""EDA's four operations, WordNet synonyms, the word diff and the display helper."""
from __future__ import annotations

import os
import stat
from collections import Counter

import numpy as np
import pytest

from rnncon_core.data import OOV, PAD, START, Vocabulary
from rnncon_core.errors import InputError
from rnncon_core.text import display
from rnncon_core.textdiff import align, words_changed
from rnncon_core.text.eda import (EDA, UNK, Lexicon, random_deletion, random_insertion,
                                  random_swap, stop_words, synonym_replacement)
from rnncon_core.text.wordnet import WORDNET_DIR, wordnet_available

needs_wordnet = pytest.mark.skipif(
    not wordnet_available(),
    reason=f"WordNet data missing in {WORDNET_DIR}: run .venv/bin/python scripts/setup_wordnet.py")

SENTENCES = [
    "the movie was good and the acting was terrible but the story is great fun",
    "i hated this film because the plot was awful and the ending was sad",
]
EXTRA = ("film picture flick awful dreadful bad beneficial nice fine tale narrative "
         "excellent big playing performing wonderful").split()


@pytest.fixture(scope="module")
def lexicon():
    if not wordnet_available():
        pytest.skip(f"WordNet data missing in {WORDNET_DIR}: run "
                    f".venv/bin/python scripts/setup_wordnet.py")
    from rnncon_core.text.wordnet import synonym_table
    words = sorted({w for s in SENTENCES for w in s.split()} | set(EXTRA))
    vocab = Vocabulary(words, num_words=len(words) + 3)
    return Lexicon(vocab, synonym_table(vocab.words, cache=False))


# ---------------------------------------------------------------- WordNet

@needs_wordnet
def test_wordnet_copy_is_lf_and_private():
    for f in ("lexnames", "data.noun", "index.sense"):
        assert b"\r\n" not in (WORDNET_DIR / f).read_bytes()[:200_000]
    for path in [WORDNET_DIR, WORDNET_DIR.parent, WORDNET_DIR.parent.parent,
                 *WORDNET_DIR.iterdir()]:
        mode = os.stat(path).st_mode
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH), path


@needs_wordnet
def test_install_is_idempotent():
    from rnncon_core.text.wordnet import install_wordnet
    before = {p.name: p.stat().st_mtime_ns for p in WORDNET_DIR.iterdir()}
    msgs = []
    assert install_wordnet(log=msgs.append) == WORDNET_DIR
    assert "already installed" in msgs[0]
    assert {p.name: p.stat().st_mtime_ns for p in WORDNET_DIR.iterdir()} == before


@needs_wordnet
def test_synonyms_come_from_wordnet_and_are_in_vocabulary(lexicon):
    from rnncon_core.text.wordnet import load_wordnet, wordnet_synonyms
    wn = load_wordnet()
    assert "film" in wordnet_synonyms("movie")
    lemmas = lambda w: {l.lower() for s in wn.synsets(w) for l in s.lemma_names()}  # noqa: E731
    assert lexicon.table, "no synonyms found"
    for word, syns in lexicon.table.items():
        assert word not in syns
        for s in syns:
            assert s in lexicon.vocab and " " not in s
            assert s in lemmas(word), (word, s)
    assert set(lexicon.synonyms("movie")) >= {"film", "picture", "flick"}


# ---------------------------------------------------------------- the four operations

def test_stop_words_are_sklearns():
    sw = stop_words()
    assert len(sw) == 318 and {"the", "and", "was", "is"} <= sw


@needs_wordnet
def test_synonym_replacement_never_touches_stop_words(lexicon):
    words = SENTENCES[0].split()
    for seed in range(40):
        out = synonym_replacement(words, 3, np.random.default_rng(seed), lexicon)
        assert len(out) == len(words)
        diff = [(a, b) for a, b in zip(words, out) if a != b]
        assert 1 <= len(diff) <= 3
        for a, b in diff:
            assert not lexicon.is_stop(a)
            assert b in lexicon.synonyms(a)
    # only stop words: nothing can change
    only_stop = "the and was is but".split()
    assert synonym_replacement(only_stop, 3, np.random.default_rng(0), lexicon) == only_stop


@needs_wordnet
def test_random_insertion_adds_synonyms_of_non_stop_words(lexicon):
    words = SENTENCES[1].split()
    for seed in range(30):
        out = random_insertion(words, 2, np.random.default_rng(seed), lexicon)
        assert len(out) == len(words) + 2
        # the original words stay in order: out minus the inserted words is the input
        extra = Counter(out) - Counter(words)
        assert sum(extra.values()) == 2
        it = iter(out)
        assert all(w in it for w in words)
        # every inserted word is a synonym of some non-stop word of the review (or of a word
        # inserted before it)
        pool = {s for w in out if not lexicon.is_stop(w) for s in lexicon.synonyms(w)}
        assert set(extra) <= pool


def test_random_swap_keeps_the_multiset():
    words = SENTENCES[0].split()
    for seed in range(30):
        out = random_swap(words, 3, np.random.default_rng(seed))
        assert Counter(out) == Counter(words)
        assert out != words or seed > 100
    assert random_swap(["one"], 3, np.random.default_rng(0)) == ["one"]


def test_random_deletion_never_empties_a_review():
    words = SENTENCES[0].split()
    for seed in range(30):
        out = random_deletion(words, 1.0, np.random.default_rng(seed))
        assert len(out) == 1 and out[0] in words
        out = random_deletion(words, 0.3, np.random.default_rng(seed))
        assert 1 <= len(out) <= len(words)
        it = iter(words)
        assert all(w in it for w in out)          # a subsequence
    assert random_deletion(words, 0.0, np.random.default_rng(0)) == words
    assert random_deletion(["alone"], 1.0, np.random.default_rng(0)) == ["alone"]


@needs_wordnet
def test_augment_is_seeded_and_uses_every_operation(lexicon):
    eda = EDA(lexicon, n_aug=8, seed=7)
    a = eda.augment_words(SENTENCES[0].split())
    b = EDA(lexicon, n_aug=8, seed=7).augment_words(SENTENCES[0].split())
    c = EDA(lexicon, n_aug=8, seed=8).augment_words(SENTENCES[0].split())
    assert a == b and a != c
    assert len(a) == 8
    assert {op for op, _ in a} == {"sr", "ri", "rs", "rd"}      # equal shares of the four
    assert eda.augment(SENTENCES[0]) == [" ".join(w) for _, w in a]
    # alpha 0 switches an operation off
    only_swap = EDA(lexicon, alpha_sr=0, alpha_ri=0, p_rd=0, n_aug=4, seed=0)
    assert {op for op, _ in only_swap.augment_words(SENTENCES[0].split())} == {"rs"}


@needs_wordnet
def test_bad_reviews_and_parameters_give_clear_errors(lexicon):
    eda = EDA(lexicon, seed=0)
    with pytest.raises(InputError, match="empty"):
        eda.augment("")
    with pytest.raises(InputError, match="empty"):
        eda.augment("<br /> !!! ...")
    with pytest.raises(InputError, match="outside the model's vocabulary"):
        eda.augment("zyxxq blorptastic qwertyuiop")
    with pytest.raises(InputError, match="alpha_sr"):
        EDA(lexicon, alpha_sr=1.5)
    with pytest.raises(InputError, match="switched off"):
        EDA(lexicon, alpha_sr=0, alpha_ri=0, alpha_rs=0, p_rd=0)
    with pytest.raises(InputError, match="n_aug"):
        EDA(lexicon, n_aug=0)


@needs_wordnet
def test_ids_round_trip_keeps_oov_and_start(lexicon):
    v = lexicon.vocab
    words = ["the", "movie", "zyxxq", "was", "good"]
    row = lexicon.ids_of(words, True, maxlen=8)
    assert row.tolist()[:2] == [PAD, PAD] and row[2] == START and row[5] == OOV
    back, had_start = lexicon.words_of(row)
    assert had_start and back == ["the", "movie", UNK, "was", "good"]
    assert lexicon.ids_of(back, had_start, 8).tolist() == row.tolist()
    # a review cut at the front has no start mark and is rebuilt the same way
    cut = np.array([v.word_id(w) for w in ["movie", "was", "good"]])
    w2, s2 = lexicon.words_of(cut)
    assert not s2 and lexicon.ids_of(w2, s2, 3).tolist() == cut.tolist()


# ---------------------------------------------------------------- diff and display

def _levenshtein(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[-1]


def test_words_changed_counts_each_edit():
    a = "a b c d e f".split()
    assert words_changed(a, a) == 0
    assert words_changed(a, "a X c d e f".split()) == 1
    assert words_changed(a, "a b c d e f g".split()) == 1
    assert words_changed(a, "a c d e f".split()) == 1
    assert words_changed(a, "e b c d a f".split()) == 2          # one swap
    # id arrays: padding (0) and the start mark (1) are not words
    assert words_changed(np.array([0, 0, 1, 5, 6, 7]), np.array([0, 1, 5, 9, 7])) == 1
    rng = np.random.default_rng(0)
    for _ in range(300):             # the edit distance, against a plain-Python oracle
        x = rng.choice(list("abcd"), size=rng.integers(0, 9)).tolist()
        y = rng.choice(list("abcd"), size=rng.integers(0, 9)).tolist()
        assert words_changed(x, y) == _levenshtein(x, y), (x, y)
        ops = align(x, y)           # an alignment of that cost that rebuilds y from x
        assert sum(max(i2 - i1, j2 - j1) for t, i1, i2, j1, j2 in ops if t != "equal") \
            == _levenshtein(x, y)
        rebuilt = []
        for t, i1, i2, j1, j2 in ops:
            assert (t == "equal") == (x[i1:i2] == y[j1:j2])
            rebuilt += x[i1:i2] if t == "equal" else y[j1:j2]
        assert rebuilt == y


def test_side_by_side_marks_changed_words():
    seed = "the film was good & fun".split()
    gen = "the movie was good fun indeed".split()
    view = display.side_by_side(seed, gen)
    assert [w["word"] for w in view["seed"]] == seed
    assert [w["word"] for w in view["generated"]] == gen
    status = {w["word"]: w["status"] for w in view["seed"]}
    assert status["film"] == "replaced" and status["&"] == "deleted" and status["the"] == "same"
    gstatus = {w["word"]: w["status"] for w in view["generated"]}
    assert gstatus["movie"] == "replaced" and gstatus["indeed"] == "inserted"
    assert view["words_changed"] == words_changed(seed, gen) == 3
    html = display.to_html(view)
    assert "&amp;" in html and "<span" in html and "3 of 6 words changed" in html
    assert align(seed, gen)[0][0] == "equal"


@needs_wordnet
def test_ids_side_by_side(lexicon):
    a = lexicon.ids_of("the movie was good".split(), True, 6)
    b = lexicon.ids_of("the film was good".split(), True, 6)
    view = display.ids_side_by_side(lexicon, a, b)
    assert view["words_changed"] == 1 and view["n_words"] == 4


@needs_wordnet
def test_side_by_side_marks_failed_checks():
    seed = "the acting was amazing and i rate it 8 10".split()
    gen = "the acting was awful and i rate it 8 decade".split()
    view = display.side_by_side(seed, gen, checked=True)
    assert view["valid"] is False and view["failed_edits"] == 2
    by_word = {it["word"]: it.get("failed") for it in view["generated"]}
    assert "polarity" in by_word["awful"] and "number" in by_word["decade"]
    assert by_word["the"] is None
    html = display.to_html(view)
    assert "✗" in html and "failed a check" in html
    ok = display.side_by_side("a good movie".split(), "a good film".split(), checked=True)
    assert ok["valid"] and "passed the checks" in display.to_html(ok)


def test_text_report_markdown_leads_with_the_valid_rate():
    from rnncon_core.reports.text import _markdown
    checks = dict.fromkeys(("antonym", "polarity", "number", "pos", "inflection"), 1.0)
    row = {"model": "/tmp/x/tiny.keras", "method": "synonym-gradient", "constraints": "reader",
           "label": "synonym-gradient, reader constraints", "n_seeds": 4, "n_adversarial": 2,
           "adv_rate": 0.5, "n_valid_adversarial": 1, "valid_adv_rate": 0.25,
           "n_adversarial_safe": 1, "substitutions_safe": 1.0, "n_substitutions_rejected": 0,
           "n_substitutions": 7, "checks": checks, "avg_words_changed": 2.0,
           "avg_share_changed": 0.05, "rconc_before": 0.2, "rconc_after": 0.3,
           "nc_before": 0.5, "nc_after": 0.6, "seconds_per_input": 1.5}
    ex = [{"seed_index": 3, "adversarial": True, "valid": False, "inserted": [],
           "edits": [{"text": "… a [good → bad] movie …", "failed": ["antonym", "polarity"]}]}]
    md = _markdown({"n_seeds": 4, "max_fraction": 0.1, "max_changes": None, "threshold": 0.5,
                    "seconds": 12.0, "rows": [row], "targets": [],
                    "examples": {"/tmp/x/tiny.keras/synonym-gradient, reader constraints": ex}})
    table_row = next(line for line in md.splitlines() if line.startswith("| /tmp/x/tiny"))
    assert "**1/4 (25.0 %)**" in table_row.split("|")[3]        # the valid rate comes first
    assert "0 of 7 rejected" in table_row
    assert "[good → bad] movie … ✗ antonym, polarity" in md and "INVALID" in md


def test_a_text_result_without_the_generators_count_uses_the_one_words_changed():
    """GenerationResult's fallback (a text generator that gives no ``words_changed``) counts
    as textdiff does: an inserted word shifting the rest counts 1, not every shifted id."""
    from rnncon_core.generate.base import GenerationResult
    seed = np.array([[0, 1, 5, 6, 7, 8], [0, 1, 5, 6, 7, 8]])
    gen = np.array([[1, 9, 5, 6, 7, 8], [0, 1, 5, 6, 7, 9]])       # one insertion, one substitution
    z = np.zeros(2, int)
    res = GenerationResult("x", "text", seed, z, gen, z.astype(bool), z, z, z.astype(float),
                           z, np.full((2, 1), -1), z - 1, 1.0)
    assert res.words_changed().tolist() == [1, 1]
    assert res.summary()["avg_words_changed_all"] == 1.0
