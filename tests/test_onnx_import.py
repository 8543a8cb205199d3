"""ONNX import (rnncon_core.onnx_import): graphs built with onnx.helper in the node patterns
torch's two exporters write, random weights, the imported Keras model compared with
onnxruntime; every supported op, both layouts, both directions, stacked layers; each refusal.

The patterns follow the exporters' code: the TorchScript exporter's ``_generic_rnn``
(torch/onnx/symbolic_opset9.py: gate blocks reordered with Slice + Concat, biases
concatenated, Unsqueeze of the direction axis, Squeeze of a forward layer's direction or
Transpose + Reshape [0, 0, -1] of a bidirectional one, h_n the Concat of each layer's Y_h,
zero states from a Shape chain) and the dynamo exporter's ``aten_lstm`` / ``aten_gru``
(onnxscript torch_lib: Slice of the initial state per layer, Transpose [0, 2, 1, 3] then a
Reshape to a shape computed by Shape / Slice / Mul / Concat, Gemm for a 2-D Linear, MatMul +
Add for a 3-D one).
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnncon_core import onnx_import, zoo
from rnncon_core.errors import ModelLoadError, UnsupportedModelError
from tests.test_user_models import _cli  # the CLI's JSON, exit 0

GATES = {"lstm": 4, "gru": 3, "rnn": 1}
# torch's gate blocks -> ONNX's, as _generic_rnn's reform_permutation writes them
REFORM = {"lstm": [(0, 1), (3, 4), (1, 3)], "gru": [(1, 2), (0, 1), (2, 3)], "rnn": [(0, 1)]}
OP = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}


class Builder:
    """A graph written node by node, as an exporter writes it."""

    def __init__(self, opset: int = 17):
        self.opset, self.nodes, self.inits, self.count = opset, [], [], 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def init(self, arr, base="w") -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def const(self, arr) -> str:
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(arr)))

    def op(self, op_type: str, inputs, outputs: int = 1, **attrs):
        names = [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names,
                                           name=f"/{op_type}_{self.count}", **attrs))
        return names[0] if outputs == 1 else names

    def axes(self, op_type, x, axes):        # Squeeze / Unsqueeze: attribute before opset 13
        if self.opset >= 13:
            return self.op(op_type, [x, self.const(np.array(axes, np.int64))])
        return self.op(op_type, [x], axes=axes)

    def model(self, x_shape, out: str, elem=TensorProto.FLOAT):
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("input", elem, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=8, producer_name="test")


def torch_params(cell: str, in_dim: int, units: int, layers: int, bidir: bool, rng) -> dict:
    """Random parameters named and laid out as torch's nn.LSTM / nn.GRU / nn.RNN keeps them."""
    g, out = GATES[cell], {}
    for k in range(layers):
        for suffix in ([""] + (["_reverse"] if bidir else [])):
            f = in_dim if k == 0 else units * (2 if bidir else 1)
            out[f"weight_ih_l{k}{suffix}"] = rng.normal(0, 0.5, (g * units, f)).astype(np.float32)
            out[f"weight_hh_l{k}{suffix}"] = rng.normal(0, 0.5, (g * units, units)).astype(np.float32)
            out[f"bias_ih_l{k}{suffix}"] = rng.normal(0, 0.5, g * units).astype(np.float32)
            out[f"bias_hh_l{k}{suffix}"] = rng.normal(0, 0.5, g * units).astype(np.float32)
    return out


def reform(m, cell, units):
    return np.concatenate([m[a * units:b * units] for a, b in REFORM[cell]], axis=0)


def layer_weights(b: Builder, params, cell, k, units, bidir, fold: bool):
    """W, R, B of layer k: folded initializers (torch's default do_constant_folding=True), or
    the Slice / Concat / Unsqueeze nodes _generic_rnn writes on torch's own parameters."""
    dirs = [""] + (["_reverse"] if bidir else [])
    if fold:
        w = np.stack([reform(params[f"weight_ih_l{k}{d}"], cell, units) for d in dirs])
        r = np.stack([reform(params[f"weight_hh_l{k}{d}"], cell, units) for d in dirs])
        bias = np.stack([np.concatenate([reform(params[f"bias_ih_l{k}{d}"], cell, units),
                                         reform(params[f"bias_hh_l{k}{d}"], cell, units)])
                         for d in dirs])
        return b.init(w, "W"), b.init(r, "R"), b.init(bias, "B")

    def reformed(name):
        raw = b.init(params[name], name)
        parts = [b.op("Slice", [raw, b.const(np.array([x * units])), b.const(np.array([y * units])),
                                b.const(np.array([0]))]) for x, y in REFORM[cell]]
        return b.op("Concat", parts, axis=0)

    out = []
    for kind in ("w", "r", "b"):
        per_dir = []
        for d in dirs:
            if kind == "w":
                t = reformed(f"weight_ih_l{k}{d}")
            elif kind == "r":
                t = reformed(f"weight_hh_l{k}{d}")
            else:
                t = b.op("Concat", [reformed(f"bias_ih_l{k}{d}"), reformed(f"bias_hh_l{k}{d}")],
                         axis=0)
            per_dir.append(b.axes("Unsqueeze", t, [0]))
        out.append(per_dir[0] if len(per_dir) == 1 else b.op("Concat", per_dir, axis=0))
    return out


