"""Import an ONNX recurrent model (what ``torch.onnx.export`` writes) as an equivalent Keras model.

The graph is read symbolically, node by node, from its one input to its one output: constants
(initializers, Constant nodes, Shape chains) are folded with numpy; the tensor that flows from
the input is described by the chain of Keras layers that computes it and by how the ONNX
tensor's axes lie over that Keras tensor (batch, time, features, directions, unit axes), so the
exporters' plumbing (Transpose, Reshape, Squeeze, Slice/Gather of the last step, Concat of
directions) only moves labels. What computes becomes a layer the tracer supports: LSTM / GRU /
RNN nodes (forward, reverse, bidirectional, stacked) -> LSTM / GRU / SimpleRNN (in
Bidirectional, or go_backwards), Gemm / MatMul+Add -> Dense, Gather on an initializer ->
Embedding, Relu / Tanh / Sigmoid / Softmax -> the Dense's activation (or an activation layer).
Anything else is refused with one line naming the node, its op and what is supported.

The Keras model is then checked against onnxruntime on one random batch: the import is refused
when the largest difference of the outputs exceeds ``MAX_DIFFERENCE``. docs/onnx.md has the
weight mappings both ways (``torch_weights`` gives a layer's weights back in PyTorch's names).
"""
from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .errors import ModelLoadError, UnsupportedModelError
from .io import versions
from .lazy import keras

MAX_DIFFERENCE = 1e-5          # float32: the largest output difference accepted on import
CHECK_BATCH, CHECK_STEPS = 8, 10   # the random batch when the file leaves them open
SUPPORTED = ("supported: LSTM, GRU and RNN nodes (forward, reverse or bidirectional, default "
             "activations, no clip, peepholes or sequence lengths, zero initial states), Gemm "
             "and MatMul+Add (Dense), Gather on an initializer (Embedding), Relu, Tanh, "
             "Sigmoid, Softmax, Dropout and Identity, and the plumbing around them (Transpose, "
             "Reshape, Flatten, Squeeze, Unsqueeze, Slice, Gather, Concat, Constant, "
             "ConstantOfShape, Expand, Shape, Cast, arithmetic on shapes), in one chain from "
             "one input to one output")
_INT_MAX = 2 ** 62


class _Refused(Exception):
    """Why a node cannot be imported (turned into one UnsupportedModelError line)."""


# ---------------------------------------------------------------- symbolic values

