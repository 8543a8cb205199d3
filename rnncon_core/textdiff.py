"""Word-level edit distance between a seed review and a generated one, and its alignment.

**Words changed** (one definition for every figure: the generators' ``words_changed`` output,
the run summaries' ``avg_words_changed`` / ``avg_words_changed_all``, the text report, the
dashboard's side-by-side view, ``quality.text_quality``): the number of word positions that
differ after an optimal alignment of the two reviews, i.e. the word-level Levenshtein
distance: the fewest substitutions, insertions and deletions of single words that turn one
review into the other (a swap of two distant words counts 2). Its *share* is that count over
the seed's words. Id arrays are read without their padding (0) and start mark (1). The dynamic
programme runs row by row in numpy: the insertion term of a row is a running minimum
(D[i, j] = j + min_k<=j (D'[i, k] - k)), so a row is a few vector operations and two 500-word
reviews take a few milliseconds.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .data import PAD, START


def tokens(seq) -> list:
    """Word lists stay as they are; id arrays lose padding (0) and the start mark (1)."""
    if isinstance(seq, np.ndarray):
        return [int(t) for t in seq.ravel() if t not in (PAD, START)]
    return list(seq)


def _codes(a: Sequence, b: Sequence) -> tuple[np.ndarray, np.ndarray]:
    index: dict = {}
    ca = np.array([index.setdefault(w, len(index)) for w in a], np.int64)
    cb = np.array([index.setdefault(w, len(index)) for w in b], np.int64)
    return ca, cb


def _next_row(prev: np.ndarray, i: int, ai: int, b: np.ndarray, ramp: np.ndarray) -> np.ndarray:
    row = np.empty_like(prev)
    row[0] = i
    row[1:] = np.minimum(prev[:-1] + (b != ai), prev[1:] + 1)   # substitute / delete
    return np.minimum.accumulate(row - ramp) + ramp               # then insert


def words_changed(a: Sequence, b: Sequence) -> int:
    """Words changed from ``a`` to ``b`` (word lists or id arrays): the word-level Levenshtein
    distance (see the module doc)."""
    ca, cb = _codes(tokens(a), tokens(b))
    # the common prefix and suffix cost nothing
    n = min(len(ca), len(cb))
    p = int(np.argmax(ca[:n] != cb[:n])) if n and (ca[:n] != cb[:n]).any() else n
    ca, cb = ca[p:], cb[p:]
    n = min(len(ca), len(cb))
    rev = ca[::-1][:n] != cb[::-1][:n]
    s = int(np.argmax(rev)) if rev.any() else n
    ca, cb = ca[:len(ca) - s], cb[:len(cb) - s]
    if len(ca) == 0 or len(cb) == 0:
        return int(max(len(ca), len(cb)))
    ramp = np.arange(len(cb) + 1)
    row = ramp.copy()
    for i, ai in enumerate(ca.tolist(), 1):
        row = _next_row(row, i, ai, cb, ramp)
    return int(row[-1])


def align(a: Sequence, b: Sequence) -> list[tuple[str, int, int, int, int]]:
    """A cheapest alignment (ties go to keeping words matched) as difflib-style opcodes (tag, i1, i2, j1, j2), tags ``equal``,
    ``replace`` (as many words on both sides), ``delete``, ``insert``; the sum of the non-equal
    blocks' lengths is :func:`words_changed`."""
    ca, cb = _codes(a, b)
    ramp = np.arange(len(cb) + 1)
    D = np.empty((len(ca) + 1, len(cb) + 1), np.int64)
    D[0] = ramp
    for i, ai in enumerate(ca.tolist(), 1):
        D[i] = _next_row(D[i - 1], i, ai, cb, ramp)
    steps = []                     # backtrace, preferring the diagonal
    i, j = len(ca), len(cb)
    while i or j:      # a match first, then a deletion or insertion, a substitution last
        if i and j and ca[i - 1] == cb[j - 1] and D[i, j] == D[i - 1, j - 1]:
            steps.append("equal")
            i, j = i - 1, j - 1
        elif i and D[i, j] == D[i - 1, j] + 1:
            steps.append("delete")
            i -= 1
        elif j and D[i, j] == D[i, j - 1] + 1:
            steps.append("insert")
            j -= 1
        else:
            steps.append("replace")
            i, j = i - 1, j - 1
    ops: list[list] = []
    i = j = 0
    for tag in reversed(steps):
        di, dj = int(tag != "insert"), int(tag != "delete")
        if ops and ops[-1][0] == tag:
            ops[-1][2] += di
            ops[-1][4] += dj
        else:
            ops.append([tag, i, i + di, j, j + dj])
        i, j = i + di, j + dj
    return [tuple(o) for o in ops]
