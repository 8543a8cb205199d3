"""How a criterion runs on TensorFlow: its graphs compiled once per (model, configuration) and
kept on the model (``model_cache``), and the ``Engine`` that cuts inputs into chunks, runs the
criterion's graph on each and hands the result to the criterion's state.

A criterion declares what it traces in ``_build`` (``self.engine.compile(fn, ...)``: fn reads
a full Trace, or with ``record`` the lean step record of ``Tracer.forward_steps``); a criterion
whose chunk is more than one reduce graph gives its own ``Engine`` subclass (``engine_class``):
``new_state``, ``chunk_size``, ``graph_chunk``, ``absorb`` (RConC), or ``step`` with
``one_graph = False`` (an update partly in Python: tknp).
"""
from __future__ import annotations

import copy
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ..lazy import tf
from ..trace import Tracer
from .state import MaxState

_CHUNK_ELEMENTS = 2 ** 24          # floats of scores held at once per update chunk
# RNNCON_CHUNK_DIVISOR divides every update chunk's budget, for a long-lived process that
# counts its peak memory more than some speed (the dashboard server sets 4: an IMDB profile's
# peak 1.4 -> 0.65 GB above the model at edge granularity, same time; 25-40 % slower edge
# updates on MNIST, where the chunks were large)
CHUNK_DIVISOR = max(1, int(os.environ.get("RNNCON_CHUNK_DIVISOR", "1") or 1))


