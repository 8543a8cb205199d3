"""The text (IMDB) parts of the dashboard pages, so the pages speak text: class names instead of
0/1, both confidences, a form with the parameters a text method takes, Table 2 with words
changed and the valid adversarial rate, pairs whose failed checks are marked, and a
Perturbations view for text runs (substitutions per part of speech and per word; t-SNE of the
change in the model's final hidden state).

The pages call these in a few lines where they branch on the data set's kind; pure functions
(tables, captions) are tested without Streamlit.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import streamlit as st

CLASS_NAMES = ("negative", "positive")        # IMDB: 0 = negative review, 1 = positive
CHECKS = ("antonym", "polarity", "number", "pos", "inflection")
TEXT_DESCRIPTIONS = {
    "eda": "EDA's four word operations (synonym replacement, insertion, swap, deletion) "
           "until the prediction flips, guided by uncovered contributions",
    "synonym-gradient": "substitutions chosen by the gradient w.r.t. the embeddings",
}
CONSTRAINT_LABELS = {"reader": "reader: same part of speech, inflection and sentiment",
                     "none": "none: any WordNet synonym (the EDA paper's)"}
POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


def class_name(c) -> str:
    c = int(c)
    return CLASS_NAMES[c] if 0 <= c < len(CLASS_NAMES) else str(c)


# ---------------------------------------------------------------- the form

def form_fields(method: str, objective: str = "loss") -> tuple[str, ...]:
    """What the form asks for a text method: coverage targets only where they steer the
    search (EDA ranks its variants by them; synonym-gradient only with the contribution
    objective)."""
    base = ("constraints", "max_fraction")
    coverage = ("layer", "n_targets", "threshold")
    if method == "synonym-gradient":
        return base + ("objective",) + (coverage if objective == "contribution" else ())
    return base + coverage


def generation_form(method: str, recurrent: list[str], default_threshold: float) -> dict:
    """The text method's fields, drawn inside the page's ``st.form``; returns their values.
    The objective of synonym-gradient is chosen outside the form (it decides which fields
    show): ``st.session_state["gen_objective"]``."""
    objective = st.session_state.get("gen_objective", "loss")
    fields = form_fields(method, objective)
    values = {}
    c = st.columns(3)
    values["constraints"] = c[0].radio(
        "Substitutions", ["reader", "none"], key="gen_constraints",
        format_func=lambda v: CONSTRAINT_LABELS[v],
        help="reader: only substitutes a reader would accept (tagged part of speech, "
             "re-inflected, same VADER polarity, no antonym, number, negation or name); "
             "every run reports the checks either way.")
    values["max_fraction"] = c[1].slider("Most words changed (share of the review)", 0.01, 0.5,
                                         0.1, key="gen_maxfrac")
    if method == "synonym-gradient":
        values["objective"] = objective
        c[2].markdown(f"**Objective:** {objective}")
    if "layer" in fields:
        c = st.columns(3)
        values["layer"] = c[0].selectbox("Uncovered contributions of", ["random"] + recurrent,
                                         key="gen_layer",
                                         format_func=lambda t: "all layers" if t == "random"
                                         else t)
        values["n_targets"] = c[1].number_input("Target contributions per seed", 1, 64, 8,
                                                key="gen_ntargets")
        values["threshold"] = c[2].slider("Threshold", 0.05, 0.95, default_threshold,
                                          step=0.05, key="gen_threshold")
    return values


def objective_picker(method: str) -> None:
    """synonym-gradient's objective, outside the form (it decides which fields show)."""
    if method == "synonym-gradient":
        st.radio("Objective", ["loss", "contribution"], key="gen_objective", horizontal=True,
                 format_func=lambda v: {"loss": "flip the prediction (loss)",
                                        "contribution": "activate uncovered contributions "
                                                        "(Algorithm 2)"}[v])


def generation_params(method: str, values: dict) -> dict:
    """run_generation's keyword arguments from the form's values."""
    params = {}
    for name in form_fields(method, values.get("objective", "loss")):
        if name not in values:
            continue
        v = values[name]
        if name == "layer" and v == "random":
            v = None
        if name == "n_targets":
            v = int(v)
        params[name] = v
    return params


# ---------------------------------------------------------------- pairs

def captions(outputs: dict, rows) -> list[tuple[str, str]]:
    """(seed caption, generated caption): label and predictions by class name, each with the
    model's confidence (the seed's from ``conf_seed`` where the run kept it)."""
    out = []
    for i in rows:
        seed = f"label {class_name(outputs['y_seed'][i])}"
        if "pred_seed" in outputs:
            seed += f", predicted {class_name(outputs['pred_seed'][i])}"
            if "conf_seed" in outputs:
                seed += f" ({float(outputs['conf_seed'][i]):.0%})"
        gen = f"predicted {class_name(outputs['pred_gen'][i])}"
        if "conf_gen" in outputs:
            gen += f" ({float(outputs['conf_gen'][i]):.0%})"
        if bool(outputs["adversarial"][i]):
            gen += " ✗ adversarial"
            if "valid" in outputs:
                gen += " (valid)" if bool(outputs["valid"][i]) else " (an edit failed a check)"
        out.append((seed, gen))
    return out


