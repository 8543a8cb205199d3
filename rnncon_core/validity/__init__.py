"""Validity of generated inputs: would a reader still accept a fault as an input of its seed's
class? (issue "Faults a reader would accept"; docs/validity.md)

    from rnncon_core.validity import oracle_for
    oracle = oracle_for("mnist")              # fitted once per data set (shipped for built-ins)
    verdict = oracle.check(x, labels, roots)  # .valid, .reason, .scores

Per kind of data (``default_checks``): images and real-valued sequences pass two fitted checks
(``fitted.Distribution``: an autoencoder of the training split, its threshold set so that 1 %
of held-out clean inputs are flagged; ``fitted.Reference``: an independent classifier must
read the seed's label); reviews pass the reader checks of every edit (``text.ReaderEdits``).
A user brings a check of their own with ``@VALIDATORS.register("name")`` (a ``Validator``
subclass) or a reference model of their own (``UserReference``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import paths
from ..data import DATASETS, load_dataset
from ..errors import InputError, JobCancelled
from ..io import file_sha256
from ..registry import Registry
from .base import REASON_DTYPE, Oracle, Validator, Verdict
from .fitted import Distribution, Reference

_V = "rnncon_core.validity."
VALIDATORS = Registry("validity check", "rnncon.validators", base=_V + "base:Validator",
                      builtins={"distribution": _V + "fitted:Distribution",
                                "reference": _V + "fitted:Reference",
                                "reader-edits": _V + "text:ReaderEdits",
                                "user-reference": _V + "user:UserReference"})
FITTED = ("distribution", "reference")       # the checks fitted on a data set
DEFAULT_CHECKS = {"image": FITTED, "sequence": FITTED, "text": ("reader-edits",)}
OFF = "off"
MAX_FIT = 20_000          # training inputs the fitted checks see at most (fashion-mnist: 60,000)


def validators_dir(dataset) -> Path:
    """Where a data set's fitted checks live: shipped in assets/validators/NAME for the
    built-in data sets, in the cache by the file's digest for a user's .npz."""
    name = str(getattr(dataset, "name", dataset))
    if name in DATASETS:
        return paths.ASSETS_DIR / "validators" / name
    path = Path(name)
    if not path.is_file():
        raise InputError(f"no data set {name!r} to fit validity checks on: give a built-in "
                         f"name or the path of your .npz")
    return paths.CACHE_DIR / "validators" / file_sha256(path)[:16]


def fit_validity(dataset, flag_rate: float = 0.01, seed: int = 0, log=None,
                 folder: Path | None = None, epochs: dict | None = None,
                 should_stop=None) -> dict:
    """Fit the data set's checks (``FITTED``) and save them; returns their cards, with the
    share of the clean test split each flags, measured. ``should_stop()`` true (Ctrl-C) ends
    the fit at the next training batch: JobCancelled, nothing saved."""
    ds = load_dataset(dataset) if not hasattr(dataset, "x_train") else dataset
    x_fit, y_fit = ds.x_train[:MAX_FIT], ds.y_train[:MAX_FIT]
    if ds.kind == "text":
        raise InputError(f"{ds.name} is text: its validity is the reader checks of each edit "
                         f"(nothing to fit)")
    folder = Path(folder) if folder else validators_dir(ds)
    epochs = epochs or {}
    log = log or (lambda s: None)
    log(f"validity: fitting the autoencoder of {ds.name} ({len(x_fit):,} training inputs)")
    def check_stopped():
        if should_stop is not None and should_stop():
            raise JobCancelled(f"the validity checks of {ds.name} were not fitted: stopped "
                               f"during the fit, nothing kept. Run the command again, or fit "
                               f"them ahead: rnncon validity train --dataset {ds.name}")
    dist = Distribution.fit(x_fit, ds.kind, flag_rate, seed,
                            epochs=epochs.get("distribution", 40), log=log,
                            should_stop=should_stop)
    check_stopped()
    log("validity: fitting the reference classifier")
    ref = Reference.fit(x_fit, y_fit, ds.kind, ds.num_classes, ds.x_test, ds.y_test,
                        seed, epochs=epochs.get("reference", 30),
                        class_names=ds.class_names, log=log, should_stop=should_stop)
    check_stopped()
    # clean test inputs checked as unchanged inputs of themselves (their own roots), and the
    # reference also without roots (its absolute bound)
    x, y = ds.x_test, ds.y_test
    v = Oracle([dist, ref]).check(x, y, x)
    dist.card["test_flagged"] = float(np.mean(~dist.check(x, y).valid))
    ref.card["test_flagged"] = float(np.mean(~ref.check(x, y, x).valid))
    ref.card["test_flagged_absolute"] = float(np.mean(~ref.check(x, y).valid))
    for c in (dist, ref):
        c.card.update({"dataset": ds.name, "source": ds.source, "seed": seed,
                       "oracle_test_flagged": float(np.mean(~v.valid))})
        c.save(folder)
    return {"folder": str(folder), "distribution": dist.get_config(),
            "reference": ref.get_config(), "test_flagged": float(np.mean(~v.valid))}


_LOADED: dict = {}


def get_validator(name: str, dataset=None, **params) -> Validator:
    """A check by name: a fitted one (``FITTED``) loaded from the data set's folder (once per
    process and file version), any other built with ``params``."""
    cls = VALIDATORS.load(name)
    if name in FITTED:
        if dataset is None:
            raise InputError(f"validity check {name!r} is fitted on a data set: give dataset=")
        folder = validators_dir(dataset)
        model = folder / f"{cls.FILE}.keras"
        key = (name, str(folder), model.stat().st_mtime_ns if model.exists() else None)
        if key not in _LOADED:
            _LOADED[key] = cls.load(folder)
        return _LOADED[key]
    return cls(**params)


def is_fitted(dataset) -> bool:
    """Whether the data set's fitted checks exist."""
    folder = validators_dir(dataset)
    return all((folder / f"{VALIDATORS.load(n).FILE}.keras").exists() for n in FITTED)


