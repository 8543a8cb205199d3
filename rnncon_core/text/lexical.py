"""Substitutions a reader would accept, and the checks that say whether one is.

A generated review is a test input only if a reader would still give it the seed's label. This
module decides which word may replace which, in context, and checks every edit afterwards:

- **Part of speech** comes from a real tagger that installs offline with its model inside the
  package: TextBlob's ``PatternTagger`` (``textblob==0.20.1``, MIT; the Brill-style lexicon and
  context rules of CLiPS Pattern, trained on the Penn Treebank, shipped as
  ``textblob/en/en-lexicon.txt`` and ``en-context.txt``). It reads the model's own tokens (lower
  case, punctuation dropped), so it is less accurate than on raw text.
- **Candidates** for a word tagged ``t`` are the lemma names of its WordNet synsets of ``t``'s
  part of speech (the word's lemma from WordNet's ``morphy``) and, at half their sense's weight
  (``RELATED_WEIGHT``), of the synsets WordNet relates to them: similar adjectives
  (beautiful -> gorgeous, interesting -> fascinating) and the hypernyms of verbs
  (told -> informed, loaded -> filled; not of nouns: read by hand, 6 of 35 noun hypernyms
  were acceptable, episode -> occurrence, hotel -> building); single lower-case words only
  (capitalized lemmas are names), **re-inflected** to ``t`` with ``lemminflect==0.2.3`` (lookup
  tables from the NIH SPECIALIST lexicon: hoping/VBG -> wishing, not wish), kept only when that
  form is a word of the model's vocabulary.
- **Similarity** (not from the model under test): the probability that the word and the
  candidate, each read in its own likely sense, mean the same synset:
  ``sum_s P(s | word) * P(s | candidate)``, where ``P(s | w)`` is proportional to WordNet's
  SemCor tag count of ``w`` in ``s`` plus ``1 / (rank of s among w's senses + 1)`` (WordNet
  orders senses by frequency; the second term covers words SemCor never tagged), over the
  word's senses of its tagged part of speech but over all of the candidate's senses (a word
  that is mostly an adjective makes an odd adverb: extremely -> passing). In a review, the
  word's sense weights are multiplied by ``exp(overlap)``, the overlap being the number of
  lemmas its gloss, examples and related synsets' names share with the content words within
  ``LESK_WINDOW`` words of it (simplified Lesk, Kilgarriff & Rosenzweig 2000): plot of land ->
  patch (in "a small plot of land"). Candidates below ``min_similarity`` are dropped.
- **Sentiment**: a candidate whose polarity in the VADER lexicon (``vaderSentiment==3.3.2``,
  MIT, Hutto & Gilbert 2014: 7,500 words rated -4..4 by people) differs from the word's is
  dropped (a rating of at least 0.5 in magnitude counts as polar, anything else or absent as
  neutral), and so is any WordNet antonym (direct, and for adjectives the antonyms' similar
  adjectives: "good" -> "bad", "evil", ...).
- **Protected words** are never replaced and never inserted: stop words (scikit-learn's list,
  less ``REPLACEABLE_STOP_WORDS``: the content adverbs, adjectives and verbs in it that have
  substitutes a reader accepts, such as often -> frequently, perhaps -> maybe, seemed ->
  appeared; not whole or many: whole -> total, so many -> so numerous read badly; its nouns
  and verbs such as show, part, found are kept
  protected), negations, numbers
  (digits as in the "7 10" of a "7/10" rating, number words, and any word WordNet lists with a
  digit form, such as "xxx" = 30), and names (words written with a capital inside sentences in
  most of their occurrences in the training reviews, when those are at hand; lemmas WordNet
  spells with a capital).

:func:`check_edits` applies the same checks to any seed/generated pair after the fact, whatever
made it: every substitution is checked for antonym, polarity, number, part of speech (the
generated review re-tagged at that position: noun, verb, adjective, adverb or the same other
tag) and inflection (the new word is a form of its own lemma with the old word's tag: the fine
tag, since the tagger reads VB and VBP, VBD and VBN of one form as the context suggests); every
inserted or deleted word for polarity and number (adding or removing a polar word or a negation
can change the label; a polar word inserted as "X and Y" after a word X of its own polarity
keeps it).
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import lru_cache
from importlib.resources import files
from typing import Sequence

from .. import paths
from ..data import imdb_texts, tokenize
from ..errors import DataMissingError
from ..io import atomic_write_text
from ..textdiff import align
from .wordnet import load_wordnet, vocab_key

PENN_TO_WN = {"NN": "n", "NNS": "n", "VB": "v", "VBD": "v", "VBG": "v", "VBN": "v",
              "VBP": "v", "VBZ": "v", "JJ": "a", "JJR": "a", "JJS": "a",
              "RB": "r", "RBR": "r", "RBS": "r"}


def stop_words() -> frozenset[str]:
    """scikit-learn's ENGLISH_STOP_WORDS (318 words)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return frozenset(ENGLISH_STOP_WORDS)


