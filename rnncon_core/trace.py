"""Run a Keras model step by step with TensorFlow ops (batched, differentiable).

For every recurrent layer (each direction of a Bidirectional one) and time step the trace keeps
the input part x^t.U and the recurrent part h^(t-1).W of each gate apart (no bias), with the
gate activations, c and h; for every Dense layer (also one applied to a sequence, or wrapped in
TimeDistributed) its input, x @ kernel and its output. Layers without contributions of their own
(Conv1D, pooling, normalization, Masking, ...) run as Keras runs them. The computation is Keras'
own, so the trace's outputs equal the model's layer outputs (tests/test_trace.py holds it to
1e-5).

    tracer = Tracer(model)
    tr = tracer(x)                    # x float (N, T, F), or int ids (N, T) for an Embedding model
    tr.layers["lstm_1"].hW["f"]       # (N, T, units) h^(t-1) @ W_f
    tr.outputs["conv1d"]              # any layer's output, as Keras computes it
    tr = tracer(emb, embedded=True)   # start after the Embedding (gradients w.r.t. embeddings)
    raw, out = tracer.forward_steps(x, record=("xU", "hW"))   # lean, time-major, for coverage

Steps are numbered in the order a layer processes them: for a ``go_backwards`` layer and the
backward direction of a Bidirectional one, step 0 reads the last input element. Masked steps
(``Masking``, ``Embedding(mask_zero=True)``) carry the state over as Keras does; their
contributions are computed but flagged by the layer's ``mask`` (False = masked).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, UnsupportedModelError
from .lazy import keras, tf

RECURRENT = {"LSTM": "lstm", "GRU": "gru", "SimpleRNN": "simple_rnn"}
GATES = {"lstm": ("i", "f", "c", "o"), "gru": ("z", "r", "h"), "simple_rnn": ("h",), "dense": ()}
# layers with no contributions of their own: run as Keras runs them (NC counts those that
# compute something; the identities at inference and pure reshapes are not neurons)
PASS_THROUGH = ("Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalMaxPooling1D",
                "GlobalAveragePooling1D", "Flatten", "Reshape", "LayerNormalization",
                "BatchNormalization", "Activation", "ReLU", "LeakyReLU", "ELU", "PReLU",
                "Softmax", "Dropout", "SpatialDropout1D", "GaussianDropout", "GaussianNoise",
                "AlphaDropout", "Masking")
NOT_NEURONS = ("Flatten", "Reshape", "Dropout", "SpatialDropout1D", "GaussianDropout",
               "GaussianNoise", "AlphaDropout", "Masking")
SUPPORTED_LAYERS = ("InputLayer", "Embedding", "SimpleRNN", "LSTM", "GRU", "Bidirectional",
                    "Dense", "TimeDistributed") + PASS_THROUGH
IMAGE_SHAPES = ((28, 28), (8, 8))     # (steps, features) of the image data sets
KINDS = {"image": "image", "sequence": "real", "text": "ids"}   # a data kind -> input domain
_SUPPORTED_TEXT = ("supported: a Sequential or single-chain functional model (one input, one "
                   "output) of Embedding (mask_zero too), SimpleRNN / LSTM / GRU (also "
                   "go_backwards, inside Bidirectional, with masks), Dense (also on a sequence "
                   "or in TimeDistributed), and " + ", ".join(PASS_THROUGH))
_DEFAULT_RECORD = ("xU", "hW", "gates", "c", "hsrc", "h_prev")


@dataclass(frozen=True)
class LayerSpec:
    """One traced layer with contributions (a recurrent direction or a Dense), in model order."""
    name: str                   # the Keras layer's name; "<bidi>/forward" | "<bidi>/backward"
    kind: str                   # "lstm" | "gru" | "simple_rnn" | "dense"
    units: int
    steps: int | None           # None for a Dense on a vector; T for a Dense on a sequence
    in_dim: int
    gates: tuple[str, ...]
    return_sequences: bool = False
    reset_after: bool | None = None   # GRU only
    go_backwards: bool = False        # steps run from the last input element to the first
    masked: bool = False              # a mask reaches the layer (its raw dict has "mask")
    zero_output: bool = False         # masked steps output zeros (Keras' zero_output_for_mask)
    layer: str = ""                   # the Keras layer it belongs to (a Bidirectional's name)

    @property
    def recurrent(self) -> bool:
        return self.kind != "dense"


@dataclass(frozen=True)
class PassSpec:
    """A layer without contributions, run by Keras; ``neurons``: NC counts its output."""
    name: str
    kind: str                   # the Keras class name
    shape: tuple                # output shape without the batch axis
    neurons: bool


@dataclass
class LayerTrace:
    """Tensors of one layer for a batch. Recurrent: (N, T, .) each; Dense: (N, .) or
    (N, T, .) on a sequence. ``mask`` (N, T) bool where a mask reaches the layer."""
    spec: LayerSpec
    x: object                                   # the input sources
    h_prev: object = None                       # h^(t-1), h^0 = 0
    h_src: dict = field(default_factory=dict)   # source of gate g's recurrent part
    xU: dict = field(default_factory=dict)      # x^t @ U_g (no bias)
    hW: dict = field(default_factory=dict)      # h_src[g] @ W_g (no bias)
    gates: dict = field(default_factory=dict)   # gate activations
    h: object = None                            # the state after each step (carried when masked)
    c: object = None                            # LSTM cell state
    pre: object = None                          # Dense: x @ kernel (no bias)
    out: object = None                          # Dense: after activation
    mask: object = None                         # (N, T) True = a real step

    @property
    def output(self):
        """What the layer (direction) hands on, in its own step order (Keras' output)."""
        if self.spec.kind == "dense":
            return self.out
        h = self.h
        if self.spec.zero_output and self.mask is not None:
            h = h * _cast_like(self.mask, h)[:, :, None]
        return h if self.spec.return_sequences else h[:, -1]


@dataclass
class Trace:
    layers: dict[str, LayerTrace]
    output: object               # the model's output
    inputs: object               # what the first traced layer read (x, or embedding vectors)
    outputs: dict = field(default_factory=dict)   # every Keras layer's output by name


def _unsupported(layer, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"layer {layer.name!r} ({type(layer).__name__}) is not "
                                 f"supported: {why}. {_SUPPORTED_TEXT}.")


def _chain_layers(model) -> list:
    """The model's layers in order, refusing anything that is not a single chain."""
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


def input_domain(model) -> str:
    """What a model reads: "ids" (word ids into its Embedding), "image" (float pixels in
    [0, 1]: inputs shaped like an image data set's, unless :func:`set_kind` said otherwise)
    or "real" (any float values)."""
    first = next((l for l in model.layers if type(l).__name__ != "InputLayer"), None)
    if type(first).__name__ == "Embedding":
        return "ids"
    told = getattr(model, "__dict__", {}).get("_rnncon_kind")
    if told is not None:
        return KINDS[told]
    return "image" if tuple(model.input_shape[1:]) in IMAGE_SHAPES else "real"


def set_kind(model, kind: str | None) -> None:
    """Say what a model reads ("image", "sequence" or "text"; CLI ``--kind``), overriding the
    guess from its input shape for every check and trace of this model object: e.g. z-scored
    sensor data on a 28 x 28 model is "sequence" (any real values), not images in [0, 1]."""
    if kind is None:
        return
    if kind not in KINDS:
        raise InputError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if (KINDS[kind] == "ids") != (_embedding_layer(model) is not None):
        raise InputError(f"--kind {kind} does not fit this model: it reads "
                         f"{'word ids (text)' if kind != 'text' else 'float vectors'}")
    object.__setattr__(model, "_rnncon_kind", kind)      # not a tracked Keras attribute


def _embedding_layer(model):
    first = next((l for l in model.layers if type(l).__name__ != "InputLayer"), None)
    return first if type(first).__name__ == "Embedding" else None


def check_model(model) -> None:
    """Refuse, before any input runs, what no command can use: a stateful recurrent layer
    (its state would carry from one batch to the next) and a model that does not compute in
    float32 (the trace and the generators run float32; convert it with :func:`to_float32`)."""
    for layer in getattr(model, "layers", []):
        inner = [layer, getattr(layer, "forward_layer", None), getattr(layer, "layer", None)]
        if any(getattr(l, "stateful", False) for l in inner if l is not None):
            raise _unsupported(layer, "stateful=True (its state would carry over from one "
                                      "batch to the next; save a copy with stateful=False)")
    dtypes = other_dtypes(model)
    if dtypes:
        raise UnsupportedModelError(
            f"model {model.name!r} computes in {', '.join(dtypes)}; the trace and the "
            f"generators run float32: convert it first with "
            f"rnncon_core.trace.to_float32(model).save('model32.keras')")


def other_dtypes(model) -> list[str]:
    """The dtypes other than float32 (and ints, bools) the model's weights have: empty for a
    model that computes in float32."""
    return sorted({str(getattr(w, "dtype", "float32")) for w in model.weights}
                  - {"float32", "int32", "int64", "bool"})


def to_float32(model):
    """A float32 copy of a float64 (or float16) model: the same layers and weights, cast."""

    def cast(node, key=None):
        if isinstance(node, dict):
            if node.get("class_name") == "DTypePolicy":
                return {**node, "config": {**node["config"], "name": "float32"}}
            return {k: cast(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [cast(v) for v in node]
        if key == "dtype" and node in ("float64", "float16", "bfloat16"):
            return "float32"
        return node

    copy = type(model).from_config(cast(model.get_config()))
    if not copy.built:
        copy.build(model.input_shape)
    copy.set_weights([np.asarray(w, np.float32) if np.issubdtype(np.asarray(w).dtype,
                      np.floating) else w for w in model.get_weights()])
    return copy if isinstance(copy, keras.Model) else model


def check_model_inputs(model, x, what: str = "inputs", kind: str | None = None) -> np.ndarray:
    """Inputs checked against the model before it runs: an array (int32 ids or float32) or
    an InputError saying what is wrong and what to do. The same checks and messages for the
    CLI, the API and the dashboard (the Tracer runs them too). ``kind`` ("image", "sequence",
    "text"; CLI ``--kind``) overrides the guess from the input shape (:func:`input_domain`):
    "sequence" inputs may hold any real values, also on a 28 x 28 model."""
    inputs = getattr(model, "inputs", None) or [None]
    if len(inputs) != 1:
        raise UnsupportedModelError(f"model {model.name!r} has {len(inputs)} inputs; only one "
                                    f"is supported. {_SUPPORTED_TEXT}.")
    check_model(model)
    emb = _embedding_layer(model)
    want = tuple(model.input_shape[1:])
    vocab = int(emb.input_dim) if emb is not None else None
    set_kind(model, kind)
    return _check_array(x, want, "ids" if emb is not None else input_domain(model), vocab, what)


def _check_array(x, want: tuple, domain: str, vocab: int | None, what: str) -> np.ndarray:
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
        except Exception as e:   # ragged lists and the like
            raise InputError(f"{what} could not be read as an array ({type(e).__name__}); give "
                             f"an array of shape (N, {_dims(want)})") from None
    ids = domain == "ids"
    _check_shape(tuple(arr.shape), want, what)
    if ids:
        if not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"word ids must be integers, got dtype {arr.dtype}; give int ids "
                             f"(N, {_dims(want)}), or pass embedding vectors with embedded=True")
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= vocab:
            raise InputError(f"word ids must lie in [0, {vocab}) (the model's Embedding has "
                             f"{vocab:,} words), but {what} hold ids from {lo} to {hi}: encode "
                             f"the texts with the model's own vocabulary")
        return arr.astype(np.int32, copy=False)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == bool):
        raise InputError(f"{what} must be real numbers, got dtype {arr.dtype}")
    if domain == "image" and not np.issubdtype(arr.dtype, np.floating):
        raise InputError(f"{what} are images for this model: they must be floats in [0, 1], "
                         f"got dtype {arr.dtype}; scale 8-bit pixels first: "
                         f"x.astype('float32') / 255")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        raise InputError(f"{what} contain NaN or infinite values; clean or clip them first")
    if domain == "image":
        lo, hi = float(arr.min()), float(arr.max())
        if lo < 0 or hi > 1:
            hint = "divide 8-bit pixels by 255" if hi > 1 and lo >= 0 else \
                "scale them into [0, 1] (e.g. (x - x.min()) / (x.max() - x.min())), or, if "\
                "they are not images, say so (CLI: --kind sequence)"
            raise InputError(f"{what} are images for this model: their values must lie in "
                             f"[0, 1]; got values from {lo:.4g} to {hi:.4g}: {hint}")
    return arr


def _check_shape(shape: tuple, want: tuple, what: str) -> None:
    if len(shape) != len(want) + 1 or any(w is not None and w != s
                                           for w, s in zip(want, shape[1:])):
        hint = " (one input? add a batch axis: x[None])" if shape == want else ""
        raise InputError(f"{what} of shape {shape} do not fit this model: it expects "
                         f"(N, {_dims(want)}){hint}")
    if shape[0] == 0:
        raise InputError(f"{what} hold no input (the batch is empty): give at least one")


def _dims(shape) -> str:
    return ", ".join("T" if d is None else str(d) for d in shape)


class Tracer:
    """Validates a model once; calling it traces a batch (see the module docstring)."""

    def __init__(self, model):
        if not getattr(model, "built", False) or not model.weights:
            raise UnsupportedModelError("the model is not built (it has no weights yet): call "
                                        "it once or give keras.Input a shape")
        check_model(model)               # stateful layers, float64 weights
        self.model = model
        shape = tuple(model.input_shape)
        self.embedding = None          # (name, matrix) for an Embedding model
        self.mask_zero = False         # its Embedding masks id 0
        self.specs: list[LayerSpec] = []
        self.passes: list[PassSpec] = []
        self._ops: list[tuple] = []    # the forward program after any Embedding
        self._weights: dict[str, dict] = {}
        self._activation: dict[str, tuple] = {}
        layers = [l for l in _chain_layers(model) if type(l).__name__ != "InputLayer"]
        feat = shape[1:]               # the shape flowing through (no batch axis)
        masked = False                 # whether a mask flows with it
        for pos, layer in enumerate(layers):
            feat, masked = self._add_layer(pos, layer, shape, feat, masked)
        if not self.specs:
            raise UnsupportedModelError(f"model {model.name!r} has no recurrent or Dense layer "
                                        f"to trace. {_SUPPORTED_TEXT}.")
        self.input_shape = tuple(shape[1:])          # (T, F) or (T,) for ids
        self.embedded_shape = (shape[1], int(self.embedding[1].shape[1])) \
            if self.embedding is not None else self.input_shape
        self.spec = {s.name: s for s in self.specs}
        # NC's neurons in model order: (name, kind, output shape) of every traced layer
        # (each direction of a Bidirectional) and of the pass-through layers that compute
        passes = {p.name: p for p in self.passes if p.neurons}
        self.neuron_layers = []
        for op in self._ops:
            for spec in (op[2], op[3]) if op[0] == "bidi" else (op[1],) if op[0] != "keras" else ():
                seq = spec.steps is not None and (spec.kind == "dense" or spec.return_sequences)
                self.neuron_layers.append((spec.name, spec.kind, (spec.steps, spec.units) if seq
                                           else (spec.units,)))
            if op[0] == "keras" and op[1].name in passes:
                p = passes[op[1].name]
                self.neuron_layers.append((p.name, p.kind.lower(), tuple(p.shape)))
        fsig = tf.TensorSpec((None,) + self.embedded_shape, tf.float32)
        self._traced_float = tf.function(lambda x: _as_dict(self.forward(x)),
                                         input_signature=[fsig])
        if self.embedding is not None:
            isig = tf.TensorSpec((None,) + self.input_shape, tf.int32)
            self._traced_ids = tf.function(lambda ids: _as_dict(self.forward(self.embed_tf(ids))),
                                           input_signature=[isig])

    def _add_layer(self, pos, layer, shape, feat: tuple, masked: bool) -> tuple:
        """Add one layer to the forward program; returns the shape that flows on (no batch
        axis) and whether a mask flows with it."""
        cls = type(layer).__name__
        if cls not in SUPPORTED_LAYERS:
            raise _unsupported(layer, f"{cls} is not one of the traced layers")
        if cls == "TimeDistributed" and type(layer.layer).__name__ == "Dense":
            cls = "Dense"
        add = {"Embedding": self._add_embedding, "Bidirectional": self._add_bidirectional,
               "Dense": self._add_dense, **{c: self._add_recurrent for c in RECURRENT},
               **{c: self._add_pass_through for c in PASS_THROUGH}}.get(cls)
        if add is None:                     # TimeDistributed around anything else
            raise _unsupported(layer, f"TimeDistributed({type(layer.layer).__name__}) "
                                      f"(only TimeDistributed(Dense) is traced)")
        return add(pos, layer, shape, feat, masked)

    def _add_embedding(self, pos, layer, shape, feat, masked):
        """An Embedding (first layer only): its matrix; ids become vectors."""
        if pos != 0:
            raise _unsupported(layer, "an Embedding must be the first layer")
        self.embedding = (layer.name, layer.embeddings)
        self.mask_zero = bool(getattr(layer, "mask_zero", False))
        masked = self.mask_zero
        feat = (shape[1], int(layer.output_dim))
        return feat, masked

    def _add_recurrent(self, pos, layer, shape, feat, masked):
        """SimpleRNN / LSTM / GRU: one traced recurrent layer."""
        spec = self._recurrent_spec(layer, layer, layer.name, feat, masked)
        self._ops.append(("rnn", spec))
        feat = (spec.steps, spec.units) if spec.return_sequences else (spec.units,)
        masked = masked and spec.return_sequences
        return feat, masked

    def _add_bidirectional(self, pos, layer, shape, feat, masked):
        """A Bidirectional wrapper: its two directions, traced apart; Keras merges them."""
        if layer.merge_mode not in ("concat", "sum", "mul", "ave"):
            raise _unsupported(layer, f"merge_mode={layer.merge_mode!r} (several "
                                      f"outputs); use concat, sum, mul or ave")
        for flag in ("stateful", "return_state"):
            if getattr(layer, flag, False):
                raise _unsupported(layer, f"{flag}=True")
        f = self._recurrent_spec(layer, layer.forward_layer, f"{layer.name}/forward",
                                 feat, masked)
        b = self._recurrent_spec(layer, layer.backward_layer,
                                 f"{layer.name}/backward", feat, masked)
        self._ops.append(("bidi", layer, f, b))
        self.passes.append(PassSpec(layer.name, "Bidirectional", _out_shape(layer, feat), False))
        units = f.units * (2 if layer.merge_mode == "concat" else 1)
        feat = (f.steps, units) if f.return_sequences else (units,)
        masked = masked and f.return_sequences
        return feat, masked

    def _add_dense(self, pos, layer, shape, feat, masked):
        """Dense (or TimeDistributed(Dense)): a traced dense layer."""
        dense = layer if type(layer).__name__ == "Dense" else layer.layer
        if len(feat) not in (1, 2) or feat[-1] is None:
            raise _unsupported(layer, f"a Dense layer needs (features) or (steps, "
                                      f"features) inputs, got shape {feat}")
        if len(feat) == 2 and feat[0] is None:
            raise _unsupported(layer, "the number of time steps is not fixed (give "
                                      "keras.Input a shape with the steps)")
        spec = LayerSpec(layer.name, "dense", int(dense.units),
                         int(feat[0]) if len(feat) == 2 else None, int(feat[-1]), (),
                         masked=masked and len(feat) == 2, layer=layer.name)
        self._weights[spec.name] = {"kernel": dense.kernel, "bias": dense.bias}
        self._activation[spec.name] = (dense.activation, None)
        self.specs.append(spec)
        self._ops.append(("dense", spec))
        feat = feat[:-1] + (spec.units,)
        return feat, masked

    def _add_pass_through(self, pos, layer, shape, feat, masked):
        """A layer Keras runs as it is (dropout, reshape, pooling, ...)."""
        cls = type(layer).__name__
        out = _out_shape(layer, feat)
        self.passes.append(PassSpec(layer.name, cls, out, cls not in NOT_NEURONS))
        self._ops.append(("keras", layer))
        if masked or cls == "Masking":
            masked = bool(layer.supports_masking) and (masked or cls == "Masking")
        feat = out
        return feat, masked

    def _recurrent_spec(self, outer, layer, name: str, feat: tuple, masked: bool) -> LayerSpec:
        """The spec of one recurrent layer (or one direction of a Bidirectional ``outer``)."""
        cls = type(layer).__name__
        if cls not in RECURRENT:
            raise _unsupported(outer, f"{cls} is not a traced recurrent layer")
        for flag in ("stateful", "return_state"):
            if getattr(layer, flag, False):
                raise _unsupported(outer, f"{flag}=True")
        if len(feat) != 2:
            raise _unsupported(outer, f"a recurrent layer needs (steps, features) inputs, got "
                                      f"shape {feat}")
        if feat[0] is None:
            raise _unsupported(outer, "the number of time steps is not fixed (give "
                                      "keras.Input a shape with the steps, e.g. "
                                      "keras.Input((200,)), or trace "
                                      "rnncon_core.zoo.with_steps(model, T))")
        kind = RECURRENT[cls]
        cell = layer.cell
        spec = LayerSpec(name, kind, int(layer.units), int(feat[0]), int(feat[1]), GATES[kind],
                         bool(layer.return_sequences),
                         bool(cell.reset_after) if kind == "gru" else None,
                         go_backwards=bool(layer.go_backwards), masked=masked,
                         zero_output=bool(getattr(layer, "zero_output_for_mask", False)),
                         layer=outer.name)
        self._weights[name] = {"kernel": cell.kernel, "recurrent_kernel": cell.recurrent_kernel,
                               "bias": cell.bias if cell.use_bias else None}
        self._activation[name] = (cell.activation, getattr(cell, "recurrent_activation", None))
        self.specs.append(spec)
        return spec

    @property
    def domain(self) -> str:
        """"ids" | "image" | "real": what the model reads (see :func:`set_kind`)."""
        return input_domain(self.model)

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
        return tf.gather(self.embedding[1], ids)

    def check_inputs(self, x, embedded: bool = False):
        """A validated tf.Tensor (float32, or int32 ids), or an InputError saying what is wrong
        (shape, dtype, NaN/inf, ids outside the vocabulary, images outside [0, 1])."""
        if embedded and self.embedding is None:
            raise InputError("embedded=True needs a model with an Embedding layer")
        ids = self.embedding is not None and not embedded
        if ids:
            arr = _check_array(x, self.input_shape, "ids", int(self.embedding[1].shape[0]),
                               "inputs")
            return tf.convert_to_tensor(arr, tf.int32)
        domain = "real" if embedded else self.domain
        if isinstance(x, (tf.Tensor, tf.Variable)) and x.dtype.is_floating:
            _check_shape(tuple(x.shape), self.embedded_shape, "inputs")   # stays a tensor
            x = tf.cast(x, tf.float32)
            if not bool(tf.reduce_all(tf.math.is_finite(x))):
                raise InputError("inputs contain NaN or infinite values; clean or clip them "
                                 "first")
            if domain == "image" and (float(tf.reduce_min(x)) < 0 or float(tf.reduce_max(x)) > 1):
                _check_array(x.numpy(), self.embedded_shape, domain, None, "inputs")
            return x
        return tf.convert_to_tensor(_check_array(x, self.embedded_shape, domain, None, "inputs"))

    # ------------------------------------------------------------------ TF graph
    def forward(self, x) -> Trace:
        """Pure TF ops from float inputs (after any Embedding); usable inside a tf.function."""
        raw, out = self.forward_steps(x)
        layers: dict[str, LayerTrace] = {}
        outputs: dict = {} if self.embedding is None else {self.embedding[0]: x}
        for spec in self.specs:
            r = raw[spec.name]
            mask = tf_batch_major(r["mask"]) if "mask" in r else None
            if spec.kind == "dense":
                bm = (lambda v: tf_batch_major(v)) if spec.steps else (lambda v: v)
                layers[spec.name] = LayerTrace(spec, bm(r["x"]), pre=bm(r["pre"]),
                                               out=bm(r["out"]), mask=mask)
                outputs[spec.name] = layers[spec.name].output
                continue
            bm = {k: tf_batch_major(v) for k, v in r.items() if k != "mask"}     # (N, T, .)
            h_prev = bm["h_prev"]
            h_src = {gname: h_prev for gname in spec.gates}
            if "hsrc" in bm:
                h_src["h"] = bm["hsrc"]
            layers[spec.name] = LayerTrace(spec, bm["x"], h_prev=h_prev, h_src=h_src,
                                           xU=_by_gate(bm["xU"], spec.gates),
                                           hW=_by_gate(bm["hW"], spec.gates),
                                           gates=_by_gate(bm["gates"], spec.gates),
                                           h=bm["h"], c=bm.get("c"), mask=mask)
            if spec.layer == spec.name:
                outputs[spec.name] = layers[spec.name].output
        for p in self.passes:
            outputs[p.name] = raw[p.name]["out"]
        return Trace(layers, out, x, outputs)

    def padding_mask(self, x):
        """(N, T) bool mask of embedded inputs for an Embedding(mask_zero=True): a step is
        padding where its vector is the embedding of id 0 (exact for embedded ids)."""
        return tf.reduce_any(tf.not_equal(x, self.embedding[1][0]), axis=-1)

    def forward_steps(self, x, record=_DEFAULT_RECORD, mask=None, step_fn=None):
        """The lean core of forward: per traced layer a dict of raw tensors, recurrent ones
        time-major (T, N, .) in the layer's own step order: "x" the sources, "h" (the state
        after each step), "mask" (T, N) where a mask reaches the layer, and those of record:
        "xU" / "hW" (all gates side by side, no bias), "gates", "c" (LSTM), "hsrc" (GRU
        reset_after=False: r * h_prev), "h_prev". Dense: "x", "pre", "out" ((N, .), or
        time-major (T, N, .) on a sequence). Layers without contributions (and a
        Bidirectional's merged output): {"out": batch-major tensor}. Only what is asked for is
        written per step, so coverage pays for no more than it reads. ``mask`` (N, T): real
        steps of the inputs (default: from the vectors for an Embedding(mask_zero=True)).
        ``step_fn(spec, xU_t, hW_t, mask_t)``, called inside each recurrent layer's step loop
        with the step's x^t·U and h^(t-1)·W ((N, gates*units) each, no bias; mask_t (N,) or
        None), returns a dict of tensors (keys ``step_fn.keys``), written per step like the
        record (T, ...): reductions of a step's contributions made while they are in cache.
        Returns (dict, model output)."""
        record = set(record)
        if mask is None and self.mask_zero:
            mask = self.padding_mask(x)
        raw: dict[str, dict] = {}
        seq = "batch"         # x is a batch-major sequence, a time-major one ("time"), or not
        for op in self._ops:
            kind = op[0]
            if kind == "keras":
                layer = op[1]
                xb = tf_batch_major(x) if seq == "time" else x
                kw = {"mask": mask} if mask is not None and layer._call_has_mask_arg else {}
                y = layer(xb, training=False, **kw)
                mask = layer.compute_mask(xb, mask) if layer.supports_masking else None
                raw[layer.name] = {"out": y}
                x, seq = y, ("batch" if len(y.shape) == 3 else False)
            elif kind == "dense":
                spec = op[1]
                if spec.steps:        # one contribution set per step: time-major like the rest
                    x_tm = tf_batch_major(x) if seq == "batch" else x
                    r = self._dense(spec, x_tm)
                    if spec.masked and mask is not None:
                        r["mask"] = tf.transpose(mask)
                    x, seq = r["out"], "time"
                else:
                    r = self._dense(spec, x)
                    x, seq = r["out"], False
                raw[spec.name] = r
            elif kind == "rnn":
                spec = op[1]
                x_tm = tf_batch_major(x) if seq == "batch" else x
                r, y = self._direction(spec, x_tm, mask, record, step_fn)
                raw[spec.name] = r
                if spec.return_sequences:
                    x, seq = y, "time"
                else:
                    x, seq, mask = y[-1], False, None
            else:   # "bidi"
                layer, fs, bs = op[1:]
                x_tm = tf_batch_major(x) if seq == "batch" else x
                rf, yf = self._direction(fs, x_tm, mask, record, step_fn)
                rb, yb = self._direction(bs, x_tm, mask, record, step_fn)
                raw[fs.name], raw[bs.name] = rf, rb
                if fs.return_sequences:
                    # Keras flips the backward outputs back into the inputs' order
                    yb = tf.reverse(yb, [0])
                    y, seq = merge_directions(layer.merge_mode, yf, yb), "time"
                else:
                    y, seq, mask = merge_directions(layer.merge_mode, yf[-1], yb[-1]), False, None
                raw[layer.name] = {"out": tf_batch_major(y) if seq == "time" else y}
                x = y
        return raw, (tf_batch_major(x) if seq == "time" else x)

    def _direction(self, spec: LayerSpec, x_tm, mask, record: set, step_fn=None):
        """One recurrent layer (direction) on time-major inputs: (raw dict, outputs (T, N, u)
        in its own step order, zeros at masked steps where Keras gives zeros)."""
        m_tm = tf.transpose(mask) if (spec.masked and mask is not None) else None
        if spec.go_backwards:
            x_tm = tf.reverse(x_tm, [0])
            m_tm = None if m_tm is None else tf.reverse(m_tm, [0])
        r = self._recurrent(spec, x_tm, record, m_tm, step_fn)
        y = r["h"]
        if m_tm is not None:
            r["mask"] = m_tm
            if spec.zero_output:
                y = y * _cast_like(m_tm, y)[:, :, None]
        return r, y

    def _dense(self, spec: LayerSpec, x) -> dict:
        w = self._weights[spec.name]
        pre = tf.matmul(x, w["kernel"]) if len(x.shape) == 2 else \
            tf.einsum("tnk,kj->tnj", x, w["kernel"])
        z = pre + w["bias"] if w["bias"] is not None else pre
        return {"x": x, "pre": pre, "out": self._activation[spec.name][0](z)}

    def _recurrent(self, spec: LayerSpec, x, record: set, mask=None, step_fn=None) -> dict:
        """x time-major (T, N, F); the loop writes h, only the fields in record and what
        step_fn returns. With a mask (T, N), masked steps keep the previous h and c (Keras'
        masked step)."""
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
        step_keys = tuple(step_fn.keys) if step_fn is not None else ()
        ta0 = {k: tf.TensorArray(x.dtype, size=T) for k in keep + list(step_keys)}

        need_hw = "hW" in ta0 or step_fn is not None
        cell = {"lstm": _lstm_step, "gru": _gru_step}.get(kind, _simple_rnn_step)
        # the loop reads its steps from TensorArrays: the gradient of a slice xz_t[t] of a
        # captured tensor is a dense (T, N, .) tensor per step (T^2 work for the backward pass;
        # 2/3 of a generator's gradient through a 28-step LSTM), a read's is the step's slice
        per_step = {"xz": xz_t, **({"xU": xU_all} if step_fn is not None else {}),
                    **({"mask": mask} if mask is not None else {})}
        inputs = {k: tf.TensorArray(v.dtype, size=T).unstack(v) for k, v in per_step.items()}

        def step(t, h, c, ta):
            at = {k: v.read(t) for k, v in inputs.items()}
            h_new, c_new, gates, hW, hsrc = cell(at["xz"], h, c, rk, act, rec_act, u, spec,
                                                 rec_bias, need_hw)
            if mask is not None:      # a masked step carries the state over
                m = at["mask"][:, None]
                h_new = tf.where(m, h_new, h)
                c_new = tf.where(m, c_new, c)
            vals = {"h": h_new, "c": c_new, "hW": hW, "hsrc": hsrc}
            if step_fn is not None:
                vals.update(step_fn(spec, at["xU"], hW, at.get("mask")))
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


# One time step of each recurrent cell, as Keras computes it, with the recurrent part h·W kept:
# each returns (h_new, c_new, gate activations, hW, the source of the recurrent part).

def _lstm_step(xz, h, c, rk, act, rec_act, u, spec, rec_bias, need_hw):
    hW = tf.matmul(h, rk)
    zi, zf, zc, zo = tf.split(xz + hW, 4, axis=1)
    i, f, o = rec_act(zi), rec_act(zf), rec_act(zo)
    cc = act(zc)
    c_new = f * c + i * cc
    return o * act(c_new), c_new, (i, f, cc, o), hW, h


def _gru_step(xz, h, c, rk, act, rec_act, u, spec, rec_bias, need_hw):
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
        hW = tf.concat([hW_zr, hW_h], axis=1) if need_hw else None
    return zg * h + (1 - zg) * hh, c, (zg, rg, hh), hW, hsrc


def _simple_rnn_step(xz, h, c, rk, act, rec_act, u, spec, rec_bias, need_hw):
    hW = tf.matmul(h, rk)
    h_new = act(xz + hW)
    return h_new, c, (h_new,), hW, h


def merge_directions(mode: str, a, b):
    if mode == "concat":
        return tf.concat([a, b], axis=-1)
    if mode == "sum":
        return a + b
    if mode == "ave":
        return (a + b) / 2
    return a * b                  # "mul"


def _out_shape(layer, feat: tuple) -> tuple:
    return tuple(layer.compute_output_shape((None,) + tuple(feat)))[1:]


def _cast_like(mask, v):
    return tf.cast(mask, v.dtype)


def tf_batch_major(v):
    """(T, N, ...) <-> (N, T, ...)."""
    perm = [1, 0] + list(range(2, len(v.shape)))
    return tf.transpose(v, perm)


def _by_gate(v, gates) -> dict:
    """(N, T, G*u) -> {gate: (N, T, u)}."""
    return dict(zip(gates, tf.split(v, len(gates), axis=2) if len(gates) > 1 else [v]))


_FIELDS = ("x", "h_prev", "h_src", "xU", "hW", "gates", "h", "c", "pre", "out", "mask")


def _as_dict(tr: Trace) -> dict:
    layers = {name: {f: getattr(lt, f) for f in _FIELDS if not _empty(getattr(lt, f))}
              for name, lt in tr.layers.items()}
    return {"layers": layers, "output": tr.output, "inputs": tr.inputs, "outputs": tr.outputs}


def _empty(v) -> bool:
    return v is None or (isinstance(v, dict) and not v)


def _from_dict(d: dict, specs: dict) -> Trace:
    layers = {name: LayerTrace(specs[name], **fields) for name, fields in d["layers"].items()}
    return Trace(layers, d["output"], d["inputs"], dict(d["outputs"]))


def fingerprint(model) -> str:
    """sha256 (first 16 hex digits) of a model's weights (a Keras model or a ``Tracer``): every
    weight array's shape, dtype and bytes, in order. The same weights loaded from another path
    give the same fingerprint; retrained weights another."""
    model = model.model if isinstance(model, Tracer) else model
    h = hashlib.sha256()
    for w in model.weights:
        a = np.ascontiguousarray(np.asarray(w.numpy() if hasattr(w, "numpy") else w))
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]
