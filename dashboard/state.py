"""What the pages share: the model and data set under test, and the cached calls into the engine.

Models and data sets are cached with ``st.cache_resource`` (one shared, read-only object per
process: a Keras model cannot be pickled, and copying 200 MB of Fashion-MNIST on every rerun
would be slow); small arrays and tables with ``st.cache_data``. A coverage measurement's
cached functions take one key, a frozen :class:`Profile`, and the view's threshold beside it.
Pages never import TensorFlow themselves: they go through here. The engine's pandas-bearing
modules (criteria, reports) are imported in the functions that compute, so the Models page's
first view loads neither pandas nor plotly (docs/internals.md, "Imports").
"""
from __future__ import annotations

import ctypes
import gc
import hashlib
import re
import shutil
import time
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
import streamlit as st

from dashboard import images
from dashboard.perf import timed
from dashboard.runtime import keep_keras_session
from dashboard.uploads import (data_label, find_upload, public, upload_dir,  # noqa: F401
                               upload_digest, upload_label, uploaded_models)
from rnncon_core import data, zoo
from rnncon_core.coverage import CRITERIA, needs_profile, title
from rnncon_core.errors import ModelLoadError, RNNConError, UnsupportedModelError
from rnncon_core.generate import predict_proba
from rnncon_core.onnx_import import onnx_card as card
from rnncon_core.paths import CACHE_DIR
from rnncon_core.quality import tsne_embedding
from rnncon_core.runs import RunStore
from rnncon_core.trace import Tracer

keep_keras_session()

DEFAULT_MODEL = "mnist-lstm"
SAMPLE_SIZE = 16            # the Models page's sample of test inputs
DEFAULT_INPUTS = 200        # the Coverage and Gates pages' default number of test inputs
MAX_UPLOAD_MB = 50          # also server.maxUploadSize in .streamlit/config.toml


def __getattr__(name: str):
    if name == "UPLOAD_DIR":          # state.UPLOAD_DIR: the run store's, read when asked
        return upload_dir()
    raise AttributeError(name)


@dataclass(frozen=True)
class Selection:
    """The model and data set the pages work on."""
    model: str | None       # a shipped name (``mnist-lstm``) or the path of an uploaded file
    label: str              # what the user sees
    dataset: str | None

    @property
    def shipped(self) -> bool:
        return self.model in zoo.ARCHITECTURES


def show_error(e: Exception) -> None:
    """An engine error as one red box: its message says what is wrong and what to do."""
    if isinstance(e, RNNConError):
        st.error(str(e))
    else:
        st.error(f"{type(e).__name__}: {e}")


# ---------------------------------------------------------------- the selection

def shipped() -> list[str]:
    """Shipped Table 1 models (files appear while the background training runs)."""
    return [n for n in zoo.shipped_models() if n in zoo.ARCHITECTURES]


def default_selection() -> Selection:
    names = shipped()
    name = DEFAULT_MODEL if DEFAULT_MODEL in names else (names[0] if names else None)
    ds = zoo.ARCHITECTURES[name].dataset if name else None
    return Selection(name, name or "no model", ds)


def current() -> Selection:
    """The selection of this browser session (set on the Models page)."""
    sel = st.session_state.get("selection")
    if sel is None or (sel.shipped and sel.model not in shipped()) \
            or (sel.model and not sel.shipped and not Path(sel.model).exists()):
        sel = default_selection()
        st.session_state["selection"] = sel
    return sel


def select(model: str | None, label: str, dataset: str | None) -> None:
    """Change the selection and rerun, so the frame (sidebar) shows it at once."""
    st.session_state["selection"] = Selection(model, label, dataset)
    st.rerun()


def require_model() -> Selection:
    """The selection, or stop the page when there is no model to work on."""
    sel = current()
    if sel.model is None:
        st.info("No trained model is in `assets/models` yet (the shipped models are being "
                "trained; they appear here as they finish). Upload a `.keras` file on the "
                "Models page, or train one with `rnncon train mnist-lstm`.")
        st.stop()
    return sel