def oracle_for(dataset, kind: str | None = None, *, train: bool = True, log=None,
               reference_model=None, lexicon=None, checks=None) -> Oracle:
    """The validity oracle of a data set (``dataset``: a name, the path of a user's .npz, or
    None when the inputs come without one). Its fitted checks are fitted once when missing
    (``train``; else an error that says how). ``reference_model``: a user's classifier (path)
    used instead of the fitted reference. ``checks``: names, or "off"."""
    if checks == OFF or (isinstance(checks, (list, tuple)) and list(checks) == [OFF]):
        return Oracle([], unchecked="switched off (--validity-checks off)")
    ds = None if dataset is None or str(dataset) == "inputs" else str(dataset)
    if kind is None and ds is not None:       # the data set read only to learn its kind
        kind = load_dataset(ds).kind
    if kind is None:
        raise InputError("validity: give the input kind (image, sequence or text)")
    names = list(checks) if checks else list(DEFAULT_CHECKS[kind])
    if reference_model is not None:
        names = [n for n in names if n != "reference"] + ["user-reference"]
    out = []
    for name in names:
        if name == "reader-edits":
            out.append(VALIDATORS.load(name)(lexicon))
        elif name == "user-reference":
            out.append(VALIDATORS.load(name)(reference_model))
        elif name in FITTED:
            if ds is None:
                return Oracle([], unchecked="the seeds came without a training split; fit "
                              "checks with `rnncon validity train --dataset own.npz` and pass "
                              "--dataset own.npz")
            if not is_fitted(ds):
                if not train:
                    raise InputError(f"no validity checks fitted for {ds}: run `rnncon "
                                     f"validity train --dataset {ds}`")
                fit_validity(ds, log=log)
            out.append(get_validator(name, ds))
        else:
            out.append(get_validator(name))
    return Oracle(out)


__all__ = ["VALIDATORS", "FITTED", "DEFAULT_CHECKS", "REASON_DTYPE", "Oracle", "Validator",
           "Verdict", "fit_validity", "get_validator", "is_fitted", "oracle_for",
           "validators_dir"]
