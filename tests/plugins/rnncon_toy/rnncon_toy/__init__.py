"""A toy rnncon plugin (docs/extending.md): one strategy, one criterion, one constraint."""
import numpy as np

from rnncon_core.coverage import Criterion, Segment
from rnncon_core.generate import BatchOutput, Generator
from rnncon_core.generate.constraints import Constraint
from rnncon_core.lazy import tf      # TensorFlow, imported on first use
from rnncon_core.params import IntRange, Interval, Param, Params


class Shift(Generator):
    """Every pixel moved by the same amount (a toy strategy)."""

    method = "shift"
    input_kind = "image"
    params = Params(Param("amount", 0.1, Interval(-1.0, 1.0),
                          "Added to every pixel (then clipped to [0, 1])."))

    def __init__(self, model, *, amount, **kw):
        super().__init__(model, **kw)
        self.amount = amount

    def _generate_batch(self, x, y, rng):
        x_gen = np.clip(x + self.amount, 0.0, 1.0).astype(np.float32)
        return BatchOutput(x_gen=x_gen, iterations=np.ones(len(x), np.int64))


class ActiveCoverage(Criterion):
    """A neuron is covered once some input drives its raw output above margin (a toy)."""

    name = "active"
    uses_threshold = False          # scores are 0/1: covered or not
    params = Params(Param("margin", 0.0, Interval(-10.0, 10.0),
                          "Raw output a neuron must exceed."))

    def _layout(self):
        segments, offset = [], 0
        for layer, kind, shape in self.tracer.neuron_layers:
            segments.append(Segment(layer, kind, "out", (), layer, offset, shape))
            offset += int(np.prod(shape))
        return segments

    def _scores_graph(self, trace):
        n = tf.shape(trace.inputs)[0]
        outs = [trace.layers[layer].output if layer in trace.layers else trace.outputs[layer]
                for layer, _, _ in self.tracer.neuron_layers]
        return tf.concat([tf.cast(tf.reshape(o, (n, -1)) > self.margin, tf.float32)
                          for o in outs], axis=1)


class Border(Constraint):
    """Only a frame of pixels along the image's edges changes (a toy constraint)."""

    name = "border"
    params = Params(Param("width", 1, IntRange(1, 10), "Border: the frame's width in pixels.",
                          kinds=("image",), level="more", when=("constraint", "border")))

    def __init__(self, width=1):
        self.width = int(width)

    def direction(self, grad, x0, p, state, rng):
        w = self.width
        frame = np.ones(grad.shape[1:], bool)
        frame[w:-w, w:-w] = False
        return np.where(frame, np.sign(grad), 0.0).astype(np.float32)

    def get_config(self):
        return {"name": self.name, "width": self.width}
