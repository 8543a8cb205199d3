"""Models as users bring them (not ours), end to end through the CLI: `rnncon coverage` and
`rnncon generate` on the user's own .keras file and .npy inputs. Tiny sizes, same structures:
the keras.io "Bidirectional LSTM on IMDB" example (keras.Input((None,)), two Bidirectional
LSTMs), a functional chain, Conv1D -> LSTM, a masked GRU (Embedding(mask_zero=True)), a
time-series LSTM on 50 x 3 inputs, and a logits head."""
from __future__ import annotations

import json

import numpy as np
import pytest


def _build(name: str):
    import keras
    keras.utils.set_random_seed(1)
    L = keras.layers
    if name == "kerasio-imdb-bidirectional":      # keras.io, with our IMDB ids (50,000 words)
        inputs = keras.Input(shape=(None,), dtype="int32")
        x = L.Embedding(50_000, 8)(inputs)
        x = L.Bidirectional(L.LSTM(4, return_sequences=True))(x)
        x = L.Bidirectional(L.LSTM(4))(x)
        return keras.Model(inputs, L.Dense(1, activation="sigmoid")(x))
    if name == "functional-chain":
        inputs = keras.Input((28, 28))
        return keras.Model(inputs, L.Dense(10, activation="softmax")(L.LSTM(6)(inputs)))
    if name == "conv1d-lstm":
        return keras.Sequential([keras.Input((28, 28)), L.Conv1D(6, 3, activation="relu"),
                                 L.MaxPooling1D(2), L.LSTM(5), L.Dense(10, activation="softmax")])
    if name == "masked-gru":
        return keras.Sequential([keras.Input((40,), dtype="int32"),
                                 L.Embedding(50_000, 6, mask_zero=True), L.GRU(5),
                                 L.Dense(1, activation="sigmoid")])
    if name == "timeseries-lstm":
        return keras.Sequential([keras.Input((50, 3)), L.LSTM(6, return_sequences=True),
                                 L.LayerNormalization(), L.LSTM(4), L.Dense(3, activation="softmax")])
    if name == "logits-head":
        return keras.Sequential([keras.Input((28, 28)), L.GRU(6), L.Dense(10)])
    raise AssertionError(name)


USER_MODELS = ["kerasio-imdb-bidirectional", "functional-chain", "conv1d-lstm", "masked-gru",
               "timeseries-lstm", "logits-head"]


def _data(name: str):
    """(x, y) as a user would have them: images in [0, 1], IMDB ids (padded with 0), or a
    time series scaled into [0, 1]."""
    from rnncon_core.data import load_dataset
    if "imdb" in name or "masked" in name:
        ds = load_dataset("imdb")
        x = ds.x_test[:12, -40:].copy()
        x[::3, :10] = 0            # some padding at the front
        return x.astype(np.int32), ds.y_test[:12].astype(np.int64)
    if "timeseries" in name:
        rng = np.random.default_rng(0)
        y = rng.integers(0, 3, 24)
        t = np.linspace(0, 6, 50)[None, :, None]
        x = 0.5 + 0.4 * np.sin(t * (y[:, None, None] + 1)) * np.ones((1, 1, 3))
        return np.clip(x + 0.05 * rng.normal(size=x.shape), 0, 1).astype(np.float32), y
    ds = load_dataset("mnist")
    return ds.x_test[:40], ds.y_test[:40].astype(np.int64)


def _cli(args, capsys):
    from rnncon_core.cli import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert e.value.code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize("name", USER_MODELS)
def test_coverage_and_generate_end_to_end(name, tmp_path, capsys):
    model = _build(name)
    path = tmp_path / f"{name}.keras"
    model.save(path)
    x, y = _data(name)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for criterion in ("rconc", "nc"):
        cov = _cli(["coverage", "--model", path, "--inputs", tmp_path / "x.npy", "--criterion",
                    criterion, "--json"], capsys)
        assert cov["n_inputs"] == len(x) and cov["total"] > 0 and 0 < cov["rate"] <= 1
    method = "eda" if x.dtype.kind == "i" else "fgsm"
    gen = _cli(["generate", "--model", path, "--inputs", tmp_path / "x.npy", "--labels",
                tmp_path / "y.npy", "--method", method, "--seeds", 3, "--runs-dir",
                tmp_path / "runs", "--json"] + (["--max-changes", 2] if method == "eda" else []),
               capsys)
    assert 1 <= gen["n_seeds"] <= 3 and 0 <= gen["adv_rate"] <= 1
    out = np.load(gen["outputs"])
    assert out["x_gen"].shape[1:] == x.shape[1:]
    assert ((out["conf_gen"] >= 0) & (out["conf_gen"] <= 1)).all()    # probabilities
    if method == "fgsm":
        assert out["x_gen"].min() >= 0 and out["x_gen"].max() <= 1