@st.cache_resource(show_spinner=False)
def lexicon(_vocab, key: str):
    from rnncon_core.text.eda import Lexicon
    return Lexicon(_vocab, table={})


def show_pairs(outputs: dict, rows, vocab, key: str = "gen_text") -> None:
    """Several seed / generated pairs, changed words marked, failed checks outlined."""
    from rnncon_core.text.display import side_by_side, to_html
    lex = lexicon(vocab, str(len(vocab.words)))
    with st.spinner("Checking the edits (WordNet, tagger and sentiment lexicon load once)…"):
        for i, (seed_cap, gen_cap) in zip(rows, captions(outputs, rows)):
            view = side_by_side(lex.words_of(outputs["x_seed"][i])[0],
                                lex.words_of(outputs["x_gen"][i])[0], checked=True)
            with st.container(border=True, key=f"{key}_{i}"):
                st.markdown(f"**seed** (test review {int(outputs['seed_index'][i])}): "
                            f"{seed_cap} · **generated:** {gen_cap}")
                st.html(to_html(view))


# ---------------------------------------------------------------- Table 2

TABLE2_LABELS = ("run", "status", "method", "substitutions", "seeds", "adversarial",
                 "adv. rate %", "valid adv. rate %", "words changed",
                 *[f"{c} ok %" for c in CHECKS], "s / seed")


def table2(runs) -> pd.DataFrame:
    """Table 2 for text runs: words changed and the valid adversarial rate instead of the
    image norms and the target layer."""
    out = []
    for info in runs:
        s = info.summary or {}
        gen_cfg = (info.config or {}).get("generator", {})
        n = s.get("n_seeds")
        checks = s.get("checks") or {}
        row = {"run": info.run_id, "status": info.status,
               "method": str(s.get("method", info.method) or ""),
               "substitutions": gen_cfg.get("constraints", "none (before #17)"),
               "seeds": n, "adversarial": s.get("n_adversarial"),
               "adv. rate %": _pct(s.get("adv_rate")),
               "valid adv. rate %": _pct(s.get("valid_adv_rate")),
               "words changed": s.get("avg_words_changed_all"),
               **{f"{c} ok %": _pct(checks.get(c)) for c in CHECKS},
               "s / seed": (s["seconds"] / n) if n and s.get("seconds") is not None else None}
        out.append(row)
    df = pd.DataFrame(out, columns=list(TABLE2_LABELS))
    numeric = [c for c in df.columns if c not in ("run", "status", "method", "substitutions")]
    df[numeric] = df[numeric].apply(pd.to_numeric, errors="coerce").astype(float)
    return df.dropna(axis=1, how="all")


def _pct(v):
    return None if v is None else 100 * float(v)


def table2_columns() -> dict:
    cc = st.column_config
    pct = lambda label, h: cc.ProgressColumn(label, format="%.1f %%", min_value=0,  # noqa
                                             max_value=100, width="small", help=h)
    return {"run": cc.TextColumn("run", width="medium", pinned=True),
            "seeds": cc.NumberColumn("seeds", format="%d", width="small"),
            "adversarial": cc.NumberColumn("adversarial", format="%d", width="small"),
            "adv. rate %": pct("adv. rate", "prediction flipped / seeds"),
            "valid adv. rate %": pct("valid adv. rate", "flipped and every edit passed the "
                                                        "checks / seeds"),
            "words changed": cc.NumberColumn("words changed", format="%.2f", width="small"),
            **{f"{c} ok %": cc.NumberColumn(f"{c} ok", format="%.1f %%", width="small",
                                            help=f"edits passing the {c} check")
               for c in CHECKS},
            "s / seed": cc.NumberColumn("s / seed", format="%.2f", width="small")}


# ---------------------------------------------------------------- Perturbations