def zero_state(b: Builder, x, batch_axis, n_states, units, dynamic: bool, expand=False):
    """torch.zeros(L * D, batch, H): from the input's shape when the batch is open."""
    if not dynamic:
        return b.init(np.zeros((n_states, 3, units), np.float32), "h0")
    n = b.op("Gather", [b.op("Shape", [x]), b.const(np.array(batch_axis))], axis=0)
    shape = b.op("Concat", [b.const(np.array([n_states])), b.axes("Unsqueeze", n, [0]),
                            b.const(np.array([units]))], axis=0)
    if expand:
        return b.op("Expand", [b.const(np.array(0.0, np.float32)), shape])
    return b.op("ConstantOfShape", [shape],
                value=numpy_helper.from_array(np.zeros(1, np.float32)))


def torchscript_rnn(b, x, cell, params, units, layers, bidir, batch_first, fold=True,
                    dynamic=True):
    """What _generic_rnn writes: (output sequence, h_n)."""
    inp = x
    if batch_first:
        x = b.op("Transpose", [x], perm=[1, 0, 2])
    d = 2 if bidir else 1
    h0 = zero_state(b, inp, 0 if batch_first else 1, layers * d, units, dynamic)
    c0 = zero_state(b, inp, 0 if batch_first else 1, layers * d, units, dynamic) \
        if cell == "lstm" else None
    h_outs = []
    for k in range(layers):
        w, r, bias = layer_weights(b, params, cell, k, units, bidir, fold)
        states = [h0] + ([c0] if c0 else [])
        if layers > 1:
            states = [b.op("Slice", [s, b.const(np.array([k * d])), b.const(np.array([k * d + d])),
                                     b.const(np.array([0]))]) for s in states]
        attrs = dict(hidden_size=units)
        if bidir:
            attrs["direction"] = "bidirectional"
        if cell == "gru":
            attrs["linear_before_reset"] = 1
        if cell == "rnn":
            attrs["activations"] = ["Tanh"] * d
        outs = b.op(OP[cell], [x, w, r, bias, ""] + states, 3 if cell == "lstm" else 2, **attrs)
        y, y_h = outs[0], outs[1]
        if bidir:
            y = b.op("Transpose", [y], perm=[0, 2, 1, 3])
            y = b.op("Reshape", [y, b.const(np.array([0, 0, -1]))])
        else:
            y = b.axes("Squeeze", y, [1])
        x = y
        h_outs.append(y_h)
    if batch_first:
        x = b.op("Transpose", [x], perm=[1, 0, 2])
    h_n = h_outs[0] if layers == 1 else b.op("Concat", h_outs, axis=0)
    return x, h_n


def dynamo_rnn(b, x, cell, params, units, layers, bidir, batch_first):
    """What onnxscript's aten_lstm / aten_gru write (weights folded by the optimizer)."""
    inp = x
    if batch_first:
        x = b.op("Transpose", [x], perm=[1, 0, 2])
    d = 2 if bidir else 1
    h0 = zero_state(b, inp, 0 if batch_first else 1, layers * d, units, True, expand=True)
    c0 = zero_state(b, inp, 0 if batch_first else 1, layers * d, units, True, expand=True) \
        if cell == "lstm" else None
    h_outs = []
    for k in range(layers):
        w, r, bias = layer_weights(b, params, cell, k, units, bidir, fold=True)
        states = [b.op("Slice", [s, b.const(np.array([k * d])), b.const(np.array([k * d + d])),
                                 b.const(np.array([0]))]) for s in [h0] + ([c0] if c0 else [])]
        attrs = dict(hidden_size=units, direction="bidirectional" if bidir else "forward")
        if cell == "gru":
            attrs["linear_before_reset"] = 1
        outs = b.op(OP[cell], [x, w, r, bias, ""] + states, 3 if cell == "lstm" else 2, **attrs)
        y = b.op("Transpose", [outs[0]], perm=[0, 2, 1, 3])
        shape = b.op("Shape", [y])

        def part(i):
            return b.op("Slice", [shape, b.const(np.array([i])), b.const(np.array([i + 1]))])
        merged = b.op("Reshape", [b.op("Mul", [part(2), part(3)]), b.const(np.array([-1]))])
        new_shape = b.op("Concat", [part(0), part(1), merged], axis=0)
        x = b.op("Reshape", [y, new_shape])
        h_outs.append(outs[1])
    if batch_first:
        x = b.op("Transpose", [x], perm=[1, 0, 2])
    h_n = h_outs[0] if layers == 1 else b.op("Concat", h_outs, axis=0)
    return x, h_n


