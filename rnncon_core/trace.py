"""Run a Keras Sequential model step by step with TensorFlow ops (batched, differentiable).

For every recurrent layer and time step the trace keeps the input part x^t.U and the recurrent
part h^(t-1).W of each gate apart (no bias), with the gate activations, c and h; for every Dense
layer its input, x @ kernel and its output. The computation is Keras' own, so the trace's
outputs equal the model's layer outputs (tests/test_trace.py holds it to 1e-5).

    tracer = Tracer(model)
    tr = tracer(x)                    # x float (N, T, F), or int ids (N, T) for an Embedding model
    tr.layers["lstm_1"].hW["f"]       # (N, T, units) h^(t-1) @ W_f
    tr = tracer(emb, embedded=True)   # start after the Embedding (gradients w.r.t. embeddings)
    raw, out = tracer.forward_steps(x, record=("xU", "hW"))   # lean, time-major, for coverage
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, UnsupportedModelError

SUPPORTED_LAYERS = ("InputLayer", "Embedding", "SimpleRNN", "LSTM", "GRU", "Dense", "Dropout")
GATES = {"lstm": ("i", "f", "c", "o"), "gru": ("z", "r", "h"), "simple_rnn": ("h",), "dense": ()}
_KINDS = {"LSTM": "lstm", "GRU": "gru", "SimpleRNN": "simple_rnn", "Dense": "dense"}
_SUPPORTED_TEXT = ("supported: a Sequential (or a single-chain functional) model of "
                   + ", ".join(SUPPORTED_LAYERS)
                   + " (recurrent layers with return_sequences on or off, GRU reset_after "
                     "True or False, any activations; Dense on the last recurrent layer's "
                     "final output; Embedding without mask_zero)")


@dataclass(frozen=True)
class LayerSpec:
    """One traced layer (recurrent or Dense), in model order."""
    name: str
    kind: str                   # "lstm" | "gru" | "simple_rnn" | "dense"
    units: int
    steps: int | None           # None for dense
    in_dim: int
    gates: tuple[str, ...]
    return_sequences: bool = False
    reset_after: bool | None = None   # GRU only

    @property
    def recurrent(self) -> bool:
        return self.kind != "dense"


@dataclass
class LayerTrace:
    """Tensors of one layer for a batch. Recurrent: (N, T, .) each; Dense: (N, .)."""
    spec: LayerSpec
    x: object                                   # the input sources
    h_prev: object = None                       # h^(t-1), h^0 = 0
    h_src: dict = field(default_factory=dict)   # source of gate g's recurrent part
    xU: dict = field(default_factory=dict)      # x^t @ U_g (no bias)
    hW: dict = field(default_factory=dict)      # h_src[g] @ W_g (no bias)
    gates: dict = field(default_factory=dict)   # gate activations
    h: object = None
    c: object = None                            # LSTM cell state
    pre: object = None                          # Dense: x @ kernel (no bias)
    out: object = None                          # Dense: after activation

    @property
    def output(self):
        """What the layer hands to the next one (Keras' layer output)."""
        if self.spec.kind == "dense":
            return self.out
        return self.h if self.spec.return_sequences else self.h[:, -1]


@dataclass
class Trace:
    layers: dict[str, LayerTrace]
    output: object               # the model's output
    inputs: object               # what the first traced layer read (x, or embedding vectors)


def _unsupported(layer, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"layer {layer.name!r} ({type(layer).__name__}) is not "
                                 f"supported: {why}. {_SUPPORTED_TEXT}.")


def _chain_layers(model) -> list:
    """The model's layers in order, refusing anything that is not a single chain."""
    import keras
    if isinstance(model, keras.Sequential):
        return list(model.layers)
    if not isinstance(model, keras.Model) or not hasattr(model, "_operations") \
            or type(model).__name__ not in ("Functional", "Model"):
        raise UnsupportedModelError(f"model {getattr(model, 'name', model)!r} of type "
                                    f"{type(model).__name__} cannot be traced (a subclassed "
                                    f"model hides its structure). {_SUPPORTED_TEXT}.")
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UnsupportedModelError(f"model {model.name!r} has {len(model.inputs)} inputs and "
                                    f"{len(model.outputs)} outputs; only one of each "
                                    f"is supported. {_SUPPORTED_TEXT}.")
    layers = [l for l in model.layers if type(l).__name__ != "InputLayer"]
    prev = model.inputs[0]
    for layer in layers:
        nodes = layer._inbound_nodes
        ins = nodes[0].input_tensors if len(nodes) == 1 else []
        if len(nodes) != 1 or len(ins) != 1 or ins[0] is not prev:
            raise UnsupportedModelError(
                f"layer {layer.name!r} ({type(layer).__name__}) is not fed by the previous "
                f"layer alone (a functional graph with branches or shared layers). "
                f"{_SUPPORTED_TEXT}.")
        prev = nodes[0].output_tensors[0]
    if prev is not model.outputs[0]:
        raise UnsupportedModelError(f"model {model.name!r}: its output is not its last "
                                    f"layer's output. {_SUPPORTED_TEXT}.")
    return layers


class Tracer:
    """Validates a model once; calling it traces a batch (see the module docstring)."""

    def __init__(self, model):
        import tensorflow as tf
        if not getattr(model, "built", False) or not model.weights:
            raise UnsupportedModelError("the model is not built (it has no weights yet): call "
                                        "it once or give keras.Input a shape")
        self.model = model
        shape = tuple(model.input_shape)
        self.embedding = None          # (name, matrix) for an Embedding model
        self.specs: list[LayerSpec] = []
        self._weights: dict[str, dict] = {}
        self._activation: dict[str, tuple] = {}
        layers = [l for l in _chain_layers(model) if type(l).__name__ != "InputLayer"]
        feature_shape = shape[1:]
        for pos, layer in enumerate(layers):
            cls = type(layer).__name__
            if cls not in SUPPORTED_LAYERS:
                raise _unsupported(layer, f"{cls} is not one of the traced layers")
            if cls == "Dropout":
                continue
            if cls == "Embedding":
                if pos != 0:
                    raise _unsupported(layer, "an Embedding must be the first layer")
                if getattr(layer, "mask_zero", False):
                    raise _unsupported(layer, "mask_zero=True (masking) changes the recurrence")
                self.embedding = (layer.name, layer.embeddings)
                feature_shape = (shape[1], int(layer.output_dim))
                continue
            if len(feature_shape) != (2 if cls != "Dense" else 1):
                if cls == "Dense":
                    raise _unsupported(layer, "a Dense layer fed a sequence (put "
                                              "return_sequences=False on the last recurrent "
                                              "layer)")
                raise _unsupported(layer, f"a recurrent layer needs (steps, features) inputs, "
                                          f"got shape {feature_shape}")
            kind = _KINDS[cls]
            if kind == "dense":
                spec = LayerSpec(layer.name, kind, int(layer.units), None,
                                 int(feature_shape[0]), ())
                self._weights[layer.name] = {"kernel": layer.kernel, "bias": layer.bias}
                self._activation[layer.name] = (layer.activation, None)
                feature_shape = (spec.units,)
            else:
                for flag in ("go_backwards", "stateful", "return_state"):
                    if getattr(layer, flag, False):
                        raise _unsupported(layer, f"{flag}=True")
                steps = feature_shape[0]
                if steps is None:
                    raise _unsupported(layer, "the number of time steps is not fixed (give "
                                              "keras.Input a shape with the steps)")
                cell = layer.cell
                spec = LayerSpec(layer.name, kind, int(layer.units), int(steps),
                                 int(feature_shape[1]), GATES[kind],
                                 bool(layer.return_sequences),
                                 bool(cell.reset_after) if kind == "gru" else None)
                self._weights[layer.name] = {"kernel": cell.kernel,
                                             "recurrent_kernel": cell.recurrent_kernel,
                                             "bias": cell.bias if cell.use_bias else None}
                self._activation[layer.name] = (cell.activation,
                                                getattr(cell, "recurrent_activation", None))
                feature_shape = (steps, spec.units) if spec.return_sequences else (spec.units,)
            self.specs.append(spec)
        if not self.specs:
            raise UnsupportedModelError(f"model {model.name!r} has no recurrent or Dense layer "
                                        f"to trace. {_SUPPORTED_TEXT}.")
        self.input_shape = tuple(shape[1:])          # (T, F) or (T,) for ids
        self.embedded_shape = (shape[1], int(self.embedding[1].shape[1])) \
            if self.embedding is not None else self.input_shape
        self.spec = {s.name: s for s in self.specs}
        fsig = tf.TensorSpec((None,) + self.embedded_shape, tf.float32)
        self._traced_float = tf.function(lambda x: _as_dict(self.forward(x)),
                                         input_signature=[fsig])
        if self.embedding is not None:
            isig = tf.TensorSpec((None,) + self.input_shape, tf.int32)
            self._traced_ids = tf.function(lambda ids: _as_dict(self.forward(self.embed_tf(ids))),
                                           input_signature=[isig])

    # ------------------------------------------------------------------ public
    def __call__(self, x, embedded: bool = False) -> Trace:
        x = self.check_inputs(x, embedded)
        if self.embedding is not None and not embedded:
            return _from_dict(self._traced_ids(x), self.spec)
        return _from_dict(self._traced_float(x), self.spec)

    def embed(self, ids):
        """(N, T, E) embedding vectors of int ids (N, T)."""
        if self.embedding is None:
            raise InputError("this model has no Embedding layer; its inputs are already vectors")
        return self.embed_tf(self.check_inputs(ids, embedded=False))

    def embed_tf(self, ids):
        import tensorflow as tf
        return tf.gather(self.embedding[1], ids)

    def check_inputs(self, x, embedded: bool = False):
        """A validated tf.Tensor (float32, or int32 ids), or an InputError saying what is wrong."""
        import tensorflow as tf
        ids = self.embedding is not None and not embedded
        if embedded and self.embedding is None:
            raise InputError("embedded=True needs a model with an Embedding layer")
        want = self.input_shape if ids else self.embedded_shape
        if isinstance(x, (tf.Tensor, tf.Variable)):
            dtype = x.dtype
            shape = tuple(x.shape)
        else:
            try:
                x = np.asarray(x)
            except Exception as e:   # ragged lists and the like
                raise InputError(f"inputs could not be read as an array ({e}); give an array "
                                 f"of shape (N, {', '.join(map(str, want))})") from None
            dtype, shape = x.dtype, x.shape
        what = "word ids" if ids else "inputs"
        if len(shape) != len(want) + 1 or tuple(shape[1:]) != tuple(want):
            hint = " (one input? add a batch axis: x[None])" if tuple(shape) == tuple(want) else ""
            raise InputError(f"{what} have shape {tuple(shape)}; this model expects "
                             f"(N, {', '.join(map(str, want))}){hint}")
        if shape[0] == 0:
            raise InputError(f"no {what} given (the batch is empty)")
        if ids:
            if not _is_integer(dtype):
                raise InputError(f"word ids must be integers, got dtype {_dtype_name(dtype)}; "
                                 f"give int ids (N, {want[0]}), or pass embedding vectors "
                                 f"with embedded=True")
            arr = x.numpy() if isinstance(x, (tf.Tensor, tf.Variable)) else x
            vocab = int(self.embedding[1].shape[0])
            if arr.min() < 0 or arr.max() >= vocab:
                raise InputError(f"word ids must lie in [0, {vocab}); got values from "
                                 f"{arr.min()} to {arr.max()}")
            return tf.convert_to_tensor(arr, tf.int32)
        if not (_is_float(dtype) or _is_integer(dtype)):
            raise InputError(f"inputs must be real numbers, got dtype {_dtype_name(dtype)}")
        x = tf.cast(x, tf.float32) if isinstance(x, (tf.Tensor, tf.Variable)) \
            else tf.convert_to_tensor(x, tf.float32)
        if not bool(tf.reduce_all(tf.math.is_finite(x))):
            raise InputError("inputs contain NaN or infinite values; clean or clip them first")
        return x

    # ------------------------------------------------------------------ TF graph
    def forward(self, x) -> Trace:
        """Pure TF ops from float inputs (after any Embedding); usable inside a tf.function."""
        raw, out = self.forward_steps(x)
        layers: dict[str, LayerTrace] = {}
        for spec in self.specs:
            r = raw[spec.name]
            if spec.kind == "dense":
                layers[spec.name] = LayerTrace(spec, r["x"], pre=r["pre"], out=r["out"])
                continue
            bm = {k: tf_batch_major(v) for k, v in r.items() if k != "x"}     # (N, T, .)
            h_prev = bm["h_prev"]
            h_src = {gname: h_prev for gname in spec.gates}
            if "hsrc" in bm:
                h_src["h"] = bm["hsrc"]
            layers[spec.name] = LayerTrace(spec, x if spec is self.specs[0] else prev.h,
                                           h_prev=h_prev, h_src=h_src,
                                           xU=_by_gate(bm["xU"], spec.gates),
                                           hW=_by_gate(bm["hW"], spec.gates),
                                           gates=_by_gate(bm["gates"], spec.gates),
                                           h=bm["h"], c=bm.get("c"))
            prev = layers[spec.name]
        return Trace(layers, out, x)

    def forward_steps(self, x, record=("xU", "hW", "gates", "c", "hsrc", "h_prev")):
        """The lean core of forward: per layer a dict of raw tensors, recurrent ones time-major
        (T, N, .): "x" the sources, "h", and those of record: "xU" / "hW" (all gates side by
        side, no bias), "gates", "c" (LSTM), "hsrc" (GRU reset_after=False: r * h_prev),
        "h_prev". Dense: "x", "pre", "out" (N, .). Only what is asked for is written per step,
        so coverage pays for no more than it reads. Returns (dict, model output)."""
        raw: dict[str, dict] = {}
        seq = "batch"                # x is a batch-major sequence, a time-major one, or not
        for spec in self.specs:
            if spec.kind == "dense":
                r = self._dense(spec, x)
                raw[spec.name] = r
                x, seq = r["out"], False
                continue
            x_tm = tf_batch_major(x) if seq == "batch" else x        # (the swap is its own inverse)
            r = self._recurrent(spec, x_tm, set(record))
            raw[spec.name] = r
            if spec.return_sequences:
                x, seq = r["h"], "time"
            else:
                x, seq = r["h"][-1], False
        return raw, (tf_batch_major(x) if seq == "time" else x)

    def _dense(self, spec: LayerSpec, x) -> dict:
        import tensorflow as tf
        w = self._weights[spec.name]
        pre = tf.matmul(x, w["kernel"])
        z = pre + w["bias"] if w["bias"] is not None else pre
        return {"x": x, "pre": pre, "out": self._activation[spec.name][0](z)}

    def _recurrent(self, spec: LayerSpec, x, record: set) -> dict:
        """x time-major (T, N, F); the loop writes h and only the fields in record."""
        import tensorflow as tf
        w = self._weights[spec.name]
        act, rec_act = self._activation[spec.name]
        u, kind, T = spec.units, spec.kind, spec.steps
        kernel, rk, bias = w["kernel"], w["recurrent_kernel"], w["bias"]
        n = tf.shape(x)[1]
        xU_all = tf.einsum("tnk,kj->tnj", x, kernel)            # all steps at once
        if kind == "gru" and bias is not None and spec.reset_after:
            in_bias, rec_bias = bias[0], bias[1]
        else:
            in_bias, rec_bias = bias, None
        xz_t = xU_all + in_bias if in_bias is not None else xU_all
        zeros = tf.zeros((n, u), x.dtype)
        keep = ["h"] + [k for k in ("hW", "gates", "c", "hsrc") if k in record
                        and (k != "c" or kind == "lstm")
                        and (k != "hsrc" or (kind == "gru" and not spec.reset_after))]
        ta0 = {k: tf.TensorArray(x.dtype, size=T) for k in keep}

        def step(t, h, c, ta):
            xz = xz_t[t]
            if kind == "lstm":
                hW = tf.matmul(h, rk)
                zi, zf, zc, zo = tf.split(xz + hW, 4, axis=1)
                i, f, o = rec_act(zi), rec_act(zf), rec_act(zo)
                cc = act(zc)
                c_new = f * c + i * cc
                h_new = o * act(c_new)
                gates = (i, f, cc, o)
                hsrc = h
            elif kind == "gru":
                x_z, x_r, x_h = tf.split(xz, 3, axis=1)
                if spec.reset_after:
                    hW = tf.matmul(h, rk)
                    inner = hW + rec_bias if rec_bias is not None else hW
                    r_z, r_r, r_h = tf.split(inner, 3, axis=1)
                    zg, rg = rec_act(x_z + r_z), rec_act(x_r + r_r)
                    hh = act(x_h + rg * r_h)
                    hsrc = h
                else:
                    hW_zr = tf.matmul(h, rk[:, :2 * u])
                    r_z, r_r = tf.split(hW_zr, 2, axis=1)
                    zg, rg = rec_act(x_z + r_z), rec_act(x_r + r_r)
                    hsrc = rg * h
                    hW_h = tf.matmul(hsrc, rk[:, 2 * u:])
                    hh = act(x_h + hW_h)
                    hW = tf.concat([hW_zr, hW_h], axis=1) if "hW" in ta else None
                h_new = zg * h + (1 - zg) * hh
                c_new = c
                gates = (zg, rg, hh)
            else:  # simple_rnn
                hW = tf.matmul(h, rk)
                h_new = act(xz + hW)
                c_new = c
                gates = (h_new,)
                hsrc = h
            vals = {"h": h_new, "c": c_new, "hW": hW, "hsrc": hsrc}
            new = {}
            for k, arr in ta.items():
                v = tf.concat(gates, axis=1) if k == "gates" and len(gates) > 1 else \
                    gates[0] if k == "gates" else vals[k]
                new[k] = arr.write(t, v)
            return t + 1, h_new, c_new, new

        _, _, _, ta = tf.while_loop(lambda t, *_: t < T, step, (tf.constant(0), zeros, zeros, ta0),
                                    parallel_iterations=32, maximum_iterations=T)
        out = {k: v.stack() for k, v in ta.items()}               # (T, N, .)
        out["x"] = x
        if "xU" in record:
            out["xU"] = xU_all
        if "h_prev" in record:
            out["h_prev"] = tf.concat([tf.zeros_like(out["h"][:1]), out["h"][:-1]], axis=0)
        return out


def tf_batch_major(v):
    """(T, N, .) <-> (N, T, .)."""
    import tensorflow as tf
    return tf.transpose(v, [1, 0, 2])


def _by_gate(v, gates) -> dict:
    """(N, T, G*u) -> {gate: (N, T, u)}."""
    import tensorflow as tf
    return dict(zip(gates, tf.split(v, len(gates), axis=2) if len(gates) > 1 else [v]))


_FIELDS = ("x", "h_prev", "h_src", "xU", "hW", "gates", "h", "c", "pre", "out")


def _as_dict(tr: Trace) -> dict:
    layers = {name: {f: getattr(lt, f) for f in _FIELDS if not _empty(getattr(lt, f))}
              for name, lt in tr.layers.items()}
    return {"layers": layers, "output": tr.output, "inputs": tr.inputs}


def _empty(v) -> bool:
    return v is None or (isinstance(v, dict) and not v)


def _from_dict(d: dict, specs: dict) -> Trace:
    layers = {name: LayerTrace(specs[name], **fields) for name, fields in d["layers"].items()}
    return Trace(layers, d["output"], d["inputs"])


def _is_integer(dtype) -> bool:
    import tensorflow as tf
    if isinstance(dtype, tf.DType):
        return dtype.is_integer
    return np.issubdtype(dtype, np.integer)


def _is_float(dtype) -> bool:
    import tensorflow as tf
    if isinstance(dtype, tf.DType):
        return dtype.is_floating
    return np.issubdtype(dtype, np.floating)


def _dtype_name(dtype) -> str:
    return getattr(dtype, "name", str(dtype))
