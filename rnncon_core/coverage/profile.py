"""Training profiles: what the profile-based criteria (testRNN's BC/SC/TC, DeepStellar's
abstract model, DeepGauge's ranges) know about a model's behaviour on its training inputs.

A profile is built from training inputs and kept as one .npz under
``CACHE_DIR/profiles/<fingerprint>-<inputs>.npz``: the fingerprint is the sha256 of the
model's weights (so a retrained model never reads a stale one), ``inputs`` which training
inputs it holds: "all" (testRNN's ``aggregate_inf`` and DeepGauge's range building read every
training input) or "correct" (DeepStellar's ``profile_train_data`` keeps only the inputs the
model classifies correctly). Its meta records a digest of the data it was built from:
``ensure_profile`` (what a criterion given ``x_train`` calls) builds it on demand and builds it
again when other data is given.

It holds, over every profiled input (and every step):

- ``neuron_lo`` / ``neuron_hi``: each neuron's smallest and largest raw output (NC's neurons,
  without the input layer) -- DeepGauge on neurons;
- ``contrib_lo`` / ``contrib_hi``: each unit contribution's smallest and largest signed raw value
  (x^t·U_g, h^(t-1)·W_g, Dense x·W; RConC's unit layout, before any normalization) -- DeepGauge
  on contributions;
- per recurrent layer L and step t (arrays (T,)): ``V_lo@L`` / ``V_hi@L`` the range of each of
  testRNN's views V (``flow_views``): xif (mean keep gate), axih (|ξ^h_t|), dnet
  (|ξ^h_t − ξ^h_(t−1)|), dparts (|Δξ^h+| + |Δξ^h−|); ``V_s1@L`` / ``V_s2@L`` the sums of xih
  and axih and of their squares over inputs (float64), ``count@L`` the inputs -- testRNN (a
  window of steps takes the min / max / moments of its steps);
- per recurrent layer L: ``pca_mean@L`` (u,), ``pca_axes@L`` (K, u) the first K principal axes
  of the hidden states h_t (K = min(8, u); each axis signed so that its largest-magnitude entry
  is positive, scikit-learn's PCA convention since 1.5), and ``proj@L`` (N, T, K) every
  profiled input's projected states -- DeepStellar's abstract model is cut from these.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from .. import paths
from ..errors import InputError, UnsupportedModelError
from ..io import atomic_write_npz
from ..lazy import tf
from ..trace import Tracer, fingerprint
from ..zoo import class_labels
from .base import Criterion
from .engine import Engine, with_max
from .rconc import ContributionCoverage

MAX_COMPONENTS = 8
PROFILE_INPUTS = ("all", "correct")
FLOW_RANGES = ("xif", "axih", "dnet", "dparts")      # per-step lo / hi kept
FLOW_MOMENTS = ("xih", "axih")                       # per-step sums kept
_BATCH = 256


def data_digest(x, y=None) -> str:
    """sha256 (first 16 hex digits) of the training inputs (and labels) a profile is built from."""
    h = hashlib.sha256()
    for a in (x, y):
        if a is not None:
            a = np.ascontiguousarray(np.asarray(a))
            h.update(str((a.shape, a.dtype.str)).encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


def default_path(model, inputs: str = "all") -> Path:
    return Path(paths.CACHE_DIR) / "profiles" / f"{fingerprint(model)}-{inputs}.npz"


class Profile:
    """The arrays of one model's training profile (see the module docstring)."""

    def __init__(self, arrays: dict, meta: dict):
        self.arrays, self.meta = arrays, meta

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.arrays:
            raise InputError(f"the profile has no {key!r}: it was built for another model or an "
                             f"older version; build it again (rnncon profile)")
        return self.arrays[key]

    def save(self, path) -> Path:
        return atomic_write_npz(path, {"_meta": np.array(json.dumps(self.meta)), **self.arrays},
                                compressed=False)

    @classmethod
    def load(cls, path) -> "Profile":
        with np.load(Path(path), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files if k != "_meta"}
            meta = json.loads(str(z["_meta"]))
        return cls(arrays, meta)


