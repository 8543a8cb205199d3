"""Training profiles: what the profile-based criteria (testRNN's BC/SC/TC, DeepStellar's
abstract model, DeepGauge's ranges) know about a model's behaviour on its training inputs.

A profile is built once per model from training inputs (``build_profile`` or
``rnncon profile --model M --dataset D``), saved as one .npz under
``CACHE_DIR/profiles/<fingerprint>.npz`` and reused. The fingerprint is the sha256 of the
model's weights (every weight array's shape and bytes, in order), so the same model loaded
from another path finds its profile, and a retrained one does not find a stale one.

It holds, over every training input (and every step):

- ``neuron_lo`` / ``neuron_hi``: each neuron's smallest and largest raw output (NC's neurons,
  without the input layer) -- DeepGauge on neurons;
- ``contrib_lo`` / ``contrib_hi``: each unit contribution's smallest and largest signed raw value
  (x^t·U_g, h^(t-1)·W_g, Dense x·W; RConC's unit layout, before any normalization) -- DeepGauge
  on contributions;
- per recurrent layer L: ``xif_lo@L`` / ``xif_hi@L`` (T,) the range of the keep-gate view
  ξ^f_t (mean forget gate; GRU: mean update gate), ``dxih_lo@L`` / ``dxih_hi@L`` (T,) the range
  of the hidden-state change Δξ^h_t, ``xih_mean@L`` / ``xih_std@L`` the mean and standard
  deviation of ξ^h_t over inputs and steps -- testRNN;
- per recurrent layer L: ``pca_mean@L`` (u,), ``pca_axes@L`` (K, u) the first K principal axes
  of the hidden states h_t (K = min(8, u)), and ``proj@L`` (N, T, K) every training input's
  projected states -- DeepStellar's abstract model is cut from these.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io import atomic_write_npz
from ..trace import fingerprint
from .base import Criterion, with_max

MAX_COMPONENTS = 8
_BATCH = 256


def default_path(model) -> Path:
    from .. import paths
    return Path(paths.CACHE_DIR) / "profiles" / f"{fingerprint(model)}.npz"


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


def load_profile(model, path=None) -> Profile:
    """The profile at ``path`` (default: the model's own under CACHE_DIR/profiles), checked
    against the model's fingerprint. Loaded once per file and modification time."""
    p = Path(path) if path else default_path(model)
    if not p.is_file():
        raise InputError(f"no training profile for this model at {p}: build it once with "
                         f"`rnncon profile --model MODEL --dataset DATASET` (or "
                         f"rnncon_core.coverage.build_profile(model, x_train))")
    key = (str(p.resolve()), p.stat().st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = Profile.load(p)
    prof = _LOADED[key]
    if prof.meta.get("fingerprint") != fingerprint(model):
        raise InputError(f"the profile {p.name} was built for another model (fingerprint "
                         f"{prof.meta.get('fingerprint')}, this model {fingerprint(model)}); "
                         f"build one for this model with `rnncon profile`")
    return prof


def build_profile(model, x, embedded: bool = False, path=None, source: str = "",
                  progress=None) -> Path:
    """Profile ``model`` over the training inputs ``x`` (two passes) and save it (default: the
    model's cache path). Returns the path."""
    import tensorflow as tf

    from ..trace import Tracer
    from .rconc import ContributionCoverage
    tracer = model if isinstance(model, Tracer) else Tracer(model)
    x = tracer.check_inputs(x, embedded).numpy()
    rec_units = [(s.steps, min(MAX_COMPONENTS, s.units)) for s in tracer.specs if s.kind != "dense"]
    kept = len(x) * sum(t * k for t, k in rec_units) * 4
    if kept > 2 ** 31:
        raise InputError(f"a profile of {len(x):,} inputs would keep {kept / 2 ** 30:.1f} GiB "
                         f"of projected hidden states; profile fewer inputs (rnncon profile --n)")
    started = time.time()
    cc = ContributionCoverage(tracer, values="signed")
    rec = [s for s in tracer.specs if s.kind != "dense"]
    neuron_names = [name for name, _, _ in tracer.neuron_layers]

    def run(xb):
        return tracer.embed_tf(xb) if tracer.embedding is not None and not embedded else xb

    sig = tf.TensorSpec((None,) + tuple(x.shape[1:]), tf.int32 if x.dtype.kind == "i" else
                        tf.float32)

    @tf.function(input_signature=[sig])
    def pass1(xb):
        xe = run(xb)
        tr = tracer.forward(xe)
        n = tf.shape(xe)[0]
        neurons = tf.concat([tf.reshape(tr.layers[nm].output if nm in tr.layers
                                        else tr.outputs[nm], (n, -1)) for nm in neuron_names], 1)
        parts = cc._unit_parts(tracer.forward_steps(xe, ("xU", "hW"))[0])
        contrib = tf.concat([tf.reshape(tf.transpose(p, [1, 0, 2]), (n, -1)) for p in parts], 1)
        flows = {s.name: flow_views(tr.layers[s.name]) for s in rec}
        hs = {s.name: tr.layers[s.name].h for s in rec}
        return neurons, contrib, flows, hs

    acc: dict = {}

    def lohi(key, v, layer=""):
        k_lo, k_hi = (f"{key}_lo@{layer}", f"{key}_hi@{layer}") if layer else \
            (f"{key}_lo", f"{key}_hi")
        lo, hi = v.min(axis=0), v.max(axis=0)
        if k_lo in acc:
            lo, hi = np.minimum(acc[k_lo], lo), np.maximum(acc[k_hi], hi)
        acc[k_lo], acc[k_hi] = lo, hi

    mom = {s.name: [np.zeros(s.units), np.zeros((s.units, s.units)), 0.0, 0.0, 0.0]
           for s in rec}
    n_total = len(x)
    for b0 in range(0, n_total, _BATCH):
        neurons, contrib, flows, hs = pass1(x[b0:b0 + _BATCH])
        lohi("neuron", neurons.numpy())
        lohi("contrib", contrib.numpy())
        for s in rec:
            xif, xih, dxih = (None if v is None else v.numpy() for v in flows[s.name])
            if xif is not None:
                lohi("xif", xif, s.name)
            lohi("dxih", dxih, s.name)
            h = hs[s.name].numpy().reshape(-1, s.units).astype(np.float64)
            m = mom[s.name]
            m[0] += h.sum(0)
            m[1] += h.T @ h
            m[2] += len(h)
            m[3] += float(xih.astype(np.float64).sum())
            m[4] += float((xih.astype(np.float64) ** 2).sum())
        if progress:
            progress(min(b0 + _BATCH, n_total), 2 * n_total)
    arrays = {k: v.astype(np.float32) for k, v in acc.items()}
    axes = {}
    for s in rec:
        s1, s2, cnt, x1, x2 = mom[s.name]
        mean = s1 / cnt
        cov = s2 / cnt - np.outer(mean, mean)
        w, v = np.linalg.eigh(cov)
        k = min(MAX_COMPONENTS, s.units)
        ax = v[:, ::-1][:, :k].T                               # (k, u), largest variance first
        ax *= np.where(ax[np.arange(k), np.abs(ax).argmax(1)] < 0, -1.0, 1.0)[:, None]
        axes[s.name] = (mean.astype(np.float32), ax.astype(np.float32))
        arrays[f"pca_mean@{s.name}"], arrays[f"pca_axes@{s.name}"] = axes[s.name]
        xm = x1 / cnt                          # cnt: the (input, step) pairs
        arrays[f"xih_mean@{s.name}"] = np.float32(xm)
        arrays[f"xih_std@{s.name}"] = np.float32(np.sqrt(max(x2 / cnt - xm * xm, 0.0)))

    @tf.function(input_signature=[sig])
    def pass2(xb):
        tr = tracer.forward(run(xb))
        return {s.name: tf.einsum("ntu,ku->ntk", tr.layers[s.name].h - axes[s.name][0],
                                  axes[s.name][1]) for s in rec}
    projs = {s.name: [] for s in rec}
    for b0 in range(0, n_total, _BATCH):
        out = pass2(x[b0:b0 + _BATCH])
        for s in rec:
            projs[s.name].append(out[s.name].numpy())
        if progress:
            progress(n_total + min(b0 + _BATCH, n_total), 2 * n_total)
    for s in rec:
        arrays[f"proj@{s.name}"] = np.concatenate(projs[s.name]).astype(np.float32)
    meta = {"fingerprint": fingerprint(tracer.model), "n_inputs": int(n_total),
            "source": source, "seconds": round(time.time() - started, 1),
            "model": getattr(tracer.model, "name", "")}
    return Profile(arrays, meta).save(path or default_path(tracer.model))


def flow_views(lt):
    """testRNN's views of one recurrent layer's trace, (N, T) each: ξ^f_t (the mean of the
    forget gate, GRU: of the update gate z; None for SimpleRNN), ξ^h_t = Σ_j h_t,j, and
    Δξ^h_t = |ξ^h+_t − ξ^h+_(t−1)| + |ξ^h−_t − ξ^h−_(t−1)| with ξ^h±_(−1) = 0."""
    import tensorflow as tf
    keep = {"lstm": "f", "gru": "z"}.get(lt.spec.kind)
    xif = tf.reduce_mean(lt.gates[keep], axis=2) if keep else None
    h = lt.h
    pos = tf.reduce_sum(tf.nn.relu(h), axis=2)
    neg = tf.reduce_sum(tf.minimum(h, 0.0), axis=2)
    prev = lambda v: tf.pad(v[:, :-1], [[0, 0], [1, 0]])     # noqa: E731
    dxih = tf.abs(pos - prev(pos)) + tf.abs(neg - prev(neg))
    return xif, pos + neg, dxih


class ProfiledCriterion(Criterion):
    """A criterion that reads the model's training profile (``profile_path`` parameter: None
    for the model's own under CACHE_DIR/profiles, or a path). Subclasses give
    ``_scores_graph``; ``profile(x)`` is each input's own scores."""

    _record = None          # what the scores read: None (the full Trace) or a forward_steps record

    def _load_profile(self) -> Profile:
        if getattr(self, "_prof", None) is None:
            self._prof = load_profile(self.tracer.model, self.profile_path)
            p = Path(self.profile_path) if self.profile_path else default_path(self.tracer.model)
            self._prof_key = (str(p.resolve()), p.stat().st_mtime_ns)
        return self._prof

    def _graph_key(self) -> tuple:
        """The graphs close over the profile's arrays: a rebuilt profile gets new graphs."""
        return super()._graph_key() + (getattr(self, "_prof_key", None),)

    def _build(self) -> None:
        self._reduce_fn = self._compile(with_max(self._scores_graph), record=self._record)

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        """(N, total) each input's own scores (the state is not touched)."""
        return self._reduce_fn(self.tracer.check_inputs(x, embedded), embedded)[0].numpy()

    def _recurrent_specs(self, what: str, kinds=("lstm", "gru", "simple_rnn")):
        from ..errors import UnsupportedModelError
        specs = [s for s in self.tracer.specs if s.kind in kinds]
        if not specs:
            have = sorted({s.kind for s in self.tracer.specs})
            raise UnsupportedModelError(f"{type(self).__name__} needs {what}; this model has "
                                        f"{', '.join(have)}")
        return specs