def linear(b, x, n_in, n_out, rng, gemm=True):
    w = rng.normal(0, 0.5, (n_out, n_in)).astype(np.float32)       # torch's Linear.weight
    bias = rng.normal(0, 0.5, n_out).astype(np.float32)
    if gemm:
        return b.op("Gemm", [x, b.init(w, "fc.weight"), b.init(bias, "fc.bias")], alpha=1.0,
                    beta=1.0, transB=1)
    return b.op("Add", [b.op("MatMul", [x, b.init(w.T.copy(), "fc.weight_t")]), b.init(bias)])


def classifier(cell="lstm", layers=1, bidir=False, batch_first=True, exporter="torchscript",
               pick="last", head="softmax", fold=True, dynamic=True, steps=5, features=4,
               units=8, classes=3, seed=0, opset=17, embedding=None):
    """An exported recurrent classifier: (ModelProto, input shape, torch-style params)."""
    rng = np.random.default_rng(seed)
    b = Builder(opset)
    x_shape = ["batch" if dynamic else 3, steps] if batch_first else [steps,
                                                                     "batch" if dynamic else 3]
    x = "input"
    in_dim = features
    if embedding:
        table = rng.normal(0, 1, embedding).astype(np.float32)
        x = b.op("Gather", [b.init(table, "embedding.weight"), x])
        in_dim = embedding[1]
    else:
        x_shape.append(features)
    params = torch_params(cell, in_dim, units, layers, bidir, rng)
    if exporter == "torchscript":
        y, h_n = torchscript_rnn(b, x, cell, params, units, layers, bidir, batch_first, fold,
                                 dynamic)
    else:
        y, h_n = dynamo_rnn(b, x, cell, params, units, layers, bidir, batch_first)
    width = units * (2 if bidir else 1)
    if pick == "last":             # out[:, -1, :] (out[-1] sequence-first)
        z = b.op("Gather", [y, b.const(np.array(-1))], axis=1 if batch_first else 0)
    elif pick == "slice":          # out[:, -1:] then squeeze (opset 9's select of dim > 1)
        axis = 1 if batch_first else 0
        z = b.op("Slice", [y, b.const(np.array([-1])), b.const(np.array([2 ** 63 - 1])),
                           b.const(np.array([axis]))])
        z = b.axes("Squeeze", z, [axis])
    elif pick == "h_n":            # h_n[-1]
        z = b.op("Gather", [h_n, b.const(np.array(-1))], axis=0)
    elif pick == "h_n_both":       # torch.cat((h_n[-2], h_n[-1]), dim=1)
        z = b.op("Concat", [b.op("Gather", [h_n, b.const(np.array(-2))], axis=0),
                            b.op("Gather", [h_n, b.const(np.array(-1))], axis=0)], axis=1)
    else:                          # the whole sequence, a Linear on each step
        z = y
    if pick == "sequence":
        z = linear(b, z, width, classes, rng, gemm=False)
    elif head == "mlp":
        z = b.op("Relu", [linear(b, z, width, 6, rng)])
        z = linear(b, z, 6, classes, rng)
    else:
        z = linear(b, z, width, classes if head == "softmax" else 1, rng)
    if head in ("softmax", "mlp"):
        z = b.op("Softmax", [z], axis=-1 if opset >= 13 else 1)
    elif head == "sigmoid":
        z = b.op("Sigmoid", [z])
    elem = TensorProto.INT64 if embedding else TensorProto.FLOAT
    return b.model(x_shape, z, elem), x_shape, params


def save(tmp_path, proto, name="model.onnx"):
    path = tmp_path / name
    onnx.save(proto, str(path))
    return path


