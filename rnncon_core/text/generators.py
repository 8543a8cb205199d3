"""Text generators: coverage-targeted EDA (Algorithm 2, lines 13-18) and gradient-guided synonym
substitution. Both work on padded word-id rows (N, T) of a model that starts with an Embedding,
change at most a budget of words per review, and stop a seed as soon as its prediction flips.

Budget: ``min(max_changes, floor(max_fraction * words))`` words of a review (at least 1),
counted as the word-level edit distance to the seed (:func:`rnncon_core.textdiff.words_changed`).

``constraints="reader"`` (the default) lets only substitutions a reader accepts through (same
part of speech, re-inflected, same sentiment, no antonym, no number, negation or name; see
:mod:`rnncon_core.text.lexical`); ``"none"`` takes any in-vocabulary WordNet synonym, as the EDA
paper does. Either way every generated review is checked afterwards
(:func:`~rnncon_core.text.lexical.check_edits`) and the run carries, per seed, whether every
edit passed (``valid``) and how many edits passed each check (``pass_<check>`` of
``checked_<check>``), and the seed's confidence (``conf_seed``).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..coverage import get_criterion
from ..coverage.threshold import DEFAULT_THRESHOLDS
from ..data import INDEX_FROM, VOCAB_FILE, Vocabulary, default_dataset, load_dataset
from ..errors import DataMissingError, InputError, UnsupportedModelError
from ..generate.base import BatchOutput, Generator, compiled_forward
from ..generate.baselines import loss_from_output
from ..lazy import tf
from ..params import Bool, FilePath, IntRange, Interval, OneOf, Param, Params, Text
from ..textdiff import words_changed
from ..trace import Tracer
from .eda import CONSTRAINTS, EDA, Lexicon
from .lexical import (CHECKS, MIN_COUNT, MIN_SIMILARITY, PENN_TO_WN, check_edits, imdb_names,
                      imdb_word_facts)

IMDB_THRESHOLD = DEFAULT_THRESHOLDS["text"]     # the paper's for the IMDB models
# what steers the search towards uncovered contributions (synonym-gradient: only with the
# contribution objective)
COVERAGE_PARAMS = ("layer", "n_targets", "threshold", "criterion")


def load_vocabulary(vocab=None) -> Vocabulary:
    """The vocabulary saved with the models (or a given Vocabulary / path to one); before any
    model is saved, the IMDB data set's own (the one training uses and saves)."""
    if isinstance(vocab, Vocabulary):
        return vocab
    path = Path(vocab) if vocab is not None else VOCAB_FILE
    if path.exists():
        return Vocabulary.load(path)
    if vocab is None:
        ds_vocab = load_dataset(default_dataset("text")).vocab
        if ds_vocab is not None:
            return ds_vocab
    raise DataMissingError(f"the vocabulary of the text models is missing ({path}): it is "
                           f"saved by `rnncon train imdb-lstm`; or pass vocab=")


