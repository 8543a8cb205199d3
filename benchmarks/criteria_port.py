"""Issue 25's measurement: every testRNN / DeepStellar / DeepGauge criterion at its defaults
(ours) beside the NumPy port of its original's own code (tests/test_criteria_originals.py, on a
float64 forward pass). A script, not a test.

    .venv/bin/python benchmarks/criteria_port.py [--models mnist-lstm,stacked-mnist-gru]
                                                 [--n-profile 4000] [--n 200] [--out FILE.json]

Profile from the first --n-profile MNIST training digits (in a temporary cache), coverage of the
first --n test digits. Prints one line per criterion: ours covered/total, the port's. docs/results.md
("Criteria as their authors defined them") holds the figures of the run in issue 25.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from math import perm
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rnncon_core import paths  # noqa: E402
from rnncon_core import coverage as C  # noqa: E402
from rnncon_core.data import load_dataset  # noqa: E402
from rnncon_core.zoo import load_model  # noqa: E402
from tests import test_criteria_originals as O  # noqa: E402
from tests.test_criteria_oracle import np_forward  # noqa: E402

NAMES = ["bc", "sc", "tc", "state", "state-boundary", "state-weighted", "transition",
         "transition-weighted", "kmnc", "nbc", "snac", "tknc", "tknp", "rconc-kmnc",
         "rconc-nbc", "rconc-snac"]


def lohi(acc, key, v):
    lo, hi = v.min(0), v.max(0)
    if key in acc:
        lo, hi = np.minimum(acc[key][0], lo), np.maximum(acc[key][1], hi)
    acc[key] = (lo, hi)


def port(m, x_tr, y_tr, x) -> dict:
    """The port's figures: (covered, total) or (weighted rate, 1) per criterion."""
    rec = [l.name for l in m.layers if type(l).__name__ in ("LSTM", "GRU")]
    last = rec[-1]
    acc, hs, preds = {}, [], []
    for i in range(0, len(x_tr), 250):
        tr = np_forward(m, x_tr[i:i + 250])
        hs.append(tr[last]["h"])
        preds.append(tr[m.layers[-1].name]["neurons"].argmax(1))
        neur = np.concatenate([tr[l.name]["neurons"].reshape(len(tr[last]["h"]), -1)
                               for l in m.layers], 1)
        con = np.concatenate([tr[l.name]["contrib"].reshape(len(tr[last]["h"]), -1)
                              for l in m.layers], 1)
        lohi(acc, "neuron", neur)
        lohi(acc, "contrib", con)
    h_tr = np.concatenate(hs)
    correct = np.concatenate(preds) == y_tr
    te = np_forward(m, x)
    n = len(x)
    r = {}
    # testRNN (last recurrent layer, every step, one global range; main.py's thresholds)
    (tc_tr, sc_tr), (tc_te, sc_te) = O.trnn_alphas(h_tr), O.trnn_alphas(te[last]["h"])
    every = slice(0, tc_tr.shape[1])
    cov, _ = O.trnn_step_cover(tc_tr, tc_te, every, 0.8)
    r["bc"] = (int(cov.sum()), cov.size)
    cov, _ = O.trnn_step_cover(sc_tr, sc_te, every, 0.6)
    r["sc"] = (int(cov.sum()), cov.size)
    words, _ = O.trnn_tc_words(tc_tr, tc_te, every, 3, 5)
    r["tc"] = (len(words), 3 ** 5)
    # DeepStellar (correct training inputs, 3 components, 10 cells, k = 1)
    h_c = h_tr[correct]
    mean, axes = O.ds_pca(h_c.reshape(-1, h_c.shape[-1]), 3)
    seq_tr, seq_te = O.ds_abstract((h_c - mean) @ axes.T, (te[last]["h"] - mean) @ axes.T, 10, 1)
    g = O.DTMC(seq_tr, 1)
    st, trn, kst = (g.cover(seq_te, "state"), g.cover(seq_te, "transition"),
                    g.cover(seq_te, "k-step", 1))
    r["state"] = (len(st), len(g.states))
    r["state-boundary"] = (len(kst), len(g.other))
    r["state-weighted"] = (round(g.weight(st, "state"), 6), 1)
    r["transition"] = (len(trn), len(g.trans))
    r["transition-weighted"] = (round(g.weight(trn, "transition"), 6), 1)
    # DeepGauge (NLC) on neurons and contributions
    neur_te = np.concatenate([te[l.name]["neurons"].reshape(n, -1) for l in m.layers], 1)
    con_te = np.concatenate([te[l.name]["contrib"].reshape(n, -1) for l in m.layers], 1)
    for pre, key, v in (("", "neuron", neur_te), ("rconc-", "contrib", con_te)):
        lo, hi = acc[key]
        fake_train = np.stack([lo, hi])              # the range is all KMNC reads
        kc, _ = O.nlc_kmnc(fake_train, v, 10)
        r[pre + "kmnc"] = (int(kc.sum()), kc.size)
        lower, upper = (v < lo).any(0), (v > hi).any(0)
        r[pre + "nbc"] = (int(lower.sum() + upper.sum()), 2 * len(lo))
        r[pre + "snac"] = (int(upper.sum()), len(lo))
    o = {"x": x, "te": te, "model": m}
    layers = O.nlc_layers(o, "te", "step")
    hit = []
    for v in layers:
        h = np.zeros(v.shape, bool)
        np.put_along_axis(h, O.nlc_topk(v, 2), True, axis=1)
        hit.append(h.any(0))
    hit = np.concatenate(hit)
    r["tknc"] = (int(hit.sum()), hit.size)
    tops = [O.nlc_topk(v, 2) for v in layers]
    seen = {str(np.concatenate([t[i] for t in tops]).tolist()) for i in range(n)}
    total = 1
    for v in layers:
        total *= perm(v.shape[1], 2)
    r["tknp"] = (len(seen), str(total))
    r["_correct_profile_inputs"] = int(correct.sum())
    return r


def ours(m, x_tr, y_tr, x) -> dict:
    out = {}
    for n in NAMES:
        kw = {"x_train": x_tr, "y_train": y_tr} if C.needs_profile(n) else {}
        c = C.get_criterion(n, m, **kw).update(x)
        out[n] = (round(c.rate(), 6), 1) if n.endswith("weighted") else (int(c.covered),
                                                                         str(c.total))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mnist-lstm,stacked-mnist-gru")
    ap.add_argument("--n-profile", type=int, default=4000)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    ds = load_dataset("mnist")
    paths.CACHE_DIR = Path(tempfile.mkdtemp(prefix="criteria-port-"))
    x_tr, y_tr, x = ds.x_train[:a.n_profile], ds.y_train[:a.n_profile], ds.x_test[:a.n]
    res = {}
    for name in a.models.split(","):
        m = load_model(name)
        res[name] = {"ours": ours(m, x_tr, y_tr, x), "port": port(m, x_tr, y_tr, x)}
        for n in NAMES:
            print(f"{name} {n}: ours {res[name]['ours'][n]}, port {res[name]['port'][n]}",
                  flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