def onnxruntime_vs_keras(path, x_shape, batch_first=True, keras_to_file=None, batch=5,
                         seed=1):
    """Largest difference between onnxruntime and the imported model on a fresh batch (not
    the importer's own): the file reads (batch, steps, ...) or, not ``batch_first``, (steps,
    batch, ...); a sequence output is time-major where the input is; ``keras_to_file`` lays
    any other Keras output out as the file's."""
    model = zoo.load_model(path)
    proto = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    shape = [batch if not isinstance(s, int) else s for s in x_shape]
    ids = proto.graph.input[0].type.tensor_type.elem_type == TensorProto.INT64
    if ids:
        vocab = next(zoo_layer for zoo_layer in model.layers
                     if type(zoo_layer).__name__ == "Embedding").input_dim
        x = rng.integers(0, vocab, shape).astype(np.int64)
    else:
        x = rng.uniform(-1, 1, shape).astype(np.float32)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"input": x})[0]
    assert onnx_import.onnx_card(model)["input_layout"].startswith(
        "batch-first" if batch_first else "sequence-first")
    keras_x = x if batch_first else np.swapaxes(x, 0, 1)
    got = np.asarray(model(keras_x.astype(np.int32 if ids else np.float32), training=False))
    if keras_to_file is not None:
        got = keras_to_file(got)
    elif got.ndim == 3 and not batch_first:                 # a sequence output, time-major
        got = np.swapaxes(got, 0, 1)
    assert got.shape == expected.shape
    return model, float(np.max(np.abs(got - expected)))


CASES = {
    # the issue's six models, in both exporters' patterns
    "lstm-softmax": dict(cell="lstm"),
    "lstm-softmax-dynamo": dict(cell="lstm", exporter="dynamo", opset=18),
    "gru-2-mlp": dict(cell="gru", layers=2, head="mlp"),
    "gru-2-mlp-dynamo": dict(cell="gru", layers=2, head="mlp", exporter="dynamo", opset=18),
    "bilstm-h_n": dict(cell="lstm", bidir=True, pick="h_n_both"),
    "bilstm-h_n-dynamo": dict(cell="lstm", bidir=True, pick="h_n_both", exporter="dynamo",
                              opset=18),
    "embedding-lstm-sigmoid": dict(cell="lstm", embedding=(50, 6), head="sigmoid"),
    "embedding-lstm-sigmoid-dynamo": dict(cell="lstm", embedding=(50, 6), head="sigmoid",
                                          exporter="dynamo", opset=18),
    "gru-sequence-first": dict(cell="gru", batch_first=False),
    "gru-sequence-first-dynamo": dict(cell="gru", batch_first=False, exporter="dynamo",
                                      opset=18),
    "lstm-2-h_n": dict(cell="lstm", layers=2, pick="h_n"),
    "lstm-2-dynamo": dict(cell="lstm", layers=2, exporter="dynamo", opset=18),
    # the rest of what is supported
    "bilstm-2-stacked": dict(cell="lstm", layers=2, bidir=True, pick="h_n_both"),
    "bigru-sequence-first": dict(cell="gru", bidir=True, batch_first=False, pick="h_n_both"),
    "lstm-unfolded-weights": dict(cell="lstm", layers=2, fold=False),
    "gru-fixed-batch": dict(cell="gru", dynamic=False),
    "rnn-tanh": dict(cell="rnn"),
    "lstm-slice-last-step": dict(cell="lstm", pick="slice"),
    "gru-sequence-first-slice": dict(cell="gru", pick="slice", batch_first=False,
                                     dynamic=False),
    "lstm-opset11": dict(cell="lstm", opset=11),
    "lstm-sequence-output-matmul-add": dict(cell="lstm", pick="sequence"),
    "bigru-sequence-output": dict(cell="gru", bidir=True, pick="sequence", batch_first=False),
}


@pytest.mark.parametrize("case", CASES)
def test_import_matches_onnxruntime(tmp_path, case):
    proto, x_shape, _ = classifier(**CASES[case])
    path = save(tmp_path, proto)
    model, diff = onnxruntime_vs_keras(path, x_shape, CASES[case].get("batch_first", True))
    assert diff <= onnx_import.MAX_DIFFERENCE, diff
    card = onnx_import.onnx_card(model)
    assert card["max_difference"] <= onnx_import.MAX_DIFFERENCE
    assert card["source"] == "model.onnx" and len(card["sha256"]) == 64
    want = {"lstm": "LSTM", "gru": "GRU", "rnn": "SimpleRNN"}[CASES[case]["cell"]]
    classes = [type(layer).__name__ for layer in model.layers]
    if CASES[case].get("bidir"):
        assert "Bidirectional" in classes
        assert type(model.layers[classes.index("Bidirectional")].forward_layer).__name__ == want
    else:
        assert want in classes
    if CASES[case].get("embedding"):
        assert classes[0] == "Embedding"


