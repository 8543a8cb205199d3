"""`rnncon report generation`: the paper's Tables 2, 3 and 4 and Figure 10's t-SNE data, measured.

Every figure comes from runs of ``run_generation`` on the same seeds (the first N test inputs
each model predicts right), stored in the run store; the paper's values stand beside ours.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from .. import jobs
from ..errors import InputError
from ..generate import generator_class
from ..generate.base import MINIMIZE
from ..quality import tsne_embedding
from ..runs import RunStore
from ..trace import Tracer
from ..zoo import ARCHITECTURES, load_model, read_card, shipped_models
from .writer import write_files

MNIST_MODELS = ("stacked-mnist-lstm", "mnist-lstm", "stacked-mnist-gru", "mnist-gru")

# The paper's Table 2 (500 seeds): row -> (#adv, avg L2, adv rate %); rows named as ours.
PAPER_TABLE2 = {
    "stacked-mnist-lstm": {"random": (428, 0.334, 85.60), "lstm_1": (436, 0.321, 87.20),
                           "lstm_2": (424, 0.210, 84.80), "dense": (358, 0.061, 71.60),
                           "constraint": (355, 0.002, 71.00)},
    "mnist-lstm": {"random": (422, 0.139, 84.40), "lstm_1": (443, 0.170, 88.60),
                   "dense": (402, 0.113, 84.40), "constraint": (361, 0.029, 72.20)},
    "stacked-mnist-gru": {"random": (444, 0.282, 88.80), "gru_1": (435, 0.266, 87.00),
                          "gru_2": (441, 0.231, 88.20), "dense": (418, 0.044, 83.60),
                          "constraint": (351, 0.029, 70.20)},
    "mnist-gru": {"random": (422, 0.191, 84.40), "gru_1": (427, 0.208, 85.40),
                  "dense": (446, 0.127, 89.20), "constraint": (396, 0.029, 79.20)},
}
PAPER_TABLE3 = {"rnntest": (500, 348, 1.740, 69.6), "rconc": (500, 422, 0.139, 84.4)}
PAPER_TABLE4 = {"model": "mnist-gru", "original": 98.53, "rnntest": 20.00, "rconc": 10.80,
                "adv_rate_rnntest": 79.31, "adv_rate_rconc": 89.20}
CONSTRAINTS = ("light", "occlusion", "blackout")
# DeepXplore's own constraint settings (its MNIST gen_diff.py: step s = 10 on a gradient scaled
# to unit RMS, one 10 x 10 occlusion at (0, 0), one 6 x 6 blackout patch per iteration set to
# -1 x s): ours cap the step at 1 per iteration, which saturates a pixel the same way
DEEPXPLORE = {"occlusion": {"size": [10, 10], "position": [0, 0], "step": 1.0},
              "blackout": {"size": 6, "patches": 1, "scale": 500.0}}
FULL_ROWS = ("random", "rnntest")       # the paper's Table 3 rows: always n_seeds seeds
TARGET_RATE, TARGET_SPEED = 0.85, 25.0


def _rows_for(model_name: str, layers: list[str]) -> list[tuple[str, str, dict]]:
    """(row label, method, params) of one model's Table 2 block."""
    rows = [("random", "rconc", {"target": "random"})]
    # a layer may hold no contribution a seed leaves inactive (Eq. 3 normalizes over the whole
    # model): such seeds target the layer's least activated ones (counted in short_pool)
    rows += [(name, "rconc", {"target": name, "short": "lowest"}) for name in layers]
    rows.append(("dense", "rconc", {"target": "dense", "short": "lowest"}))
    rows += [(f"constraint:{c}", "rconc", {"target": "random", "constraint": c})
             for c in CONSTRAINTS]
    rows += [(f"deepxplore:{c}", "rconc", {"target": "random", "constraint": c, **p})
             for c, p in DEEPXPLORE.items()]
    rows += [("nc", "nc", {"target": "random"}), ("rnntest", "rnntest", {"target": "random"}),
             ("differential", "differential", {}), ("fgsm", "fgsm", {}), ("pgd", "pgd", {})]
    return rows


