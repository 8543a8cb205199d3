"""Easy Data Augmentation (Wei & Zou, EMNLP 2019) over a model's vocabulary.

The four operations, as the EDA paper (and RNNCon's Algorithm 2) describe them:

- synonym replacement (SR): n words that are not stop words are replaced, each by a random
  WordNet synonym (n = max(1, int(alpha_sr * len)); one position per picked word);
- random insertion (RI): n times, a random synonym of a random non-stop word is inserted at a
  random position;
- random swap (RS): n times, two random positions swap their words;
- random deletion (RD): each word is deleted with probability p_rd; a review is never emptied
  (when every word would go, one random word stays, as in EDA's code).

Stop words are scikit-learn's ENGLISH_STOP_WORDS (318 words); SR and RI never pick one (RS and
RD work on any word, as in EDA). Synonyms are those WordNet gives that are single words of the
model's vocabulary, so an edit never produces an out-of-vocabulary id. A word of the review
outside the vocabulary is what the model's tokenizer makes of it: the OOV id (shown ``<unk>``);
it has no synonyms and is only moved or deleted.

``constraints="reader"`` keeps the operations but only where a reader would still give the review
its label (see :mod:`rnncon_core.text.lexical`): SR takes the substitutes that keep part of
speech, inflection and sentiment; RI coordinates an adjective with such a substitute ("a good
movie" -> "a good and fine movie"); RS swaps two words of the same tag and polarity; RD deletes
only a neutral adverb or a neutral adjective before a noun or adjective. ``constraints="none"``
is the EDA paper's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data import IMDB_MAXLEN, INDEX_FROM, OOV, PAD, START, Vocabulary, pad_sequences, tokenize
from ..errors import InputError
from .lexical import (MIN_SIMILARITY, NEGATIONS, PENN_TO_WN, Substitutes, is_number, polarity,
                      pos_tags, stop_words)
from .vectors import imdb_vectors
from .wordnet import synonym_table, vocab_key

OPERATIONS = ("sr", "ri", "rs", "rd")
UNK = "<unk>"


CONSTRAINTS = ("reader", "none")
_SUBSTITUTES: dict = {}


def check_constraints(constraints: str) -> str:
    if constraints not in CONSTRAINTS:
        raise InputError(f"constraints {constraints!r}: choose 'reader' (substitutions a reader "
                         f"accepts) or 'none' (the EDA paper's)")
    return constraints


class Lexicon:
    """A vocabulary with its in-vocabulary WordNet synonyms (context-free, as EDA takes them),
    the stop words, the names, and the substitutes that keep the reading
    (:class:`~rnncon_core.text.lexical.Substitutes`, built on first use)."""

    def __init__(self, vocab: Vocabulary, table: dict[str, list[str]] | None = None,
                 names=frozenset(), common=None, name_pairs=frozenset()):
        if table is None:
            table = synonym_table(vocab.words)
        self.vocab = vocab
        self.table = table
        self.stop = stop_words()
        self.names = frozenset(names)
        self.common = None if common is None else frozenset(common)   # see lexical.Substitutes
        self.name_pairs = frozenset(name_pairs)
        self._substitutes = None
        self.min_similarity = None         # None: lexical.MIN_SIMILARITY
        self.min_cosine = None             # None: no cosine floor (text.vectors)
        self._tags: tuple[tuple, list[str]] = ((), [])

    def set_similarity(self, min_similarity: float | None, min_cosine: float | None = None
                       ) -> None:
        """The WordNet sense similarity (None: the default) and the cosine in the training
        reviews' word vectors (None: not used) below which substitutes are dropped."""
        if (min_similarity, min_cosine) != (self.min_similarity, self.min_cosine):
            self.min_similarity, self.min_cosine = min_similarity, min_cosine
            self._substitutes = None

    @property
    def substitutes(self):
        """Shared by every lexicon of the same vocabulary, names and similarity threshold (its
        cache survives generators)."""
        if self._substitutes is None:
            sim = MIN_SIMILARITY if self.min_similarity is None else float(self.min_similarity)
            key = (vocab_key(self.vocab.words), vocab_key(sorted(self.names)), sim,
                   self.min_cosine, None if self.common is None else
                   vocab_key(sorted(self.common)), vocab_key(sorted(map(" ".join,
                                                                          self.name_pairs))))
            if key not in _SUBSTITUTES:
                vectors = None
                if self.min_cosine is not None:
                    vectors = imdb_vectors(self.vocab)
                _SUBSTITUTES[key] = Substitutes(set(self.vocab.words), self.stop, self.names,
                                                min_similarity=sim, vectors=vectors,
                                                min_cosine=self.min_cosine, common=self.common,
                                                name_pairs=self.name_pairs)
            self._substitutes = _SUBSTITUTES[key]
        return self._substitutes

    def tags(self, words: Sequence[str]) -> list[str]:
        """Penn tags of a review (the last review asked is remembered)."""
        key = tuple(words)
        if key != self._tags[0]:
            self._tags = (key, pos_tags(key))
        return self._tags[1]

    def synonyms(self, word: str) -> list[str]:
        return self.table.get(word, [])

    def is_stop(self, word: str) -> bool:
        return word in self.stop

    def replaceable(self, word: str) -> bool:
        """A word SR and RI may pick: not a stop word, with at least one synonym."""
        return word not in self.stop and bool(self.table.get(word))

    # ---- ids <-> words (the model's own encoding: 0 pad, 1 start, 2 OOV, rank r -> r + 2)

    def words_of(self, row: np.ndarray) -> tuple[list[str], bool]:
        """One padded id row -> its words (OOV as ``<unk>``) and whether it holds the start mark."""
        ids = [int(i) for i in np.asarray(row).ravel() if i != PAD]
        had_start = bool(ids) and ids[0] == START
        words = self.vocab.words
        return [UNK if i == OOV else words[i - INDEX_FROM] for i in ids if i != START], had_start

    def ids_of(self, words: Sequence[str], had_start: bool = True, maxlen: int = IMDB_MAXLEN
               ) -> np.ndarray:
        """Words -> one padded id row, cut at the front as Keras' pad_sequences does."""
        ids = ([START] if had_start else []) + [self.vocab.word_id(w) for w in words]
        return pad_sequences([ids], maxlen)[0]

    def check_review(self, words: Sequence[str], what: str = "the review") -> None:
        """A review EDA can work on: some words, not all of them outside the vocabulary."""
        if not words:
            raise InputError(f"{what} is empty: give a review with at least one word")
        if all(w == UNK or w not in self.vocab for w in words):
            raise InputError(f"{what} is made only of words outside the model's vocabulary "
                             f"({len(self.vocab):,} ids): the model sees nothing but the "
                             f"unknown-word id; give a review in English")


