"""DeepXplore's detection of training-data pollution (its §7.3; the RNNCon paper §7.3).

One model trains on clean data, a second on data where a share of one class (30 % of the 9s)
is relabelled as another (1). Differential generation finds inputs on which the clean model
says 9 and the polluted one says 1; the training samples most similar to those inputs, by
structural similarity (SSIM), are flagged as the polluted ones. We report the share of flagged
samples that really were relabelled (DeepXplore: 95.6 %) and the share of relabelled samples
found, beside the base rate and the same search started from the unperturbed seeds.
"""
from __future__ import annotations

import time

import numpy as np

from .. import jobs
from ..data import default_dataset, load_dataset, to_images
from ..errors import InputError
from ..generate import generator_class
from ..generate.base import predict_proba
from ..retrain import fit_split
from ..runs import RunStore
from ..zoo import ARCHITECTURES, build_model, load_model


# ---------------------------------------------------------------- SSIM

WINDOW = 11        # scikit-image's Gaussian window at sigma 1.5 (truncated at 3.5 sigma)


def _images(x, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[0] == 0:
        raise InputError(f"{what}: expected images (N, H, W) or one (H, W), got {x.shape}")
    if min(x.shape[1:]) < WINDOW:
        raise InputError(f"{what}: SSIM needs images of at least {WINDOW} x {WINDOW} pixels "
                         f"(its window), got {x.shape[1]} x {x.shape[2]}")
    if not np.isfinite(x).all():
        raise InputError(f"{what} contain NaN or inf")
    return x


def _ssim_pairs(a: np.ndarray, b: np.ndarray, data_range: float,
                chunk: int = 2048) -> np.ndarray:
    """scikit-image's mean SSIM of each pair (a[i], b[i]), ``chunk`` pairs per call: the pairs
    are stacked into one tall image each side and the per-pixel SSIM map (``full=True``) is
    averaged per pair over the pixels scikit-image averages (those whose window lies inside the
    image). A window there never reaches the next image, so each value is that of the pair
    alone (tests/test_quality.py checks it against one call per pair)."""
    from skimage.metrics import structural_similarity
    n, h, w = a.shape
    r = WINDOW // 2
    out = np.empty(n)
    for i in range(0, n, chunk):
        m = len(a[i:i + chunk])
        _, full = structural_similarity(a[i:i + chunk].reshape(m * h, w),
                                        b[i:i + chunk].reshape(m * h, w),
                                        data_range=data_range, gaussian_weights=True,
                                        sigma=1.5, use_sample_covariance=False, full=True)
        out[i:i + m] = full.reshape(m, h, w)[:, r:h - r, r:w - r].mean(axis=(1, 2))
    return out


def ssim(a, b, data_range: float = 1.0) -> np.ndarray:
    """Mean structural similarity (Wang et al. 2004) of each pair (a[i], b[i]), by
    scikit-image's ``structural_similarity`` with the paper's settings: Gaussian window (sigma
    1.5, 11 x 11), population statistics, C1 = (0.01 L)^2, C2 = (0.03 L)^2, averaged over the
    pixels whose window lies inside the image. ``a``, ``b``: (N, H, W) or one image each;
    returns (N,)."""
    a, b = _images(a, "first images"), _images(b, "second images")
    if a.shape != b.shape:
        raise InputError(f"SSIM compares images of one shape: {a.shape} vs {b.shape}")
    return _ssim_pairs(a, b, data_range)


def ssim_matrix(queries, pool, data_range: float = 1.0) -> np.ndarray:
    """SSIM of every query against every pool image: (Q, M)."""
    q, p = _images(queries, "queries"), _images(pool, "pool images")
    if q.shape[1:] != p.shape[1:]:
        raise InputError(f"SSIM compares images of one shape: {q.shape[1:]} vs {p.shape[1:]}")
    return np.stack([_ssim_pairs(np.broadcast_to(x, p.shape), p, data_range) for x in q])


def nearest_by_ssim(queries, pool, k: int = 1) -> np.ndarray:
    """Indices (Q, k) of the k pool images most similar to each query."""
    s = ssim_matrix(queries, pool)
    return np.argsort(-s, axis=1)[:, :k]


# ---------------------------------------------------------------- the experiment

def pollute(y: np.ndarray, source: int, target: int, share: float, seed: int = 0):
    """Relabel ``share`` of the ``source`` samples as ``target``: (new labels, polluted idx)."""
    if not 0 < share <= 1:
        raise InputError(f"the polluted share must lie in (0, 1], got {share}")
    if source == target:
        raise InputError("the source and the target class of the pollution must differ")
    idx = np.flatnonzero(y == source)
    if len(idx) == 0:
        raise InputError(f"no training sample of class {source} to pollute")
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(idx, int(round(share * len(idx))), replace=False))
    y2 = y.copy()
    y2[picked] = target
    return y2, picked