UPOS = {"n": "NOUN", "v": "VERB", "a": "ADJ", "r": "ADV"}
NEGATIONS = frozenset(("not no never nothing none nobody nowhere neither nor without cannot "
                       "hardly barely scarcely lack lacks lacking").split())
NUMBER_WORDS = frozenset((
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred thousand million billion first second third fourth fifth sixth seventh "
    "eighth ninth tenth half quarter dozen once twice single double triple").split())
POLARITY_BAND = 0.5          # |VADER rating| below this counts as neutral
CHECKS = ("antonym", "polarity", "number", "pos", "inflection")
# below this WordNet sense similarity a substitute is dropped: on 129 substitutions of 10
# imdb-lstm seeds read by hand, 36 % were acceptable at 0.05, 52 % at 0.2 (56 kept)
MIN_SIMILARITY = 0.2
LESK_WINDOW = 10             # words either side that weight a word's senses (simplified Lesk)
RELATED_WEIGHT = 0.5         # share of a sense's weight for a similar adjective or a hypernym
# stop words a reader accepts substitutes for (their candidates pass every check as any word's)
REPLACEABLE_STOP_WORDS = frozenset((
    "afterwards almost also anyway anywhere besides describe everyone former hence however "
    "meanwhile moreover mostly nevertheless often perhaps seem seemed seeming seems "
    "several sincere somehow someone sometimes somewhere therefore thus").split())
_DIGIT = re.compile(r"\d")


# ---------------------------------------------------------------- resources (loaded once)

@lru_cache(maxsize=1)
def _tagger():
    try:
        from textblob.en import tag
    except ImportError as e:      # pragma: no cover - a broken install
        raise DataMissingError("the part-of-speech tagger needs textblob==0.20.1 "
                               "(pip install -r requirements.txt)") from e
    return tag


@lru_cache(maxsize=1)
def vader_lexicon() -> dict[str, float]:
    """VADER's word ratings (mean of ten people's ratings on -4..4), read from the package."""
    try:
        text = (files("vaderSentiment") / "vader_lexicon.txt").read_text(encoding="utf-8")
    except (ImportError, FileNotFoundError, ModuleNotFoundError) as e:
        raise DataMissingError("the sentiment lexicon needs vaderSentiment==3.3.2 "
                               "(pip install -r requirements.txt)") from e
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                continue
    return out


def _wn():
    return load_wordnet()


# ---------------------------------------------------------------- word properties

def pos_tags(words: Sequence[str]) -> list[str]:
    """Penn Treebank tags of the model's tokens, one per word (``<unk>`` read as a noun)."""
    words = list(words)
    if not words:
        return []
    clean = ["unk" if w == "<unk>" else w for w in words]
    tagged = _tagger()(" ".join(clean), tokenize=False)
    if len(tagged) != len(words):       # never expected: the tokens hold no spaces
        tagged = [t for w in clean for t in (_tagger()(w, tokenize=False) or [(w, "NN")])[:1]]
    return [t for _, t in tagged]