def datasets_for(model_ref: str) -> list[str]:
    """The data sets whose inputs fit the model (its own first for a shipped model)."""
    return zoo.model_datasets(model_ref, load=model)


def save_upload(name: str, content: bytes) -> Path:
    """Write an uploaded file to the run store's uploads, in a folder named by its hash;
    return the path."""
    if len(content) > MAX_UPLOAD_MB * 1024 * 1024:
        raise ModelLoadError(f"{name} is {len(content) / 2**20:.1f} MB; uploads are limited to "
                             f"{MAX_UPLOAD_MB} MB")
    if not name.lower().endswith((".keras", ".onnx")):
        raise ModelLoadError(f"{name}: only Keras 3 '.keras' files are supported (in Keras, "
                             f"model.save('model.keras') writes one), and ONNX files of "
                             f"recurrent models ('.onnx', from torch.onnx.export)")
    digest = hashlib.sha256(content).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name)
    path = upload_dir() / digest / safe
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(content)
    return path


def check_upload(path: str):
    """Load an uploaded model (cached); a file that does not load is removed from the
    uploads (it would be offered again in the picker) and its error raised."""
    try:
        return model(path)
    except RNNConError:
        if upload_digest(path):
            shutil.rmtree(Path(path).parent, ignore_errors=True)
        raise


# ---------------------------------------------------------------- cached engine calls
# Every view of a model and data set comes from these server-wide caches (keys are plain
# strings and numbers): computed once, by whichever session or the warm-up thread asks first,
# while the others wait on the same per-key lock. No spinner inside them (the warm-up thread
# has no page to draw on): the pages show their own while they wait.

_computed: set = set()          # (function, key) pairs whose value is in a cache


def ready(fn_name: str, *key) -> bool:
    """Whether a cached value is computed already (so asking for it will not block)."""
    return (fn_name, key) in _computed


@timed()
@st.cache_resource(show_spinner=False, max_entries=8)
def model(model_ref: str):
    """The Keras model (safe loading: ``zoo.load_model`` refuses code-carrying files)."""
    m = zoo.load_model(model_ref)
    _computed.add(("model", (model_ref,)))
    return m


def onnx_card(model) -> dict | None:
    """The import card of a model read from an ONNX file (None for a Keras file)."""
    return card(model)


@timed()
@st.cache_resource(show_spinner=False, max_entries=4)
def dataset(name: str) -> data.Dataset:
    ds = data.load_dataset(name)
    _computed.add(("dataset", (name,)))
    return ds


def load_with_progress(model_ref: str, dataset_name: str, what: str, compute):
    """``compute()`` (a cached profile) on a page, the first time with its stages shown as
    they pass: the model, the data set (both loaded once per server, shared by every
    session), then ``what``. Later calls (any session) return at once."""
    if ready("model", model_ref) and ready("dataset", dataset_name):
        return compute()
    started = time.perf_counter()
    with st.status(f"Loading {what}…", expanded=True) as box:
        st.write(f"the model {model_ref if model_ref in zoo.ARCHITECTURES else 'uploaded'}…")
        model(model_ref)
        st.write(f"the {data_label(dataset_name)} data set…")
        dataset(dataset_name)
        st.write(f"{what} (kept on disk for the next start)…")
        out = compute()
        box.update(label=f"Loaded {what} in {time.perf_counter() - started:.0f} s "
                         "(once per server: shared by every session)",
                   state="complete", expanded=False)
    return out


