"""Text substitutes a reader accepts: only words seen often enough in the training reviews,
never inside a multi-word name ("Family Guy" is not "household guy")."""
from rnncon_core.text.lexical import Substitutes, name_pairs_from_texts
from rnncon_core.text.wordnet import wordnet_available
import pytest

needs_wordnet = pytest.mark.skipif(not wordnet_available(), reason="WordNet is not installed")


def test_name_pairs_are_capitalised_inside_sentences_most_of_the_time():
    texts = ["I watched Family Guy again. My family guy friend laughed."] + \
        ["Then Family Guy was on, and Star Wars too."] * 3 + \
        ["Family reunions are fun, the family guy said."]
    pairs = name_pairs_from_texts(texts, min_count=3)
    assert ("family", "guy") in pairs and ("star", "wars") in pairs
    assert ("my", "family") not in pairs


@needs_wordnet
def test_substitutes_only_common_words_and_never_inside_a_name():
    vocab = {"tip", "bakshis", "point", "end", "family", "guy", "household", "fellow", "love"}
    free = Substitutes(vocab)
    common = Substitutes(vocab, common=vocab - {"bakshis"},
                         name_pairs={("family", "guy")})
    assert "bakshis" in free.words("tip", "NN")          # WordNet lists it: rare in reviews
    assert "bakshis" not in common.words("tip", "NN")
    review = ["i", "love", "family", "guy"]
    assert common.in_name(review, 2) and common.in_name(review, 3)
    assert not common.in_name(["my", "family", "is", "here"], 1)