# ---------------------------------------------------------------- the four operations

def synonym_replacement(words: list[str], n: int, rng: np.random.Generator, lex: Lexicon,
                        reader: bool = False) -> list[str]:
    out = list(words)
    if reader:
        tags = lex.tags(out)
        subs = {i: lex.substitutes.words(w, t) for i, (w, t) in enumerate(zip(out, tags))
                if not lex.substitutes.in_name(out, i)}
        positions = [i for i, s in subs.items() if s]
    else:
        positions = [i for i, w in enumerate(out) if lex.replaceable(w)]
    for i in rng.permutation(positions)[:n].tolist():
        syns = subs[i] if reader else lex.synonyms(out[i])
        out[i] = syns[int(rng.integers(len(syns)))]
    return out


def random_insertion(words: list[str], n: int, rng: np.random.Generator, lex: Lexicon,
                     reader: bool = False) -> list[str]:
    out = list(words)
    if reader:         # "good" -> "good and fine": a substitute coordinated with its adjective
        tags = list(lex.tags(out))
        for _ in range(n):
            pool = [i for i, (w, t) in enumerate(zip(out, tags))
                    if t == "JJ" and lex.substitutes.words(w, t)
                    and not (i + 1 < len(out) and out[i + 1] in ("and", "or"))]
            if not pool:
                break
            i = pool[int(rng.integers(len(pool)))]
            syns = lex.substitutes.words(out[i], "JJ")
            out[i + 1:i + 1] = ["and", syns[int(rng.integers(len(syns)))]]
            tags[i + 1:i + 1] = ["CC", "JJ"]
        return out
    for _ in range(n):
        pool = [w for w in out if lex.replaceable(w)]
        if not pool:
            break
        syns = lex.synonyms(pool[int(rng.integers(len(pool)))])
        out.insert(int(rng.integers(len(out) + 1)), syns[int(rng.integers(len(syns)))])
    return out


def random_swap(words: list[str], n: int, rng: np.random.Generator, lex: Lexicon | None = None,
                reader: bool = False) -> list[str]:
    out = list(words)
    if len(out) < 2:
        return out
    if reader:         # two words of the same tag and polarity, neither protected
        tags = lex.tags(out)
        groups: dict[tuple, list[int]] = {}
        for i, (w, t) in enumerate(zip(out, tags)):
            if t in PENN_TO_WN and not lex.substitutes.protected(w):
                groups.setdefault((t, polarity(w)), []).append(i)
        pairs = [g for g in groups.values() if len(g) >= 2]
        for _ in range(n if pairs else 0):
            g = pairs[int(rng.integers(len(pairs)))]
            i, j = rng.choice(g, size=2, replace=False).tolist()
            out[i], out[j] = out[j], out[i]
        return out
    for _ in range(n):
        i, j = rng.choice(len(out), size=2, replace=False).tolist()
        out[i], out[j] = out[j], out[i]
    return out