def test_bidirectional_coverage_counts_each_direction(tmp_path):
    """Each direction has its own blocks: x and h parts at every step of its own order."""
    from rnncon_core import ContributionCoverage
    model = _build("kerasio-imdb-bidirectional")
    from rnncon_core.zoo import with_steps
    fixed = with_steps(model, 40)
    cov = ContributionCoverage(fixed, threshold=0.5)
    rows = cov.by_layer().set_index("layer")
    bidi = [n for n in rows.index if n.endswith("/forward") or n.endswith("/backward")]
    assert len(bidi) == 4
    for name in bidi:
        spec = cov.tracer.spec[name]
        assert rows.loc[name, "total"] == 2 * 4 * spec.units * 40   # LSTM: 4 gates, x and h


def test_masked_steps_are_never_activated():
    """A masked step's contributions take their scope's minimum: never above any threshold,
    and the unmasked steps' values are the same as in the unmasked model."""
    import keras

    from rnncon_core import ContributionCoverage
    keras.utils.set_random_seed(2)
    L = keras.layers
    masked = keras.Sequential([keras.Input((6, 3)), L.Masking(0.0), L.GRU(3), L.Dense(2)])
    plain = keras.Sequential([keras.Input((6, 3)), L.GRU(3), L.Dense(2)])
    plain.set_weights(masked.get_weights())
    x = np.random.default_rng(0).random((1, 6, 3)).astype(np.float32) + 0.1
    x[0, 4:] = 0.0                                     # two padded steps at the end
    for normalize in ("step", "layer", "model"):
        cm = ContributionCoverage(masked, threshold=0.0, normalize=normalize)
        vm = cm.profile(x)[0]
        steps = np.array([cm.describe(i)["step"] for i in range(cm.total)], dtype=object)
        pad = np.array([s in (4, 5) for s in steps])
        assert (vm[pad] <= 0).all()
        cm.update(x)
        assert not cm.report.covered_mask(0.0)[pad].any()
        if normalize == "step":    # the real steps' scopes are untouched by the padding
            vp = ContributionCoverage(plain, threshold=0.0, normalize=normalize).profile(x)[0]
            np.testing.assert_allclose(vm[~pad & (steps != None)], vp[~pad & (steps != None)],  # noqa: E711
                                       atol=1e-5)