def polarity(word: str) -> int:
    """+1, -1 or 0 from the VADER lexicon; a negation is -2 (never equal to a word's)."""
    if word in NEGATIONS or word.endswith("n't"):
        return -2
    v = vader_lexicon().get(word, 0.0)
    return 1 if v >= POLARITY_BAND else -1 if v <= -POLARITY_BAND else 0


@lru_cache(maxsize=200_000)
def is_number(word: str) -> bool:
    """Digits, a number word, or a word WordNet also writes with digits (xxx = 30, iv = 4)."""
    if _DIGIT.search(word) or word in NUMBER_WORDS:
        return True
    return any(_DIGIT.search(name) for s in _wn().synsets(word) for name in s.lemma_names()
               if s.lexname() in ("noun.quantity", "adj.all"))


@lru_cache(maxsize=200_000)
def wordnet_name(word: str) -> bool:
    """WordNet knows the word only as a name (every lemma spelled so is capitalized)."""
    spelled = [l.name() for s in _wn().synsets(word) for l in s.lemmas()
               if l.name().lower() == word]
    return bool(spelled) and all(n != n.lower() for n in spelled)


def _base(word: str, pos: str) -> str:
    return _wn().morphy(word, pos) or word


@lru_cache(maxsize=200_000)
def _sense_weights(lemma: str, pos: str | None) -> dict[str, float]:
    """P(sense | lemma) over the lemma's synsets of one part of speech, or of all of them
    (``pos=None``; ranks then count within each part of speech); see the module doc."""
    w = {}
    for p in (pos,) if pos else "nvar":
        for rank, s in enumerate(_wn().synsets(lemma, p)):
            if s.name() in w:
                continue
            count = sum(l.count() for l in s.lemmas() if l.name().lower() == lemma)
            w[s.name()] = count + 1.0 / (rank + 1)
    total = sum(w.values())
    return {k: v / total for k, v in w.items()} if total else {}


@lru_cache(maxsize=200_000)
def _lemma(word: str) -> str:
    """The word's WordNet base form (any part of speech), or the word."""
    return _wn().morphy(word) or word


@lru_cache(maxsize=100_000)
def _signature(sname: str) -> frozenset[str]:
    """Lesk's signature of a synset: the lemmas of the content words of its gloss and
    examples, and its own and its related synsets' lemma names."""
    s = _wn().synset(sname)
    text = " ".join([s.definition(), *s.examples(),
                     *(n for r in [s, *s.hypernyms(), *s.similar_tos()]
                       for n in r.lemma_names())])
    stop = stop_words()
    return frozenset(_lemma(t) for t in re.findall(r"[a-z]+", text.lower()) if t not in stop)


@lru_cache(maxsize=200_000)
def antonyms(word: str) -> frozenset[str]:
    """WordNet antonyms of any sense of the word (any part of speech), and for adjectives the
    adjectives similar to those antonyms (indirect antonyms)."""
    wn = _wn()
    out = set()
    for pos in "nvar":
        for s in wn.synsets(_base(word, pos), pos):
            for l in s.lemmas():
                for a in l.antonyms():
                    syn = a.synset()
                    out.update(n.lower() for n in syn.lemma_names())
                    if pos == "a":
                        for sim in syn.similar_tos():
                            out.update(n.lower() for n in sim.lemma_names())
    return frozenset(out)


def _lemmas(word: str) -> set[str]:
    return {word} | {_base(word, pos) for pos in "nvar"}


def are_antonyms(a: str, b: str) -> bool:
    return bool((_lemmas(b) & antonyms(a)) or (_lemmas(a) & antonyms(b)))


def inflect(lemma: str, tag: str) -> str | None:
    """The form of ``lemma`` for the Penn tag (single words only), e.g. (wish, VBG) -> wishing."""
    from lemminflect import getInflection
    if tag in ("NN", "VB", "VBP", "JJ", "RB"):
        forms = (lemma,) if tag != "VBP" else getInflection(lemma, tag) or (lemma,)
    else:
        forms = getInflection(lemma, tag, inflect_oov=True)
    forms = [f for f in forms if f.isalpha()]
    return forms[0] if forms else None