def test_reverse_direction(tmp_path):
    """direction=reverse -> go_backwards: the final state (Y_h), and the sequence (Y, whose
    steps the file keeps in input order) through a Dense on each step."""
    rng = np.random.default_rng(3)
    for pick in ("y_h", "sequence", "first_step"):
        b = Builder()
        params = torch_params("lstm", 4, 8, 1, False, rng)
        w, r, bias = layer_weights(b, params, "lstm", 0, 8, False, True)
        y, y_h, _ = b.op("LSTM", ["input", w, r, bias], 3, hidden_size=8, direction="reverse")
        if pick == "y_h":
            z = b.axes("Squeeze", y_h, [0])
        elif pick == "first_step":       # Y[0]: what the reverse layer computes last
            z = b.op("Gather", [b.axes("Squeeze", y, [1]), b.const(np.array(0))], axis=0)
        else:
            z = b.op("Transpose", [b.axes("Squeeze", y, [1])], perm=[1, 0, 2])
        z = linear(b, z, 8, 3, rng, gemm=pick != "sequence")
        path = save(tmp_path, b.model([6, "batch", 4], z), f"{pick}.onnx")
        # the file's sequence keeps the input's order; go_backwards gives it last step first
        model, diff = onnxruntime_vs_keras(path, [6, "batch", 4], False, (
            lambda y: y[:, ::-1]) if pick == "sequence" else None)
        assert diff <= onnx_import.MAX_DIFFERENCE
        assert model.layers[0].go_backwards


def test_gru_without_linear_before_reset(tmp_path):
    """linear_before_reset=0 (ONNX's default, not torch's) -> GRU(reset_after=False)."""
    rng = np.random.default_rng(4)
    b = Builder()
    params = torch_params("gru", 4, 8, 1, False, rng)
    w, r, bias = layer_weights(b, params, "gru", 0, 8, False, True)
    y, y_h = b.op("GRU", ["input", w, r, bias], 2, hidden_size=8)
    z = b.op("Tanh", [linear(b, b.axes("Squeeze", y_h, [0]), 8, 2, rng)])
    path = save(tmp_path, b.model([7, "batch", 4], z))
    model, diff = onnxruntime_vs_keras(path, [7, "batch", 4], batch_first=False)
    assert diff <= onnx_import.MAX_DIFFERENCE
    assert model.layers[0].reset_after is False
    assert type(model.layers[-1]).__name__ == "Dense" and \
        model.layers[-1].activation.__name__ == "tanh"


def test_inverse_mapping_gives_torch_parameters_back(tmp_path):
    """torch_weights (the docs' mapping back to PyTorch) inverts the import: the exporter's
    reordering, then the importer's, then the inverse give torch's parameters (an LSTM's two
    biases come back summed, which computes the same)."""
    for cell, bidir in (("lstm", False), ("gru", True), ("rnn", False)):
        proto, _, params = classifier(cell=cell, layers=2, bidir=bidir, pick="h_n_both"
                                      if bidir else "h_n", seed=5)
        model = zoo.load_model(save(tmp_path, proto, f"{cell}.onnx"))
        recurrent = [layer for layer in model.layers if type(layer).__name__ in
                     ("LSTM", "GRU", "SimpleRNN", "Bidirectional")]
        back = {}
        for k, layer in enumerate(recurrent):
            back.update(onnx_import.torch_weights(layer, k))
        assert set(back) == set(params)
        for name, value in params.items():
            if cell != "gru" and name.startswith("bias_"):
                continue
            np.testing.assert_array_equal(back[name], value, err_msg=f"{cell} {name}")
        if cell != "gru":
            for name in params:
                if name.startswith("bias_ih"):
                    hh = name.replace("bias_ih", "bias_hh")
                    np.testing.assert_allclose(back[name] + back[hh], params[name] + params[hh],
                                               atol=1e-6)
        dense = onnx_import.torch_weights(model.layers[-1])
        assert dense["weight"].shape == (3, 16 if bidir else 8)


