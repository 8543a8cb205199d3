"""Test prioritization: which inputs to inspect (or label) first.

    res = prioritize(model, x, y, by=["gini", "lsa", "nc-additional", "random"],
                     x_train=x_train, y_train=y_train)
    res.orders["gini"]          # input indices, the first to inspect first
    res.metrics                 # with labels: APFD and the share of the misclassified inputs
                                # found in the first 1 / 5 / 10 % (intervals over repeats)

Every signal of ``signals`` (docs/prioritize.md): ``gini``, ``margin``, ``entropy``, ``lsa``,
``dsa``, ``deepstate``, ``<criterion>-total`` and ``<criterion>-additional`` for every
registered coverage criterion, and ``random``. With ``store`` (a run store) the ranking is
written to a new run of kind ``prioritize`` (``ranking.csv``, ``ranking.npz``,
``metrics.csv``, ``summary.json``).

Randomness enters through ties (broken by a random order of the inputs) and the random
order itself: such a signal is ranked ``repeats`` times (seeds ``seed``, ``seed + 1``, ...)
and each figure is given as the mean with the 2.5 and 97.5 percentiles of the repeats; the
ranking kept is the first repeat's. A signal without ties is ranked once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ..coverage import CRITERIA, StateCoverage, default_threshold, get_criterion, needs_profile
from ..errors import InputError
from ..generate.base import model_head, predict_proba
from ..io import atomic_write_bytes
from ..params import split_list
from ..trace import check_model_inputs
from . import signals
from .signals import SURPRISE, UNCERTAINTY, apfd, detection_curve, found_within

SHARES = (0.01, 0.05, 0.10)           # the shares of inputs inspected the metrics report
DEFAULT_REPEATS = 20
N_PROFILE = 2000                      # training inputs LSA / DSA are profiled from by default
ORDER_ONLY = ("deepstate",)           # signals whose ranking is not a sort of their scores


def signal_names() -> list[str]:
    """Every signal ``prioritize`` takes, in the order the CLI lists them."""
    cov = [f"{c}-{how}" for c in CRITERIA for how in ("total", "additional")]
    return [*UNCERTAINTY, *SURPRISE, "deepstate", *cov, "random"]


def parse_signals(by) -> list[str]:
    """A list (or comma-separated text) of signal names, checked."""
    chosen = split_list(by, "--by") if isinstance(by, str) else list(by or [])
    if not chosen:
        raise InputError("give at least one signal (--by gini,margin,...)")
    known = signal_names()
    unknown = [s for s in chosen if s not in known]
    if unknown:
        raise InputError(f"unknown signal {', '.join(map(repr, unknown))}; choose from "
                         f"{', '.join(known)}")
    return list(dict.fromkeys(chosen))


def criterion_of(signal: str) -> tuple[str, str] | None:
    """(criterion, "total" | "additional") of a coverage signal, else None."""
    name, _, how = signal.rpartition("-")
    return (name, how) if how in ("total", "additional") and name else None


@dataclass
class Prioritization:
    """What ``prioritize`` found: per signal its ranking (input indices, the first to inspect
    first), its scores (NaN where the ranking is not a sort of scores), and with labels the
    metrics table; ``seconds`` per signal (the shared passes counted once, by the first)."""
    signals: list[str]
    orders: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    predictions: np.ndarray
    labels: np.ndarray | None = None
    metrics: pd.DataFrame | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    repeats: dict[str, list[np.ndarray]] = field(default_factory=dict)
    run_id: str | None = None

    @property
    def misclassified(self) -> np.ndarray | None:
        return None if self.labels is None else self.predictions != self.labels

    def ranking_table(self) -> pd.DataFrame:
        """One row per input: its index, prediction (label and misclassified with labels),
        and per signal its rank (1 = first) and score."""
        n = len(self.predictions)
        df = pd.DataFrame({"input": np.arange(n), "predicted": self.predictions})
        if self.labels is not None:
            df["label"] = self.labels
            df["misclassified"] = self.misclassified
        for s in self.signals:
            rank = np.empty(n, np.int64)
            rank[self.orders[s]] = np.arange(1, n + 1)
            df[f"rank_{s}"] = rank
            df[f"score_{s}"] = self.scores[s]
        return df

    def curve(self, signal: str) -> tuple[np.ndarray, np.ndarray]:
        """(share of inputs inspected, share of the misclassified found) in this signal's
        order (labels needed)."""
        if self.labels is None:
            raise InputError("the fault-detection curve needs the inputs' labels")
        return detection_curve(self.orders[signal], self.misclassified)


def metrics_of(orders_by_signal: dict[str, list[np.ndarray]], faults) -> pd.DataFrame:
    """Per signal: APFD and the share of faults found in the first SHARES of the inputs, as
    the mean over its repeated orders with the 2.5 / 97.5 percentiles."""
    rows = []
    for s, orders in orders_by_signal.items():
        row = {"signal": s, "repeats": len(orders), "inputs": len(faults),
               "faults": int(np.sum(faults))}
        values = {"apfd": [apfd(o, faults) for o in orders]}
        for share in SHARES:
            values[f"found_{share * 100:g}pct"] = [found_within(o, faults, share)
                                                   for o in orders]
        for k, v in values.items():
            v = np.asarray(v, np.float64)
            row[k] = float(np.mean(v)) if len(v) else float("nan")
            row[f"{k}_lo"], row[f"{k}_hi"] = (float(np.percentile(v, 2.5)),
                                              float(np.percentile(v, 97.5))) \
                if len(v) and np.isfinite(v).all() else (float("nan"), float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def _tied(scores) -> bool:
    """Whether two inputs share a score (inf and NaN included)."""
    s = np.asarray(scores, np.float64)
    return len(np.unique(s)) < len(s)


class _Context:
    """What several signals share, computed once: probabilities, the last hidden states,
    the surprise model, the criteria."""

    def __init__(self, model, x, x_train, y_train, criterion_params, n_profile, progress,
                 reuse=None):
        self.model, self.x = model, x
        self.reuse = {} if reuse is None else reuse
        self.x_train, self.y_train = x_train, y_train
        self.criterion_params = criterion_params or {}
        self.n_profile, self.progress = n_profile, progress
        self._probs = self._hidden = None
        self._items: dict = {}

    def probs(self) -> np.ndarray:
        if self._probs is None:
            self._probs = signals.probabilities(predict_proba(self.model, self.x))
        return self._probs

    def hidden(self) -> np.ndarray:
        if self._hidden is None:
            self._hidden = signals.last_hidden(self.model, self.x)[1]
        return self._hidden

    def _train(self, what: str):
        if self.x_train is None:
            raise InputError(f"{what} is profiled from the training split: give the data set "
                             f"(--dataset) or x_train")
        return self.x_train[:self.n_profile] if self.n_profile else self.x_train

    def surprise(self) -> signals.Surprise:
        if "surprise" not in self.reuse:
            x_tr = self._train("surprise adequacy (lsa, dsa)")
            self.progress(f"profiling {len(x_tr):,} training inputs for LSA / DSA")
            out, hid = signals.last_hidden(self.model, x_tr)
            self.reuse["surprise"] = signals.Surprise(hid, signals.probabilities(out).argmax(1))
        return self.reuse["surprise"]

    def criterion(self, name: str):
        if name not in CRITERIA:
            raise InputError(f"unknown criterion {name!r}")
        params = dict(self.criterion_params.get(name, {}))
        cls = CRITERIA[name]
        if cls.threshold_from_data and "threshold" not in params and "threshold" in cls.params:
            params["threshold"] = default_threshold(self.model)
        if needs_profile(name) and params.get("profile_path") is None:
            x_tr = self._train(f"criterion {name}")
            params.update(x_train=x_tr, y_train=None if self.y_train is None
                          else self.y_train[:len(x_tr)])
        return get_criterion(name, self.model, **params)

    def items(self, name: str):
        """``signals.covered_items`` of criterion ``name`` (once for -total and -additional)."""
        if name not in self._items:
            self._items[name] = signals.covered_items(self.criterion(name), self.x)
        return self._items[name]

    def abstraction(self):
        x_tr = self._train("DeepState's abstraction")
        return StateCoverage(self.model, x_train=x_tr, profile_inputs="all")


def _rank(signal: str, ctx: _Context, repeats: int, seed: int):
    """(scores, [orders]) of one signal."""
    n = len(ctx.x)
    rngs = [np.random.default_rng(seed + r) for r in range(repeats)]
    if signal in UNCERTAINTY:
        scores = signals.UNCERTAINTY_FN[signal](ctx.probs())
    elif signal in SURPRISE:
        sa = ctx.surprise()
        pred = ctx.probs().argmax(1)
        scores = sa.lsa(ctx.hidden(), pred) if signal == "lsa" else sa.dsa(ctx.hidden(), pred)
    elif signal == "random":
        return np.full(n, np.nan), [r.permutation(n).astype(np.int64) for r in rngs]
    elif signal == "deepstate":
        probs = signals.step_probabilities(ctx.model, ctx.x[:1])
        rates, trends = signals.deepstate_rates(ctx.model, ctx.x, None if probs is not None
                                                else ctx.abstraction())
        return rates, [signals.deepstate_order(rates, trends, r) for r in rngs]
    else:
        name, how = criterion_of(signal)
        bits, items, weights = ctx.items(name)
        if how == "total":
            scores = signals.total_scores(bits, items, weights)
        else:
            gains = signals.total_scores(bits, items, weights)
            return gains, [signals.additional_order(bits, items, weights, r) for r in rngs]
    if not _tied(scores):
        return scores, [signals.score_order(scores)]
    return scores, [signals.score_order(scores, r) for r in rngs]


def prioritize(model, x, y=None, by=("gini", "margin", "entropy", "random"), *,
               x_train=None, y_train=None, criterion_params: dict | None = None,
               repeats: int = DEFAULT_REPEATS, seed: int = 0, n_profile: int = N_PROFILE,
               store=None, model_ref: str | None = None, source: str = "",
               progress: Callable[[str], None] | None = None,
               reuse: dict | None = None) -> Prioritization:
    """Rank inputs ``x`` of classifier ``model`` by each signal of ``by`` (see the module
    docstring); with labels ``y`` measure each ranking. ``x_train`` / ``y_train``: the
    training split LSA / DSA, DeepState's fallback abstraction and the profiled criteria are
    profiled from (its first ``n_profile`` inputs; 0: all). ``criterion_params``: criterion
    name -> its parameters. ``store``: a run store to write the ranking to (a run of kind
    ``prioritize``; ``model_ref`` and ``source`` describe the model and inputs there).
    ``reuse``: a dict kept between calls on the same model and training split, so the
    surprise model is profiled once."""
    chosen = parse_signals(by)
    head = model_head(model).require_classifier("prioritization")
    if int(repeats) < 1:
        raise InputError(f"repeats must be at least 1, got {repeats}")
    x = check_model_inputs(model, x, "the inputs")
    if not len(x):
        raise InputError("no inputs to rank")
    labels = None if y is None else head.check_labels(y)
    if labels is not None and len(labels) != len(x):
        raise InputError(f"{len(x)} inputs but {len(labels)} labels: give one each")
    if x_train is not None:
        x_train = check_model_inputs(model, x_train, "the training inputs")
    say = progress or (lambda _msg: None)
    ctx = _Context(model, x, x_train, y_train, criterion_params, n_profile, say, reuse)
    orders, scores, seconds, reps = {}, {}, {}, {}
    for s in chosen:
        t0 = time.perf_counter()
        scores[s], reps[s] = _rank(s, ctx, int(repeats), int(seed))
        orders[s] = reps[s][0]
        seconds[s] = round(time.perf_counter() - t0, 3)
        say(f"{s}: ranked {len(x):,} inputs in {seconds[s]:.1f}s")
    pred = ctx.probs().argmax(1).astype(np.int64)
    res = Prioritization(chosen, orders, scores, pred, labels, seconds=seconds, repeats=reps)
    if labels is not None:
        res.metrics = metrics_of(reps, pred != labels)
    if store is not None:
        write_run(store, res, model_ref, {"signals": chosen, "repeats": int(repeats),
                                          "seed": int(seed), "n_profile": int(n_profile),
                                          "inputs": len(x), "source": source,
                                          "criterion_params": criterion_params or {}})
    return res


def summary_of(res: Prioritization) -> dict:
    """The run's summary: per signal its seconds, and with labels its metrics."""
    out = {"inputs": len(res.predictions), "signals": res.signals, "seconds": res.seconds}
    if res.metrics is not None:
        out["faults"] = int(res.misclassified.sum())
        out["metrics"] = res.metrics.to_dict(orient="records")
        best = res.metrics.dropna(subset=["apfd"])
        best = best[best["signal"] != "random"]
        if len(best):
            out["best_apfd"] = str(best.loc[best["apfd"].idxmax(), "signal"])
    return out


