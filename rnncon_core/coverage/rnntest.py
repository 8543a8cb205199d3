"""RNN-Test's hidden-state (HS_C) and cell-state (CS_C) coverage."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import UnsupportedModelError
from ..lazy import tf
from .base import Criterion, Segment
from .params import IntRange, Param, Params


class HiddenStateCoverage(Criterion):
    """RNN-Test's HS_C: for every input, step and recurrent layer, the units among the top k of
    that hidden vector are covered (k = max(1, units // 100) unless given)."""

    name = "hsc"
    uses_threshold = False
    params = Params(Param("k", None, IntRange(1), "Units covered per hidden vector (its top "
                                                  "k); default max(1, units // 100)."))

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        self._k = {}
        for spec in self.tracer.specs:
            if spec.kind == "dense":
                continue
            self._k[spec.name] = min(spec.units, self.k or max(1, spec.units // 100))
            segs.append(Segment(spec.name, spec.kind, "out", (), spec.name, off,
                                (spec.steps, spec.units)))
            off += spec.steps * spec.units
        if not segs:
            raise UnsupportedModelError("HiddenStateCoverage needs a recurrent layer; the model "
                                        "has only Dense layers")
        return segs

    def _scores_graph(self, trace):
        parts = []
        for seg in self.segments:
            h = trace.layers[seg.layer].h                       # (N, T, u)
            kth = tf.math.top_k(h, k=self._k[seg.layer]).values[..., -1:]
            parts.append(tf.reshape(tf.cast(h >= kth, tf.float32), (tf.shape(h)[0], -1)))
        return tf.concat(parts, axis=1)

    def _hidden_graph(self, trace, idx):
        flat = tf.concat([tf.reshape(trace.layers[s.layer].h, (tf.shape(trace.inputs)[0], -1))
                          for s in self.segments], axis=1)
        return tf.gather(flat, idx, axis=1)

    def _build(self) -> None:
        super()._build()
        self._scores = self.engine.compile(self._scores_graph)
        # item values (targets.item_values): the hidden-state values h of those (layer, step,
        # unit) items, differentiable (RNN-Test raises them to make them top-k)
        self._values_fn = self.engine.compile(self._hidden_graph,
                                              [tf.TensorSpec((None,), tf.int32)])

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def describe(self, index: int) -> dict:
        seg, (t, u) = self.report.segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind, "step": int(t), "gate": None,
                "part": "h", "unit": int(u), "source": None}


CELL_BOUNDARIES = (-0.8, -0.2, 0.2, 0.8)


class CellStateCoverage(Criterion):
    """RNN-Test's CS_C: tanh(c) of every LSTM cell (layer, step, unit) falls in one of five
    sections cut at CELL_BOUNDARIES; an item is one (cell, section) pair, covered when some
    input put the cell there. ``sections()`` gives each section's share (the two outer
    sections are the boundary coverage)."""

    name = "csc"
    uses_threshold = False
    params = Params()

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        for spec in self.tracer.specs:
            if spec.kind == "lstm":
                shape = (spec.steps, spec.units, len(CELL_BOUNDARIES) + 1)
                segs.append(Segment(spec.name, spec.kind, "c", (), spec.name, off, shape))
                off += int(np.prod(shape))
        if not segs:
            kinds = sorted({s.kind for s in self.tracer.specs})
            raise UnsupportedModelError(f"CellStateCoverage needs LSTM layers (it reads the "
                                        f"cell state c); this model has {', '.join(kinds)}. "
                                        f"Use hsc, nc or rconc for it.")
        return segs

    def _scores_graph(self, trace):
        parts = []
        for seg in self.segments:
            tc = tf.tanh(trace.layers[seg.layer].c)
            sec = tf.raw_ops.Bucketize(input=tc, boundaries=list(CELL_BOUNDARIES))
            hot = tf.one_hot(sec, len(CELL_BOUNDARIES) + 1, dtype=tf.float32)
            parts.append(tf.reshape(hot, (tf.shape(tc)[0], -1)))
        return tf.concat(parts, axis=1)

    def _build(self) -> None:
        super()._build()
        self._scores = self.engine.compile(self._scores_graph)

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def sections(self) -> pd.DataFrame:
        """Per section of tanh(c): the share of cells some input put there."""
        mask = self.report.covered_mask()
        labels = ["< -0.8", "[-0.8, -0.2)", "[-0.2, 0.2)", "[0.2, 0.8)", ">= 0.8"]
        per = np.zeros(len(labels))
        cells = 0
        for seg in self.segments:
            m = mask[seg.offset:seg.offset + seg.size].reshape(-1, len(labels))
            per += m.sum(axis=0)
            cells += m.shape[0]
        return pd.DataFrame({"section": labels, "covered": per.astype(int), "cells": cells,
                             "rate": per / max(1, cells),
                             "boundary": [True, False, False, False, True]})

    def describe(self, index: int) -> dict:
        seg, (t, u, s) = self.report.segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind, "step": int(t), "gate": None,
                "part": "c", "unit": int(u), "source": None, "section": int(s)}