def inflection_ok(new: str, tag: str) -> bool:
    """``new`` is the form of its own lemma that the tag asks for (hop is no VBG; hopping is)."""
    pos = PENN_TO_WN.get(tag)
    if pos is None:
        return True                      # no inflection to keep (determiners, numbers, ...)
    from lemminflect import getAllLemmas, getInflection
    lemmas = {l for ls in getAllLemmas(new, UPOS[pos]).values() for l in ls}
    lemmas |= {_base(new, pos), new}
    return any(new in (getInflection(l, tag, inflect_oov=True) or ()) for l in lemmas)


# ---------------------------------------------------------------- names in the training reviews

_SENTENCE_END = re.compile(r"[.!?]\s*$")


def names_from_texts(texts, min_count: int = 3, share: float = 0.5) -> frozenset[str]:
    """Lower-cased words written with a capital inside sentences (not after . ! ? or at the
    start) in at least ``share`` of their ``min_count`` or more such occurrences."""
    word = re.compile(r"[A-Za-z][A-Za-z']*")
    caps, seen = Counter(), Counter()
    for t in texts:
        t = t.replace("<br />", " . ")
        for m in word.finditer(t):
            start = m.start()
            if start == 0 or _SENTENCE_END.search(t[max(0, start - 3):start]):
                continue
            w = m.group()
            low = w.lower()
            seen[low] += 1
            if w[0].isupper():
                caps[low] += 1
    return frozenset(w for w, n in seen.items() if n >= min_count and caps[w] >= share * n)


def imdb_names(vocab_words: Sequence[str]) -> frozenset[str]:
    """Names among the vocabulary's words, from the IMDB training reviews (cached in .cache/);
    empty when the reviews are not installed."""
    path = paths.CACHE_DIR / f"imdb-names-{vocab_key(list(vocab_words))}.json"
    if path.exists():
        return frozenset(json.loads(path.read_text()))
    try:
        texts, _ = imdb_texts("train")
    except Exception:                    # the data package is missing: no names known
        return frozenset()
    known = set(vocab_words)
    names = sorted(names_from_texts(texts) & known)
    paths.ensure_dir(paths.CACHE_DIR)
    atomic_write_text(path, json.dumps(names))
    return frozenset(names)


MIN_COUNT = 5          # a substitute is a word seen at least this often in the training reviews


def name_pairs_from_texts(texts, min_count: int = 3, share: float = 0.5
                          ) -> frozenset[tuple[str, str]]:
    """Lower-cased word pairs written as two capitalised words inside sentences ("Family
    Guy", "Star Wars") in at least ``share`` of their ``min_count`` or more such occurrences:
    multi-word names whose words, alone, are common words."""
    pair = re.compile(r"(?=\b([A-Za-z]+) ([A-Za-z]+)\b)")
    caps, seen = Counter(), Counter()
    for t in texts:
        t = t.replace("<br />", " . ")
        for m in pair.finditer(t):
            a, b = m.group(1), m.group(2)
            start = m.start(1)
            key = (a.lower(), b.lower())
            seen[key] += 1
            if start and not _SENTENCE_END.search(t[max(0, start - 3):start]) \
                    and a[0].isupper() and b[0].isupper():
                caps[key] += 1
    return frozenset(k for k, n in seen.items() if n >= min_count and caps[k] >= share * n)