def test_card_and_load_model_hook(tmp_path):
    proto, x_shape, _ = classifier(cell="gru", layers=2)
    path = save(tmp_path, proto, "two gru.onnx")
    model = zoo.load_model(str(path))
    card = onnx_import.onnx_card(model)
    import hashlib
    assert card["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert card["source"] == "two gru.onnx" and card["producer"] == "test"
    assert [layer["class"] for layer in card["layers"]] == ["GRU", "GRU", "Dense", ]
    assert all(layer["onnx_node"].startswith("/") for layer in card["layers"])
    assert card["versions"]["onnxruntime"] == ort.__version__
    again = zoo.load_model(path)        # a fresh model each time (retraining changes its own)
    assert again is not model
    np.testing.assert_array_equal(again.get_weights()[0], model.get_weights()[0])
    assert zoo.output_head(model).kind == "softmax"


# ---------------------------------------------------------------- refusals

def _refusal(tmp_path, proto, match, error=UnsupportedModelError):
    with pytest.raises(error, match=match) as info:
        zoo.load_model(save(tmp_path, proto, "refused.onnx"))
    assert "\n" not in str(info.value)
    return str(info.value)


def _single_lstm(attrs=None, extra_inputs=(), op_after=None, rng=None):
    rng = rng or np.random.default_rng(6)
    b = Builder()
    params = torch_params("lstm", 4, 8, 1, False, rng)
    w, r, bias = layer_weights(b, params, "lstm", 0, 8, False, True)
    ins = ["input", w, r, bias] + [b.init(a) if isinstance(a, np.ndarray) else a
                                   for a in extra_inputs]
    y, y_h, _ = b.op("LSTM", ins, 3, hidden_size=8, **(attrs or {}))
    z = b.axes("Squeeze", y_h, [0])
    if op_after:
        z = op_after(b, z)
    z = linear(b, z, 8, 3, rng)
    return b.model(["batch", 5, 4], z)


@pytest.mark.parametrize("what, kwargs, match", [
    ("peepholes", dict(extra_inputs=["", "", "", np.zeros((1, 24), np.float32)]),
     r"node '/LSTM_\d+' \(LSTM\): it has peepholes.*"),
    ("clip", dict(attrs={"clip": 3.0}), r"\(LSTM\): it clips"),
    ("activations", dict(attrs={"activations": ["Sigmoid", "Relu", "Tanh"]}),
     r"\(LSTM\): non-default activations"),
    ("sequence lengths", dict(extra_inputs=[np.full(3, 5, np.int32)]),
     r"\(LSTM\): sequence_lens"),
    ("initial state", dict(extra_inputs=["", np.ones((1, 3, 8), np.float32)]),
     r"\(LSTM\): its initial_h is not zero"),
    ("unsupported op", dict(op_after=lambda b, z: b.op("LayerNormalization", [
        z, b.init(np.ones(8, np.float32)), b.init(np.zeros(8, np.float32))])),
     r"\(LayerNormalization\): the op is not supported; supported: LSTM, GRU"),
    ("branches", dict(op_after=lambda b, z: b.op("Add", [z, b.op("Tanh", [z])])),
     r"\(Add\): it adds two computed tensors \(a graph with branches\)"),
    ("attention", dict(op_after=lambda b, z: b.op("MatMul", [z, b.op(
        "Transpose", [z], perm=[1, 0])])), r"\(MatMul\): only the flowing tensor times a "
                                          r"constant"),
])
def test_refusals_name_node_op_and_what_is_supported(tmp_path, what, kwargs, match):
    _refusal(tmp_path, _single_lstm(**kwargs), match)


def test_bidirectional_last_step_refused(tmp_path):
    proto, _, _ = classifier(cell="lstm", bidir=True, pick="last")
    msg = _refusal(tmp_path, proto, r"\(Gather\): the last step of a bidirectional layer")
    assert "h_n[-2]" in msg


def test_several_inputs_and_non_recurrent_inputs_refused(tmp_path):
    b = Builder()
    z = b.op("Add", ["input", "h0"])
    graph = helper.make_graph(b.nodes, "g", [
        helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 5, 4]),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 5, 4])],
        [helper.make_tensor_value_info(z, TensorProto.FLOAT, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    _refusal(tmp_path, proto, r"the graph has 2 inputs \(input, h0\)")
    b = Builder()
    z = b.op("Relu", ["input"])
    _refusal(tmp_path, b.model(["batch", 3, 4, 4], z), r"float of rank 4")


def test_external_data_outside_the_folder_refused(tmp_path):
    proto, _, _ = classifier(cell="lstm")
    inside = tmp_path / "model"
    inside.mkdir()
    # written by hand: onnx.save itself will not write such a location
    data = b""
    for tensor in proto.graph.initializer:
        raw = tensor.raw_data or numpy_helper.to_array(tensor).tobytes()
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "../weights.bin"), ("offset", str(len(data))),
                           ("length", str(len(raw)))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        data += raw
    (tmp_path / "weights.bin").write_bytes(data)
    (inside / "model.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(ModelLoadError, match=r"outside the model's folder"):
        zoo.load_model(inside / "model.onnx")


def test_external_data_inside_the_folder_loads(tmp_path):
    proto, x_shape, _ = classifier(cell="gru")
    onnx.save_model(proto, str(tmp_path / "model.onnx"), save_as_external_data=True,
                    location="model.data", size_threshold=0)
    model, diff = onnxruntime_vs_keras(tmp_path / "model.onnx", x_shape)
    assert diff <= onnx_import.MAX_DIFFERENCE
    assert diff <= onnx_import.MAX_DIFFERENCE


def test_import_refused_when_keras_differs(tmp_path, monkeypatch):
    """The check on import is real: a wrong gate order (a bug the check must catch) is
    refused with the measured difference."""
    proto, _, _ = classifier(cell="lstm")
    monkeypatch.setitem(onnx_import._KERAS_BLOCKS, "LSTM", (0, 1, 2, 3))
    monkeypatch.setattr(onnx_import, "_IMPORTED", {})
    msg = _refusal(tmp_path, proto, r"differs from onnxruntime by up to [0-9.e-]+ on a random "
                                    r"batch of 8 \(more than 1e-05\)", ModelLoadError)
    assert "refused to import refused.onnx" in msg


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x00\x01not a protobuf at all" * 10)
    with pytest.raises(ModelLoadError, match=r"junk.onnx is not a valid ONNX file"):
        zoo.load_model(path)


# ---------------------------------------------------------------- everything downstream

def digits_classifier(tmp_path):
    """A Keras LSTM(12) + Dense(10, softmax) trained briefly on the 8 x 8 digits, given back to
    PyTorch's layout (torch_weights) and written in the TorchScript exporter's pattern, as the
    file torch would write for the same network."""
    import keras

    from rnncon_core import retrain
    from rnncon_core.data import load_dataset
    ds = load_dataset("digits")
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(12),
                            keras.layers.Dense(10, activation="softmax")])
    retrain.compile_for_training(net, 1e-2)
    net.fit(ds.x_train, ds.y_train, epochs=8, batch_size=64, verbose=0)
    params = onnx_import.torch_weights(net.layers[0])
    fc = onnx_import.torch_weights(net.layers[1])
    b = Builder()
    _, h_n = torchscript_rnn(b, "input", "lstm", params, 12, 1, False, True)
    z = b.op("Gather", [h_n, b.const(np.array(-1))], axis=0)
    z = b.op("Gemm", [z, b.init(fc["weight"]), b.init(fc["bias"])], transB=1)
    z = b.op("Softmax", [z], axis=-1)
    path = save(tmp_path, b.model(["batch", 8, 8], z), "digits-lstm.onnx")
    x = ds.x_test[:50]
    np.testing.assert_allclose(np.asarray(zoo.load_model(path)(x)), np.asarray(net(x)),
                               atol=1e-5)
    return path