def deletable(words: Sequence[str], tags: Sequence[str], lex: Lexicon) -> list[bool]:
    """Where reader-mode RD may delete: a neutral adverb (not a negation, number or name), or a
    neutral adjective right before a noun or an adjective."""
    out = []
    for i, (w, t) in enumerate(zip(words, tags)):
        nxt = tags[i + 1] if i + 1 < len(tags) else ""
        ok = (t in ("RB", "RBR", "RBS")
              or (t == "JJ" and (nxt.startswith("NN") or nxt.startswith("JJ"))))
        out.append(ok and w.isalpha() and w not in NEGATIONS and polarity(w) == 0
                   and not is_number(w) and w not in lex.names)
    return out


def random_deletion(words: list[str], p: float, rng: np.random.Generator,
                    lex: Lexicon | None = None, reader: bool = False) -> list[str]:
    if len(words) <= 1:
        return list(words)
    keep = rng.random(len(words)) > p
    if reader:
        keep |= ~np.array(deletable(words, lex.tags(words), lex), bool)
        return [w for w, k in zip(words, keep) if k] or list(words)
    if not keep.any():
        return [words[int(rng.integers(len(words)))]]
    return [w for w, k in zip(words, keep) if k]


# ---------------------------------------------------------------- EDA

@dataclass
class EDA:
    """EDA's parameters: alpha per operation (share of the words it touches), n augmented.

    ``alpha_* = 0`` switches an operation off. ``seed`` makes every call reproducible.
    """
    lexicon: Lexicon
    alpha_sr: float = 0.1
    alpha_ri: float = 0.1
    alpha_rs: float = 0.1
    p_rd: float = 0.1
    n_aug: int = 9
    seed: int | None = 0
    constraints: str = "none"

    def __post_init__(self):
        check_constraints(self.constraints)
        for name in ("alpha_sr", "alpha_ri", "alpha_rs", "p_rd"):
            v = getattr(self, name)
            if not 0.0 <= float(v) <= 1.0:
                raise InputError(f"EDA {name} = {v}: it must lie in [0, 1]")
        if not self.operations:
            raise InputError("EDA: every operation is switched off (all alphas are 0): give at "
                             "least one alpha above 0")
        if int(self.n_aug) < 1:
            raise InputError(f"EDA n_aug = {self.n_aug}: ask for at least one augmented review")

    @property
    def operations(self) -> tuple[str, ...]:
        alphas = {"sr": self.alpha_sr, "ri": self.alpha_ri, "rs": self.alpha_rs, "rd": self.p_rd}
        return tuple(op for op in OPERATIONS if alphas[op] > 0)

    def rng(self, rng: np.random.Generator | None = None) -> np.random.Generator:
        return rng if rng is not None else np.random.default_rng(self.seed)

    def apply(self, op: str, words: list[str], rng: np.random.Generator) -> list[str]:
        """One operation on a list of words (a new list)."""
        n = lambda alpha: max(1, int(alpha * len(words)))   # noqa: E731
        lex, reader = self.lexicon, self.constraints == "reader"
        if op == "sr":
            return synonym_replacement(words, n(self.alpha_sr), rng, lex, reader)
        if op == "ri":
            return random_insertion(words, n(self.alpha_ri), rng, lex, reader)
        if op == "rs":
            return random_swap(words, n(self.alpha_rs), rng, lex, reader)
        if op == "rd":
            return random_deletion(words, self.p_rd, rng, lex, reader)
        raise InputError(f"unknown EDA operation {op!r}; choose one of {', '.join(OPERATIONS)}")

    def augment_words(self, words: Sequence[str], rng: np.random.Generator | None = None
                      ) -> list[tuple[str, list[str]]]:
        """``n_aug`` augmented reviews as (operation, words), each made by one operation,
        the operations in equal shares (EDA's ``int(n_aug / k) + 1`` each, shuffled, cut)."""
        words = list(words)
        self.lexicon.check_review(words)
        rng = self.rng(rng)
        per_op = self.n_aug // len(self.operations) + 1
        made = [(op, self.apply(op, words, rng)) for op in self.operations for _ in range(per_op)]
        order = rng.permutation(len(made))[: self.n_aug]
        return [made[i] for i in order.tolist()]

    def augment(self, text: str, rng: np.random.Generator | None = None) -> list[str]:
        """A review's text -> ``n_aug`` augmented texts (tokenized as the model's tokenizer)."""
        return [" ".join(w) for _, w in self.augment_words(tokenize(text), rng)]
