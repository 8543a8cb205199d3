"""DeepXplore's neuron coverage (NC)."""
from __future__ import annotations

import numpy as np

from ..lazy import tf
from .base import Criterion, Segment, minmax_normalize, threshold_grid
from .params import CURVE_THRESHOLDS, Bool, Param, Params, threshold


class NeuronCoverage(Criterion):
    """DeepXplore's NC: a neuron (one element of a layer's output, per step where the layer
    returns sequences) is covered when its output, min-max scaled over its layer for that
    input, exceeds the threshold for some input.

    A layer with a single neuron has nothing to scale against (min-max over one value is 0 for
    every input, so it could never be covered). A one-unit sigmoid output (a binary
    classifier's P(positive), already in [0, 1]) is read as it is: covered at threshold t when
    some input gives P(positive) > t. Any other one-unit layer stays unscaled-at-zero, i.e.
    never covered; ``one_unit_layers()`` names them so a report can say so."""

    name = "nc"
    threshold_from_data = True
    params = Params(threshold(0.25),
                    Param("include_input", False, Bool(), "Count the input layer's elements "
                                                          "as neurons too.", level="more"),
                    CURVE_THRESHOLDS)

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        tr = self.tracer
        if self.include_input:
            segs.append(Segment("input", "input", "input", (), "input", 0, tr.embedded_shape))
            off = segs[0].size
        for name, kind, shape in tr.neuron_layers:   # traced layers and those run by Keras
            segs.append(Segment(name, kind, "out", (), name, off, shape))
            off += int(np.prod(shape))
        return segs

    def _curve_grid(self) -> tuple:
        return threshold_grid(self.threshold, self.curve_thresholds)

    def _scores_graph(self, trace):
        n = tf.shape(trace.inputs)[0]
        parts = []
        if self.include_input:
            parts.append(minmax_normalize(tf.reshape(trace.inputs, (n, -1))))
        probability = set(self.one_unit_layers()["probability"])
        for name, _, _ in self.tracer.neuron_layers:
            out = trace.layers[name].output if name in trace.layers else trace.outputs[name]
            flat = tf.reshape(out, (n, -1))
            parts.append(flat if name in probability else minmax_normalize(flat))
        return tf.concat(parts, axis=1)

    def one_unit_layers(self) -> dict:
        """Layers of one neuron: {"probability": one-unit sigmoid layers (read as P(positive)),
        "unscaled": other one-unit layers (never covered: min-max needs two values)}."""
        out = {"probability": [], "unscaled": []}
        for name, _, shape in self.tracer.neuron_layers:
            if int(np.prod(shape)) != 1:
                continue
            try:
                act = getattr(self.tracer.model.get_layer(name), "activation", None)
            except (ValueError, AttributeError):
                act = None
            kind = "probability" if getattr(act, "__name__", "") == "sigmoid" else "unscaled"
            out[kind].append(name)
        return out

    def _build(self) -> None:
        super()._build()
        self._scores = self.engine.compile(self._scores_graph)
        # item values (targets.item_values): scaled neuron outputs, differentiable w.r.t. x
        self._values_fn = self.engine.compile(
            lambda tr, idx: tf.gather(self._scores_graph(tr), idx, axis=1),
            [tf.TensorSpec((None,), tf.int32)])

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def describe(self, index: int) -> dict:
        seg, pos = self.report.segment_of(index)
        step = int(pos[0]) if len(seg.shape) == 2 else None
        return {"layer": seg.layer, "kind": seg.kind, "step": step, "gate": None,
                "part": seg.part, "unit": int(pos[-1]), "source": None}