@timed()
@st.cache_data(show_spinner=False, max_entries=32)
def test_inputs(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first n inputs of the test split and their labels."""
    ds = dataset(name)
    return ds.x_test[:n], ds.y_test[:n]


def _cards_signature() -> tuple:
    return tuple((n, zoo.card_path(n).stat().st_mtime) for n in zoo.ARCHITECTURES
                 if zoo.card_path(n).exists())


@st.cache_data(show_spinner=False)
def _table1(signature: tuple) -> list[dict]:
    rows = zoo.models_table()
    _computed.add(("table1", (signature,)))
    return rows


@timed()
def table1() -> list[dict]:
    """zoo.models_table(), recomputed when a model card appears or changes."""
    return _table1(_cards_signature())


@timed()
def accuracy_figure():
    """Table 1's accuracies, ours beside the paper's (one figure per server and cards)."""
    return _accuracy_figure(_cards_signature())


@st.cache_resource(show_spinner=False, max_entries=4)
def _accuracy_figure(signature: tuple):
    from dashboard import tables
    from rnncon_core.reports import charts
    return charts.accuracy_beside_paper(tables.table1(_table1(signature)))


def table1_ready() -> bool:
    return ready("table1", _cards_signature())


def model_card(name: str) -> dict | None:
    """The shipped model's card (re-read when it changes)."""
    return _card(name, _cards_signature())


@st.cache_data(show_spinner=False, max_entries=64)
def _card(name: str, signature: tuple) -> dict | None:
    return zoo.read_card(name)


def predictions(model_ref: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted labels and their confidences for a few inputs."""
    return _predictions(model_ref, x)


@st.cache_data(show_spinner=False, max_entries=32)
def _predictions(model_ref: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The engine's class probabilities (``predict_proba``: logits through a softmax, one
    sigmoid unit as two columns), never a second reading of the raw outputs."""
    p = predict_proba(model(model_ref), x)
    return p.argmax(-1), p.max(-1)


@timed()
@st.cache_data(show_spinner=False, max_entries=16)
def sample(model_ref: str, dataset_name: str, n: int) -> dict:
    """The Models page's sample: the first n test inputs, labels, predictions, confidences."""
    x, y = test_inputs(dataset_name, n)
    pred, conf = predictions(model_ref, x)
    _computed.add(("sample", (model_ref, dataset_name, n)))
    return {"x": x, "y": y, "pred": pred, "conf": conf}


@timed()
@st.cache_data(show_spinner=False, max_entries=16)
def traced_layers(model_ref: str) -> list[dict]:
    """The traced layers of the model in order: name, kind, units, steps (the Tracer checks
    that the model is supported: UnsupportedModelError says why not)."""
    return [{"name": s.name, "kind": s.kind, "units": s.units, "steps": s.steps,
             "gates": list(s.gates)} for s in Tracer(model(model_ref)).specs]


def kind_of(dataset_name: str) -> str:
    """"text" (word ids) or "image" (float inputs, also a user's sequences)."""
    return "text" if data_kind(dataset_name) == "text" else "image"


def data_kind(dataset_name: str) -> str:
    """The data set's own kind: "image", "text" or "sequence" (a user's real-valued series)."""
    if dataset_name in data.DATASETS:
        return data.dataset_kind(dataset_name)
    return dataset(dataset_name).kind


def run_outputs(info, name: str = "outputs") -> dict | None:
    """A run's ``<name>.npz`` arrays (re-read when the file changes), or None."""
    path = info.path / f"{name}.npz"
    if not path.exists():
        return None
    return _npz(str(path), path.stat().st_mtime)


@st.cache_resource(show_spinner=False, max_entries=8)
def _npz(path: str, mtime: float) -> dict:
    """One shared, read-only copy per file version (not one per session and rerun)."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ---------------------------------------------------------------- coverage

THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(20))     # 0.0 ... 0.95
INPUT_CHOICES = (50, 100, 200, 500, 1000, 2000)
NORMALIZATIONS = ("step", "layer", "model")   # ContributionCoverage(normalize=...)
VALUES = ("abs", "signed")                    # ContributionCoverage(values=...)
DEFAULT_NORM = ("step", "abs")                # the engine's defaults: (normalize, values)
EQ3_AS_WRITTEN = ("model", "signed")


@dataclass(frozen=True)
class Profile:
    """The key of one coverage measurement, the one argument of the cached functions below:
    the model, the data set, its first ``n_inputs`` test inputs, and how RConC counts and
    scales contributions. Frozen, so the caches key on it. The threshold and the row grouping
    are not part of it: they choose a view of a profile (``coverage_at(profile, by, t)``), so
    a slider move reads the kept profile and never recomputes it."""
    model: str
    dataset: str
    n_inputs: int
    granularity: str = "unit"
    normalize: str = DEFAULT_NORM[0]
    values: str = DEFAULT_NORM[1]

    @property
    def norm(self) -> dict:
        """ContributionCoverage's keyword arguments for the scaling."""
        return _norm_kwargs(self.normalize, self.values)


def default_threshold(dataset_name: str | None) -> float:
    """The engine's default threshold for a data set (the paper's: 0.25 for the MNIST models,
    0.5 for the IMDB ones)."""
    from rnncon_core.coverage import default_threshold as engine_default
    return engine_default(dataset_name)


def _norm_kwargs(normalize: str, values: str) -> dict:
    return {"normalize": normalize, "values": values}


PROFILE_INPUTS_N = 4000         # training inputs a criterion's profile is built from


def _no_paths(text: str) -> str:
    """A message without server paths (a path becomes its last part)."""
    return re.sub(r"(?:[A-Za-z]:)?(?:/[^\s/:'\"`]+){2,}", lambda m: m.group(0).rsplit("/", 1)[-1],
                  text)


def _big(n: int) -> str:
    return f"{n:,}" if n < 10 ** 12 else f"{float(n):.3g}"


@timed()
@st.cache_data(show_spinner=False, max_entries=256)
def criterion_row(model_ref: str, dataset_name: str, n_inputs: int, name: str) -> dict:
    """One criterion at its defaults over the first n test inputs: its name in words, short
    id, rate, covered, total and a note (what it counts where another figure on the page
    differs; the profile it read), or the reason it does not apply. A profile-based one
    builds the model's training profile from the first PROFILE_INPUTS_N training inputs of
    the data set when it has none (coverage.profile.ensure_profile)."""
    x = test_inputs(dataset_name, n_inputs)[0]
    cls = CRITERIA[name]
    params = {"threshold": default_threshold(dataset_name)} if cls.threshold_from_data else {}
    note = ""
    if needs_profile(name):
        x_tr, y_tr = dataset(dataset_name).split("train")
        params.update(x_train=x_tr[:PROFILE_INPUTS_N], y_train=y_tr[:PROFILE_INPUTS_N],
                      train_source=f"{dataset_name} train[:{PROFILE_INPUTS_N}]")
    row = {"criterion": title(name), "id": name}
    try:
        crit = cls(model(model_ref), **params).update(x)
    except RNNConError as e:
        return {**row, "rate": None, "covered": "", "total": "",
                "note": _no_paths(str(e).splitlines()[0])}
    if needs_profile(name):
        inputs = crit.get_config().get("profile_inputs", "all")
        note = (f"profile: the first {PROFILE_INPUTS_N:,} {dataset_name} training inputs"
                + (", those classified correctly" if inputs == "correct" else ""))
    if name == "nc":
        note = (f"at threshold {params['threshold']:g}, the data set's default (the NC "
                f"figure above follows the slider); layer outputs only, no input pixels")
    elif name == "csc":
        note = ("(cell, section) pairs over all five sections; the CS_C boundary figure above "
                "counts the cells driven into an outer section")
    elif name == "tknp":
        note = f"{crit.patterns_seen():,} distinct patterns of {_big(crit.total)} possible"
    elif cls.uses_threshold and "threshold" in crit.get_config():
        note = (f"threshold {crit.threshold:g}" + ("; " + note if note else ""))
    return {**row, "rate": float(crit.rate()), "covered": _big(int(crit.covered)),
            "total": _big(int(crit.total)), "note": note}


def every_criterion(model_ref: str, dataset_name: str, n_inputs: int,
                    progress=None) -> "pd.DataFrame":
    """Every registered criterion with its default parameters over the same first n test
    inputs (``criterion_row`` each); ``progress(i, n, name)`` before each one."""
    import pandas as pd
    rows = []
    for i, name in enumerate(CRITERIA):
        if progress:
            progress(i, len(CRITERIA), name)
        rows.append(criterion_row(model_ref, dataset_name, n_inputs, name))
    return pd.DataFrame(rows)


@st.cache_resource(show_spinner="Computing coverage (one forward pass over the inputs)…",
                   max_entries=6)
def coverage(profile: Profile) -> dict:
    """The criteria after ``update`` over the profile's test inputs: {"RConC", "NC", "HS_C",
    "CS_C" (LSTM models only, else None)}. Each keeps its per-item maxima, so any threshold,
    layer table and growth curve (on THRESHOLD_GRID) is read without another forward pass.
    Shared read-only between sessions: pages only read them."""
    from rnncon_core.coverage import (CellStateCoverage, ContributionCoverage,
                                      HiddenStateCoverage, NeuronCoverage)
    tracer = Tracer(model(profile.model))
    crits = {"RConC": ContributionCoverage(tracer, granularity=profile.granularity,
                                           curve_thresholds=THRESHOLD_GRID, **profile.norm),
             "NC": NeuronCoverage(tracer, curve_thresholds=THRESHOLD_GRID),
             "HS_C": HiddenStateCoverage(tracer)}
    try:
        crits["CS_C"] = CellStateCoverage(tracer)
    except UnsupportedModelError:
        crits["CS_C"] = None                           # a GRU model has no cell state
    key = astuple(profile)     # the tuple the files on disk were always named by
    for name, c in crits.items():
        if c is not None:
            crits[name] = kept_profile(
                c, key, name, lambda: test_inputs(profile.dataset, profile.n_inputs)[0])
            release_memory()   # each criterion's pass on a heap given back (the peak counts)
    _computed.add(("coverage", (profile,)))
    release_memory()           # the forward pass's buffers go back to the system
    return crits


def release_memory() -> None:
    """Hand freed heap memory back to the system (glibc's malloc_trim): a profile's forward
    pass over an IMDB model frees about a gigabyte that the allocator would otherwise keep
    for the life of the server. A no-op where there is no glibc."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


PROFILE_DIR = CACHE_DIR / "dashboard-profiles"
# a profile's inputs go to a criterion's update in slices of about this many time steps in
# all (32 IMDB reviews, all 200 digits at once): NC on 200 IMDB reviews in one update held
# every step's trace at once, 0.5 GB (an update of a slice adds to the covered set exactly
# as the whole one would)
PROFILE_SLICE_STEPS = 16_000
PROFILE_VERSION = 2         # bumped when a criterion's values change (2: NC's one-unit output)


def kept_profile(crit, key: tuple, name: str, inputs):
    """``crit`` after update(inputs()), kept on disk between server starts
    (``coverage.statefile.save``/``load``; the file holds the model's weight fingerprint and
    ``load`` refuses another model's, so a changed model is never read from a stale file). A file
    that cannot be read or written only costs the forward pass."""
    from rnncon_core.coverage import statefile
    digest = hashlib.sha256(repr((key, name, crit.get_config(), PROFILE_VERSION)).encode()
                            ).hexdigest()[:20]
    path = PROFILE_DIR / f"{name}-{digest}.npz"
    if path.exists():
        try:
            return statefile.load(crit.tracer, path)
        except (RNNConError, OSError, ValueError, KeyError):
            pass
    x = inputs()
    steps = x.shape[1] if x.ndim > 1 else 1
    size = max(8, PROFILE_SLICE_STEPS // max(1, steps))
    for i in range(0, len(x), size):
        crit.update(x[i:i + size])
    try:
        statefile.save(crit, path)
    except OSError:
        pass
    return crit


@timed()
@st.cache_data(show_spinner=False, max_entries=256)
def coverage_at(profile: Profile, by: str, threshold: float) -> dict:
    """What the Coverage page shows at one threshold, read once per server from the kept
    maxima: the four headline figures, RConC and NC per layer, the growth curves (at the
    nearest grid threshold) and CS_C's sections. Small tables only."""
    from rnncon_core.reports.results import coverage_view
    return coverage_view(coverage(profile), threshold, by, THRESHOLD_GRID)


@timed()
@st.cache_data(show_spinner=False, max_entries=256)
def coverage_bars(profile: Profile, by: str, threshold: float) -> str:
    """The per-layer chart at one threshold as inline SVG (no chart script for the browser to
    load: the Coverage page's first view), built once per server."""
    view = coverage_at(profile, by, threshold)
    return images.coverage_bars(view["by_layer"], threshold=threshold)


@timed()
@st.cache_resource(show_spinner=False, max_entries=64)
def growth_figure(profile: Profile, by: str, threshold: float):
    """The growth curves (Figure 6) at the grid threshold nearest to ``threshold``, built once
    per server (read-only)."""
    from rnncon_core.reports import charts
    view = coverage_at(profile, by, threshold)
    return charts.growth_curves(view["curves"], threshold=view["grid_threshold"])


@timed()
@st.cache_data(show_spinner=False, max_entries=64)
def sweep(profile: Profile, by: str = "layer") -> "pd.DataFrame":
    """RConC and NC per layer (and "All") at every threshold of the grid."""
    from rnncon_core.reports.results import coverage_sweep
    return coverage_sweep(coverage(profile), THRESHOLD_GRID, by)


@timed()
@st.cache_data(show_spinner=False, max_entries=256)
def gate_table(profile: Profile, layer: str, threshold: float,
               input_index: int | None = None) -> "pd.DataFrame":
    """by_gate_step() of a unit profile: the whole set, or one input of it (Figure 12)."""
    rconc = coverage(profile)["RConC"]
    if input_index is None:
        return rconc.by_gate_step(layer, threshold=threshold)
    # the input itself, not input_index: a profile read back from disk keeps no inputs
    x, _ = test_inputs(profile.dataset, profile.n_inputs)
    return rconc.by_gate_step(layer, x=x[input_index:input_index + 1], threshold=threshold)


@timed()
@st.cache_resource(show_spinner=False, max_entries=64)
def sweep_figure(profile: Profile, by: str, chosen: float):
    from rnncon_core.reports import charts
    return charts.threshold_sweep(sweep(profile, by), chosen=chosen)


@st.cache_data(show_spinner="Trying the candidate thresholds on each label…", max_entries=16)
def threshold_choice(profile: Profile, candidates: tuple) -> tuple[float, "pd.DataFrame"]:
    """§5.2's threshold selection on the profile's test inputs."""
    from rnncon_core.coverage import select_threshold
    x, y = test_inputs(profile.dataset, profile.n_inputs)
    return select_threshold(model(profile.model), x, y, candidates=candidates,
                            granularity=profile.granularity, **profile.norm)


@st.cache_data(show_spinner="Running t-SNE on the perturbations…", max_entries=16)
def tsne(run_id: str, mtime: float, rows: tuple, perplexity: float = 30.0,
         seed: int = 0) -> np.ndarray:
    """2-D t-SNE of the perturbations (x_gen − x_seed) of some rows of a run (the core's
    ``quality.tsne_embedding``, fewer iterations than the report's)."""
    store = RunStore             # the server's store (jobs.store(): the same root)
    out = run_outputs(store().get(run_id))
    idx = np.asarray(rows, dtype=np.int64)
    p = out["x_gen"][idx].astype(np.float32) - out["x_seed"][idx].astype(np.float32)
    return tsne_embedding(p, seed=seed, perplexity=perplexity, max_iter=500)