def imdb_word_facts(vocab_words: Sequence[str]) -> dict:
    """From the IMDB training reviews (cached in .cache/): ``counts`` (word -> occurrences, for
    the vocabulary's words) and ``name_pairs`` (multi-word names, see
    :func:`name_pairs_from_texts`); empty when the reviews are not installed."""

    path = paths.CACHE_DIR / f"imdb-word-facts-{vocab_key(list(vocab_words))}.json"
    stop = stop_words()

    def names(pairs) -> frozenset:        # "A Bronx Tale": the article is no part of it
        return frozenset(tuple(p) for p in pairs if p[0] not in stop and p[1] not in stop)
    if path.exists():
        raw = json.loads(path.read_text())
        return {"counts": raw["counts"], "name_pairs": names(raw["name_pairs"])}
    try:
        texts, _ = imdb_texts("train")
    except Exception:                    # the data package is missing: nothing known
        return {"counts": {}, "name_pairs": frozenset()}
    known = set(vocab_words)
    counts = Counter()
    for t in texts:
        counts.update(tokenize(t))
    pairs = sorted(p for p in name_pairs_from_texts(texts) if p[0] in known and p[1] in known)
    paths.ensure_dir(paths.CACHE_DIR)
    atomic_write_text(path, json.dumps({"counts": {w: n for w, n in counts.items() if w in known},
                                        "name_pairs": pairs}))
    return {"counts": {w: n for w, n in counts.items() if w in known},
            "name_pairs": names(pairs)}


# ---------------------------------------------------------------- candidates

def _related(synset, pos: str) -> list:
    """The synsets whose lemmas are candidates at ``RELATED_WEIGHT``: an adjective's similar
    adjectives, a verb's hypernyms (not a noun's: see the module doc)."""
    if pos == "a":
        return synset.similar_tos()
    return synset.hypernyms() if pos == "v" else []


class Substitutes:
    """Ranked substitutes of a word with a given tag that pass every check (cached).

    ``vocab``: the words a substitute may be (the model's vocabulary); ``stop``: stop words
    (never replaced, never substitutes, except ``REPLACEABLE_STOP_WORDS``); ``names``: names
    (never replaced, never substitutes); ``common``: if given, the only words a substitute may
    be (those seen at least ``MIN_COUNT`` times in the training reviews: a rare word such as
    "bakshis" for "tip" reads wrong even when WordNet lists it); ``name_pairs``: multi-word
    names (lower-cased word pairs) whose words are never replaced where they stand together
    (:meth:`in_name`).
    """

    def __init__(self, vocab, stop=frozenset(), names=frozenset(),
                 min_similarity: float = MIN_SIMILARITY,
                 max_candidates: int = 8, vectors=None, min_cosine: float | None = None,
                 common=None, name_pairs=frozenset()):
        self.vocab = vocab
        self.common = None if common is None else frozenset(common)
        self.name_pairs = frozenset(name_pairs)
        self.stop = frozenset(stop) - REPLACEABLE_STOP_WORDS
        self.names = frozenset(names)
        self.min_similarity = float(min_similarity)
        if min_cosine is not None and vectors is None:
            raise ValueError("min_cosine needs word vectors (text.vectors.CorpusVectors)")
        self.vectors, self.min_cosine = vectors, min_cosine
        self.max_candidates = int(max_candidates)
        self._cache: dict[tuple[str, str], list[tuple[str, float]]] = {}

    def protected(self, word: str) -> bool:
        """Never replaced: stop words, negations, numbers, names, contractions, OOV."""
        return (word in self.stop or word in NEGATIONS or "'" in word or not word.isalpha()
                or word in self.names or is_number(word) or wordnet_name(word)
                or word not in self.vocab)

    def __call__(self, word: str, tag: str,
                 context: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
        """Ranked (substitute, similarity) pairs of ``word`` tagged ``tag``; ``context``: the
        lemmas around it (:meth:`context`), which weight its senses (simplified Lesk)."""
        pos = PENN_TO_WN.get(tag)
        if pos is None or self.protected(word):
            return []
        base = _base(word, pos)
        overlaps = tuple(len(_signature(s) & context) for s in _sense_weights(base, pos))
        key = (word, tag, overlaps)
        if key not in self._cache:
            self._cache[key] = self._compute(word, tag, overlaps)
        return self._cache[key]

    def in_name(self, words: Sequence[str], k: int) -> bool:
        """Whether word k of a review is part of a multi-word name there ("family guy")."""
        w = words[k]
        return (k > 0 and (words[k - 1], w) in self.name_pairs) or \
            (k + 1 < len(words) and (w, words[k + 1]) in self.name_pairs)

    def words(self, word: str, tag: str, context: frozenset[str] = frozenset()) -> list[str]:
        return [w for w, _ in self(word, tag, context)]

    def context(self, words: Sequence[str], k: int) -> frozenset[str]:
        """The lemmas of the content words within ``LESK_WINDOW`` words of position ``k``."""
        lo, hi = max(0, k - LESK_WINDOW), k + LESK_WINDOW + 1
        return frozenset(_lemma(w) for i, w in enumerate(words[lo:hi], lo)
                         if i != k and w.isalpha() and w not in self.stop)

    def _compute(self, word: str, tag: str, overlaps: tuple[int, ...]) -> list[tuple[str, float]]:
        pos = PENN_TO_WN[tag]
        base = _base(word, pos)
        prior = _sense_weights(base, pos)
        weights = {s: p * math.exp(o) for (s, p), o in zip(prior.items(), overlaps)}
        total = sum(weights.values())
        scores: dict[str, float] = {}
        wn = _wn()
        for sname, w in weights.items():
            synset = wn.synset(sname)
            related = [(r, RELATED_WEIGHT) for r in _related(synset, pos)]
            for other, discount in [(synset, 1.0)] + related:
                for lemma in other.lemma_names():
                    if lemma == base or not lemma.isalpha() or lemma != lemma.lower():
                        continue              # multi-word, hyphenated or capitalized (a name)
                    q = _sense_weights(lemma, None).get(other.name(), 0.0)
                    scores[lemma] = scores.get(lemma, 0.0) + discount * w / total * q
        bad = antonyms(word) | antonyms(base)
        pol = polarity(word)
        # the lemmas above the sense-similarity floor, inflected like the word
        forms = {lemma: inflect(lemma, tag) for lemma, score in scores.items()
                 if score >= self.min_similarity}
        ranking = {lemma: scores[lemma] for lemma in forms}
        if self.min_cosine is not None:      # ranked by the cosine of the forms in the reviews
            ranking = {lemma: c for lemma, form in forms.items() if form is not None
                       and (c := self.vectors.cosine(word, form)) >= self.min_cosine}
        out = []
        for lemma, score in sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0])):
            form = forms[lemma]
            if (form is None or form == word or form not in self.vocab or lemma in bad
                    or (self.common is not None and form not in self.common)
                    or form in bad or are_antonyms(word, form)   # both ways, as check_edits
                    or form in self.stop or form in self.names
                    or is_number(form) or polarity(form) != pol
                    or form in (w for w, _ in out)):
                continue
            out.append((form, round(score, 4)))
            if len(out) >= self.max_candidates:
                break
        return out