def chunk_elements(budget: int) -> int:
    """An update chunk's budget of floats, divided by CHUNK_DIVISOR."""
    return max(1, budget // CHUNK_DIVISOR)


# ---------------------------------------------------------------- per-model cache

CACHE_LOCK = threading.RLock()


def model_cache(model) -> dict:
    """A dict kept on the Keras model itself (so it lives and dies with the model): the
    model's Tracer and every compiled graph of its criteria, shared by every criterion object,
    generator and thread that uses the same model."""
    model = model.model if isinstance(model, Tracer) else model
    cache = model.__dict__.get("_rnncon_cache")
    if cache is None:
        with CACHE_LOCK:
            cache = model.__dict__.get("_rnncon_cache")
            if cache is None:
                cache = {}
                object.__setattr__(model, "_rnncon_cache", cache)   # not a tracked Keras attr
    return cache


def tracer_for(model) -> Tracer:
    """The model's Tracer, validated once per model (a Tracer is returned as it is)."""
    if isinstance(model, Tracer):
        return model
    cache = model_cache(model)
    with CACHE_LOCK:
        if "tracer" not in cache:
            cache["tracer"] = Tracer(model)
        return cache["tracer"]


# ---------------------------------------------------------------- the engine

class Engine:
    """Runs one criterion's graphs over its inputs (see the module docstring)."""

    one_graph = True     # a chunk is one graph call (graph_chunk) whose result the state absorbs

    def __init__(self, crit):
        self.crit = crit
        self.taps = False      # True: the compiled graphs also return the model's outputs

    # -- the graphs
    def key(self) -> tuple:
        """What the compiled graphs depend on: the class and every parameter but the
        threshold and the curve grid (which only the NumPy state reads)."""
        config = {k: v for k, v in self.crit.get_config().items()
                  if k not in ("threshold", "curve_thresholds")}
        return ("graphs", type(self.crit).__qualname__, json.dumps(config, sort_keys=True,
                                                                   default=str), self.taps)

    def attach(self, taps: bool = False) -> None:
        """Compile once per (model, configuration): the first criterion of a configuration
        builds the graphs on a stateless twin of itself (they close over it, not over a state
        that grows), and every later one, in any thread, reuses them. ``taps``: graphs that
        also return the model's outputs (what ``update_with_outputs`` reads), kept apart."""
        self.taps = self.taps or taps
        crit = self.crit
        cache = model_cache(crit.tracer)
        key = self.key()
        with CACHE_LOCK:
            built = cache.get(key)
            if built is None:
                twin = copy.copy(crit)
                before = dict(vars(twin))       # (graphs built before are replaced too)
                twin._build()
                built = {k: v for k, v in vars(twin).items()
                         if k not in before or before[k] is not v}
                cache[key] = built
        crit.__dict__.update(built)

    def compile(self, fn, extra_sig=(), record=None, step_fn=None):
        """fn(trace, *extra) -> tensors, compiled once for float inputs and for word ids.
        With record, fn gets the lean time-major dict of Tracer.forward_steps instead (with
        what step_fn reduces inside the step loops). The result is called as
        ``f(x, embedded, *extra)``; a graph built with taps, called with
        ``with_outputs=True``, returns (its result, (model outputs, last hidden state))."""
        tr = self.crit.tracer
        tapped = self.taps
        if record is None:
            run = (lambda x: _tapped(tr, tr.forward(x))) if tapped else tr.forward
        else:
            run = (lambda x: _tapped(tr, *tr.forward_steps(x, record, step_fn=step_fn))) \
                if tapped else (lambda x: tr.forward_steps(x, record, step_fn=step_fn)[0])
        body = (lambda x, *a: (lambda r: (fn(r[0], *a), r[1]))(run(x))) if tapped else \
            (lambda x, *a: fn(run(x), *a))
        fsig = [tf.TensorSpec((None,) + tr.embedded_shape, tf.float32), *extra_sig]
        f_float = tf.function(body, input_signature=fsig)
        f_ids = None
        if tr.embedding is not None:
            isig = [tf.TensorSpec((None,) + tr.input_shape, tf.int32), *extra_sig]
            f_ids = tf.function(lambda ids, *a: body(tr.embed_tf(ids), *a),
                                input_signature=isig)

        def call(x, embedded=False, *args, with_outputs: bool = False):
            got = f_ids(x, *args) if f_ids is not None and not embedded else f_float(x, *args)
            if not tapped:
                return got
            if with_outputs:
                return got[0], tuple(t.numpy() for t in got[1])
            return got[0]
        return call

    # -- what a criterion may change
    def new_state(self):
        """An empty state for the criterion."""
        return MaxState(self.crit.total, self.crit._curve_grid())

    def elements_per_input(self) -> int:
        return self.crit.total

    def chunk_size(self) -> int:
        return max(1, min(1024, chunk_elements(_CHUNK_ELEMENTS)
                          // max(1, self.elements_per_input())))

    def graph_chunk(self, x, embedded, with_outputs: bool = False):
        """A chunk's TensorFlow part (thread-safe: it touches no state): (what the state
        absorbs, the model's outputs or None)."""
        got = self.crit._reduce_fn(x, embedded, with_outputs=with_outputs)
        (scores, bm), outs = got if with_outputs else (got, None)
        return (scores, bm.numpy()), outs

    def absorb(self, crit, out) -> None:
        """Add what graph_chunk computed to crit's state."""
        crit._state.add_batch(*out)

    def step(self, x, embedded, with_outputs: bool = False):
        """One chunk, all of it (for ``one_graph = False``): the model's outputs or None."""
        out, outs = self.graph_chunk(x, embedded, with_outputs)
        self.absorb(self.crit, out)
        return outs

    # -- an update
    def run(self, x, embedded, also=(), with_outputs: bool = False):
        """Add inputs x (checked: a tf.Tensor from ``check_inputs``) to the criterion's state
        and to those of ``also`` (criteria of the same configuration), with one graph call per
        chunk for all where the chunk is one graph; returns each chunk's (outputs, hidden) in
        order with ``with_outputs``."""
        n, chunk = int(x.shape[0]), self.chunk_size()
        chunks = [x[start:start + chunk] for start in range(0, n, chunk)]
        outputs: list = []
        if not self.one_graph or (not also and len(chunks) == 1):
            outputs = [self.step(part, embedded, with_outputs) for part in chunks]
            for crit in also:
                crit.engine.run(x, embedded)
        elif also:
            for part in chunks:
                out, outs = self.graph_chunk(part, embedded, with_outputs)
                outputs.append(outs)
                for crit in (self.crit, *also):
                    crit.engine.absorb(crit, out)
        else:
            # a pipeline: the graph of chunk i+1 runs in a worker thread while this one adds
            # chunk i to the state (NumPy): a step loop keeps about one core busy, so on two
            # or more cores the host's part mostly costs no time
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(self.graph_chunk, chunks[0], embedded, with_outputs)
                for part in chunks[1:] + [None]:
                    out, outs = pending.result()
                    if part is not None:
                        pending = pool.submit(self.graph_chunk, part, embedded, with_outputs)
                    outputs.append(outs)
                    self.absorb(self.crit, out)
        arr = x.numpy()
        for crit in (self.crit, *also) if self.one_graph and also else (self.crit,):
            crit._inputs.keep(arr, embedded, crit.KEEP_INPUTS)
        return outputs


# ---------------------------------------------------------------- outputs from one pass

def last_recurrent(tracer):
    """The spec of the last recurrent layer (direction) of a traced model, or None."""
    rec = [s for s in tracer.specs if s.recurrent]
    return rec[-1] if rec else None


def _tapped(tracer, trace, out=None):
    """(what the criterion's graph reads, (model output, last hidden state (N, units))):
    from a full Trace, or from forward_steps' (raw dict, output)."""
    spec = last_recurrent(tracer)
    if out is None:                       # a Trace
        h = trace.layers[spec.name].h[:, -1] if spec is not None else \
            tf.zeros((tf.shape(trace.output)[0], 0))
        return trace, (trace.output, h)
    h = trace[spec.name]["h"][-1] if spec is not None else tf.zeros((tf.shape(out)[0], 0))
    return trace, (out, h)


def forward_outputs(model):
    """x -> (model outputs (N, classes), last step's hidden state of the last recurrent layer
    (N, units)) as NumPy arrays, from one traced forward pass (float inputs or word ids),
    compiled once per model: what ``Criterion.update_with_outputs`` gives without a
    criterion."""
    tr = tracer_for(model)
    cache = model_cache(tr)
    with CACHE_LOCK:
        fns = cache.get("forward-outputs")
        if fns is None:
            def body(x):
                return _tapped(tr, *tr.forward_steps(x, ()))[1]
            f_float = tf.function(body, input_signature=[
                tf.TensorSpec((None,) + tr.embedded_shape, tf.float32)])
            f_ids = None if tr.embedding is None else tf.function(
                lambda ids: body(tr.embed_tf(ids)),
                input_signature=[tf.TensorSpec((None,) + tr.input_shape, tf.int32)])
            fns = cache["forward-outputs"] = (f_float, f_ids)
    f_float, f_ids = fns

    def call(x):
        x = tr.check_inputs(x)
        got = f_ids(x) if f_ids is not None else f_float(x)
        return tuple(t.numpy() for t in got)
    return call


def with_max(scores_graph):
    """trace -> (scores (N, total), their maximum over the batch per item)."""

    @tf.autograph.experimental.do_not_convert
    def fn(trace):
        v = scores_graph(trace)
        return v, tf.reduce_max(v, axis=0)
    return fn