def build_generation(n_seeds: int = 500, models=None, out_dir="reports/generation",
                     iterations: int | None = None, store=None, tsne_model: str = "mnist-lstm",
                     reuse: bool = True, log: Callable[[str], None] = print,
                     other_seeds: int | None = None) -> dict:
    """Run every strategy on every model's seeds, write the tables, return them as a dict.
    The RNNCon-Test (Random) and RNN-Test rows take ``n_seeds`` seeds, every other row
    ``other_seeds`` (default: as many; the first ones of the same seed list).
    With ``reuse``, a finished run of the store with the same request (model, method, seeds,
    parameters) is read instead of being run again (so an interrupted report resumes)."""

    store = store if store is not None else RunStore()
    shipped = set(shipped_models())
    models = _check_models(models, shipped)
    extra = {} if iterations is None else {"iterations": int(iterations)}
    other_seeds = n_seeds if other_seeds is None else min(int(other_seeds), n_seeds)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build = _Build(n_seeds=n_seeds, other_seeds=other_seeds, models=models, shipped=shipped,
                   iterations=iterations, extra=extra, store=store, reuse=reuse, log=log,
                   out=out, run_generation=jobs.run_generation,
                   tm=tsne_model if tsne_model in models else models[0])
    for model in models:
        report = build.model(model)
    return report


def _check_models(models, shipped: set) -> list[str]:
    """The models asked (default: every shipped MNIST model), each a trained MNIST model."""
    models = list(models) if models else [m for m in MNIST_MODELS if m in shipped]
    if not models:
        raise InputError("no MNIST model is shipped: train them first (`rnncon train "
                         "mnist-lstm`, ...)")
    for m in models:
        if m not in ARCHITECTURES or ARCHITECTURES[m].text:
            raise InputError(f"{m!r} is not one of the MNIST models ({', '.join(MNIST_MODELS)})")
        if m not in shipped:
            raise InputError(f"model {m!r} is not trained yet: `rnncon train {m}`")
    return models