def detection_scores(queries, x_train, y_polluted, polluted_idx, target: int,
                     k: int = 1) -> dict:
    """Flag the k training samples labelled ``target`` nearest (SSIM) to each query; how many
    flags are right (precision) and how many polluted samples were found (recall)."""
    pool = np.flatnonzero(y_polluted == target)
    near = pool[nearest_by_ssim(to_images(queries), to_images(x_train[pool]), k=k)].ravel()
    is_polluted = np.isin(near, polluted_idx)
    found = np.unique(near[is_polluted])
    return {"n_queries": int(len(queries)), "k": k, "n_flags": int(len(near)),
            "flag_precision": float(is_polluted.mean()) if len(near) else float("nan"),
            "unique_flagged": int(len(np.unique(near))), "polluted_found": int(len(found)),
            "recall": float(len(found) / len(polluted_idx)),
            "base_rate": float(np.isin(pool, polluted_idx).mean())}


def run_pollution(architecture: str = "mnist-gru", source: int = 9, target: int = 1,
                  share: float = 0.3, epochs: int = 15, n_seeds: int = 200, k: int = 1,
                  method: str = "differential", seed: int = 0, store=None,
                  progress=None, **generator_params) -> dict:
    """The whole experiment, stored as a run of kind ``pollution``; returns its summary."""
    if architecture not in ARCHITECTURES or ARCHITECTURES[architecture].text:
        raise InputError(f"the pollution experiment trains an MNIST architecture; "
                         f"{architecture!r} is not one")
    store = store or RunStore()
    emit = progress or (lambda e: None)
    images = default_dataset("image")       # MNIST
    ds = load_dataset(images)
    x_fit, y_fit = fit_split(ds)
    y_bad, polluted = pollute(y_fit, source, target, share, seed)
    config = {"architecture": architecture, "source": source, "target": target,
              "share": share, "epochs": epochs, "n_seeds": n_seeds, "k": k, "method": method,
              "seed": seed, "n_polluted": int(len(polluted)), "generator": generator_params}
    started = time.time()
    with store.start("pollution", model=architecture, method=method, config=config) as run:
        paths = {}
        for i, (label, y) in enumerate((("clean", y_fit), ("polluted", y_bad))):
            run.check_cancel()
            run.progress(i, 4, f"training the {label} model")
            emit({"stage": "train", "model": label})
            model = build_model(architecture, seed=seed)
            model.fit(x_fit, y, epochs=epochs, batch_size=128, verbose=0, shuffle=True)
            paths[label] = str(run.path / f"{label}.keras")
            model.save(paths[label])
        run.progress(2, 4, "differential generation")
        emit({"stage": "generate"})
        clean, bad = load_model(paths["clean"]), load_model(paths["polluted"])
        cand = np.flatnonzero(ds.y_test == source)
        agree = (predict_proba(clean, ds.x_test[cand]).argmax(1) == source) & \
                (predict_proba(bad, ds.x_test[cand]).argmax(1) == source)
        seeds = cand[agree][:n_seeds]
        if len(seeds) == 0:
            raise InputError(f"no test {source} is predicted right by both models; train them "
                             f"longer (epochs=)")
        gen = jobs.run_generation(paths["clean"], method, seed_indices=seeds, dataset=images,
                                  others=[paths["polluted"]]
                                  if generator_class(method).needs_others else (),
                                  seed=seed, store=store, should_stop=run.cancel_requested,
                                  **generator_params)
        out = store.get(gen["run_id"]).load_npz("outputs")
        x_gen = out["x_gen"]
        hit = (predict_proba(clean, x_gen).argmax(1) == source) & \
              (predict_proba(bad, x_gen).argmax(1) == target)
        run.progress(3, 4, "searching the training set by SSIM")
        emit({"stage": "search", "n_inputs": int(hit.sum())})
        summary = {"architecture": architecture, "source": source, "target": target,
                   "share": share, "n_polluted": int(len(polluted)),
                   "clean_accuracy": float((predict_proba(clean, ds.x_test).argmax(1)
                                            == ds.y_test).mean()),
                   "polluted_accuracy": float((predict_proba(bad, ds.x_test).argmax(1)
                                               == ds.y_test).mean()),
                   "generation_run": gen["run_id"], "n_seeds": int(len(seeds)),
                   "n_disagreeing": int(hit.sum()),
                   "paper_deepxplore_precision": 0.956}
        if hit.any():
            summary["generated"] = detection_scores(x_gen[hit], x_fit, y_bad, polluted,
                                                    target, k)
        # the same search from the unperturbed seeds: what the generation adds
        summary["seeds_baseline"] = detection_scores(ds.x_test[seeds], x_fit, y_bad, polluted,
                                                     target, k)
        summary["models"] = paths
        summary["seconds"] = round(time.time() - started, 1)
        summary["run_id"] = run.run_id
        run.progress(4, 4, "finished")
        run.finish(summary)
    return summary