class Sym:
    """A dimension the file leaves open (the batch, or the steps): equal by name; times 1 is
    itself, any other arithmetic is refused."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __mul__(self, other):
        if isinstance(other, (int, np.integer)) and other == 1:
            return self
        raise _Refused(f"arithmetic on the open dimension {self.name!r}")

    __rmul__ = __mul__

    def __eq__(self, other):
        return isinstance(other, Sym) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return self.name


class _Zeros:
    """A tensor of zeros (ConstantOfShape(0), Expand of 0 and their slices): the initial
    states torch writes when none is given. ``shape`` where it is known (may hold Syms)."""

    def __init__(self, shape=None):
        self.shape = shape


ZEROS = _Zeros()


@dataclass(frozen=True)
class Layer:
    """One Keras layer to build: ``kind`` input | embedding | rnn | dense | activation."""
    kind: str
    config: tuple              # sorted (key, value) pairs
    weights: tuple = ()        # numpy arrays, in Keras' order
    node: str = ""             # the ONNX node it comes from

    def get(self, key, default=None):
        return dict(self.config).get(key, default)

    def with_config(self, **kw) -> "Layer":
        return replace(self, config=tuple(sorted({**dict(self.config), **kw}.items())))


def _layer(kind: str, node: str = "", weights=(), **config) -> Layer:
    return Layer(kind, tuple(sorted(config.items())), tuple(weights), node)


@dataclass(frozen=True)
class Axis:
    """One axis of an ONNX tensor over a Keras tensor (N, [T,] C): kind N (batch), T (steps;
    ``info`` True when the file's order is the reverse of Keras'), C (features; ``info`` the
    directions it holds, None = all), 1 (a unit axis Keras does not have), D (directions or
    stacked states: ``info`` one (chain, directions) per row) with H (each row's features)."""
    kind: str
    size: object               # int or Sym
    info: object = None


@dataclass(frozen=True)
class Dyn:
    """The tensor that flows from the input: the chain of layers computing it (None where a
    D axis holds rows of several) and its axes in the file's order."""
    chain: tuple | None
    axes: tuple

    def index(self, kind: str) -> int | None:
        return next((i for i, a in enumerate(self.axes) if a.kind == kind), None)


class _Unusable:
    def __init__(self, why: str):
        self.why = why


def _directions(chain: tuple) -> int:
    last = chain[-1]
    return 2 if last.kind == "rnn" and last.get("direction") == "bidirectional" else 1


def _width(chain: tuple, dirs=None) -> int:
    last = chain[-1]
    if last.kind == "rnn":
        return last.get("units") * (len(dirs) if dirs is not None else _directions(chain))
    return last.get("units")


def _feature_axis(chain: tuple, dirs) -> Axis:
    if dirs is not None and tuple(dirs) == tuple(range(_directions(chain))):
        dirs = None
    return Axis("C", _width(chain, dirs), dirs)


# ---------------------------------------------------------------- reading the file

def read_model(path: Path):
    """The ONNX ModelProto of ``path`` with its external data (only from files inside the
    model's own folder), or ModelLoadError."""
    import onnx
    from onnx import external_data_helper
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf raises several kinds for a file that is not ONNX
        raise ModelLoadError(f"{path.name} is not a valid ONNX file ({type(e).__name__}: "
                             f"{str(e)[:200]}); export it again with torch.onnx.export") from None
    folder = path.resolve().parent
    for tensor in external_data_helper._get_all_tensors(proto):
        if not external_data_helper.uses_external_data(tensor):
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = (folder / location).resolve()
        if Path(location).is_absolute() or not target.is_relative_to(folder):
            raise ModelLoadError(f"refused to load {path.name}: tensor {tensor.name!r} reads "
                                 f"its data from {location!r}, outside the model's folder; "
                                 f"keep the external data files beside the .onnx file")
        if not target.is_file():
            raise ModelLoadError(f"{path.name}: tensor {tensor.name!r} reads its data from "
                                 f"{location!r}, which is missing beside the model")
    try:
        external_data_helper.load_external_data_for_model(proto, str(folder))
    except Exception as e:
        raise ModelLoadError(f"could not read the external data of {path.name} "
                             f"({type(e).__name__}: {str(e)[:200]})") from None
    return proto


# ---------------------------------------------------------------- the graph, symbolically

def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _const(v, what: str) -> np.ndarray:
    if not isinstance(v, np.ndarray):
        raise _Refused(f"{what} must be a constant")
    return v


def _ints(v, what: str) -> list:
    return [x if isinstance(x, Sym) else int(x) for x in np.asarray(_const(v, what)).reshape(-1)]


def _axis(a: int, rank: int) -> int:
    a = int(a)
    if not -rank <= a < rank:
        raise _Refused(f"axis {a} out of range for rank {rank}")
    return a % rank


class _Graph:
    """Evaluates the nodes one output needs, in the file's (topological) order."""

    def __init__(self, graph, opset: int, inp: Dyn, input_name: str):
        from onnx import numpy_helper
        self.graph, self.opset = graph, opset
        self.values: dict = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.values[input_name] = inp
        self.progress = 0
        self.node_name = ""
        self.used: list = []          # the nodes the output needs, in order

    def run(self, output: str):
        needed, producers = {output}, {o: n for n in self.graph.node for o in n.output}
        todo = [output]
        while todo:
            node = producers.get(todo.pop())
            for name in (node.input if node is not None else []):
                if name and name not in needed:
                    needed.add(name)
                    todo.append(name)
        for node in self.graph.node:
            if not any(o in needed for o in node.output):
                continue
            self.node_name = node.name or node.output[0]
            try:
                if node.domain not in ("", "ai.onnx"):
                    raise _Refused(f"its domain {node.domain!r} is not the standard one")
                ins = [self._value(n) if n else None for n in node.input]
                outs = self._evaluate(node, ins)
            except _Refused as e:
                raise _Refused(f"node {self.node_name!r} ({node.op_type}): {e}") from None
            except Exception as e:   # a malformed node (missing attribute, wrong rank, ...)
                raise _Refused(f"node {self.node_name!r} ({node.op_type}) could not be read "
                               f"({type(e).__name__}: {str(e)[:200]})") from None
            for name, v in zip(node.output, outs):
                if name:
                    self.values[name] = v
            self.progress += 1
            self.used.append(node)
        return self._value(output)

    def _value(self, name: str):
        if name not in self.values:
            raise _Refused(f"input {name!r} is neither an initializer nor computed before")
        v = self.values[name]
        if isinstance(v, _Unusable):
            raise _Refused(f"it reads {v.why}, which has no Keras equivalent")
        return v

    def _evaluate(self, node, ins: list) -> list:
        op, at = node.op_type, _attrs(node)
        if op == "Constant":
            return [_constant_attr(at)]
        if op in ("LSTM", "GRU", "RNN"):
            return _recurrent(node, op, ins, at)
        if op in ("ConstantOfShape", "Expand"):
            zeros = _open_zeros(op, ins, at)
            if zeros is not None:
                return [zeros]
        if ins and all(isinstance(v, np.ndarray) or v is None for v in ins) and op in _FOLD:
            try:
                folded = _FOLD[op](self, ins, at)
                return [folded if isinstance(folded, np.ndarray) else np.asarray(
                    folded, dtype=object if isinstance(folded, Sym) else None)]
            except (TypeError, ValueError) as e:
                raise _Refused(f"its constant inputs could not be folded ({e})") from None
        if op == "Shape" and isinstance(ins[0], _Zeros) and ins[0].shape is not None:
            sizes = np.asarray(ins[0].shape, dtype=object)[at.get("start", 0):at.get("end")]
            return [sizes if any(isinstance(x, Sym) for x in sizes) else sizes.astype(np.int64)]
        if op in _KEEPS_ZEROS and isinstance(ins[0], _Zeros) and (op != "Concat" or all(
                isinstance(v, _Zeros) or (isinstance(v, np.ndarray) and not np.any(v))
                for v in ins)):
            return [ZEROS] + [None] * (len(node.output) - 1)
        handler = _DYN.get(op)
        if handler is None:
            raise _Refused(f"the op is not supported; {SUPPORTED}")
        dyn = [v for v in ins if isinstance(v, Dyn)]
        if not dyn:
            raise _Refused(f"its inputs are not supported here; {SUPPORTED}")
        return handler(self, ins, at)

    # inputs that moved to attributes (or back) across opsets
    def axes_of(self, ins, at, index: int, default=None):
        if len(ins) > index and ins[index] is not None:
            return _ints(ins[index], "axes")
        return list(at["axes"]) if "axes" in at else default


def _open_zeros(op: str, ins: list, at: dict):
    """Zeros of a shape the file leaves open (ConstantOfShape or Expand of a zero); None when
    the shape is known (folded as a constant)."""
    from onnx import numpy_helper
    shape = ins[0] if op == "ConstantOfShape" else ins[1] if len(ins) > 1 else None
    if not isinstance(shape, np.ndarray) or not any(isinstance(x, Sym) for x in shape.flat):
        return None
    if op == "ConstantOfShape":
        value = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1)
    else:
        value = ins[0]
    if not isinstance(value, np.ndarray) or np.any(value):
        raise _Refused("only zeros are supported in a tensor of an open shape")
    return _Zeros(list(shape.reshape(-1)))


