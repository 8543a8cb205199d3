"""Validity of a generated review: every edit from its root review passes the reader checks of
``text.lexical.check_edits`` (same part of speech, re-inflected, same sentiment, no antonym,
no number): the checks the campaign's substitutions are chosen by, measured again on the
result and reported like the other validity checks."""
from __future__ import annotations

import numpy as np

from ..text.eda import Lexicon
from ..text.generators import load_vocabulary
from ..text.lexical import check_edits
from .base import Validator, Verdict


class ReaderEdits(Validator):
    name = "reader-edits"
    kinds = ("text",)
    title = "every edit from the root review passes the reader checks"

    def __init__(self, lexicon=None):
        self.lexicon = lexicon

    def _lex(self):
        if self.lexicon is None:
            self.lexicon = Lexicon(load_vocabulary())
        return self.lexicon

    def check(self, x, labels, roots=None) -> Verdict:
        n = len(x)
        if roots is None or not n:
            return Verdict.all_valid(n)
        lex = self._lex()
        ok, reason, failed = np.ones(n, bool), [""] * n, np.zeros(n, np.float32)
        for i in range(n):
            got = check_edits(lex.words_of(roots[i])[0], lex.words_of(x[i])[0])
            bad = [f"{e['old']}->{e['new']} ({', '.join(e['failed'])})"
                   for e in got["edits"] if e["failed"]]
            ok[i], failed[i] = not bad, len(bad)
            if bad:
                reason[i] = "edits a reader would not accept: " + "; ".join(bad)
        return Verdict(ok, np.array(reason), {"reader-edits": failed})