class _Build:
    """One report in the making: its settings, the runs so far and the tables they fill."""

    def __init__(self, *, n_seeds, other_seeds, models, shipped, iterations, extra, store,
                 reuse, log, out, run_generation, tm):
        self.n_seeds, self.other_seeds, self.models = n_seeds, other_seeds, models
        self.shipped, self.iterations, self.extra = shipped, iterations, extra
        self.store, self.reuse, self.log, self.out = store, reuse, log, out
        self.run_generation, self.tm = run_generation, tm
        self.started = time.time()
        self.table2, self.table4, self.runs, self.reused = [], [], {}, []
        self.done, self.tsne_rows = [], []

    def run(self, model, label, method, params):
        """One row's run (or the finished run of the same request), logged and kept."""
        t0 = time.time()
        seeds = self.n_seeds if label in FULL_ROWS else self.other_seeds
        p = self._params(model, method, params)
        s = _reusable(self.store, model, method, seeds, p) if self.reuse else None
        if s is None:
            s = self.run_generation(model, method, seeds, store=self.store, **p)
        else:
            self.reused.append(s["run_id"])
            self.log(f"[{model}] {label}: reusing finished run {s['run_id']}")
        self.log(f"[{model}] {label}: {s['n_adversarial']}/{s['n_seeds']} adversarial, "
                 f"avg L2 {_f(s['avg_l2'])} (before the minimal stage "
                 f"{_f(s.get('avg_l2_unminimized'))}), {time.time() - t0:.0f} s")
        self.runs[(model, label)] = s
        return s

    def _params(self, model, method, params) -> dict:
        """A row's generator params, with the report's iterations and a differential run's
        other models."""
        p = dict(params)
        if "iterations" in generator_class(method).params and "iterations" not in p:
            p.update(self.extra)
        if generator_class(method).needs_others:
            p["others"] = [o for o in self.models if o != model] or \
                [o for o in self.shipped if o in ARCHITECTURES and o != model
                 and not ARCHITECTURES[o].text]
        return p

    def model(self, model) -> dict:
        """Every row of one model, then the report of the models done so far."""
        keras_model = load_model(model)
        layers = [s.name for s in Tracer(keras_model).specs if s.kind != "dense"]
        rows = _rows_for(model, layers)
        # the two rows the targets compare run first (an interrupted report still has them)
        for label, method, params in sorted(rows, key=lambda r: r[0] not in FULL_ROWS):
            self.run(model, label, method, params)
        self.table2.extend(_row(model, label, method, self.runs[(model, label)])
                           for label, method, _ in rows)
        self._noise(model)
        self.table4.append(self._table4_row(model))
        self.done.append(model)
        if model == self.tm:
            self._figure10()
        return self.write()

    def _noise(self, model):
        """Random noise with, per seed, the L2 norm of the RNNCon-Test (random) perturbation."""
        z = np.load(self.runs[(model, "random")]["outputs"])
        l2 = np.linalg.norm((z["x_gen"] - z["x_seed"]).reshape(len(z["x_seed"]), -1),
                            axis=1)[:self.other_seeds]
        s = self.run(model, "noise (same L2)", "noise", {"l2": l2})
        self.table2.append(_row(model, "noise (same L2)", "noise", s))

    def _table4_row(self, model) -> dict:
        runs = self.runs
        card = read_card(model) or {}
        return {"model": model,
                "original_test_accuracy": card.get("test_accuracy"),
                **{f"accuracy_{lab}": runs[(model, lab)]["accuracy_gen"]
                   for lab in ("random", "rnntest", "nc", "fgsm", "pgd")},
                "adv_rate_rconc": runs[(model, "random")]["adv_rate"],
                "adv_rate_rnntest": runs[(model, "rnntest")]["adv_rate"]}

    def _figure10(self):
        """Figure 10: perturbations of activating 1, 2 and 3 contributions on the same seeds."""
        tm = self.tm
        tsne_runs = {1: self.runs[(tm, "random")]}
        for k in (2, 3):
            # a seed may leave fewer than k contributions inactive: the least activated
            tsne_runs[k] = self.run(tm, f"k={k}", "rconc", {"target": "random", "k": k,
                                                            "short": "lowest"})
        self.tsne_rows = _tsne(tsne_runs)

    def _table3(self) -> list[dict]:
        tm, runs = self.tm, self.runs
        if tm not in self.done:
            return []
        table3 = [_row(tm, lab, lab, runs[(tm, "random" if lab == "rconc" else lab)])
                  for lab in ("rnntest", "rconc")]
        for r in table3:
            p = PAPER_TABLE3[r["method"]]
            r.update(paper_seeds=p[0], paper_adv=p[1], paper_avg_l2=p[2],
                     paper_adv_rate=p[3])
        return table3

    def write(self) -> dict:
        """The report of the models done so far (rewritten after each model)."""
        table3 = self._table3()
        report = {"n_seeds": self.n_seeds, "other_seeds": self.other_seeds,
                  "models": list(self.done), "models_asked": self.models,
                  "iterations": self.iterations, "deepxplore_settings": DEEPXPLORE,
                  "seconds": round(time.time() - self.started, 1), "table2": self.table2,
                  "table3": table3, "table4": self.table4, "paper_table4": PAPER_TABLE4,
                  "targets": _targets(self.done, self.runs), "tsne_model": self.tm,
                  "reused_runs": len(self.reused),
                  "run_ids": {f"{m}/{lab}": s["run_id"] for (m, lab), s in self.runs.items()}}
        report["files"] = write_files(self.out, {"table2.csv": self.table2, "table3.csv": table3,
                                                 "table4.csv": self.table4,
                                                 "figure10_tsne.csv": self.tsne_rows,
                                                 "generation.json": report,
                                                 "README.md": _markdown(report)},
                                      report="generation")
        return report


def _reusable(store, model: str, method: str, n_seeds: int, params: dict) -> dict | None:
    """The summary of the finished run that answered this very request (jobs.find_generation:
    the same model file, seeds and whole generator configuration), or None."""
    if "l2" in params:          # matched noise depends on another run: always run it (cheap)
        return None
    info = jobs.find_generation(store, model, method, n_seeds, **params)
    if info is None or not (info.path / "outputs.npz").exists() or not info.summary:
        return None
    return {**info.summary, "run_id": info.run_id, "outputs": str(info.path / "outputs.npz")}