class TextGenerator(Generator):
    """What both text strategies share: vocabulary and synonyms, the word budget, the coverage
    of the seed set and one random set of uncovered contributions per seed."""

    input_kind = "text"
    params = Params(
        Param("constraints", "reader", OneOf(CONSTRAINTS),
              "reader: only substitutes a reader would accept (tagged part of speech, "
              "re-inflected, same sentiment, no antonym, number, negation or name); none: any "
              "WordNet synonym (the EDA paper's). Every run reports the checks either way.",
              kinds=("text",), aliases=("constraint",), label="Substitutions"),
        Param("max_fraction", 0.1, Interval(0.0, 1.0, lo_open=True),
              "Most words changed, as a share of the review.", kinds=("text",),
              label="Most words changed (share of the review)"),
        Param("max_changes", None, IntRange(1, 10_000), "Most words changed (default: only the "
                                                        "share).", kinds=("text",),
              level="more"),
        Param("layer", None, Text(layers="recurrent", what="LAYER"),
              "Uncovered contributions of this layer (default: all layers).", kinds=("text",),
              label="Uncovered contributions of"),
        Param("n_targets", 8, IntRange(1, 1000), "Uncovered target contributions per seed.",
              kinds=("text",), label="Target contributions per seed"),
        Param("threshold", IMDB_THRESHOLD, Interval(0.0, 1.0), "Activation threshold of the "
                                                               "contributions.",
              kinds=("text",), label="Threshold"),
        Param("criterion", "rconc", Text(what="CRITERION"), "The coverage criterion whose "
                                                             "uncovered items are targeted.",
              kinds=("text",), level="more"),
        Param("min_similarity", None, Interval(0.0, 1.0), "Least WordNet similarity of a "
                                                          "substitute (default: the lexicon's).",
              kinds=("text",), level="more"),
        Param("min_cosine", None, Interval(-1.0, 1.0), "Least cosine between a word and its "
                                                        "substitute in word vectors learned "
                                                        "from the IMDB training reviews, not "
                                                        "from the model (default: not used).",
              kinds=("text",), level="more"),
        Param("vocab", None, FilePath(), "The vocabulary of the text model (a JSON saved by "
                                         "data.Vocabulary.save; default: the IMDB models').",
              kinds=("text",), level="cli"))
    accepts = ("lexicon",)

    def __init__(self, model, *, vocab, max_changes: int | None, max_fraction: float,
                 criterion: str, threshold: float, layer: str | None, n_targets: int,
                 constraints: str, min_similarity: float | None, min_cosine: float | None,
                 lexicon: Lexicon | None = None, batch_size: int = 64, seed: int = 0):
        super().__init__(model, batch_size=batch_size, seed=seed)
        self.tracer = Tracer(model)
        if self.tracer.embedding is None:
            raise UnsupportedModelError(f"method {self.method!r} needs a text model that starts "
                                        f"with an Embedding of word ids; this one reads vectors")
        self.constraints = constraints
        if lexicon is None:
            v = load_vocabulary(vocab)
            facts = imdb_word_facts(v.words)
            common = {w for w, n in facts["counts"].items() if n >= MIN_COUNT} or None
            lexicon = Lexicon(v, names=imdb_names(v.words), common=common,
                              name_pairs=facts["name_pairs"])
        self.lexicon = lexicon
        self.lexicon.set_similarity(min_similarity, min_cosine)
        self.min_similarity = MIN_SIMILARITY if min_similarity is None else float(min_similarity)
        n_ids = int(self.tracer.embedding[1].shape[0])
        if self.lexicon.vocab.num_words > n_ids:
            raise InputError(f"the vocabulary has {self.lexicon.vocab.num_words:,} ids but the "
                             f"model's Embedding only {n_ids:,}: give the vocabulary the model "
                             f"was trained with")
        self.max_changes = None if max_changes is None else int(max_changes)
        self.max_fraction = float(max_fraction)
        self.criterion_name = criterion
        self.threshold = float(threshold)
        self.layer = layer
        self.n_targets = int(n_targets)
        self.coverage = get_criterion(criterion, self.tracer, threshold=self.threshold)
        self._pool = np.zeros(0, np.int64)

    def budget(self, n_words: int) -> int:
        b = int(np.floor(self.max_fraction * n_words))
        if self.max_changes is not None:
            b = min(b, self.max_changes)
        return max(1, b)

    def _prepare(self, x, y):
        for n, row in enumerate(x):      # every seed must be a review the model can read
            self.lexicon.check_review(self.lexicon.words_of(row)[0], f"seed review {n}")
        self.coverage.reset()            # the seed set's coverage; targets are what it misses
        self.coverage.update(x)
        self._pool = np.asarray(self.coverage.report.uncovered(self.layer), np.int64)

    def _pick_targets(self, B: int, rng) -> np.ndarray:
        if len(self._pool) == 0:
            return np.full((B, 0), -1, np.int64)
        k = min(self.n_targets, len(self._pool))
        return np.stack([rng.choice(self._pool, size=k, replace=False) for _ in range(B)])

    def _activated(self, x_ids: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(M,) how many of each row's own targets (M, k) its input lifts above the threshold."""
        if targets.shape[1] == 0 or len(x_ids) == 0:
            return np.zeros(len(x_ids), np.int64)
        return (self._target_values(x_ids, targets) > self.threshold).sum(axis=1)

    def _target_values(self, x_ids: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(M, k) normalized values of each row's own targets, in chunks (``values`` makes
        every contribution of an input: a million for a stacked IMDB model)."""
        union, inv = np.unique(targets, return_inverse=True)
        inv = inv.reshape(targets.shape)
        rows = max(1, 2 ** 24 // max(1, self.coverage.total))
        values = self.coverage.targets.item_values
        out = [np.take_along_axis(np.asarray(values(x_ids[s:s + rows], union)),
                                  inv[s:s + rows], axis=1)
               for s in range(0, len(x_ids), rows)]
        return np.concatenate(out)

    def _describe_targets(self, targets):
        return [[self.coverage.describe(int(t)) for t in row if t >= 0] for row in targets]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (N, C) through the compiled forward pass (an eager 500-step
        recurrence is several times slower)."""

        fwd = compiled_forward(self.model)
        outs = [np.asarray(fwd(tf.constant(x[i:i + 256], tf.int32)))
                for i in range(0, len(x), 256)]
        return np.concatenate(outs) if outs else np.zeros((0, 2), np.float32)

    def _seeds(self, x):
        words, starts = zip(*(self.lexicon.words_of(row) for row in x))
        return list(words), list(starts)

    def _checked(self, x, x_gen, extras: dict) -> dict:
        """``extras`` plus every edit checked (see the module doc), the seed's confidence and
        the words changed (textdiff's one definition, whatever the generator counted for its
        budget)."""
        n = len(x)
        valid = np.zeros(n, bool)
        changed = np.zeros(n, np.int64)
        passed = {c: np.zeros(n, np.int64) for c in CHECKS}
        checked = {c: np.zeros(n, np.int64) for c in CHECKS}
        for i in range(n):
            a, b = self.lexicon.words_of(x[i])[0], self.lexicon.words_of(x_gen[i])[0]
            changed[i] = words_changed(a, b)
            res = check_edits(a, b, self.lexicon.tags(a))
            valid[i] = res["valid"]
            for c, (ok, total) in res["passed"].items():
                passed[c][i], checked[c][i] = ok, total
        p = self.predict(x)
        return {**extras, "words_changed": changed, "valid": valid,
                "conf_seed": p.max(axis=1).astype(np.float32),
                **{f"pass_{c}": v for c, v in passed.items()},
                **{f"checked_{c}": v for c, v in checked.items()}}

    def get_config(self) -> dict:
        """... with the lexicon's similarity floor where none was given."""
        return {**super().get_config(), "min_similarity": self.min_similarity}


def _edit_bound(a: list[str], b: list[str]) -> int:
    """An upper bound of words_changed(a, b) for b made from a by one EDA operation: the
    positions that differ when the lengths agree (SR, RS), else the length difference (RI
    only inserts, RD only deletes)."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b))
    return abs(len(a) - len(b))


class CoverageEDA(TextGenerator):
    """Algorithm 2, lines 13-18: EDA edits until the review raises the coverage asked for.

    Each round makes ``n_aug`` EDA variants of the current review (the four operations in turn,
    each with its alpha), drops those beyond the word budget, and keeps the variant that flips
    the prediction, else the one that activates most of the seed's uncovered target
    contributions, else the one least sure of the seed's label. A seed stops when its prediction
    flips, when no variant fits the budget, after ``max_rounds``, or (``stop_at_coverage``) as
    soon as it activates a target: the literal line 18, "reaches the coverage asked for".
    """

    method = "eda"
    params = TextGenerator.params.add(
        *(Param(name, 0.02, Interval(0.0, 1.0), f"EDA's {what}: share of the words per "
                                                 f"variant.", kinds=("text",), level="more")
          for name, what in (("alpha_sr", "synonym replacement"), ("alpha_ri", "random "
                             "insertion"), ("alpha_rs", "random swap"), ("p_rd", "random "
                             "deletion"))),
        Param("n_aug", 8, IntRange(1, 1000), "EDA variants per round.", kinds=("text",),
              level="more"),
        Param("max_rounds", 30, IntRange(1, 10_000), "Rounds per seed.", kinds=("text",),
              level="more"),
        Param("stop_at_coverage", False, Bool(), "Stop a seed as soon as it activates a target "
                                                 "(Algorithm 2's line 18).", kinds=("text",),
              level="more"))

    def __init__(self, model, *, alpha_sr: float, alpha_ri: float, alpha_rs: float, p_rd: float,
                 n_aug: int, max_rounds: int, stop_at_coverage: bool, **kw):
        super().__init__(model, **kw)
        self.eda = EDA(self.lexicon, alpha_sr, alpha_ri, alpha_rs, p_rd, n_aug, seed=self.seed,
                       constraints=self.constraints)
        self.max_rounds = int(max_rounds)
        self.stop_at_coverage = bool(stop_at_coverage)

    def _generate_batch(self, x, y, rng):
        T = x.shape[1]
        seeds, starts = self._seeds(x)
        budgets = np.array([self.budget(len(w)) for w in seeds])
        targets = self._pick_targets(len(x), rng)
        # a seed's state is the id row the model reads (a review grown past T is cut at the
        # front, as the tokenizer does) and the words of that row
        rows = x.copy()
        current = [list(w) for w in seeds]
        changed = np.zeros(len(x), np.int64)
        activated = np.zeros(len(x), np.int64)
        rounds = np.zeros(len(x), np.int64)
        active = self.predict(x).argmax(1) == y        # a seed predicted wrong is not worked on
        ops = self.eda.operations
        for _ in range(self.max_rounds):
            cands, owner = [], []
            for i in np.flatnonzero(active):
                first = int(rng.integers(len(ops)))
                for k in range(self.eda.n_aug):
                    c = self.eda.apply(ops[(first + k) % len(ops)], current[i], rng)
                    row = self.lexicon.ids_of(c, self.lexicon.words_of(rows[i])[1], T)
                    c = self.lexicon.words_of(row)[0]
                    # an upper bound of the distance to the seed is enough to keep the budget;
                    # the exact distance is computed for the variant kept
                    if c != current[i] and changed[i] + _edit_bound(current[i], c) <= budgets[i]:
                        cands.append((row, c)), owner.append(i)
            stuck = np.setdiff1d(np.flatnonzero(active), owner)
            active[stuck] = False
            if not cands:
                break
            owner = np.array(owner)
            xc = np.stack([row for row, _ in cands])
            proba = self.predict(xc)
            flips = proba.argmax(1) != y[owner]
            act = self._activated(xc, targets[owner])
            sure = proba[np.arange(len(owner)), y[owner]]
            # best first: a flip, then most targets activated, then least sure of the label
            order = np.lexsort((sure, -act, ~flips))
            best = {}
            for m in order.tolist():
                best.setdefault(int(owner[m]), m)
            for i, m in best.items():
                rows[i], current[i] = cands[m]
                activated[i] = act[m]
                changed[i] = words_changed(seeds[i], current[i])
                rounds[i] += 1
                if flips[m] or (self.stop_at_coverage and act[m] > 0):
                    active[i] = False
            self._finished(len(x) - int(active.sum()))
            if not active.any():
                break
        n_words = np.array([len(w) for w in seeds])
        extras = self._checked(x, rows, {"words_changed": changed, "n_words": n_words,
                                         "budget": budgets})
        return BatchOutput(x_gen=rows.astype(np.int32), iterations=rounds, targets=targets,
                           n_activated=activated, extras=extras)


class SynonymGradient(TextGenerator):
    """Gradient-guided synonym substitution (beyond the paper).

    Per step and seed: the gradient g of the objective with respect to the embedding vectors
    gives, for every position t holding a word w and every substitute s of w there (with
    ``constraints="reader"``: the substitutes of w with its tag in the seed review, see
    :class:`~rnncon_core.text.lexical.Substitutes`; with ``"none"``: every in-vocabulary WordNet
    synonym of a non-stop word), the first-order change g_t . (E[s] - E[w]); the ``rescore``
    best pairs (by that estimate, whatever its sign) are tried for real (one forward pass) and
    the one with the largest objective is substituted if it raises the objective; with the
    reader constraints, a pair is tried only if the tagger still reads the substitute, in the
    review, as the part of speech of the word it replaces. A position is changed at most once,
    so the words changed never exceed the budget. A seed stops when it flips, when its budget
    is spent or when no tried pair raises the objective. After a flip (objective ``"loss"``),
    the substitutions the flip does not need are given back, one at a time.

    The substitutes come from the review alone (WordNet, the tagger, VADER, the sense
    similarity with the words around: :class:`~rnncon_core.text.lexical.Substitutes`); the
    model under test only decides which of them to try and keep.

    ``objective``: ``"loss"`` (the prediction's cross-entropy on the seed's label, to flip it)
    or ``"contribution"`` (the sum of the seed's random uncovered target contributions,
    Algorithm 2's objective).
    """

    method = "synonym-gradient"
    params = Params(
        Param("objective", "loss", OneOf(("loss", "contribution")),
              "loss: flip the prediction (cross-entropy); contribution: activate uncovered "
              "contributions (Algorithm 2).", kinds=("text",), label="Objective"),
        *(replace(p, when=("objective", "contribution")) if p.name in COVERAGE_PARAMS else p
          for p in TextGenerator.params),
        Param("rescore", 32, IntRange(1, 1000), "Best first-order pairs tried for real per step.",
              kinds=("text",), level="more"))

    def __init__(self, model, *, objective: str, rescore: int, **kw):
        super().__init__(model, **kw)
        self.objective = objective
        self.rescore = int(rescore)
        self.E = np.asarray(self.tracer.embedding[1])
        self._build_synonym_index()
        self._grad_fn = None

    def _build_synonym_index(self):
        """CSR table over ids: the synonym ids of id i are syn[ptr[i]:ptr[i + 1]] (none for stop
        words, OOV and the marks), so a lookup for a whole review is a few numpy gathers."""
        lex, n_ids = self.lexicon, int(self.E.shape[0])
        lists = [[] for _ in range(n_ids)]
        for w, syns in lex.table.items():
            i = lex.vocab.word_id(w)
            if i >= INDEX_FROM and not lex.is_stop(w):
                lists[i] = [lex.vocab.index[s] for s in syns]
        self._ptr = np.concatenate([[0], np.cumsum([len(s) for s in lists])]).astype(np.int64)
        self._syn = np.array([s for row in lists for s in row], np.int64)

    def _gradient(self, ids, y, targets) -> np.ndarray:
        """(B, T, E): the gradient of the objective w.r.t. the embedding vectors."""
        if self.objective == "loss":
            if self._grad_fn is None:
                tr = self.tracer
                # Keras' own layers after the Embedding: the loss needs no trace, and their
                # gradient is about 5 times faster than through the traced recurrence
                after = [l for l in self.model.layers
                         if l.name != tr.embedding[0] and type(l).__name__ != "InputLayer"]

                def fn(ids, y):
                    emb = tr.embed_tf(ids)
                    with tf.GradientTape() as tape:
                        tape.watch(emb)
                        out = emb
                        for layer in after:
                            out = layer(out, training=False)
                        loss = loss_from_output(out, y)
                    return tape.gradient(loss, emb)
                self._grad_fn = tf.function(fn, input_signature=[
                    tf.TensorSpec((None,) + tuple(tr.input_shape), tf.int32),
                    tf.TensorSpec((None,), tf.int64)])
            return self._grad_fn(tf.constant(ids, tf.int32), tf.constant(y, tf.int64)).numpy()
        emb = self.tracer.embed(ids)
        union, inv = np.unique(targets, return_inverse=True)
        with tf.GradientTape() as tape:
            tape.watch(emb)
            vals = self.coverage.targets.item_values(emb, union, embedded=True)              # (B, U)
            obj = tf.reduce_sum(tf.gather(vals, inv.reshape(targets.shape), axis=1,
                                          batch_dims=1), axis=1)
        return tape.gradient(obj, emb).numpy()

    def _exact(self, ids, y, targets) -> tuple[np.ndarray, np.ndarray]:
        """The objective of each row for real (no gradient), and the model's prediction."""
        p = self.predict(ids)
        if self.objective == "loss":
            score = -np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1.0))
        else:
            score = self._target_values(ids, targets).sum(axis=1)
        return score, p.argmax(1)

    def _pairs(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (position, substitute id) pair of one padded review, before any change."""
        tok = row.astype(np.int64)
        if self.constraints == "none":
            lens = self._ptr[tok + 1] - self._ptr[tok]
            pos = np.repeat(np.arange(len(tok)), lens)
            starts = np.repeat(self._ptr[tok] - np.cumsum(lens) + lens, lens)
            return pos, self._syn[starts + np.arange(len(pos))]
        lex = self.lexicon
        words, _ = lex.words_of(row)
        first = len(tok) - len(words)          # the words are the last ids of the row
        pos, syn = [], []
        subs = lex.substitutes
        for k, (w, t) in enumerate(zip(words, lex.tags(words))):
            if subs.in_name(words, k):            # "family guy": a name, not two words
                continue
            for s in subs.words(w, t, subs.context(words, k)):
                pos.append(first + k)
                syn.append(lex.vocab.index[s])
        return np.array(pos, np.int64), np.array(syn, np.int64)

    def _reads_alike(self, row: np.ndarray, p: int, s: int) -> bool:
        """The tagger reads substitute ``s`` at position ``p`` as the same part of speech as
        the word it replaces (the review re-tagged with it)."""
        lex = self.lexicon
        words, _ = lex.words_of(row)
        k = p - (len(row) - len(words))
        new = list(words)
        new[k] = lex.vocab.words[s - INDEX_FROM]
        old_tag, new_tag = lex.tags(words)[k], lex.tags(new)[k]
        return PENN_TO_WN.get(old_tag, old_tag) == PENN_TO_WN.get(new_tag, new_tag)

    def _candidates(self, row, grad, frozen, pairs=None):
        """The first-order gains of the (position, substitute) pairs of one review at positions
        not changed yet, best first."""
        pos, syn = pairs if pairs is not None else self._pairs(row)
        keep = ~frozen[pos]
        pos, syn = pos[keep], syn[keep]
        if len(pos) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        tok = row.astype(np.int64)
        gain = np.einsum("pe,pe->p", grad[pos], self.E[syn] - self.E[tok[pos]])
        order = np.argsort(-gain, kind="stable")
        return pos[order], syn[order], gain[order]

    def _generate_batch(self, x, y, rng):
        seeds, _ = self._seeds(x)
        budgets = np.array([self.budget(len(w)) for w in seeds])
        targets = self._pick_targets(len(x), rng)
        if self.objective == "contribution" and targets.shape[1] == 0:
            raise InputError("objective 'contribution': the seeds already cover every "
                             "contribution of the chosen layer; use objective='loss'")
        ids = x.copy()
        pairs = [self._pairs(row) for row in x]   # substitutes fixed by the seed's own tags
        frozen = np.zeros(x.shape, bool)          # positions changed already
        changed = np.zeros(len(x), np.int64)
        steps = np.zeros(len(x), np.int64)
        score, pred = self._exact(x, y, targets)
        active = pred == y
        while active.any():
            idx = np.flatnonzero(active)
            grad = self._gradient(ids[idx], y[idx], targets[idx])
            trials = []
            for b, i in enumerate(idx.tolist()):
                n_tried = 0
                if changed[i] < budgets[i]:
                    pos, syn, _ = self._candidates(ids[i], grad[b], frozen[i], pairs[i])
                    for p, s in zip(pos.tolist(), syn.tolist()):
                        if n_tried == self.rescore:
                            break
                        if self.constraints == "reader" and not self._reads_alike(ids[i], p, s):
                            continue
                        trials.append((i, p, s))
                        n_tried += 1
                if n_tried == 0:
                    active[i] = False          # budget spent, or nothing left to substitute
            if not trials:
                break
            xt = ids[[i for i, _, _ in trials]].copy()
            for m, (_, p, s) in enumerate(trials):
                xt[m, p] = s
            owner = np.array([i for i, _, _ in trials])
            t_score, t_pred = self._exact(xt, y[owner], targets[owner])
            best = {}
            for m in np.argsort(-t_score, kind="stable").tolist():
                best.setdefault(int(owner[m]), m)
            for i, m in best.items():
                if t_score[m] <= score[i]:
                    active[i] = False          # no substitution raises the objective for real
                    continue
                _, p, s = trials[m]
                ids[i, p] = s
                frozen[i, p] = True
                changed[i] += 1
                steps[i] += 1
                score[i] = t_score[m]
                if t_pred[m] != y[i]:          # flipped: this seed is done
                    active[i] = False
            self._finished(len(x) - int(active.sum()))
        if self.objective == "loss":
            self._prune(x, ids, y, frozen)
        act = self._activated(ids, targets)
        n_words = np.array([len(w) for w in seeds])
        extras = self._checked(x, ids, {"words_changed": changed, "n_words": n_words,
                                        "budget": budgets})
        return BatchOutput(x_gen=ids.astype(np.int32), iterations=steps, targets=targets,
                           n_activated=act, extras=extras)

    def _prune(self, x, ids, y, frozen) -> None:
        """Give the seed's word back wherever the prediction stays flipped without the
        substitution (in place; per round, per seed, the undoing that keeps the loss highest),
        so a reader sees only the edits the flip needs."""
        todo = np.flatnonzero((self.predict(ids).argmax(1) != y) & (frozen.sum(1) > 1))
        while len(todo):
            trials = [(i, p) for i in todo.tolist() for p in np.flatnonzero(frozen[i]).tolist()]
            xt = ids[[i for i, _ in trials]].copy()
            for m, (i, p) in enumerate(trials):
                xt[m, p] = x[i, p]
            owner = np.array([i for i, _ in trials])
            t_score, t_pred = self._exact(xt, y[owner], None)
            best = {}
            for m in np.argsort(-t_score, kind="stable").tolist():
                if t_pred[m] != y[owner[m]]:
                    best.setdefault(int(owner[m]), m)
            for i, m in best.items():
                p = trials[m][1]
                ids[i, p], frozen[i, p] = x[i, p], False
            todo = np.array([i for i in best if frozen[i].sum() > 1], np.int64)