# ---------------------------------------------------------------- checks after the fact

def check_substitution(old: str, new: str, old_tag: str, new_tag: str) -> dict[str, bool]:
    """The five checks of one substitution (True = passed)."""
    return {"antonym": not are_antonyms(old, new),
            "polarity": polarity(old) == polarity(new),
            "number": not (is_number(old) or is_number(new)),
            "pos": PENN_TO_WN.get(old_tag, old_tag) == PENN_TO_WN.get(new_tag, new_tag),
            "inflection": inflection_ok(new, old_tag)}


def check_edits(seed_words: Sequence[str], gen_words: Sequence[str],
                seed_tags: Sequence[str] | None = None) -> dict:
    """Every edit between two reviews, checked.

    Returns ``{"edits": [...], "passed": {check: [n_passed, n_checked]}, "valid": bool,
    "n_substitutions": int}``; an edit is ``{"kind": "substitution"|"insertion"|"deletion",
    "old", "new", "position", "failed": [checks]}`` (``position``: in the seed, for an
    insertion in the generated review; a substitution also has ``gen_position``). Replaced blocks of equal length are
    substitutions word by word; the rest of a replaced block counts as insertions/deletions.
    """
    seed_words, gen_words = list(seed_words), list(gen_words)
    seed_tags = list(seed_tags) if seed_tags is not None else pos_tags(seed_words)
    gen_tags = None
    edits = []
    for tag, i1, i2, j1, j2 in _merged(align(seed_words, gen_words)):
        if tag == "equal":
            continue
        if gen_tags is None:
            gen_tags = pos_tags(gen_words)
        # an unequal replaced block pairs its words at the offset with the fewest failures
        # (seed "really good" -> "fine" is a deletion of "really" and good -> fine)
        blocks = [_block(seed_words, gen_words, seed_tags, gen_tags, i1, i2, j1, j2, o)
                  for o in range(abs((i2 - i1) - (j2 - j1)) + 1)] if tag == "replace" else \
            [_block(seed_words, gen_words, seed_tags, gen_tags, i1, i2, j1, j2, None)]
        edits += min(blocks, key=lambda b: sum(len(e["failed"]) for e in b))
    passed = {c: [0, 0] for c in CHECKS}
    for e in edits:
        applies = CHECKS if e["kind"] == "substitution" else ("polarity", "number")
        for c in applies:
            passed[c][1] += 1
            passed[c][0] += c not in e["failed"]
    return {"edits": edits, "passed": passed, "valid": not any(e["failed"] for e in edits),
            "n_substitutions": sum(e["kind"] == "substitution" for e in edits)}