def _row(model: str, label: str, method: str, s: dict) -> dict:
    key = "constraint" if label.startswith("constraint:") else label
    paper = PAPER_TABLE2.get(model, {}).get(key) if method == "rconc" else None
    return {"model": model, "row": label, "method": method, "seeds": s["n_seeds"],
            "n_adversarial": s["n_adversarial"], "adv_rate": s["adv_rate"],
            "valid_adv_rate": s.get("valid_adv_rate"), "avg_l2": s["avg_l2"], "avg_l1": s["avg_l1"], "avg_linf": s["avg_linf"],
            "mean_iterations": s["mean_iterations"], "seconds": s["seconds"],
            "adv_per_second": s["adv_per_second"], "accuracy_gen": s["accuracy_gen"],
            "mean_activated": s.get("mean_activated"),
            # the same run before its minimal-perturbation stage (= the run without it)
            "avg_l2_unminimized": s.get("avg_l2_unminimized"),
            "avg_l1_unminimized": s.get("avg_l1_unminimized"),
            "avg_linf_unminimized": s.get("avg_linf_unminimized"),
            "mean_activated_unminimized": s.get("mean_activated_unminimized"),
            "minimize_seconds": s.get("minimize_seconds"),
            "run_id": s["run_id"], "short_pool_seeds": _short_count(s),
            "paper_adv": None if paper is None else paper[0],
            "paper_avg_l2": None if paper is None else paper[1],
            "paper_adv_rate": None if paper is None else paper[2]}


def _short_count(s: dict):
    z = np.load(s["outputs"])
    return int(z["short_pool"].sum()) if "short_pool" in z.files else None


def _targets(models, runs) -> list[dict]:
    out = []
    for m in models:
        rc, rt = runs[(m, "random")], runs[(m, "rnntest")]
        out.append({"model": m, "rconc_adv_rate": rc["adv_rate"],
                    "rate_target_met": rc["adv_rate"] >= TARGET_RATE,
                    "rate_gap": rc["adv_rate"] - TARGET_RATE,
                    "rconc_avg_l2": rc["avg_l2"], "rnntest_avg_l2": rt["avg_l2"],
                    "l2_target_met": rc["avg_l2"] is not None and rt["avg_l2"] is not None
                    and rc["avg_l2"] < rt["avg_l2"],
                    "rconc_adv_per_second": rc["adv_per_second"],
                    "speed_target_met": rc["adv_per_second"] >= TARGET_SPEED
                    if m == "mnist-lstm" else None})
    return out


def _tsne(tsne_runs: dict) -> list[dict]:
    zs = {k: np.load(s["outputs"]) for k, s in tsne_runs.items()}
    n = min(len(z["seed_index"]) for z in zs.values())     # k = 1 may have more seeds
    zs = {k: {f: z[f][:n] for f in ("seed_index", "x_gen", "x_seed", "adversarial")}
          for k, z in zs.items()}
    seeds = zs[1]["seed_index"]
    for k, z in zs.items():
        if not np.array_equal(z["seed_index"], seeds):
            raise AssertionError("the t-SNE runs did not see the same seeds")
    pert = np.concatenate([(z["x_gen"] - z["x_seed"]).reshape(len(seeds), -1)
                           for z in zs.values()])
    ks = np.concatenate([np.full(len(seeds), k) for k in zs])
    emb = tsne_embedding(pert, seed=0)
    adv = np.concatenate([z["adversarial"] for z in zs.values()])
    return [{"seed_index": int(s), "k": int(k), "tsne_x": float(e[0]), "tsne_y": float(e[1]),
             "adversarial": bool(a), "l2": float(np.linalg.norm(p))}
            for s, k, e, a, p in zip(np.tile(seeds, len(zs)), ks, emb, adv, pert)]


def _f(v, nd=3, pct=False):
    if v is None:
        return "-"
    return f"{100 * v:.1f}" if pct else f"{v:.{nd}f}"


def _markdown(r: dict) -> str:
    """The report's README.md: the introduction, then each table's section."""
    L = _md_intro(r) + _md_table2(r)
    if not r["table3"]:
        return "\n".join(L + ["", f"(Tables 3 and 4 and Figure 10 follow once "
                                f"{r['tsne_model']} is done.)", ""])
    L += _md_table3(r) + _md_table4(r) + _md_targets(r) + _md_figure10(r)
    return "\n".join(L)