def _constant_attr(at: dict):
    from onnx import numpy_helper
    if "value" in at:
        return numpy_helper.to_array(at["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in at:
            return np.asarray(at[key], dtype)
    raise _Refused("only numeric constants are supported")


# ------------------------------------------------ folding constants (numpy, shapes with Syms)

def _slice_params(g, ins, at):
    if g.opset < 10:
        starts, ends = list(at["starts"]), list(at["ends"])
        axes = list(at.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(ins[1], "starts"), _ints(ins[2], "ends")
        axes = _ints(ins[3], "axes") if len(ins) > 3 and ins[3] is not None \
            else list(range(len(starts)))
        steps = _ints(ins[4], "steps") if len(ins) > 4 and ins[4] is not None \
            else [1] * len(starts)
    if any(isinstance(x, Sym) for x in starts + ends):
        raise _Refused("slice bounds must be constants")
    return starts, ends, axes, steps


def _fold_slice(g, ins, at):
    data = ins[0]
    starts, ends, axes, steps = _slice_params(g, ins, at)
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        e = None if (e >= _INT_MAX and st > 0) else e
        index[_axis(a, data.ndim)] = slice(s, e, st)
    return data[tuple(index)]


def _fold_gather(g, ins, at):
    data, idx = ins[0], np.asarray(ins[1]).astype(np.int64)
    axis = _axis(at.get("axis", 0), data.ndim)
    return np.take(data, np.where(idx < 0, idx + data.shape[axis], idx), axis=axis)


def _fold_reshape(g, ins, at):
    data, shape = ins[0], _ints(ins[1], "shape")
    shape = [data.shape[i] if (d == 0 and not at.get("allowzero", 0)) else d
             for i, d in enumerate(shape)]
    return data.reshape(shape)


def _fold_squeeze(g, ins, at):
    axes = g.axes_of(ins, at, 1)
    if axes is None:
        return np.squeeze(ins[0])
    return np.squeeze(ins[0], axis=tuple(_axis(a, ins[0].ndim) for a in axes))


def _fold_unsqueeze(g, ins, at):
    axes = g.axes_of(ins, at, 1)
    rank = ins[0].ndim + len(axes)
    out = ins[0]
    for a in sorted(_axis(a, rank) for a in axes):
        out = np.expand_dims(out, a)
    return out


def _fold_cast(g, ins, at):
    from onnx import helper
    if ins[0].dtype == object:
        return ins[0]
    return ins[0].astype(helper.tensor_dtype_to_np_dtype(at["to"]))


def _fold_shape(g, ins, at):
    shape = np.asarray(ins[0].shape, np.int64)
    return shape[at.get("start", 0):at.get("end", None)]


def _fold_const_of_shape(g, ins, at):
    from onnx import numpy_helper
    value = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
    return np.full(_ints(ins[0], "shape"), value.reshape(-1)[0], value.dtype)


def _binary(fn):
    return lambda g, ins, at: np.asarray(fn(ins[0], ins[1]))


_FOLD = {
    "Identity": lambda g, ins, at: ins[0],
    "Transpose": lambda g, ins, at: np.transpose(ins[0], at.get("perm")),
    "Reshape": _fold_reshape, "Squeeze": _fold_squeeze, "Unsqueeze": _fold_unsqueeze,
    "Slice": _fold_slice, "Gather": _fold_gather, "Cast": _fold_cast, "Shape": _fold_shape,
    "Concat": lambda g, ins, at: np.concatenate([np.atleast_1d(v) for v in ins],
                                                axis=at.get("axis", 0)),
    "ConstantOfShape": _fold_const_of_shape,
    "Expand": lambda g, ins, at: ins[0] * np.ones(_ints(ins[1], "shape"), ins[0].dtype),
    "Flatten": lambda g, ins, at: ins[0].reshape(
        int(np.prod(ins[0].shape[:at.get("axis", 1)])), -1),
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": lambda g, ins, at: np.asarray(ins[0] // ins[1] if np.issubdtype(
        np.asarray(ins[0]).dtype, np.integer) else ins[0] / ins[1]),
}
_KEEPS_ZEROS = ("Identity", "Slice", "Gather", "Squeeze", "Unsqueeze", "Reshape", "Expand",
                "Cast", "Transpose", "Concat")


# ------------------------------------------------ the flowing tensor

def _shape_of(d: Dyn) -> np.ndarray:
    return np.asarray([a.size for a in d.axes], dtype=object)


def _dyn_shape(g, ins, at):
    sizes = _shape_of(ins[0])[at.get("start", 0):at.get("end", None)]
    return [sizes if any(isinstance(s, Sym) for s in sizes) else sizes.astype(np.int64)]


def _rows_value(d: Dyn, rows: tuple, position: int, keep_axis: bool) -> Dyn:
    """``d`` with its D axis (at ``position``) cut down to ``rows``."""
    axes = list(d.axes)
    h = d.index("H")
    if len(rows) == 1:
        chain, dirs = rows[0]
        axes[h] = _feature_axis(chain, dirs)
        if keep_axis:
            axes[position] = Axis("1", 1)
        else:
            del axes[position]
        return Dyn(chain, tuple(axes))
    axes[position] = Axis("D", len(rows), tuple(rows))
    return Dyn(None, tuple(axes))


def _final(chain: tuple, axis: Axis, index) -> tuple:
    """The chain whose last recurrent layer returns only the step it processes last, when the
    file's ``index`` of the T axis ``axis`` is that step; else refused."""
    steps, reversed_ = axis.size, bool(axis.info)
    if isinstance(steps, Sym):
        if index not in (0, -1):
            raise _Refused("it selects a step that depends on the open number of steps")
        last = index == (0 if reversed_ else -1)
    else:
        last = index % steps == (0 if reversed_ else steps - 1)
    if not last:
        raise _Refused(f"it selects step {index} of a sequence; only the step the recurrent "
                       f"layer processes last (its final state) is supported")
    k = max(i for i, layer in enumerate(chain) if layer.kind in ("rnn", "input", "embedding"))
    layer = chain[k]
    if layer.kind != "rnn":
        raise _Refused("it selects a step of the input; only a recurrent layer's last step "
                       "is supported")
    if layer.get("direction") == "bidirectional":
        raise _Refused("the last step of a bidirectional layer's output holds the backward "
                       "direction after one step only, which Keras cannot express; use "
                       "torch.cat((h_n[-2], h_n[-1]), dim=1) (the final states) instead")
    return chain[:k] + (layer.with_config(return_sequences=False),) + chain[k + 1:]


def _dyn_gather(g, ins, at):
    data, idx = ins
    if not isinstance(data, Dyn):
        if not isinstance(data, np.ndarray) or data.ndim != 2 or at.get("axis", 0) != 0:
            raise _Refused("only an embedding (a 2-D initializer indexed by the input ids) is "
                           "supported")
        return [_embedding(g, data, idx)]
    index = np.asarray(_const(idx, "the index"))
    if index.size != 1:
        raise _Refused("only one index is supported")
    position = _axis(at.get("axis", 0), len(data.axes))
    return [_select(data, position, index.reshape(-1)[0], keep_axis=index.ndim > 0)]


def _select(d: Dyn, position: int, i, keep_axis: bool) -> Dyn:
    axis = d.axes[position]
    i = i if isinstance(i, Sym) else int(i)
    if axis.kind == "D":
        row = axis.info[i]
        return _rows_value(d, (row,), position, keep_axis)
    if axis.kind == "1" and i in (0, -1):
        return d if keep_axis else Dyn(d.chain, d.axes[:position] + d.axes[position + 1:])
    if axis.kind == "T":
        chain = _final(d.chain, axis, i)
        axes = list(d.axes)
        if keep_axis:
            axes[position] = Axis("1", 1)
        else:
            del axes[position]
        return Dyn(chain, tuple(axes))
    raise _Refused({"N": "it selects inputs of the batch", "C": "it selects features"}
                   .get(axis.kind, "it selects part of an axis") + "; only the last step and "
                   "one direction or layer of the final states are supported")


def _dyn_slice(g, ins, at):
    d = ins[0]
    starts, ends, axes, steps = _slice_params(g, ins, at)
    for s, e, a, st in zip(starts, ends, axes, steps):
        position = _axis(a, len(d.axes))
        axis = d.axes[position]
        size = axis.size
        if st == 1 and s == 0 and (e >= _INT_MAX or (not isinstance(size, Sym) and e >= size)):
            continue                                      # the whole axis
        if axis.kind == "1" and st == 1 and _one_step(s, e, 1) is not None:
            continue
        if axis.kind == "D":
            rows = axis.info[slice(s, None if e >= _INT_MAX else e, st)]
            if not rows:
                raise _Refused("it selects no row")
            d = _rows_value(d, tuple(rows), position, keep_axis=True)
            continue
        if axis.kind == "T" and st == 1:
            one = _one_step(s, e, size)
            if one is not None:
                d = _select(d, position, one, keep_axis=True)
                continue
        raise _Refused(f"it slices [{s}:{e}:{st}] of a {_AXIS_NAMES[axis.kind]} axis; only "
                       f"the last step and rows of the final states are supported")
    return [d]


def _one_step(start: int, end: int, size) -> int | None:
    """The one step a slice [start:end] selects (-1 for the last of open steps), else None."""
    if isinstance(size, Sym):
        if start == -1 and end >= _INT_MAX:
            return -1
        return start if start >= 0 and end == start + 1 else None
    lo = max(0, start + size if start < 0 else min(start, size))
    hi = size if end >= _INT_MAX else max(0, end + size if end < 0 else min(end, size))
    return lo if hi - lo == 1 else None


_AXIS_NAMES = {"N": "batch", "T": "time", "C": "feature", "1": "unit", "D": "direction",
               "H": "feature"}


def _dyn_transpose(g, ins, at):
    d = ins[0]
    perm = at.get("perm", list(range(len(d.axes)))[::-1])
    return [Dyn(d.chain, tuple(d.axes[p] for p in perm))]


def _dyn_squeeze(g, ins, at):
    d = ins[0]
    axes = g.axes_of(ins, at, 1)
    if axes is None:
        axes = [i for i, a in enumerate(d.axes) if a.kind == "1"]
    positions = {_axis(a, len(d.axes)) for a in axes}
    for p in positions:
        if d.axes[p].kind != "1":
            raise _Refused(f"it squeezes a {_AXIS_NAMES[d.axes[p].kind]} axis")
    return [Dyn(d.chain, tuple(a for i, a in enumerate(d.axes) if i not in positions))]


def _dyn_unsqueeze(g, ins, at):
    d = ins[0]
    axes = g.axes_of(ins, at, 1)
    rank = len(d.axes) + len(axes)
    out = list(d.axes)
    for p in sorted(_axis(a, rank) for a in axes):
        out.insert(p, Axis("1", 1))
    return [Dyn(d.chain, tuple(out))]


def _norm(size) -> tuple:
    """A size as (integer factor, open dimensions)."""
    return (1, (size.name,)) if isinstance(size, Sym) else (int(size), ())


def _times(a: tuple, b: tuple) -> tuple:
    return a[0] * b[0], tuple(sorted(a[1] + b[1]))


def _reshape_to(d: Dyn, target: list) -> Dyn:
    """``d`` reshaped to ``target`` ((factor, open dims) per axis), where that only merges a
    D axis with its H features, drops unit axes or adds them; else refused."""
    total = (1, ())
    for a in d.axes:
        total = _times(total, _norm(a.size))
    if sum(t == "infer" for t in target) > 1:
        raise _Refused("two -1 in the shape")
    if "infer" in target:
        known = (1, ())
        for t in target:
            if t != "infer":
                known = _times(known, t)
        rest = list(total[1])
        for s in known[1]:
            if s not in rest:
                raise _Refused("the shape does not fit the tensor")
            rest.remove(s)
        if known[0] == 0 or total[0] % known[0]:
            raise _Refused("the shape does not fit the tensor")
        target = [(total[0] // known[0], tuple(rest)) if t == "infer" else t for t in target]
    essential = [a for a in d.axes if a.kind != "1"]
    out, j, k = [], 0, 0
    one = (1, ())
    while k < len(essential):
        a = essential[k]
        size = _norm(a.size)
        if a.kind == "D":
            h = essential[k + 1] if k + 1 < len(essential) else None
            if h is None or h.kind != "H":
                raise _Refused("it reshapes directions apart from their features")
            size = _times(size, _norm(h.size))
        while j < len(target) and target[j] == one and size != one:
            out.append(Axis("1", 1))
            j += 1
        if j >= len(target) or target[j] != size:
            raise _Refused("the reshape does more than merge directions or add and drop unit "
                           "axes")
        if a.kind == "D":
            chains = {id(c) for c, _ in a.info}
            dirs = tuple(x for c, ds in a.info
                         for x in (ds if ds is not None else range(_directions(c))))
            chain = a.info[0][0]
            if len(chains) != 1 or dirs != tuple(range(_directions(chain))):
                raise _Refused("it merges final states of different layers or directions out "
                               "of order")
            out.append(_feature_axis(chain, None))
            d = Dyn(chain, d.axes)
            k += 2
        else:
            out.append(a)
            k += 1
        j += 1
    while j < len(target) and target[j] == one:
        out.append(Axis("1", 1))
        j += 1
    if j != len(target):
        raise _Refused("the shape does not fit the tensor")
    return Dyn(d.chain, tuple(out))


def _dyn_reshape(g, ins, at):
    d = ins[0]
    shape = _ints(ins[1], "the shape")
    target = []
    for i, s in enumerate(shape):
        if not isinstance(s, Sym) and s == 0 and not at.get("allowzero", 0):
            target.append(_norm(d.axes[i].size))
        elif not isinstance(s, Sym) and s == -1:
            target.append("infer")
        else:
            target.append(_norm(s))
    return [_reshape_to(d, target)]


def _dyn_flatten(g, ins, at):
    d = ins[0]
    axis = int(at.get("axis", 1))
    axis = axis + len(d.axes) if axis < 0 else axis
    left, right = (1, ()), (1, ())
    for a in d.axes[:axis]:
        left = _times(left, _norm(a.size))
    for a in d.axes[axis:]:
        right = _times(right, _norm(a.size))
    return [_reshape_to(d, [left, right])]


def _dyn_concat(g, ins, at):
    if any(not isinstance(v, Dyn) for v in ins):
        raise _Refused("it joins the flowing tensor with a constant")
    rank = len(ins[0].axes)
    position = _axis(at.get("axis", 0), rank)
    kinds = {tuple(a.kind if i != position else "*" for i, a in enumerate(v.axes)) for v in ins}
    if len(kinds) != 1:
        raise _Refused("it joins tensors of different layouts")
    first = ins[0].axes[position]
    if first.kind in ("1", "D"):                         # stacking final states (h_n)
        rows = []
        for v in ins:
            a = v.axes[position]
            if a.kind == "1":
                c = v.axes[v.index("C")]
                rows.append((v.chain, c.info))
            elif a.kind == "D":
                rows.extend(a.info)
            else:
                raise _Refused("it joins tensors of different layouts")
        base = ins[0]
        axes = list(base.axes)
        if base.axes[position].kind == "1":
            c = base.index("C")
            axes[c] = Axis("H", axes[c].size)
        axes[position] = Axis("D", len(rows), tuple(rows))
        return [Dyn(None, tuple(axes))]
    if first.kind == "C":                                # the directions of one layer
        chain = ins[0].chain
        if any(v.chain is not chain for v in ins):
            raise _Refused("it joins the outputs of different layers (a graph with branches)")
        dirs = tuple(x for v in ins for x in (v.axes[position].info
                                              if v.axes[position].info is not None
                                              else range(_directions(chain))))
        if dirs != tuple(range(_directions(chain))):
            raise _Refused("it joins directions out of order or twice")
        axes = list(ins[0].axes)
        axes[position] = _feature_axis(chain, None)
        return [Dyn(chain, tuple(axes))]
    raise _Refused(f"it joins tensors along a {_AXIS_NAMES[first.kind]} axis")


def _whole(d: Dyn, what: str) -> Dyn:
    """``d`` when it is one layer's whole output with features last; else refused."""
    if d.chain is None or d.index("D") is not None:
        raise _Refused(f"{what} reads stacked final states; select one layer's first")
    c = d.index("C")
    if c is None or d.axes[c].info is not None:
        raise _Refused(f"{what} reads one direction of a bidirectional layer only")
    if any(a.kind not in ("1",) for a in d.axes[c + 1:]):
        raise _Refused(f"{what} reads features that are not the last axis")
    return d


def _extend(d: Dyn, layer: Layer) -> Dyn:
    chain = d.chain + (layer,)
    axes = tuple(_feature_axis(chain, None) if a.kind == "C" else a for a in d.axes)
    return Dyn(chain, axes)


def _last_dense(d: Dyn):
    last = d.chain[-1]
    return last if last.kind == "dense" else None


def _dense(d: Dyn, kernel: np.ndarray, bias, node: str) -> Dyn:
    d = _whole(d, "the matrix product")
    if kernel.ndim != 2 or kernel.shape[0] != d.axes[d.index("C")].size:
        raise _Refused(f"its weights of shape {kernel.shape} do not fit "
                       f"{d.axes[d.index('C')].size} features")
    return _extend(d, _layer("dense", node, (kernel.astype(np.float32), bias),
                             units=int(kernel.shape[1]), activation="linear"))


def _dyn_matmul(g, ins, at):
    a, b = ins
    if not isinstance(a, Dyn) or not isinstance(b, np.ndarray):
        raise _Refused("only the flowing tensor times a constant matrix is supported")
    return [_dense(a, b, None, g.node_name)]


def _dyn_gemm(g, ins, at):
    a, b = ins[0], _const(ins[1], "B")
    c = ins[2] if len(ins) > 2 else None
    if not isinstance(a, Dyn) or at.get("transA", 0) or len(a.axes) != 2:
        raise _Refused("only A (the 2-D flowing tensor, not transposed) times a constant is "
                       "supported")
    kernel = (b.T if at.get("transB", 0) else b) * np.float32(at.get("alpha", 1.0))
    units = kernel.shape[1]
    bias = None
    if c is not None:
        c = _const(c, "C")
        if c.size not in (1, units):
            raise _Refused(f"its bias of shape {c.shape} does not fit {units} units")
        bias = np.broadcast_to(c.reshape(-1) * np.float32(at.get("beta", 1.0)),
                               (units,)).astype(np.float32)
    return [_dense(a, kernel, bias, g.node_name)]


def _dyn_add(g, ins, at):
    d, c = (ins[0], ins[1]) if isinstance(ins[0], Dyn) else (ins[1], ins[0])
    if not isinstance(c, np.ndarray):
        raise _Refused("it adds two computed tensors (a graph with branches)")
    last = _last_dense(d) if d.chain else None
    if last is None or last.weights[1] is not None or last.get("activation") != "linear":
        raise _Refused("a constant is added to something other than a matrix product (only "
                       "a Dense's bias is supported)")
    units = last.get("units")
    if c.size not in (1, units) or (c.ndim and c.shape[-1] not in (1, units)):
        raise _Refused(f"its bias of shape {c.shape} does not fit {units} units")
    bias = np.broadcast_to(c.reshape(-1), (units,)).astype(np.float32)
    return [Dyn(d.chain[:-1] + (replace(last, weights=(last.weights[0], bias)),), d.axes)]


def _activation(name: str):
    def handler(g, ins, at):
        d = _whole(ins[0], name)
        if name == "softmax":
            axis = at.get("axis", -1 if g.opset >= 13 else 1)
            position = _axis(axis, len(d.axes))
            if d.axes[position].kind != "C" or (g.opset < 13 and any(
                    a.kind != "1" for a in d.axes[position + 1:])):
                raise _Refused("only a softmax over the features is supported")
        last = _last_dense(d)
        if last is not None and last.get("activation") == "linear":
            return [Dyn(d.chain[:-1] + (last.with_config(activation=name),), d.axes)]
        return [_extend(d, _layer("activation", g.node_name, (), activation=name,
                                  units=d.axes[d.index("C")].size))]
    return handler


def _dyn_identity(g, ins, at):
    return [ins[0], None]


def _dyn_cast(g, ins, at):
    from onnx import TensorProto
    if at.get("to") != TensorProto.FLOAT:
        raise _Refused("only a cast to float32 is supported on the computed tensor")
    return [ins[0]]


_DYN = {"Shape": _dyn_shape, "Gather": _dyn_gather, "Slice": _dyn_slice,
        "Transpose": _dyn_transpose, "Squeeze": _dyn_squeeze, "Unsqueeze": _dyn_unsqueeze,
        "Reshape": _dyn_reshape, "Flatten": _dyn_flatten, "Concat": _dyn_concat,
        "MatMul": _dyn_matmul, "Gemm": _dyn_gemm, "Add": _dyn_add,
        "Relu": _activation("relu"), "Tanh": _activation("tanh"),
        "Sigmoid": _activation("sigmoid"), "Softmax": _activation("softmax"),
        "Identity": _dyn_identity, "Dropout": _dyn_identity, "Cast": _dyn_cast}


def _embedding(g, table: np.ndarray, ids) -> Dyn:
    if not isinstance(ids, Dyn) or len(ids.chain) != 1 or ids.chain[0].get("dtype") != "int32":
        raise _Refused("an embedding must read the model's input ids directly")
    chain = ids.chain + (_layer("embedding", g.node_name, (table.astype(np.float32),),
                                units=int(table.shape[1]), vocab=int(table.shape[0])),)
    return Dyn(chain, ids.axes + (Axis("C", int(table.shape[1])),))


# ------------------------------------------------ recurrent nodes

_DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh")}
# ONNX gate blocks in Keras' order: LSTM i,o,f,c -> i,f,c,o; GRU z,r,h as is
_KERAS_BLOCKS = {"LSTM": (0, 2, 3, 1), "GRU": (0, 1, 2), "RNN": (0,)}


def _blocks(m: np.ndarray, order: tuple, units: int) -> np.ndarray:
    return np.concatenate([m[b * units:(b + 1) * units] for b in order], axis=0)


def _refuse_recurrent_options(at: dict, seq_lens, peep, h0, c0) -> None:
    """A recurrent node's options Keras' layers do not have: refused, each with its reason."""
    if seq_lens is not None:
        raise _Refused("sequence_lens is given (packed sequences); export padded sequences")
    if peep is not None:
        raise _Refused("it has peepholes (input P), which Keras' LSTM does not have")
    for what, s in (("initial_h", h0), ("initial_c", c0)):
        if s is not None and not isinstance(s, _Zeros) and not (isinstance(s, np.ndarray)
                                                    and not np.any(s)):
            raise _Refused(f"its {what} is not zero; export without an initial state")
    if "clip" in at:
        raise _Refused("it clips the cell inputs (clip), which Keras does not")
    if at.get("input_forget", 0):
        raise _Refused("input_forget=1 couples the input and forget gates")
    if "activation_alpha" in at or "activation_beta" in at:
        raise _Refused("it has activation parameters")


def _keras_weights(op: str, w, r, b, units: int, lbr: int) -> list:
    """ONNX's W, R, B (one block per direction) as Keras' kernel, recurrent kernel and bias
    of each direction, gates in Keras' order."""
    gates = w.shape[1] // units
    weights = []
    for d in range(w.shape[0]):
        order = _KERAS_BLOCKS[op]
        kernel = _blocks(w[d], order, units).T
        recurrent = _blocks(r[d], order, units).T
        wb, rb = _blocks(b[d][:gates * units], order, units), \
            _blocks(b[d][gates * units:], order, units)
        bias = np.stack([wb, rb]) if (op == "GRU" and lbr) else wb + rb
        weights += [kernel.astype(np.float32), recurrent.astype(np.float32),
                    bias.astype(np.float32)]
    return weights


def _recurrent(node, op: str, ins: list, at: dict) -> list:
    x = ins[0]
    name = node.name or node.output[0]
    if not isinstance(x, Dyn):
        raise _Refused("its input X is not computed from the model's input")
    ins = ins + [None] * (8 - len(ins))
    w, r, b, seq_lens, h0 = ins[1:6]
    c0, peep = (ins[6], ins[7]) if op == "LSTM" else (None, None)
    w, r = _const(w, "W"), _const(r, "R")
    _refuse_recurrent_options(at, seq_lens, peep, h0, c0)
    direction = at.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    n_dir = 2 if direction == "bidirectional" else 1
    acts = tuple(a.decode() if isinstance(a, bytes) else a for a in at.get("activations", []))
    if op == "RNN":
        per = acts[:1] if acts else ("Tanh",)
        if per[0] not in ("Tanh", "Relu") or acts not in ((), per * n_dir):
            raise _Refused(f"activations {list(acts)}: only Tanh or Relu (the same for both "
                           f"directions) are supported")
        activation = per[0].lower()
    else:
        if acts and acts != _DEFAULT_ACTIVATIONS[op] * n_dir:
            raise _Refused(f"non-default activations {list(acts)}; supported: "
                           f"{list(_DEFAULT_ACTIVATIONS[op])}")
        activation = "tanh"
    layout = at.get("layout", 0)
    want = ("N", "T") if layout else ("T", "N")
    kinds = tuple(a.kind for a in x.axes)
    x = _whole(x, "the recurrent layer")
    if kinds != want + ("C",):
        raise _Refused(f"its input's axes are ({', '.join(_AXIS_NAMES[k] for k in kinds)}), "
                       f"where layout={layout} reads ({', '.join(_AXIS_NAMES[k] for k in want)}"
                       f", feature)")
    if x.axes[x.index("T")].info:
        raise _Refused("it reads the sequence of a reverse layer in reverse order")
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    units = int(at.get("hidden_size", r.shape[-1]))
    features = x.axes[x.index("C")].size
    if w.shape != (n_dir, gates * units, features) or r.shape != (n_dir, gates * units, units):
        raise _Refused(f"its weights W {w.shape} and R {r.shape} do not fit {n_dir} "
                       f"direction(s) of {units} units on {features} features")
    b = np.zeros((n_dir, 2 * gates * units), np.float32) if b is None else _const(b, "B")
    lbr = int(at.get("linear_before_reset", 0))
    weights = _keras_weights(op, w, r, b, units, lbr)
    cell = {"LSTM": "lstm", "GRU": "gru", "RNN": "simple_rnn"}[op]
    config = dict(cell=cell, units=units, direction=direction, return_sequences=True,
                  activation=activation)
    if op == "GRU":
        config["reset_after"] = bool(lbr)
    seq = x.chain + (_layer("rnn", name, weights, **config),)
    final = x.chain + (_layer("rnn", name, weights, **{**config, "return_sequences": False}),)
    t_axis, n_axis = x.axes[x.index("T")], x.axes[x.index("N")]
    t_axis = replace(t_axis, info=direction == "reverse")
    if n_dir == 1:
        y_dir, yh_dir = Axis("1", 1), Axis("1", 1)
        y_feat, yh_feat = _feature_axis(seq, None), _feature_axis(final, None)
        y_chain, yh_chain = seq, final
    else:
        y_dir = Axis("D", 2, ((seq, (0,)), (seq, (1,))))
        yh_dir = Axis("D", 2, ((final, (0,)), (final, (1,))))
        y_feat = yh_feat = Axis("H", units)
        y_chain = yh_chain = None
    if layout:
        y = Dyn(y_chain, (n_axis, t_axis, y_dir, y_feat))
        y_h = Dyn(yh_chain, (n_axis, yh_dir, yh_feat))
    else:
        y = Dyn(y_chain, (t_axis, y_dir, n_axis, y_feat))
        y_h = Dyn(yh_chain, (yh_dir, n_axis, yh_feat))
    outs = [y, y_h]
    if op == "LSTM":
        outs.append(_Unusable("the LSTM's cell state (Y_c)"))
    return outs


# ---------------------------------------------------------------- the Keras model

def _build(chain: tuple, name: str):
    """The Keras Sequential model of a chain, weights set."""
    L = keras.layers
    first = chain[0]
    counts: dict = {}

    def named(base):
        counts[base] = counts.get(base, 0) + 1
        return f"{base}_{counts[base]}"

    layers = [keras.Input(first.get("shape"), dtype=first.get("dtype"),
                          name="ids" if first.get("dtype") == "int32" else "inputs")]
    for spec in chain[1:]:
        if spec.kind == "embedding":
            layers.append(L.Embedding(spec.get("vocab"), spec.get("units"),
                                      name=named("embedding")))
        elif spec.kind == "rnn":
            cell = spec.get("cell")
            kw = dict(return_sequences=spec.get("return_sequences"))
            if cell == "gru":
                kw["reset_after"] = spec.get("reset_after")
            if cell == "simple_rnn":
                kw["activation"] = spec.get("activation")
            Cell = {"lstm": L.LSTM, "gru": L.GRU, "simple_rnn": L.SimpleRNN}[cell]
            if spec.get("direction") == "bidirectional":
                layers.append(L.Bidirectional(Cell(spec.get("units"), **kw),
                                              merge_mode="concat",
                                              name=named(f"bidirectional_{cell}")))
            else:
                layers.append(Cell(spec.get("units"), go_backwards=spec.get("direction")
                                   == "reverse", name=named(cell), **kw))
        elif spec.kind == "dense":
            layers.append(L.Dense(spec.get("units"), activation=spec.get("activation"),
                                  use_bias=spec.weights[1] is not None, name=named("dense")))
        else:
            act = spec.get("activation")
            layers.append(L.Softmax(name=named("softmax")) if act == "softmax"
                          else L.Activation(act, name=named(act)))
    model = keras.Sequential(layers, name=name)
    for layer, spec in zip(model.layers, chain[1:]):
        weights = [w for w in spec.weights if w is not None]
        if weights:
            layer.set_weights(weights)
    return model


def _keras_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", path.stem) or "imported"
    return name if name[0].isalpha() else f"onnx_{name}"


# ---------------------------------------------------------------- import

@dataclass
class Imported:
    """What an import gives: the chain of layers (rebuilt into a fresh Keras model per load)
    and the model card."""
    chain: tuple
    card: dict
    name: str

    def model(self):
        model = _build(self.chain, self.name)
        object.__setattr__(model, "_rnncon_onnx_card", self.card)   # not a Keras attribute
        return model


def _input_of(graph):
    from onnx import TensorProto
    inits = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise UnsupportedModelError(
            f"the graph has {len(inputs)} inputs ({', '.join(i.name for i in inputs)}) and "
            f"{len(graph.output)} outputs; one of each is supported (export the model with "
            f"its input only, the initial states left to torch, and return one tensor)")
    inp = inputs[0]
    t = inp.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    elem = t.elem_type
    if elem == TensorProto.FLOAT and len(dims) == 3:
        return inp, dims, "float32"
    if elem in (TensorProto.INT64, TensorProto.INT32) and len(dims) == 2:
        return inp, dims, "int32"
    raise UnsupportedModelError(
        f"input {inp.name!r}: {TensorProto.DataType.Name(elem).lower()} of rank {len(dims)}; "
        f"supported: float32 sequences (3-D: batch, steps, features in either order) or "
        f"integer token ids (2-D)")


def _evaluate(proto, inp, dims, dtype, batch_axis: int):
    """(the output value, the nodes it needs) when the input's batch is axis ``batch_axis``,
    or (None, (nodes read, why it was refused))."""
    graph = proto.graph
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 13)
    n, t = dims[batch_axis], dims[1 - batch_axis]
    axes = [None, None]
    axes[batch_axis] = Axis("N", n if n else Sym("N"))
    axes[1 - batch_axis] = Axis("T", t if t else Sym("T"), False)
    steps = t if t else None
    if dtype == "float32":
        chain = (_layer("input", "", (), shape=(steps, dims[2]), dtype=dtype),)
        axes.append(Axis("C", dims[2]))
    else:
        chain = (_layer("input", "", (), shape=(steps,), dtype=dtype),)
    g = _Graph(graph, opset, Dyn(chain, tuple(axes)), inp.name)
    try:
        out = g.run(graph.output[0].name)
    except _Refused as e:
        return None, (g.progress, str(e))
    try:
        if not isinstance(out, Dyn):
            raise _Refused("the output does not depend on the input")
        if out.index("D") is not None:
            raise _Refused("the output holds stacked final states; select one layer's")
        _whole(out, "the output")
        if len(out.chain) < 2:
            raise _Refused("nothing is computed from the input")
    except _Refused as e:
        return None, (g.progress, f"output {graph.output[0].name!r}: {e}")
    return out, g.used


def _to_file_layout(y: np.ndarray, axes: tuple) -> np.ndarray:
    """The Keras output (N, [T,] C) laid out as the file's output (its axes)."""
    keras_axis = {"N": 0, "T": 1, "C": y.ndim - 1}
    kept = [a for a in axes if a.kind != "1"]
    out = np.transpose(y, [keras_axis[a.kind] for a in kept])
    for a in kept:
        if a.kind == "T" and a.info:
            out = np.flip(out, kept.index(a))
    return out.reshape([1 if a.kind == "1" else out.shape[kept.index(a)] for a in axes])


def import_onnx(path: str | Path, seed: int = 0) -> Imported:
    """Read an ONNX file into an equivalent Keras chain, check it against onnxruntime on one
    random batch and make the model card; ModelLoadError / UnsupportedModelError on refusal."""
    started = time.time()
    path = Path(path)
    content = path.read_bytes()
    proto = read_model(path)
    inp, dims, dtype = _input_of(proto.graph)
    # which input axis is the batch: both are tried (batch-first first), the one that goes
    # through wins; a refusal names the node of the try that got further
    tries = [0, 1]
    results = [_evaluate(proto, inp, dims, dtype, b) for b in tries]
    ok = [(b, out, used) for b, (out, used) in zip(tries, results) if out is not None]
    if not ok:
        progress, why = max((err for _, err in results), key=lambda e: e[0])
        raise UnsupportedModelError(f"refused to import {path.name}: {why}")
    batch_axis, out, used = ok[0]
    del proto.graph.node[:]           # onnxruntime runs only the nodes the output needs
    proto.graph.node.extend(used)
    name = _keras_name(path)
    imported = Imported(out.chain, {}, name)
    model = imported.model()
    difference, batch, steps = _check(proto, model, inp, dims, dtype, batch_axis, out, seed,
                                      path.name)
    if not difference <= MAX_DIFFERENCE:
        raise ModelLoadError(
            f"refused to import {path.name}: the Keras model differs from onnxruntime by up "
            f"to {difference:.3g} on a random batch of {batch} (more than {MAX_DIFFERENCE:g}); "
            f"please report the file")
    layers = [{"layer": layer.name, "class": type(layer).__name__, "onnx_node": spec.node}
              for layer, spec in zip(model.layers, out.chain[1:])]
    imported.card = {
        "name": name,
        "source": path.name,
        "source_path": str(path.resolve()),
        "sha256": hashlib.sha256(content).hexdigest(),
        "producer": f"{proto.producer_name} {proto.producer_version}".strip() or "unknown",
        "opset": next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                      None),
        "input_layout": ("batch-first" if batch_axis == 0 else "sequence-first (the Keras "
                         "model reads batch-first inputs)"),
        "params": int(model.count_params()),
        "layers": layers,
        "max_difference": float(difference),
        "checked_on": f"{batch} random inputs of {steps} steps against onnxruntime",
        "import_seconds": round(time.time() - started, 2),
        "versions": versions(("onnx", "onnxruntime")),
        "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    object.__setattr__(model, "_rnncon_onnx_card", imported.card)
    return imported


def _check(proto, model, inp, dims, dtype, batch_axis, out, seed, name):
    """Largest absolute difference between onnxruntime and the Keras model on one random
    batch, with the batch size and steps used."""
    import onnxruntime as ort
    from onnx import helper
    n = dims[batch_axis] or CHECK_BATCH
    steps = dims[1 - batch_axis] or CHECK_STEPS
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        x = rng.uniform(-1, 1, (n, steps, dims[2])).astype(np.float32)
    else:
        vocab = next(s for s in out.chain if s.kind == "embedding").get("vocab")
        x = rng.integers(0, vocab, (n, steps)).astype(np.int32)
    feed = x if batch_axis == 0 else np.swapaxes(x, 0, 1)
    feed = feed.astype(helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(proto.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        expected = session.run(None, {inp.name: np.ascontiguousarray(feed)})[0]
    except Exception as e:   # onnxruntime raises its own kinds for files it cannot run
        raise ModelLoadError(f"refused to import {name}: onnxruntime could not run it "
                             f"({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200]})") from None
    got = _to_file_layout(np.asarray(model(x, training=False)), out.axes)
    if got.shape != expected.shape:
        return float("inf"), n, steps
    return float(np.max(np.abs(got - expected))) if got.size else 0.0, n, steps


_IMPORTED: dict = {}


def load_onnx(path: str | Path):
    """A fresh Keras model of an ONNX file: imported and checked once per process and file
    content (the card is ``onnx_card(model)``)."""
    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = (str(path.resolve()), digest)
    if key not in _IMPORTED:
        _IMPORTED.clear()             # one file at a time (memory)
        _IMPORTED[key] = import_onnx(path)
    return _IMPORTED[key].model()


def onnx_card(model) -> dict | None:
    """The import's model card of a model loaded from an ONNX file, else None."""
    return getattr(model, "__dict__", {}).get("_rnncon_onnx_card")


# ---------------------------------------------------------------- back to PyTorch

def torch_weights(layer, index: int = 0) -> dict[str, np.ndarray]:
    """A Keras layer's weights in PyTorch's names and layouts (numpy arrays): LSTM / GRU /
    SimpleRNN (also in Bidirectional) as ``weight_ih_l{index}``, ``weight_hh_l{index}``,
    ``bias_ih_l{index}``, ``bias_hh_l{index}`` (``_reverse`` for the backward direction), Dense
    as ``weight`` and ``bias``, Embedding as ``weight``. The inverse of the import's mapping
    (docs/onnx.md): an LSTM's summed bias comes back whole in ``bias_ih`` (``bias_hh`` zeros),
    which computes the same."""
    kind = type(layer).__name__
    if kind == "Dense":
        w = layer.get_weights()
        return {"weight": w[0].T.copy(), **({"bias": w[1]} if len(w) > 1 else {})}
    if kind == "Embedding":
        return {"weight": layer.get_weights()[0]}
    if kind == "Bidirectional":
        out = torch_weights(layer.forward_layer, index)
        back = torch_weights(layer.backward_layer, index)
        return {**out, **{f"{k}_reverse": v for k, v in back.items()}}
    if kind not in ("LSTM", "GRU", "SimpleRNN"):
        raise UnsupportedModelError(f"layer {layer.name!r} ({kind}) has no PyTorch mapping")
    kernel, recurrent, bias = layer.get_weights()
    units = recurrent.shape[0]
    # Keras' gate blocks -> PyTorch's: LSTM i,f,c,o = i,f,g,o; GRU z,r,h -> r,z,n
    order = (1, 0, 2) if kind == "GRU" else tuple(range(kernel.shape[1] // units))

    def torch_rows(m):               # (in, gates*units) -> (gates*units, in), torch order
        return np.concatenate([m[:, g * units:(g + 1) * units].T for g in order], axis=0)

    if kind == "GRU" and not layer.reset_after:
        raise UnsupportedModelError(f"layer {layer.name!r}: GRU(reset_after=False) has no "
                                    f"PyTorch equivalent (torch's GRU resets after the "
                                    f"recurrent product)")
    if bias.ndim == 2:               # GRU(reset_after=True): input and recurrent biases
        b_ih, b_hh = bias[0], bias[1]
    else:
        b_ih, b_hh = bias, np.zeros_like(bias)
    return {f"weight_ih_l{index}": torch_rows(kernel),
            f"weight_hh_l{index}": torch_rows(recurrent),
            f"bias_ih_l{index}": torch_rows(b_ih[None]).reshape(-1),
            f"bias_hh_l{index}": torch_rows(b_hh[None]).reshape(-1)}
