"""Word vectors learned from the training reviews alone (never from the model under test).

A word's vector is its row of the positive pointwise mutual information (PPMI) matrix of word
co-occurrences within ``WINDOW`` words (a co-occurrence at distance d counts 1/d; the context
distribution smoothed with exponent 0.75), reduced by a truncated SVD to ``DIMS`` dimensions
(rows ``U * sqrt(S)``, unit length): Levy, Goldberg & Dagan, "Improving distributional similarity
with lessons learned from word embeddings", TACL 2015. Words used alike in movie reviews get a
high cosine (watched/viewed 0.54, great/outstanding 0.58), words WordNet relates through a sense
the reviews never use a low one (tip/bakshis 0.00, acting/behaving 0.06).

:class:`~rnncon_core.text.lexical.Substitutes` can require a least cosine between a word and its
substitute (``min_cosine``; the IMDB models' vectors from :func:`imdb_vectors`).
"""
from __future__ import annotations

import io

import numpy as np

from .. import paths
from ..data import default_dataset, load_dataset
from ..errors import DataMissingError
from ..io import atomic_write_bytes
from .wordnet import vocab_key

WINDOW = 5
DIMS = 200
SMOOTHING = 0.75
FIRST_WORD_ID = 3          # ids below are padding, the start mark and out-of-vocabulary


class CorpusVectors:
    """Unit word vectors over a model's ids (a zero row for an id the corpus never has)."""

    def __init__(self, vectors: np.ndarray, index: dict[str, int]):
        self.vectors = np.asarray(vectors, np.float32)
        self.index = index

    @classmethod
    def build(cls, rows: np.ndarray, index: dict[str, int], num_ids: int,
              window: int = WINDOW, dims: int = DIMS, seed: int = 0) -> "CorpusVectors":
        """From padded id rows (N, T) of the training reviews; ``index``: word -> id."""
        import scipy.sparse as sp
        from sklearn.utils.extmath import randomized_svd
        rows = np.asarray(rows, np.int64)
        a_parts, b_parts, w_parts = [], [], []
        for d in range(1, window + 1):
            a, b = rows[:, :-d].ravel(), rows[:, d:].ravel()
            keep = (a >= FIRST_WORD_ID) & (b >= FIRST_WORD_ID)
            a, b = a[keep], b[keep]
            w = np.full(len(a), 1.0 / d)
            a_parts += [a, b]
            b_parts += [b, a]
            w_parts += [w, w]
        counts = sp.coo_matrix((np.concatenate(w_parts),
                                (np.concatenate(a_parts), np.concatenate(b_parts))),
                               shape=(num_ids, num_ids)).tocsr().tocoo()
        word = np.asarray(counts.sum(axis=1)).ravel()
        context = np.asarray(counts.sum(axis=0)).ravel() ** SMOOTHING
        context /= max(context.sum(), 1e-12)
        with np.errstate(divide="ignore"):
            pmi = np.log(counts.data / word[counts.row] / context[counts.col])
        keep = pmi > 0
        ppmi = sp.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])),
                             shape=(num_ids, num_ids))
        k = max(1, min(dims, num_ids - 1))
        u, s, _ = randomized_svd(ppmi, k, n_iter=4, random_state=seed)
        vectors = u * np.sqrt(s)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return cls(np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0),
                   index)

    def cosine(self, a: str, b: str) -> float:
        """Cosine of two words' vectors (0 for a word outside the vocabulary)."""
        i, j = self.index.get(a), self.index.get(b)
        if i is None or j is None:
            return 0.0
        return float(self.vectors[i] @ self.vectors[j])


def imdb_vectors(vocab) -> CorpusVectors:
    """The vectors of the IMDB training reviews over ``vocab`` (built once, about 30 s, and
    cached in .cache/ as float16: a fresh build gives the same cosines as the cached copy)."""
    name = f"imdb-vectors-{vocab_key(vocab.words)}-{WINDOW}-{DIMS}-{SMOOTHING}.npy"
    path = paths.CACHE_DIR / name
    if path.exists():
        return CorpusVectors(np.load(path), vocab.index)
    try:
        ds = load_dataset(default_dataset("text"))
    except Exception as e:
        raise DataMissingError(f"min_cosine needs word vectors from the IMDB training reviews, "
                               f"which are not installed here ({e}); run `make setup`, or leave "
                               f"min_cosine unset") from e
    if ds.vocab is not None and list(ds.vocab.words) != list(vocab.words):
        raise DataMissingError("min_cosine needs word vectors over the model's vocabulary; they "
                               "are learned from the IMDB training reviews, so only models with "
                               "the IMDB vocabulary have them: leave min_cosine unset")
    vectors = CorpusVectors.build(ds.x_train, vocab.index, vocab.num_words).vectors
    vectors = vectors.astype(np.float16)
    paths.ensure_dir(paths.CACHE_DIR)
    buf = io.BytesIO()
    np.save(buf, vectors)
    atomic_write_bytes(path, buf.getvalue())
    return CorpusVectors(vectors, vocab.index)