def _md_intro(r: dict) -> list[str]:
    """The title and how the report was made (seeds, measures, paper values)."""
    return ["# Test generation: Tables 2, 3, 4 and Figure 10 (measured)", "",
            f"Generated by `rnncon report generation --seeds {r['n_seeds']} --other-seeds "
            f"{r.get('other_seeds', r['n_seeds'])}` in {r['seconds']:.0f} s "
            f"on this machine ({r.get('reused_runs', 0)} of the runs were finished runs of the "
            f"same request, read back from the run store; each row's run_id is in table2.csv). "
            f"Seeds: the first {r['n_seeds']} test inputs each model predicts right for the "
            f"random and rnntest rows, the first {r.get('other_seeds', r['n_seeds'])} of them "
            f"for every other row (the paper: 500). One generated input per seed. Avg. L2 is "
            f"the mean L2 norm of the perturbation over the adversarial inputs, on [0, 1] pixels "
            f"(784 per image). Targets activated: the mean share of each seed's targeted items "
            f"(contributions, neurons, hidden units) above the threshold on its generated input. "
            f"The `deepxplore:` rows use DeepXplore's own constraint settings "
            f"({', '.join(f'{c}: {p}' for c, p in (r.get('deepxplore_settings') or {}).items())}"
            f"). Paper values are in the `paper` columns (500 seeds; the paper does not say how "
            f"its L2 is scaled, nor which constraint its Constraint row used).", "",
            f"Models done: {', '.join(r['models']) or 'none yet'} (asked: "
            f"{', '.join(r.get('models_asked', r['models']))}).", ""]


def _md_table2(r: dict) -> list[str]:
    """Table 2's section: one line per (model, row)."""
    steps, polish = (p.default for p in MINIMIZE[1:3])
    L = ["## Table 2: adversarial inputs per model and strategy", "",
         "Every gradient method ran with the minimal-perturbation stage (`minimize=True`, "
         f"`min_steps` {steps}, `polish_steps` {polish}: Adam then FAB descents; FGSM: the "
         "scale search alone). The `raw` columns are the same run "
         "before that stage, i.e. the run without it (the stage runs after the ascent and "
         "never changes which seeds are adversarial); `stage s` is the stage's share of the "
         "run's seconds. `valid adv rate`: adversarial and passed by the data set's "
         "validity checks (docs/validity.md; - where the run was not checked).", "",
         "| model | row | method | #seeds | #adv | adv rate % | valid adv rate % | L2 | L2 raw "
         "| L1 | L1 raw "
         "| L∞ | L∞ raw | targets activated | raw | mean iters | adv/s | stage s "
         "| seeds w/o inactive target | paper #adv | paper L2 | paper rate % |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
         "---|---|"]
    for x in r["table2"]:
        stage = x.get("minimize_seconds")
        share = "-" if stage is None or not x["seconds"] else \
            f"{stage:.1f} ({100 * stage / x['seconds']:.0f} %)"
        L.append(f"| {x['model']} | {x['row']} | {x['method']} | {x['seeds']} | "
                 f"{x['n_adversarial']} | {_f(x['adv_rate'], pct=True)} | "
                 f"{_f(x.get('valid_adv_rate'), pct=True)} | {_f(x['avg_l2'])} | "
                 f"{_f(x.get('avg_l2_unminimized'))} | {_f(x['avg_l1'], 1)} | "
                 f"{_f(x.get('avg_l1_unminimized'), 1)} | {_f(x['avg_linf'])} | "
                 f"{_f(x.get('avg_linf_unminimized'))} | "
                 f"{_f(x.get('mean_activated'), 2)} | "
                 f"{_f(x.get('mean_activated_unminimized'), 2)} | "
                 f"{_f(x['mean_iterations'], 1)} | {_f(x['adv_per_second'], 1)} | {share} | "
                 f"{'-' if x['short_pool_seeds'] is None else x['short_pool_seeds']} | "
                 f"{x['paper_adv'] or '-'} | "
                 f"{_f(x['paper_avg_l2'])} | {x['paper_adv_rate'] or '-'} |")
    return L


