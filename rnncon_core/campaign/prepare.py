"""What a campaign starts from: the model and its seeds, the guide, the abstraction of faults,
the training profile the profiled criteria and the abstraction read, the text lexicon."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import paths
from ..coverage import CRITERIA, StateCoverage, default_threshold, get_criterion
from ..coverage.profile import build_profile, default_path
from ..data import load_dataset
from ..errors import InputError
from ..generate.base import model_head, select_seeds
from ..text.eda import Lexicon
from ..text.generators import load_vocabulary
from ..text.lexical import imdb_names
from ..trace import check_model_inputs
from ..validity import fit_validity, is_fitted, oracle_for
from ..zoo import load_model, model_datasets, with_steps
from .loop import Campaign
from .mutations import input_kind  # noqa: F401  (re-exported for the run and Ray paths)
from .signal_guides import SIGNAL_GUIDES, make_signal_guide

GUIDE_NONE = "none"
GUIDE_FAULTS = "faults"
BASELINES = (GUIDE_NONE, GUIDE_FAULTS)     # the guides without a coverage criterion
# what each baseline keeps as parents (Campaign._keep; none: DeepHunter's random mode)
BASELINE_TEXT = {GUIDE_NONE: "keeps every mutant predicted right",
                 GUIDE_FAULTS: "keeps only the new distinct faults"}


PROFILE_INPUTS = {"image": 2000, "sequence": 2000, "text": 500}
# Seeds a campaign starts from by default: with 1,000 instead of 100 MNIST seeds a rconc
# campaign of 320,000 model calls found 2,332 distinct faults in 83 pairs instead of 1,001
# in 70 (docs/results.md, "Test campaigns"); text keeps 100 (a review's substitutes are
# looked up before the clock starts, and a text model call costs ~10 times more).
DEFAULT_SEEDS = {"image": 1000, "sequence": 1000, "text": 100}


def guide_names() -> list[str]:
    return [*CRITERIA, *SIGNAL_GUIDES, *BASELINES]


def faults_only(name: str) -> bool:
    """Whether guide ``name`` keeps only the new distinct faults as parents (``Campaign``'s
    ``faults_only``)."""
    return name == GUIDE_FAULTS


def make_guide(name: str, model, params: dict | None):
    """The guiding criterion (None for the baselines, ``BASELINES``; a signal guide of
    ``signal_guides.SIGNAL_GUIDES``), its profile built first where it needs one."""
    if name in BASELINES:
        if params:
            raise InputError(f"the unguided baseline (guide {name}) takes no guide parameters")
        return None
    if name in SIGNAL_GUIDES:                  # beyond coverage (signal_guides.py)
        return make_signal_guide(name, model, params)
    if name not in CRITERIA:
        raise InputError(f"unknown guide {name!r}; choose one of {', '.join(guide_names())}")
    params = dict(params or {})
    cls = CRITERIA[name]
    if cls.threshold_from_data and "threshold" not in params and "threshold" in cls.params:
        params["threshold"] = default_threshold(model)
    if "profile_inputs" in cls.params:         # the campaign builds the all-inputs profile
        params.setdefault("profile_inputs", "all")
    return get_criterion(name, model, **params)


def ensure_profile(model, x_train, kind: str, log=None) -> None:
    """The model's training profile (the abstraction and the profiled guides read it): built
    once from the first training inputs when it is missing."""
    if default_path(model).exists():
        return
    n = PROFILE_INPUTS[kind]
    if log is not None:
        log(f"building the model's training profile from {min(n, len(x_train))} inputs "
            f"(once per model)")
    build_profile(model, x_train[:n], source="campaign")


def make_campaign(model, x, y, guide: str, guide_params, values: dict, seed, kind: str,
                  validity=None):
    """The loop one process and each Ray worker run: seeds ``x``, ``y`` of ``model``, guided
    by ``guide`` (a criterion's name or a baseline, ``BASELINES``); its faults checked by
    ``validity`` (a ``ValiditySpec``, or None: not checked)."""
    lexicon = _lexicon(kind)
    oracle = validity.oracle(kind, lexicon) if validity is not None else None
    return Campaign(model, x, y, make_guide(guide, model, guide_params), values, seed, kind,
                    make_abstraction(model, values), lexicon, faults_only(guide), oracle)


@dataclass(frozen=True)
class ValiditySpec:
    """Which validity oracle a campaign's faults are checked by (``validity.oracle_for``):
    the data set its checks were fitted on (None: the seeds came without one), the checks
    ("default" or "off"), a user's reference model. A value, so a Ray worker and a resumed
    campaign build the same oracle."""
    dataset: str | None
    checks: str = "default"
    reference_model: str | None = None

    def oracle(self, kind: str, lexicon=None, log=None):
        return oracle_for(self.dataset, kind, log=log, lexicon=lexicon,
                          reference_model=self.reference_model,
                          checks=None if self.checks == "default" else
                          [c for c in self.checks.split(",") if c])

    def config(self) -> dict:
        return {"dataset": self.dataset, "checks": self.checks,
                "reference_model": self.reference_model}

    @classmethod
    def of(cls, config: dict | None, dataset: str | None):
        """The spec stored in a campaign's config (campaigns before validity: not checked)."""
        if config is None:
            return None
        return cls(config.get("dataset", dataset), config.get("checks", "default"),
                   config.get("reference_model"))


def validity_spec(checks: str | None, dataset: str | None, reference_model=None, kind=None,
                  log=None, should_stop=None):
    """The spec a new campaign runs with (checks None: "default"; "off": None), its fitted
    checks fitted first when missing (once per data set; logged; ``should_stop()`` true ends
    the fit with JobCancelled)."""
    checks = checks or "default"
    if checks == "off":
        return None
    spec = ValiditySpec(None if dataset in (None, "inputs") else str(dataset), checks,
                        None if reference_model is None else str(reference_model))
    if kind is not None and spec.dataset is not None and kind != "text":
        # once, before the clock starts and before any Ray worker builds its oracle
        if not is_fitted(spec.dataset):
            if log is not None:
                log(f"fitting the validity checks of {spec.dataset} (once per data set; "
                    f"`rnncon validity train` does it ahead)")
            fit_validity(spec.dataset, log=log, should_stop=should_stop)
    return spec


def make_abstraction(model, values: dict):
    """DeepStellar's abstraction of the last recurrent layer (a
    ``coverage.deepstellar.StateCoverage``): a fault's abstract state is
    ``states_of_hidden`` of its last step's hidden state (from the batch's one traced pass)."""
    return StateCoverage(model, components=values["components"], cells=values["cells"],
                         profile_inputs="all")


def _lexicon(kind: str):
    if kind != "text":
        return None
    v = load_vocabulary()
    return Lexicon(v, names=imdb_names(v.words))


def load_seeds(model_ref, dataset=None, n_seeds=None, inputs=None, labels=None):
    """(keras model, x seeds, y seeds, x train, dataset name): the first n_seeds test inputs
    the model predicts right (generate.runner's seeds), or of the inputs given; n_seeds None:
    ``DEFAULT_SEEDS`` of the model's input kind."""
    keras_model = _loaded(model_ref, load_model) if isinstance(model_ref, str) else model_ref
    head = model_head(keras_model).require_classifier("a campaign")
    if (inputs is None) != (labels is None):
        raise InputError("give inputs and labels together (CLI: --inputs X.npy --labels Y.npy)")
    if inputs is not None:
        x_all = check_model_inputs(keras_model, inputs, "inputs")
        y_all, x_train, ds_name = np.asarray(labels).reshape(-1), x_all, "inputs"
        if len(y_all) != len(x_all):
            raise InputError(f"{len(x_all)} inputs but {len(y_all)} labels: give one each")
    else:
        fits = model_datasets(model_ref if isinstance(model_ref, str) else None, keras_model)
        if not dataset and not fits:
            raise InputError(f"cannot tell which data set fits a model with input "
                             f"{tuple(keras_model.input_shape[1:])}: give --dataset NAME or "
                             f"your own seeds (--inputs X.npy --labels Y.npy)")
        ds_name = dataset or fits[0]
        ds = load_dataset(ds_name)
        x_all = check_model_inputs(keras_model, ds.x_test, f"the {ds_name} test inputs")
        y_all, x_train = ds.y_test, ds.x_train
    y_all = head.check_labels(y_all)
    keras_model = with_steps(keras_model, x_all.shape[1])
    if n_seeds is None:
        n_seeds = DEFAULT_SEEDS[input_kind(keras_model)]
    idx = select_seeds(keras_model, x_all, y_all, int(n_seeds))
    return keras_model, x_all[idx], y_all[idx], x_train, ds_name


_MODELS: dict = {}


def _loaded(ref: str, load_model):
    """A shipped model or .keras file loaded once per process and file version (its compiled
    graphs are kept with it, so the next campaign on it traces nothing)."""

    path = next((p for p in (paths.MODELS_DIR / f"{ref}.keras", Path(ref)) if p.is_file()), None)
    key = (ref, path.stat().st_mtime_ns if path else None)
    if key not in _MODELS:
        _MODELS.clear()               # one model at a time (memory)
        _MODELS[key] = load_model(ref)
    return _MODELS[key]