_LOADED: dict = {}

MISSING = ("no training profile of this model ({inputs} training inputs): pass its training "
           "data (CLI: --dataset NAME; Python: x_train=..., y_train=...; dashboard: a model "
           "with its data set) or build it once with `rnncon profile --model M --dataset D`")


def load_profile(model, path=None, inputs: str = "all", choosable: bool = False) -> Profile:
    """The profile at ``path`` (default: the model's own for ``inputs`` under
    CACHE_DIR/profiles), checked against the model's fingerprint and against ``inputs`` (the
    training inputs it must hold: a profile of the others is an InputError; ``choosable``:
    the criterion takes ``profile_inputs``, so the message offers it). Loaded once per file
    and modification time."""
    p = Path(path) if path else default_path(model, inputs)
    if not p.is_file():
        if path:
            raise InputError(f"no training profile at {p}: build it with `rnncon profile "
                             f"--profile-path {p}`")
        raise InputError(MISSING.format(inputs=inputs))
    key = (str(p.resolve()), p.stat().st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = Profile.load(p)
    prof = _LOADED[key]
    if prof.meta.get("fingerprint") != fingerprint(model):
        raise InputError(f"the profile {p.name} was built for another model (fingerprint "
                         f"{prof.meta.get('fingerprint')}, this model {fingerprint(model)}); "
                         f"build one for this model with `rnncon profile`")
    built = prof.meta.get("inputs")
    if built is not None and built != inputs:
        switch = f"give --profile-inputs {built} to use it, or " if choosable else ""
        raise InputError(f"the profile {p} was built from {_INPUTS_TEXT.get(built, built)}, but "
                         f"the criterion reads a profile of {_INPUTS_TEXT.get(inputs, inputs)}: "
                         f"{switch}build one with `rnncon profile --profile-inputs {inputs} "
                         f"--profile-path FILE`")
    return prof


_INPUTS_TEXT = {"all": "all the training inputs",
                "correct": "the training inputs the model classifies correctly"}


def correct_inputs(model, x, y, embedded: bool = False):
    """The inputs of x the model classifies as y (DeepStellar's profile_train_data:
    argmax of the softmax; a sigmoid output (N, 1): above one half)."""
    m = model.model if isinstance(model, Tracer) else model
    if y is None:
        raise InputError("profile_inputs='correct' keeps the training inputs the model "
                         "classifies correctly: give their labels too (y_train), or use "
                         "profile_inputs='all'")
    y = np.asarray(y).reshape(-1)
    if len(y) != len(x):
        raise InputError(f"{len(x)} training inputs but {len(y)} labels")
    out = np.concatenate([np.asarray(m(x[i:i + _BATCH], training=False))
                          for i in range(0, len(x), _BATCH)])
    keep = class_labels(out) == y.astype(np.int64)
    if not keep.any():
        raise InputError("the model classifies none of the training inputs correctly: no "
                         "profile of correct inputs (check the labels, or use "
                         "profile_inputs='all')")
    return x[keep]


def ensure_profile(model, x, y=None, inputs: str = "all", embedded: bool = False,
                   source: str = "", progress=None) -> Path:
    """The model's cached profile of ``inputs`` ("all" or "correct") over the training data
    (x, y): built when missing or built from other data (the meta's digest), else reused."""
    if inputs not in PROFILE_INPUTS:
        raise InputError(f"profile_inputs must be one of {', '.join(PROFILE_INPUTS)}, got "
                         f"{inputs!r}")
    path = default_path(model, inputs)
    digest = data_digest(x, y if inputs == "correct" else None)
    if path.is_file():
        try:
            if Profile.load(path).meta.get("digest") == digest:
                return path
        except (OSError, ValueError, KeyError):
            pass                                   # unreadable: build it again
    return build_profile(model, x, embedded=embedded, path=path, source=source,
                         progress=progress, y=y, inputs=inputs)


def build_profile(model, x, embedded: bool = False, path=None, source: str = "",
                  progress=None, y=None, inputs: str = "all") -> Path:
    """Profile ``model`` over the training inputs ``x`` (all of them, or with ``inputs=
    "correct"`` those it classifies as ``y``; two passes) and save it (default: the model's
    cache path for ``inputs``). Returns the path."""
    if inputs not in PROFILE_INPUTS:
        raise InputError(f"inputs must be one of {', '.join(PROFILE_INPUTS)}, got {inputs!r}")
    tracer = model if isinstance(model, Tracer) else Tracer(model)
    x_all = tracer.check_inputs(x, embedded).numpy()
    digest = data_digest(x, y if inputs == "correct" else None)
    xs = correct_inputs(tracer, x_all, y, embedded) if inputs == "correct" else x_all
    rec_units = [(s.steps, min(MAX_COMPONENTS, s.units)) for s in tracer.specs if s.kind != "dense"]
    kept = len(xs) * sum(t * k for t, k in rec_units) * 4
    if kept > 2 ** 31:
        raise InputError(f"a profile of {len(xs):,} inputs would keep {kept / 2 ** 30:.1f} GiB "
                         f"of projected hidden states; profile fewer inputs (rnncon profile --n)")
    started = time.time()
    arrays = _profile_arrays(tracer, xs, embedded, progress)
    meta = {"fingerprint": fingerprint(tracer.model), "n_inputs": int(len(xs)),
            "n_given": int(len(x_all)), "inputs": inputs, "digest": digest,
            "source": source, "seconds": round(time.time() - started, 1),
            "model": getattr(tracer.model, "name", "")}
    return Profile(arrays, meta).save(path or default_path(tracer.model, inputs))


def _profile_arrays(tracer, x, embedded, progress) -> dict:
    """The profile's arrays over x (see the module docstring): two passes."""
    rec = [s for s in tracer.specs if s.kind != "dense"]

    def run(xb):
        return tracer.embed_tf(xb) if tracer.embedding is not None and not embedded else xb

    sig = tf.TensorSpec((None,) + tuple(x.shape[1:]), tf.int32 if x.dtype.kind == "i" else
                        tf.float32)
    arrays, mom = _first_pass(tracer, x, run, sig, rec, progress)
    axes = _pca_axes(rec, mom, arrays)
    _second_pass(tracer, x, run, sig, rec, axes, progress, arrays)
    return arrays


def _pass1_graph(tracer, run, sig, rec):
    """The first pass's graph: neuron outputs, signed contributions, the flow views and the
    hidden states of one batch."""
    cc = ContributionCoverage(tracer, values="signed")
    neuron_names = [name for name, _, _ in tracer.neuron_layers]

    @tf.function(input_signature=[sig])
    def pass1(xb):
        xe = run(xb)
        tr = tracer.forward(xe)
        n = tf.shape(xe)[0]
        neurons = tf.concat([tf.reshape(tr.layers[nm].output if nm in tr.layers
                                        else tr.outputs[nm], (n, -1)) for nm in neuron_names], 1)
        parts = cc._unit_parts(tracer.forward_steps(xe, ("xU", "hW"))[0])
        contrib = tf.concat([tf.reshape(tf.transpose(p, [1, 0, 2]), (n, -1)) for p in parts], 1)
        flows = {s.name: {k: v for k, v in flow_views(tr.layers[s.name]).items()
                          if v is not None} for s in rec}
        hs = {s.name: tr.layers[s.name].h for s in rec}
        return neurons, contrib, flows, hs
    return pass1


def _lohi(acc: dict, key, v, layer=""):
    """Widen acc's running [lo, hi] of key (per layer) to cover v's rows."""
    k_lo, k_hi = (f"{key}_lo@{layer}", f"{key}_hi@{layer}") if layer else \
        (f"{key}_lo", f"{key}_hi")
    lo, hi = v.min(axis=0), v.max(axis=0)
    if k_lo in acc:
        lo, hi = np.minimum(acc[k_lo], lo), np.maximum(acc[k_hi], hi)
    acc[k_lo], acc[k_hi] = lo, hi


def _add(acc: dict, key, v):
    acc[key] = acc.get(key, 0.0) + v


def _first_pass(tracer, x, run, sig, rec, progress):
    """Ranges and sums over x (the arrays so far) and each layer's hidden-state moments
    [sum h, sum h h^T, count]."""
    pass1 = _pass1_graph(tracer, run, sig, rec)
    acc: dict = {}
    mom = {s.name: [np.zeros(s.units), np.zeros((s.units, s.units)), 0.0] for s in rec}
    n_total = len(x)
    for b0 in range(0, n_total, _BATCH):
        neurons, contrib, flows, hs = pass1(x[b0:b0 + _BATCH])
        _lohi(acc, "neuron", neurons.numpy())
        _lohi(acc, "contrib", contrib.numpy())
        for s in rec:
            _add_layer(acc, mom[s.name], s, flows[s.name], hs[s.name])
        if progress:
            progress(min(b0 + _BATCH, n_total), 2 * n_total)
    arrays = {k: (np.asarray(v, np.float64) if "_s1@" in k or "_s2@" in k or "count@" in k
                  else np.asarray(v, np.float32)) for k, v in acc.items()}
    return arrays, mom


def _add_layer(acc: dict, m: list, s, flows: dict, h):
    """One batch of one recurrent layer: its flow views' ranges and sums, its moments m."""
    views = {k: v.numpy().astype(np.float64) for k, v in flows.items()}
    for k in FLOW_RANGES:
        if k in views:
            _lohi(acc, k, views[k], s.name)
    for k in FLOW_MOMENTS:
        _add(acc, f"{k}_s1@{s.name}", views[k].sum(0))
        _add(acc, f"{k}_s2@{s.name}", (views[k] ** 2).sum(0))
    _add(acc, f"count@{s.name}", float(len(views["xih"])))
    h = h.numpy().reshape(-1, s.units).astype(np.float64)
    m[0] += h.sum(0)
    m[1] += h.T @ h
    m[2] += len(h)


def _pca_axes(rec, mom, arrays) -> dict:
    """Each layer's hidden-state mean and principal axes (signs fixed), also put in arrays."""
    axes = {}
    for s in rec:
        s1, s2, cnt = mom[s.name]
        mean = s1 / cnt
        cov = s2 / cnt - np.outer(mean, mean)
        _, v = np.linalg.eigh(cov)
        k = min(MAX_COMPONENTS, s.units)
        ax = v[:, ::-1][:, :k].T                               # (k, u), largest variance first
        ax *= np.where(ax[np.arange(k), np.abs(ax).argmax(1)] < 0, -1.0, 1.0)[:, None]
        axes[s.name] = (mean.astype(np.float32), ax.astype(np.float32))
        arrays[f"pca_mean@{s.name}"], arrays[f"pca_axes@{s.name}"] = axes[s.name]
    return axes


def _second_pass(tracer, x, run, sig, rec, axes, progress, arrays):
    """Each input's hidden states projected on the layer's axes, put in arrays."""

    @tf.function(input_signature=[sig])
    def pass2(xb):
        tr = tracer.forward(run(xb))
        return {s.name: tf.einsum("ntu,ku->ntk", tr.layers[s.name].h - axes[s.name][0],
                                  axes[s.name][1]) for s in rec}
    projs = {s.name: [] for s in rec}
    n_total = len(x)
    for b0 in range(0, n_total, _BATCH):
        out = pass2(x[b0:b0 + _BATCH])
        for s in rec:
            projs[s.name].append(out[s.name].numpy())
        if progress:
            progress(n_total + min(b0 + _BATCH, n_total), 2 * n_total)
    for s in rec:
        arrays[f"proj@{s.name}"] = np.concatenate(projs[s.name]).astype(np.float32)


def flow_views(lt) -> dict:
    """testRNN's views of one recurrent layer's trace, (N, T) each, with ξ^h±_t the sums of
    the positive and of the negative parts of h_t (ξ^h±_(−1) = 0):

    - xif: the mean of the forget gate f_t over the units (GRU: of the update gate z, which
      keeps h^(t−1) the same way; None for SimpleRNN) -- the paper's ξ^f;
    - xih: ξ^h_t = ξ^h+_t + ξ^h−_t;  axih: |ξ^h_t| (testRNN's code: ``alpha_TC`` in
      src/utils.py ``aggregate_inf``, the value its BC and TC read);
    - dnet: |ξ^h_t − ξ^h_(t−1)| (testRNN's code: ``alpha_SC``);
    - dparts: |ξ^h+_t − ξ^h+_(t−1)| + |ξ^h−_t − ξ^h−_(t−1)| (the paper's Δξ^h_t)."""
    keep = {"lstm": "f", "gru": "z"}.get(lt.spec.kind)
    h = lt.h
    pos = tf.reduce_sum(tf.nn.relu(h), axis=2)
    neg = tf.reduce_sum(tf.minimum(h, 0.0), axis=2)
    prev = lambda v: tf.pad(v[:, :-1], [[0, 0], [1, 0]])     # noqa: E731
    xih = pos + neg
    return {"xif": tf.reduce_mean(lt.gates[keep], axis=2) if keep else None,
            "xih": xih, "axih": tf.abs(xih), "dnet": tf.abs(xih - prev(xih)),
            "dparts": tf.abs(pos - prev(pos)) + tf.abs(neg - prev(neg))}


class ProfiledEngine(Engine):
    """The graphs close over the profile's arrays: a rebuilt profile gets new graphs."""

    def key(self) -> tuple:
        return super().key() + (getattr(self.crit, "_prof_key", None),)


class ProfiledCriterion(Criterion):
    """A criterion that reads the model's training profile: ``profile_path`` (None: the
    model's own under CACHE_DIR/profiles for ``profile_inputs``), built on demand when the
    criterion is given the training data: ``Criterion(model, x_train=..., y_train=...,
    progress=fn)`` (progress(done, total)). Subclasses give ``_scores_graph``;
    ``profile(x)`` is each input's own scores."""

    _record = None          # what the scores read: None (the full Trace) or a forward_steps record
    engine_class = ProfiledEngine

    def __init__(self, model, x_train=None, y_train=None, progress=None, train_source: str = "",
                 **params):
        self._train = (x_train, y_train, progress, train_source)
        try:
            super().__init__(model, **params)
        finally:
            self._train = None

    def _load_profile(self) -> Profile:
        if getattr(self, "_prof", None) is None:
            inputs = getattr(self, "profile_inputs", "all")
            x, y, progress, source = self._train or (None, None, None, "")
            if self.profile_path is None and x is not None:
                ensure_profile(self.tracer, x, y, inputs, source=source, progress=progress)
            self._prof = load_profile(self.tracer.model, self.profile_path, inputs,
                                      choosable=hasattr(self, "profile_inputs"))
            p = Path(self.profile_path) if self.profile_path else \
                default_path(self.tracer.model, inputs)
            self._prof_key = (str(p.resolve()), p.stat().st_mtime_ns)
        return self._prof

    def _build(self) -> None:
        self._reduce_fn = self.engine.compile(with_max(self._scores_graph), record=self._record)

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        """(N, total) each input's own scores (the state is not touched)."""
        return self._reduce_fn(self.tracer.check_inputs(x, embedded), embedded)[0].numpy()

    def _recurrent_specs(self, what: str, kinds=("lstm", "gru", "simple_rnn")):
        specs = [s for s in self.tracer.specs if s.kind in kinds]
        if not specs:
            have = sorted({s.kind for s in self.tracer.specs})
            raise UnsupportedModelError(f"{type(self).__name__} needs {what}; this model has "
                                        f"{', '.join(have)}")
        return specs