def substitution_tables(outputs: dict, lex) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every edit of a run, counted per part of speech of the seed word (share passing every
    check, share in reviews that flipped) and per (old -> new) substitution."""
    from rnncon_core.text.lexical import PENN_TO_WN, check_edits
    by_pos: dict[str, Counter] = {}
    pairs: Counter = Counter()
    failed: dict = {}
    for i in range(len(outputs["x_seed"])):
        a, b = lex.words_of(outputs["x_seed"][i])[0], lex.words_of(outputs["x_gen"][i])[0]
        adv = bool(outputs["adversarial"][i])
        for e in check_edits(a, b)["edits"]:
            if e["kind"] == "substitution":
                pos = POS_NAMES.get(PENN_TO_WN.get(e["tag"], ""), e["tag"])
                key = (e["old"], e["new"])
                pairs[key] += 1
                failed.setdefault(key, set()).update(e["failed"])
            else:
                pos = e["kind"]
            c = by_pos.setdefault(pos, Counter())
            c["edits"] += 1
            c["passed"] += not e["failed"]
            c["in flipped reviews"] += adv
    pos_df = pd.DataFrame([{"part of speech / edit": k, "edits": v["edits"],
                            "passing every check %": 100 * v["passed"] / v["edits"],
                            "in flipped reviews %": 100 * v["in flipped reviews"] / v["edits"]}
                           for k, v in sorted(by_pos.items(), key=lambda kv: -kv[1]["edits"])],
                          columns=["part of speech / edit", "edits", "passing every check %",
                                   "in flipped reviews %"])
    word_df = pd.DataFrame([{"seed word": o, "substitute": n, "times": k,
                             "failed checks": ", ".join(sorted(failed[(o, n)])) or "-"}
                            for (o, n), k in pairs.most_common()],
                           columns=["seed word", "substitute", "times", "failed checks"])
    return pos_df, word_df


@st.cache_data(show_spinner="t-SNE of the change in the final hidden state…", max_entries=8)
def hidden_change_tsne(model_ref: str, run_id: str, mtime: float, _outputs: dict,
                       seed: int = 0) -> np.ndarray:
    """2-D t-SNE of h_T(generated) - h_T(seed): the change an edit makes to the output of the
    model's last recurrent layer (its final hidden state)."""
    import keras

    from dashboard import state
    from rnncon_core.quality import tsne_embedding
    m = state.model(model_ref)
    rec = [l for l in m.layers if type(l).__name__ in ("LSTM", "GRU", "SimpleRNN")]
    if not rec:
        raise ValueError("the model has no recurrent layer")
    sub = keras.Model(m.inputs, rec[-1].output)
    h0 = np.asarray(sub.predict(_outputs["x_seed"], verbose=0)).reshape(len(_outputs["x_seed"]), -1)
    h1 = np.asarray(sub.predict(_outputs["x_gen"], verbose=0)).reshape(len(_outputs["x_gen"]), -1)
    return tsne_embedding(h1 - h0, seed=seed, max_iter=500)


def perturbations_view(sel, info, outputs: dict) -> None:
    """The Perturbations page for a text run: where its edits fall (part of speech, words),
    and the t-SNE map of the change in the final hidden state, coloured by class flip; a
    selected point shows its pair."""
    from dashboard import charts, state
    vocab = state.dataset(sel.dataset).vocab
    lex = lexicon(vocab, str(len(vocab.words)))
    s = info.summary or {}
    if "valid_adv_rate" in s:
        st.markdown(f"**{s.get('n_adversarial', 0)} of {s.get('n_seeds', 0)} seeds flipped "
                    f"({100 * s.get('adv_rate', 0):.1f} %); valid adversarial (every edit "
                    f"passed the checks): {100 * s['valid_adv_rate']:.1f} %.**")
    with st.spinner("Checking every edit of the run…"):
        pos_df, word_df = substitution_tables(outputs, lex)
    c = st.columns([2, 3])
    c[0].markdown("**Edits per part of speech of the seed word**")
    c[0].dataframe(pos_df, hide_index=True, width="stretch",
                   column_config={k: st.column_config.NumberColumn(k, format="%.1f %%")
                                  for k in ("passing every check %", "in flipped reviews %")})
    c[1].markdown("**Substitutions** (most frequent first)")
    c[1].dataframe(word_df, hide_index=True, width="stretch", height=260)

    st.subheader("Change in the final hidden state (t-SNE)")
    n = len(outputs["x_seed"])
    if n < 3:
        st.info(f"The map needs at least 3 generated reviews; this run has {n}.")
        return
    mtime = (info.path / "outputs.npz").stat().st_mtime
    points = hidden_change_tsne(sel.model, info.run_id, mtime, outputs)
    flipped = ["flipped" if a else "kept" for a in np.asarray(outputs["adversarial"], bool)]
    hover = [f"review {int(outputs['seed_index'][i])}: {class_name(outputs['y_seed'][i])} → "
             f"{class_name(outputs['pred_gen'][i])}" for i in range(n)]
    fig = charts.perturbation_map(points, flipped, "prediction", hover)
    event = st.plotly_chart(fig, width="stretch", key="pert_text_map", on_select="rerun",
                            selection_mode=("points", "box", "lasso"))
    picked = charts.selected_rows(fig, event.selection.points if event else [])
    if not picked:
        picked = [int(st.number_input("No point selected: click one, or pick it by number",
                                      0, n - 1, 0, key="pert_text_pick"))]
    show_pairs(outputs, np.asarray(picked[:6]), vocab, key="pert_text")
