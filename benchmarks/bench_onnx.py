"""ONNX import: how long it takes, and what coverage of an imported model costs. A script, not a test.

    .venv/bin/python benchmarks/bench_onnx.py [--n 2000] [--repeats 3]

The model is Table 1's stacked-mnist-gru (GRU(128) -> GRU(128) -> Dense(32, relu) -> Dense(10,
softmax); shipped weights when trained, else build_model's), given back to PyTorch's layout
(onnx_import.torch_weights) and written as torch's TorchScript exporter writes that network
(tests/test_onnx_import.py's builders: gate blocks reordered, zero states from a Shape chain,
h_n[-1], Gemm, Relu, Gemm, Softmax), so the imported model and the Keras one hold the same
weights. Prints, each measured in this one run on this machine (os.cpu_count() said):
- the import (read, symbolic pass, Keras build, the onnxruntime check), a fresh import each
  time (the per-process memo bypassed): the first (it builds TensorFlow's graphs) and the median
  of the next ``--repeats``;
- RConC (unit) and NC on ``--n`` MNIST test digits, a new criterion object per update, on the
  imported model and on the Keras model, interleaved (the order alternating), medians of
  ``--repeats`` of the wall time and of the process's CPU time (less moved by other work on
  a shared machine): the ratios imported / Keras.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def write_onnx(model, path: Path) -> None:
    """The Keras stacked GRU classifier as the TorchScript exporter writes its PyTorch twin."""
    from rnncon_core import onnx_import
    from tests.test_onnx_import import Builder, save, torchscript_rnn
    grus = [layer for layer in model.layers if type(layer).__name__ == "GRU"]
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
    params = {}
    for k, layer in enumerate(grus):
        params.update(onnx_import.torch_weights(layer, k))
    b = Builder(17)
    _, h_n = torchscript_rnn(b, "input", "gru", params, grus[0].units, len(grus), False, True)
    z = b.op("Gather", [h_n, b.const(np.array(-1))], axis=0)
    for i, layer in enumerate(dense):
        w = onnx_import.torch_weights(layer)
        z = b.op("Gemm", [z, b.init(w["weight"], f"fc{i}.weight"),
                          b.init(w["bias"], f"fc{i}.bias")], transB=1)
        z = b.op("Relu" if i < len(dense) - 1 else "Softmax", [z],
                 **({} if i < len(dense) - 1 else {"axis": -1}))
    save(path.parent, b.model(["batch", 28, 28], z), path.name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    from rnncon_core import onnx_import
    from rnncon_core.coverage import ContributionCoverage, NeuronCoverage
    from rnncon_core.data import load_dataset
    from rnncon_core.zoo import build_model, load_model, shipped_models

    name = "stacked-mnist-gru"
    if name in shipped_models():
        keras_model, how = load_model(name), "shipped weights"
    else:
        keras_model, how = build_model(name, seed=0), "untrained build_model weights"
    print(f"machine: {os.cpu_count()} CPU cores; model: {name} ({how}), "
          f"{keras_model.count_params():,} parameters")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stacked-gru.onnx"
        write_onnx(keras_model, path)
        print(f"ONNX file: {path.stat().st_size / 2**20:.2f} MB (TorchScript exporter's pattern)")
        times = []
        for _ in range(args.repeats + 1):
            t0 = time.perf_counter()
            imported = onnx_import.import_onnx(path)
            times.append(time.perf_counter() - t0)
        card = imported.card
        print(f"import (read, symbolic pass, Keras build, onnxruntime check): first "
              f"{times[0]:.2f} s, then median {np.median(times[1:]):.2f} s of {args.repeats} "
              f"({', '.join(f'{t:.2f}' for t in times[1:])}); target < 5 s on 2 cores")
        print(f"largest difference from onnxruntime on import: {card['max_difference']:.2e} "
              f"({card['checked_on']})")
        model = imported.model()

    x = load_dataset("mnist").x_test[:args.n]
    diff = float(np.max(np.abs(np.asarray(model.predict(x[:500], verbose=0))
                                - np.asarray(keras_model.predict(x[:500], verbose=0)))))
    print(f"imported vs Keras predictions on 500 test digits: largest difference {diff:.2e}")
    for label, make in (("RConC (unit)", lambda m: ContributionCoverage(m)),
                        ("NC", lambda m: NeuronCoverage(m))):
        for m in (model, keras_model):
            make(m).update(x[:64]).rate()                     # compile once per model
        spent = {"imported": [], "keras": []}
        cpu = {"imported": [], "keras": []}
        rates = {}
        pair = [("imported", model), ("keras", keras_model)]
        for r in range(args.repeats):                         # interleaved, order alternating
            for key, m in (pair if r % 2 == 0 else pair[::-1]):
                t0, c0 = time.perf_counter(), time.process_time()
                rates[key] = make(m).update(x).rate()
                spent[key].append(time.perf_counter() - t0)
                cpu[key].append(time.process_time() - c0)
        ti, tk = (float(np.median(spent[k])) for k in ("imported", "keras"))
        mi, mk = (min(spent[k]) for k in ("imported", "keras"))
        ci, ck = (float(np.median(cpu[k])) for k in ("imported", "keras"))
        print(f"{label} on {len(x):,} digits, a new criterion object: wall imported {ti:.2f} s, "
              f"Keras {tk:.2f} s, ratio {ti / tk:.2f} (medians of {args.repeats}; fastest "
              f"{mi:.2f} vs {mk:.2f} s, ratio {mi / mk:.2f}); CPU time (all threads) "
              f"{ci:.2f} vs {ck:.2f} s, ratio {ci / ck:.2f}; rates {rates['imported']:.4f} vs "
              f"{rates['keras']:.4f}")


if __name__ == "__main__":
    main()