def _md_table3(r: dict) -> list[str]:
    """Table 3's section: RNNCon-Test vs RNN-Test on the t-SNE model."""
    L = ["", f"## Table 3: RNNCon-Test vs RNN-Test on {r['table3'][0]['model']}", "",
         "| method | #seeds | #adv | avg L2 | avg L2 raw | adv rate % | paper #seeds | paper #adv "
         "| paper L2 | paper rate % |", "|---|---|---|---|---|---|---|---|---|---|"]
    for x in r["table3"]:
        L.append(f"| {x['method']} | {x['seeds']} | {x['n_adversarial']} | {_f(x['avg_l2'])} | "
                 f"{_f(x.get('avg_l2_unminimized'))} | "
                 f"{_f(x['adv_rate'], pct=True)} | {x['paper_seeds']} | {x['paper_adv']} | "
                 f"{x['paper_avg_l2']} | {x['paper_adv_rate']} |")
    return L


def _md_table4(r: dict) -> list[str]:
    """Table 4's section: accuracy on the generated inputs, the paper's row last."""
    p4 = r["paper_table4"]
    L = ["", "## Table 4: accuracy (%) on the generated inputs", "",
         "Original = the model's test accuracy on our whole test split; the others = accuracy "
         "on the generated inputs of the seeds (all predicted right before).", "",
         "| model | original | RNNCon (random) | RNN-Test | NC | FGSM | PGD | adv rate RNNCon | "
         "adv rate RNN-Test |", "|---|---|---|---|---|---|---|---|---|"]
    for x in r["table4"]:
        L.append(f"| {x['model']} | {_f(x['original_test_accuracy'], pct=True)} | "
                 f"{_f(x['accuracy_random'], pct=True)} | {_f(x['accuracy_rnntest'], pct=True)} | "
                 f"{_f(x['accuracy_nc'], pct=True)} | {_f(x['accuracy_fgsm'], pct=True)} | "
                 f"{_f(x['accuracy_pgd'], pct=True)} | {_f(x['adv_rate_rconc'], pct=True)} | "
                 f"{_f(x['adv_rate_rnntest'], pct=True)} |")
    L.append(f"| paper: {p4['model']} | {p4['original']} | {p4['rconc']} | {p4['rnntest']} | - "
             f"| - | - | {p4['adv_rate_rconc']} | {p4['adv_rate_rnntest']} |")
    return L


def _md_targets(r: dict) -> list[str]:
    """The targets' section: rate, L2 and speed, each met or not."""
    L = ["", "## Targets", "",
         "| model | RNNCon rate % | ≥ 85 %? | RNNCon L2 | RNN-Test L2 | lower? | adv/s "
         f"(RNNCon) | ≥ {TARGET_SPEED:g}/s? |", "|---|---|---|---|---|---|---|---|"]
    yn = lambda b: "-" if b is None else ("yes" if b else "**no**")   # noqa: E731
    for t in r["targets"]:
        L.append(f"| {t['model']} | {_f(t['rconc_adv_rate'], pct=True)} "
                 f"({100 * t['rate_gap']:+.1f}) | {yn(t['rate_target_met'])} | "
                 f"{_f(t['rconc_avg_l2'])} | {_f(t['rnntest_avg_l2'])} | "
                 f"{yn(t['l2_target_met'])} | {_f(t['rconc_adv_per_second'], 1)} | "
                 f"{yn(t['speed_target_met'])} |")
    return L


def _md_figure10(r: dict) -> list[str]:
    """A note on adv/s, then what figure10_tsne.csv holds."""
    return ["", "Adv/s here is each stored run's own figure (model loading excluded, TensorFlow "
            "tracing included, the machine shared with other jobs); "
            "`benchmarks/bench_generate.py` measures the warm throughput.", "",
            "## Figure 10", "", f"`figure10_tsne.csv`: t-SNE (scikit-learn, perplexity ≤ 30, "
            f"PCA init, random_state 0) of the perturbations of activating k = 1, 2, 3 random "
            f"contributions on the same seeds of {r['tsne_model']}; one row per (seed, k).", ""]