def _merged(ops):
    """Adjacent non-equal opcodes as one block ("replace" when both sides have words)."""
    out = []
    for op in ops:
        if op[0] != "equal" and out and out[-1][0] != "equal":
            _, i1, _, j1, _ = out[-1]
            i2, j2 = op[2], op[4]
            out[-1] = ("replace" if i2 > i1 and j2 > j1 else op[0], i1, i2, j1, j2)
        else:
            out.append(tuple(op))
    return out


def _block(seed, gen, seed_tags, gen_tags, i1, i2, j1, j2, offset):
    """The edits of one non-equal block of the alignment: with ``offset`` (a replaced block),
    min(lengths) substitutions starting ``offset`` words into the longer side, the rest
    deletions (seed longer) or insertions (generated longer); without, all deletions and
    insertions."""
    n = 0 if offset is None else min(i2 - i1, j2 - j1)
    si = i1 + (offset if offset is not None and i2 - i1 > j2 - j1 else 0)
    sj = j1 + (offset if offset is not None and j2 - j1 > i2 - i1 else 0)
    out = []
    for k in range(n):
        old, new = seed[si + k], gen[sj + k]
        res = check_substitution(old, new, seed_tags[si + k], gen_tags[sj + k])
        out.append({"kind": "substitution", "old": old, "new": new, "position": si + k,
                    "gen_position": sj + k, "tag": seed_tags[si + k],
                    "new_tag": gen_tags[sj + k], "failed": [c for c in CHECKS if not res[c]]})
    for i in range(i1, i2):
        if not si <= i < si + n:
            out.append({"kind": "deletion", "old": seed[i], "new": None, "position": i,
                        "tag": seed_tags[i], "failed": _lone_failures(seed[i])})
    for j in range(j1, j2):
        if not sj <= j < sj + n:
            failed = _lone_failures(gen[j])
            if failed == ["polarity"] and _coordinated(gen, j):
                failed = []        # coordinated with a word of its polarity: "good and fine"
            out.append({"kind": "insertion", "old": None, "new": gen[j], "position": j,
                        "failed": failed})
    return out


def _coordinated(gen, j: int) -> bool:
    """``gen[j]`` is joined by "and"/"or" to a neighbour of its own polarity (either side)."""
    p = polarity(gen[j])
    return ((j >= 2 and gen[j - 1] in ("and", "or") and polarity(gen[j - 2]) == p)
            or (j + 2 < len(gen) and gen[j + 1] in ("and", "or") and polarity(gen[j + 2]) == p))


def _lone_failures(word: str) -> list[str]:
    """An inserted or deleted word: it must be neutral (no polar word, no negation) and no
    number."""
    failed = []
    if polarity(word) != 0:
        failed.append("polarity")
    if is_number(word):
        failed.append("number")
    return failed