def write_run(store, res: Prioritization, model_ref: str | None, config: dict):
    """A finished run of kind ``prioritize`` holding the ranking (CSV and NPZ) and, with
    labels, the metrics; returns the run."""
    run = store.start("prioritize", model=model_ref, method=",".join(res.signals),
                      config=config)
    with run:
        arrays = {"predicted": res.predictions}
        if res.labels is not None:
            arrays["labels"] = res.labels
        for s in res.signals:
            arrays[f"order/{s}"] = res.orders[s]
            arrays[f"score/{s}"] = res.scores[s]
        run.save_npz("ranking", **arrays)
        atomic_write_bytes(run.path / "ranking.csv",
                           res.ranking_table().to_csv(index=False).encode())
        if res.metrics is not None:
            atomic_write_bytes(run.path / "metrics.csv",
                               res.metrics.to_csv(index=False).encode())
        run.finish(summary_of(res))
    res.run_id = run.run_id
    return run


def load_ranking(info) -> Prioritization:
    """The Prioritization a ``prioritize`` run holds (``RunStore.get(run_id)``)."""
    arrays = info.load_npz("ranking")
    if arrays is None:
        raise InputError(f"run {info.run_id} holds no ranking")
    sigs = [k[len("order/"):] for k in arrays if k.startswith("order/")]
    res = Prioritization(sigs, {s: np.asarray(arrays[f"order/{s}"]) for s in sigs},
                         {s: np.asarray(arrays[f"score/{s}"]) for s in sigs},
                         np.asarray(arrays["predicted"]),
                         np.asarray(arrays["labels"]) if "labels" in arrays else None)
    if (info.path / "metrics.csv").is_file():
        res.metrics = pd.read_csv(info.path / "metrics.csv")
    elif res.labels is not None:
        res.metrics = metrics_of({s: [res.orders[s]] for s in sigs}, res.misclassified)
    res.run_id = info.run_id
    return res


__all__ = ["prioritize", "Prioritization", "signal_names", "parse_signals", "metrics_of",
           "write_run", "load_ranking", "SHARES", "apfd", "found_within", "detection_curve"]