def test_coverage_of_an_imported_model_equals_its_keras_copy(tmp_path, capsys):
    """`rnncon coverage --model m.onnx`: the same figures as the imported model saved as
    .keras (the import is the model, nothing else in between)."""
    proto, _, _ = classifier(cell="gru", layers=2, steps=8, features=8, classes=10, seed=8)
    path = save(tmp_path, proto, "digits-gru.onnx")
    copy = tmp_path / "copy.keras"
    zoo.load_model(path).save(copy)
    got = [_cli(["coverage", "--model", p, "--dataset", "digits", "--n", 40, "--criterion",
                 "rconc", "--json"], capsys) for p in (path, copy)]
    assert got[0]["total"] > 0 and 0 < got[0]["rate"] <= 1
    assert {k: v for k, v in got[0].items() if k != "model"} == \
        {k: v for k, v in got[1].items() if k != "model"}


@pytest.mark.slow
def test_every_command_works_on_an_imported_model(tmp_path, capsys):
    """--model m.onnx in coverage (every criterion), generate, campaign, check and retrain
    (which saves the retrained model as .keras)."""
    from rnncon_core.coverage import CRITERIA
    path = digits_classifier(tmp_path)
    runs = tmp_path / "runs"
    for criterion in CRITERIA.names():
        cov = _cli(["coverage", "--model", path, "--dataset", "digits", "--n", 40,
                    "--criterion", criterion, "--n-profile", 200, "--json"], capsys)
        assert cov["total"] > 0 and 0 <= cov["rate"] <= 1, criterion
    gen = _cli(["generate", "--model", path, "--dataset", "digits", "--method", "fgsm",
                "--seeds", 30, "--runs-dir", runs, "--json"], capsys)
    assert gen["n_seeds"] >= 1 and 0 < gen["adv_rate"] <= 1
    camp = _cli(["campaign", "--model", path, "--dataset", "digits", "--budget", "60calls",
                 "--guide", "rconc", "--seeds", 10, "--runs-dir", runs, "--json"], capsys)
    assert camp["calls"] >= 60
    check = _cli(["check", "--model", path, "--dataset", "digits", "--budget", "30calls",
                  "--min-coverage", "nc=0.0", "--seeds", 10, "--runs-dir", runs,
                  "--html", tmp_path / "check.html", "--json"], capsys)
    assert check["passed"] is True
    out = _cli(["retrain", "--model", path, "--from-run", gen["run_id"], "--dataset", "digits",
                "--epochs", 1, "--repeats", 1, "--no-control", "--transfer-methods", "fgsm",
                "--transfer-seeds", 10, "--runs-dir", runs, "--json"], capsys)
    assert out["best_model"].endswith(".keras")
    retrained = zoo.load_model(out["best_model"])
    assert [type(layer).__name__ for layer in retrained.layers] == ["LSTM", "Dense"]


