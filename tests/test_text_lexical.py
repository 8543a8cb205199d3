"""The reader checks on hand-made examples: antonyms, polarity, numbers, part of speech,
inflection, protected words; substitutes that pass them; EDA's reader-mode operations."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.text.wordnet import WORDNET_DIR, wordnet_available

pytestmark = pytest.mark.skipif(
    not wordnet_available(),
    reason=f"WordNet data missing in {WORDNET_DIR}: run .venv/bin/python scripts/setup_wordnet.py")

from rnncon_core.text import lexical as L  # noqa: E402

VOCAB = set(("movie film picture flick story tale plot hoping trusting trust hope wish hop hopping caper "
             "amazing awesome awful incredible astonishing good bad evil fine nice great "
             "workers play fun prank joke bored tired tire delivers returns return delivered "
             "prepared ready fixed disposed standards criteria touchstone obviously evidently "
             "plainly extremely highly exceedingly passing four foursome ten decade george "
             "not never really very quite the a and was is of it this").split())
# for the context and related-synset tests only (a separate vocabulary: the fixture's lists
# above stay as they are)
VOCAB_CONTEXT = VOCAB | set("tract patch strategy scheme beautiful gorgeous splendid lovely "
                            "tale told informed hotel building often frequently perhaps maybe "
                            "show found".split())


@pytest.fixture(scope="module")
def subs():
    from rnncon_core.text.lexical import stop_words
    return L.Substitutes(VOCAB, stop_words(), names={"george"}, min_similarity=0.0,
                         max_candidates=50)


def test_antonyms_are_rejected():
    assert L.are_antonyms("good", "bad") and L.are_antonyms("bad", "good")
    assert L.are_antonyms("good", "evil")
    assert not L.are_antonyms("movie", "film")
    res = L.check_substitution("good", "bad", "JJ", "JJ")
    assert not res["antonym"] and not res["polarity"]


def test_polarity_swaps_are_rejected():
    assert L.polarity("amazing") == 1 and L.polarity("awful") == -1
    assert L.polarity("utter") == 0 and L.polarity("movie") == 0
    assert L.polarity("not") == L.polarity("didn't") == -2      # negations are never neutral
    for old, new in [("amazing", "awful"), ("utter", "perfect"), ("just", "good")]:
        assert not L.check_substitution(old, new, "JJ", "JJ")["polarity"], (old, new)
    assert L.check_substitution("movie", "film", "NN", "NN") == dict.fromkeys(L.CHECKS, True)


def test_numbers_and_ratings_are_never_touched(subs):
    for w in ("10", "4", "7", "four", "ten", "xxx", "30", "first"):
        assert L.is_number(w), w
    for w in ("movie", "mix", "civil", "good"):
        assert not L.is_number(w), w
    res = L.check_edits("i rate it 4 10".split(), "i rate it foursome 10".split())
    assert "number" in res["edits"][0]["failed"] and not res["valid"]
    res = L.check_edits("i rate it 4 10".split(), "i rate it 4 decade".split())
    assert "number" in res["edits"][0]["failed"]
    assert subs("4", "CD") == [] and subs("ten", "NN") == []


def test_inflection_is_kept():
    assert L.inflect("wish", "VBG") == "wishing"
    assert L.inflect("tire", "VBN") == "tired"
    assert L.inflect("criterion", "NNS") == "criteria"
    assert L.inflection_ok("wishing", "VBG") and L.inflection_ok("hopping", "VBG")
    assert not L.inflection_ok("hop", "VBG") and not L.inflection_ok("wish", "VBG")
    assert not L.inflection_ok("prepare", "VBN") and L.inflection_ok("prepared", "VBN")
    assert not L.inflection_ok("touchstone", "NNS") and L.inflection_ok("criteria", "NNS")
    assert not L.inflection_ok("return", "VBZ") and L.inflection_ok("returns", "VBZ")
    for old, new, tag in [("hoping", "hop", "VBG"), ("bored", "tire", "VBN"),
                          ("delivers", "return", "VBZ"), ("prepared", "prepare", "VBN")]:
        assert not L.check_substitution(old, new, tag, tag)["inflection"], (old, new)


def test_part_of_speech_in_context():
    words = "a few of the workers play a prank on him".split()
    tags = L.pos_tags(words)
    assert len(tags) == len(words)
    assert tags[4] == "NNS" and tags[5].startswith("VB") and tags[7] == "NN"
    res = L.check_edits(words, "a few of the workers fun a prank on him".split())
    assert res["n_substitutions"] == 1 and "pos" in res["edits"][0]["failed"]
    assert not L.check_edits(words, "a few of the workers play a joke on him".split())["valid"]
    ok = L.check_edits(words, "a few of the workers play a caper on him".split())
    assert ok["valid"] and ok["passed"]["pos"] == [1, 1]
    assert L.pos_tags([]) == [] and L.pos_tags(["<unk>", "movie"])[0].startswith("NN")


def test_insertions_and_deletions_are_checked():
    seed = "the movie was not good".split()
    res = L.check_edits(seed, "the movie was good".split())            # a negation deleted
    assert res["edits"] == [{"kind": "deletion", "old": "not", "new": None, "position": 3,
                             "tag": res["edits"][0]["tag"], "failed": ["polarity"]}]
    assert not L.check_edits(seed, "the awful movie was not good".split())["valid"]
    assert L.check_edits(seed, "the movie was really not good".split())["valid"]
    # a polar word coordinated with a word of its own polarity keeps the reading
    assert L.check_edits("a good movie".split(), "a good and fine movie".split())["valid"]
    assert not L.check_edits("a good movie".split(), "a good and awful movie".split())["valid"]


def test_substitutes_keep_tag_inflection_and_sentiment(subs):
    got = subs.words("hoping", "VBG")        # hope ~ trust, and hoping is no form of hop
    assert "trusting" in got and "hop" not in got and "hope" not in got and "trust" not in got
    assert all(w.endswith("ing") for w in got)
    for w in subs.words("amazing", "JJ"):
        assert L.polarity(w) == 1 and not L.are_antonyms("amazing", w)
    assert "awful" not in subs.words("amazing", "JJ")
    assert "bad" not in subs.words("good", "JJ") and "evil" not in subs.words("good", "JJ")
    assert subs.words("standards", "NNS") == ["criteria"]
    assert "film" in subs.words("movie", "NN")
    assert subs.words("bored", "VBN") == ["tired"]
    assert subs("movie", "VB") == []                  # no verb senses: nothing
    # protected: stop words, negations, names, numbers, words outside the vocabulary
    for w, t in [("the", "DT"), ("not", "RB"), ("never", "RB"), ("george", "NN"),
                 ("four", "CD"), ("zyxxq", "NN")]:
        assert subs(w, t) == [], w
    # ranked by the WordNet sense similarity, best first, and every pair passes every check
    for w, t in [("movie", "NN"), ("hoping", "VBG"), ("obviously", "RB"), ("extremely", "RB")]:
        scores = [s for _, s in subs(w, t)]
        assert scores == sorted(scores, reverse=True)
        for new in subs.words(w, t):
            res = L.check_substitution(w, new, t, t)
            assert all(res[c] for c in ("antonym", "polarity", "number", "inflection")), (w, new)


def test_similarity_prefers_the_common_sense():
    from rnncon_core.text.lexical import stop_words
    s = L.Substitutes(VOCAB, stop_words())                 # the default threshold
    assert s.words("extremely", "RB")[:1] == ["highly"]
    assert "passing" not in s.words("extremely", "RB")   # an adverb only in a rare sense


def test_context_weights_the_senses():
    """Simplified Lesk: the words around a word move its substitutes towards the sense they
    share a gloss with (plot of land -> patch; not so for the plot of a movie)."""
    from rnncon_core.text.lexical import stop_words
    s = L.Substitutes(VOCAB_CONTEXT, stop_words(), min_similarity=0.0, max_candidates=50)
    land = "they bought a small plot of land to grow vegetables".split()
    movie = "the plot of the movie was weak and the story dull".split()
    none = dict(s("plot", "NN"))
    by_land = dict(s("plot", "NN", s.context(land, 4)))
    by_movie = dict(s("plot", "NN", s.context(movie, 1)))
    assert "land" in s.context(land, 4) and "plot" not in s.context(land, 4)
    assert by_land["patch"] > none["patch"] and by_movie["patch"] < none["patch"]
    assert max(by_land, key=by_land.get) == "patch"
    assert s("plot", "NN", frozenset()) == s("plot", "NN")        # no context: the prior


def test_similar_adjectives_and_verb_hypernyms_are_candidates_noun_hypernyms_not():
    """WordNet's similar adjectives (beautiful -> gorgeous) and a verb's hypernym (told ->
    informed) count at half their sense's weight; a noun's hypernym does not (hotel ->
    building: read by hand, 6 of 35 noun hypernyms were acceptable); every candidate still
    passes the checks."""
    from rnncon_core.text.lexical import stop_words
    s = L.Substitutes(VOCAB_CONTEXT, stop_words(), min_similarity=0.0, max_candidates=50)
    wn = L._wn()
    assert "gorgeous" not in wn.synset("beautiful.a.01").lemma_names()
    assert "gorgeous" in s.words("beautiful", "JJ")
    assert "informed" not in {n for syn in wn.synsets("tell", "v") for n in syn.lemma_names()}
    assert "informed" in s.words("told", "VBD")
    assert "building" in wn.synset("hotel.n.01").hypernyms()[0].lemma_names()
    assert "building" not in s.words("hotel", "NN")
    for w, t in (("beautiful", "JJ"), ("told", "VBD"), ("tale", "NN")):
        for new in s.words(w, t):
            assert L.polarity(new) == L.polarity(w) and not L.are_antonyms(w, new), (w, new)
    strict = L.Substitutes(VOCAB_CONTEXT, stop_words())       # the default threshold
    assert all(sc >= L.MIN_SIMILARITY for _, sc in strict("beautiful", "JJ"))


def test_content_stop_words_may_be_replaced_function_words_not():
    """scikit-learn's stop words hold content adverbs (often, perhaps): they get substitutes;
    its nouns and verbs (show, found) and the function words stay protected."""
    from rnncon_core.text.lexical import stop_words
    s = L.Substitutes(VOCAB_CONTEXT, stop_words())
    assert {"often", "perhaps", "show", "found", "the"} <= stop_words()
    assert "frequently" in s.words("often", "RB")
    assert "maybe" in s.words("perhaps", "RB")
    for w, t in (("show", "NN"), ("found", "VBD"), ("the", "DT"), ("very", "RB")):
        assert s.protected(w) and s(w, t) == [], w
    assert "often" not in s.words("frequently", "RB") or "often" in L.REPLACEABLE_STOP_WORDS
    for w, t in (("whole", "JJ"), ("many", "JJ")):      # whole -> total, so many -> so numerous
        assert s.protected(w) and s(w, t) == [], w


def _vectors(pairs: dict[tuple[str, str], float]):
    """CorpusVectors whose cosines are exactly ``pairs`` (2-d unit vectors at set angles from
    the first word of each pair)."""
    from rnncon_core.text.vectors import CorpusVectors
    words = sorted({w for pair in pairs for w in pair})
    index = {w: i for i, w in enumerate(words)}
    vec = np.zeros((len(words), 2), np.float32)
    for (a, b), c in pairs.items():
        vec[index[a]] = (1.0, 0.0)
        vec[index[b]] = (c, np.sqrt(1.0 - c * c))
    return CorpusVectors(vec, index)


def test_min_cosine_keeps_only_substitutes_used_alike_and_ranks_by_it():
    from rnncon_core.text.lexical import stop_words
    base = L.Substitutes(VOCAB, stop_words(), min_similarity=0.0, max_candidates=50)
    assert {"film", "flick"} <= set(base.words("movie", "NN"))
    vec = _vectors({("movie", "film"): 0.8, ("movie", "flick"): 0.1, ("movie", "picture"): 0.5})
    s = L.Substitutes(VOCAB, stop_words(), min_similarity=0.0, max_candidates=50, vectors=vec,
                      min_cosine=0.3)
    assert s("movie", "NN") == [("film", 0.8), ("picture", 0.5)]
    # an antonym only from the substitute's side (laying -> lay, whose antonym is sit) is
    # dropped too, as check_edits rejects it
    vocab = VOCAB | {"sitting", "laying", "seated"}
    sit = L.Substitutes(vocab, stop_words(), min_similarity=0.0, max_candidates=50,
                        vectors=_vectors({("sitting", "laying"): 0.9, ("sitting", "seated"): 0.5}),
                        min_cosine=0.3)
    assert L.are_antonyms("sitting", "laying") and "laying" not in sit.words("sitting", "VBG")
    with pytest.raises(ValueError, match="vectors"):
        L.Substitutes(VOCAB, stop_words(), min_cosine=0.3)


def test_corpus_vectors_from_co_occurrences():
    """Words that share their neighbours get a high cosine, words that never do a low one."""
    from rnncon_core.text.vectors import CorpusVectors
    rng = np.random.default_rng(0)
    # ids 3..6: "good" and "fine" both follow "very" and precede "film"; 7..10 another topic
    words = ["very", "good", "fine", "film", "red", "blue", "car", "paint"]
    index = {w: i + 3 for i, w in enumerate(words)}
    rows = []
    for _ in range(400):
        if rng.random() < 0.5:
            rows.append([index["very"], index[rng.choice(["good", "fine"])], index["film"]] * 3)
        else:
            rows.append([index["car"], index[rng.choice(["red", "blue"])], index["paint"]] * 3)
    vec = CorpusVectors.build(np.array(rows), index, num_ids=len(words) + 3, dims=4)
    assert vec.cosine("good", "fine") > 0.8
    assert vec.cosine("good", "blue") < 0.3
    assert vec.cosine("good", "unknown") == 0.0
    assert np.allclose(np.linalg.norm(vec.vectors[3:], axis=1), 1.0, atol=1e-5)


def test_names_from_texts():
    texts = ["We saw Matt and the dog today. Matt left.", "Later matt came back with Kyle.",
             "Kyle and Matt. The Dog was fine.", "Another dog met Kyle and a dog."]
    names = L.names_from_texts(texts, min_count=2)
    assert names >= {"matt", "kyle"} and "dog" not in names and "the" not in names


def test_reader_eda_operations():
    from rnncon_core.data import Vocabulary
    from rnncon_core.text.eda import Lexicon, random_deletion, random_insertion, random_swap, \
        synonym_replacement
    words = sorted(VOCAB)
    lex = Lexicon(Vocabulary(words, num_words=len(words) + 3), table={})
    review = "the movie was amazing and the story was really good but the workers play".split()
    tags = L.pos_tags(review)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        out = synonym_replacement(review, 3, rng, lex, reader=True)
        assert len(out) == len(review)
        for a, b, t in zip(review, out, tags):
            if a != b:
                assert b in lex.substitutes.words(a, t)
        out = random_insertion(review, 1, rng, lex, reader=True)
        res = L.check_edits(review, out)
        assert res["valid"] and {e["kind"] for e in res["edits"]} <= {"insertion"}
        out = random_swap(review, 2, rng, lex, reader=True)
        assert sorted(out) == sorted(review)
        assert L.check_edits(review, out)["passed"]["polarity"][0] == \
            L.check_edits(review, out)["passed"]["polarity"][1]
        out = random_deletion(review, 0.5, rng, lex, reader=True)
        assert set(review) - set(out) <= {"really"}


def test_an_unequal_replaced_block_pairs_words_at_the_best_offset():
    res = L.check_edits("it was really good fun".split(), "it was fine fun".split())
    kinds = sorted((e["kind"], e["old"], e["new"]) for e in res["edits"])
    assert kinds == [("deletion", "really", None), ("substitution", "good", "fine")]
    assert res["valid"]
    # the aligner may put the inserted words before the equal one: "[terrible and] terrible"
    res = L.check_edits("a terrible story".split(), "a terrible and terrible story".split())
    assert res["valid"], res["edits"]