def test_dashboard_takes_an_uploaded_test_set_beside_an_uploaded_model(tmp_path, monkeypatch):
    """Models page: a model whose inputs fit no built-in data set (50 x 3) becomes the model
    under test with the user's .npy inputs and labels; a test set that does not fit the model
    gets the CLI's message."""
    import io
    import os
    import sys
    from pathlib import Path

    from rnncon_core import zoo
    if not zoo.model_path("mnist-lstm").exists():
        pytest.skip("needs the shipped mnist-lstm (the dashboard's default)")
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    os.environ.setdefault("RNNCON_DASHBOARD_WARMUP", "0")
    monkeypatch.setattr("rnncon_core.runs.RUNS_DIR", tmp_path / "runs")
    from streamlit.testing.v1 import AppTest
    model = _build("timeseries-lstm")
    model.save(tmp_path / "series.keras")
    x, y = _data("timeseries-lstm")

    def npy(a):
        buf = io.BytesIO()
        np.save(buf, a)
        return buf.getvalue()

    at = AppTest.from_file(str(root / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    at.radio(key="models_source").set_value("Upload a .keras file").run()
    at.file_uploader(key="models_upload").set_value(
        ("series.keras", (tmp_path / "series.keras").read_bytes(), "application/zip")).run()
    assert any("fits none of the data sets" in e.value for e in at.error)   # no set yet
    at.file_uploader(key="models_own_x").set_value(("bad.npy", npy(x[:, :10]), "application/octet-stream"))
    at.file_uploader(key="models_own_y").set_value(("y.npy", npy(y), "application/octet-stream")).run()
    assert any("do not fit this model" in e.value for e in at.error)
    at.file_uploader(key="models_own_x").set_value(("x.npy", npy(x), "application/octet-stream")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    sel = at.session_state["selection"]
    assert sel.label.startswith("upload: series.keras · ") and \
        sel.dataset.startswith("own: x.npy")


# ---------------------------------------------------------------- RConC oracle, new layer kinds

def _sig(z):
    return 1 / (1 + np.exp(-z))


def _np_rnn(layer, x, mask):
    """NumPy recurrence (default activations, float64) in the layer's own step order; masked
    steps keep the state. Returns the x and h part sources: x (N, T, K), h_prev (N, T, u)."""
    cell = layer.cell
    U, W = (v.numpy().astype(np.float64) for v in (cell.kernel, cell.recurrent_kernel))
    b = cell.bias.numpy().astype(np.float64)
    if layer.go_backwards:
        x, mask = x[:, ::-1], mask[:, ::-1]
    n, T, _ = x.shape
    u = layer.units
    h, c = np.zeros((n, u)), np.zeros((n, u))
    hprev = []
    for t in range(T):
        hprev.append(h)
        xt = x[:, t]
        kind = type(layer).__name__
        if kind == "LSTM":
            z = xt @ U + h @ W + b
            i, f, g, o = _sig(z[:, :u]), _sig(z[:, u:2 * u]), np.tanh(z[:, 2 * u:3 * u]), _sig(z[:, 3 * u:])
            cn = f * c + i * g
            hn = o * np.tanh(cn)
        elif kind == "GRU":                           # reset_after=True (Keras' default)
            xz, inner = xt @ U + b[0], h @ W + b[1]
            zg, r = _sig(xz[:, :u] + inner[:, :u]), _sig(xz[:, u:2 * u] + inner[:, u:2 * u])
            hn = zg * h + (1 - zg) * np.tanh(xz[:, 2 * u:] + r * inner[:, 2 * u:])
            cn = c
        else:
            hn, cn = np.tanh(xt @ U + h @ W + b), c
        m = mask[:, t][:, None]
        h, c = np.where(m, hn, h), np.where(m, cn, c)
    return x, np.stack(hprev, 1), U, W, mask


def _oracle(model, x, mask, normalize, values):
    """(N, total) normalized unit contributions: every traced layer's input taken from Keras,
    the recurrences recomputed in NumPy; masked steps are excluded from the scopes and 0."""
    import keras
    parts = []          # (layer, part, values (N, T, J), mask (N, T))
    for layer in model.layers:
        cls = type(layer).__name__
        if cls in ("Dense", "TimeDistributed", "LSTM", "GRU", "SimpleRNN", "Bidirectional"):
            src = keras.Model(model.inputs, layer.input)(x)
            src = np.asarray(src[0] if isinstance(src, (list, tuple)) else src, np.float64)
        if cls in ("Dense", "TimeDistributed"):
            dense = layer if cls == "Dense" else layer.layer
            k = dense.kernel.numpy().astype(np.float64)
            seq = src.ndim == 3
            v = src @ k if seq else (src @ k)[:, None]
            m = mask if seq and mask is not None and seq else np.ones(v.shape[:2], bool)
            parts.append((layer.name, "x", v, m))
        elif cls in ("LSTM", "GRU", "SimpleRNN", "Bidirectional"):
            dirs = [(f"{layer.name}/forward", layer.forward_layer),
                    (f"{layer.name}/backward", layer.backward_layer)] if cls == "Bidirectional" \
                else [(layer.name, layer)]
            m0 = mask if mask is not None else np.ones(src.shape[:2], bool)
            for name, rnn in dirs:
                xs, hp, U, W, m = _np_rnn(rnn, src, m0)
                parts.append((name, "x", xs @ U, m))
                parts.append((name, "h", hp @ W, m))
    if values == "abs":
        parts = [(a, b, np.abs(v), m) for a, b, v, m in parts]
    n = x.shape[0]
    out = []
    for i in range(n):
        keyed = []
        for layer, part, v, m in parts:
            for t in range(v.shape[1]):
                key = 0 if normalize == "model" else layer if normalize == "layer" else (layer, part, t)
                keyed.append((key, v[i, t], bool(m[i, t])))
        lo, hi = {}, {}
        for key, row, real in keyed:
            if real:
                lo[key] = min(lo.get(key, np.inf), row.min())
                hi[key] = max(hi.get(key, -np.inf), row.max())
        vals = []
        for key, row, real in keyed:
            r = hi.get(key, 0) - lo.get(key, 0)
            vals.append((row - lo[key]) / r if real and r > 0 else np.zeros_like(row))
        out.append(np.concatenate(vals))
    return np.stack(out)


def _oracle_models():
    import keras
    L = keras.layers
    keras.utils.set_random_seed(11)
    yield "masking-bidi-td", keras.Sequential([
        keras.Input((6, 3)), L.Masking(0.0), L.Bidirectional(L.LSTM(3, return_sequences=True)),
        L.TimeDistributed(L.Dense(2)), L.Flatten(), L.Dense(3, activation="softmax")])
    yield "mask-zero-backwards-dense-seq", keras.Sequential([
        keras.Input((7,), dtype="int32"), L.Embedding(15, 3, mask_zero=True),
        L.GRU(3, go_backwards=True, return_sequences=True), L.Dense(2, activation="tanh"),
        L.SimpleRNN(2), L.Dense(1, activation="sigmoid")])
    yield "conv-bidi-gru", keras.Sequential([
        keras.Input((8, 2)), L.Conv1D(3, 3, activation="relu"),
        L.Bidirectional(L.GRU(2), merge_mode="sum"), L.Dense(2)])


@pytest.mark.parametrize("case", range(3), ids=["masking-bidi-td", "mask-zero-backwards",
                                                "conv-bidi-gru"])
@pytest.mark.parametrize("normalize, values", [("step", "abs"), ("layer", "signed"),
                                               ("model", "abs")])
def test_rconc_equals_the_oracle_on_new_layer_kinds(case, normalize, values):
    from rnncon_core import ContributionCoverage
    name, model = list(_oracle_models())[case]
    rng = np.random.default_rng(case)
    if "mask-zero" in name:
        x = rng.integers(1, 15, (4, 7)).astype(np.int32)
        x[0, :3] = 0
        x[2, -2:] = 0
        mask = x != 0
    else:
        x = rng.random((4,) + model.input_shape[1:]).astype(np.float32) + 0.05
        mask = None
        if "masking" in name:
            x[1, :2] = 0.0
            x[3, -1] = 0.0
            mask = np.abs(x).sum(-1) > 0
    cov = ContributionCoverage(model, threshold=0.5, normalize=normalize, values=values)
    got = cov.profile(x)
    want = _oracle(model, x, mask, normalize, values)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-5)
    for t in (0.1, 0.5, 0.9):       # covered sets from update() agree with the oracle's maxima
        c = ContributionCoverage(model, threshold=t, normalize=normalize, values=values).update(x)
        near = np.abs(want.max(0) - t) < 1e-5
        np.testing.assert_array_equal(c.report.covered_mask(t)[~near], (want.max(0) > t)[~near])


# ---------------------------------------------------------------- confidences on the dashboard

def _dashboard_state():
    import os
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    os.environ.setdefault("RNNCON_DASHBOARD_WARMUP", "0")
    from dashboard import state
    return state


def test_dashboard_confidences_are_the_engines_for_a_logits_model(tmp_path):
    """The Models page's predictions and confidences are predict_proba's (a softmax of the
    logits), not the raw outputs' maximum (before: 62 % shown where the engine said 19 %)."""
    from rnncon_core.generate import predict_proba
    state = _dashboard_state()
    model = _build("logits-head")
    path = tmp_path / "logits.keras"
    model.save(path)
    x = np.random.default_rng(0).random((6, 28, 28)).astype(np.float32)
    pred, conf = state.predictions(str(path), x)
    p = predict_proba(model, x)
    assert pred.tolist() == p.argmax(1).tolist() and np.allclose(conf, p.max(1), atol=1e-6)
    raw = np.asarray(model.predict(x, verbose=0)).max(1)
    assert not np.allclose(conf, raw, atol=1e-3)           # logits are not probabilities
    assert ((conf > 0) & (conf <= 1)).all()


def test_models_page_shows_the_engines_confidences_for_an_uploaded_logits_model(tmp_path,
                                                                               monkeypatch):
    """The Models page with an uploaded logits model and an uploaded .npz data set: the
    sample's captions carry predict_proba's confidences."""
    import io
    import re
    from pathlib import Path

    from rnncon_core import zoo
    from rnncon_core.generate import predict_proba
    if not zoo.model_path("mnist-lstm").exists():
        pytest.skip("needs the shipped mnist-lstm (the dashboard's default)")
    _dashboard_state()
    monkeypatch.setattr("rnncon_core.runs.RUNS_DIR", tmp_path / "runs")
    from streamlit.testing.v1 import AppTest
    model = _build("logits-head")
    model.save(tmp_path / "logits.keras")
    rng = np.random.default_rng(1)
    x, y = rng.random((12, 28, 28)).astype(np.float32), rng.integers(0, 10, 12)
    buf = io.BytesIO()
    np.savez(buf, x_train=x, y_train=y, x_test=x, y_test=y)
    root = Path(__file__).resolve().parents[1]
    at = AppTest.from_file(str(root / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    at.radio(key="models_source").set_value("Upload a .keras file").run()
    at.file_uploader(key="models_upload").set_value(
        ("logits.keras", (tmp_path / "logits.keras").read_bytes(), "application/zip")).run()
    at.file_uploader(key="models_own_npz").set_value(
        ("mine.npz", buf.getvalue(), "application/octet-stream")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["selection"].dataset.endswith(".npz")     # kept in the run store
    block = next(h.proto.body for h in at.get("html") if "<figcaption" in h.proto.body)
    captions = re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", block)
    shown = [int(re.search(r"\((\d+)%\)", c).group(1)) for c in captions]
    p = predict_proba(model, x[:len(shown)])
    assert shown and shown == [int(round(100 * c)) for c in p.max(1)]