def test_models_page_takes_an_onnx_upload(tmp_path, monkeypatch):
    """The Models page's .onnx upload: the imported model becomes the model under test, its
    import card is shown, a page that runs it works; a refused file shows the one line."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    if not zoo.model_path("mnist-lstm").exists():
        pytest.skip("needs the shipped mnist-lstm (assets/models)")
    monkeypatch.syspath_prepend(str(root))                  # the dashboard package
    monkeypatch.setenv("RNNCON_DASHBOARD_WARMUP", "0")      # the test computes what it shows
    from streamlit.testing.v1 import AppTest
    monkeypatch.setattr("rnncon_core.runs.RUNS_DIR", tmp_path / "runs")
    proto, _, _ = classifier(cell="lstm", steps=28, features=28, classes=10, units=6)
    content = proto.SerializeToString()
    at = AppTest.from_file(str(root / "dashboard" / "app.py"), default_timeout=240).run()
    at.radio(key="models_source").set_value("Upload an .onnx file (PyTorch)").run()
    at.file_uploader(key="models_upload_onnx").set_value(
        ("classifier.onnx", content, "application/octet-stream")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    sel = at.session_state["selection"]
    assert sel.label.startswith("upload: classifier.onnx · ") and sel.model.endswith(".onnx")
    assert at.selectbox(key="models_dataset").options == ["mnist", "fashion-mnist"]
    text = " ".join(m.value for m in at.markdown)
    assert "Imported from ONNX" in text and "differs from onnxruntime by at most" in text
    at.switch_page("views/gates.py").run()
    assert not at.exception and not at.error
    at.switch_page("views/models.py").run()
    bad = _single_lstm(attrs={"clip": 3.0}).SerializeToString()
    at.file_uploader(key="models_upload_onnx").set_value(
        ("clipped.onnx", bad, "application/octet-stream")).run()
    assert any("(LSTM): it clips" in e.value for e in at.error)
    assert at.session_state["selection"].model == sel.model


def test_nodes_the_output_does_not_need_are_ignored(tmp_path):
    """An unused output (the LSTM's cell state into an op of another domain) is neither
    refused nor given to onnxruntime."""
    proto = _single_lstm()
    lstm = next(n for n in proto.graph.node if n.op_type == "LSTM")
    proto.graph.node.append(helper.make_node("Custom", [lstm.output[2]], ["unused"],
                                             domain="com.example", name="/dead"))
    model = zoo.load_model(save(tmp_path, proto))
    assert onnx_import.onnx_card(model)["max_difference"] <= onnx_import.MAX_DIFFERENCE


def test_cli_refusal_is_one_error_line(tmp_path, capsys):
    path = save(tmp_path, _single_lstm(attrs={"clip": 3.0}), "clipped.onnx")
    from rnncon_core.cli import main
    with pytest.raises(SystemExit) as e:
        main(["coverage", "--model", str(path), "--dataset", "digits", "--n", "5"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "\n" not in err
    assert err.startswith("error: refused to import clipped.onnx: node '/LSTM_")
    assert "(LSTM): it clips the cell inputs" in err
