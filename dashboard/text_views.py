"""The text (IMDB) parts of the dashboard pages, so the pages speak text: class names instead of
0/1, both confidences (the Generate form comes from the declarations: forms.py), Table 2 with words
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

from dashboard import state
from rnncon_core.data import PAD, START
from rnncon_core.lazy import keras
from rnncon_core.quality import tsne_embedding
from rnncon_core.reports import charts
from rnncon_core.text.display import side_by_side, to_html
from rnncon_core.text.eda import Lexicon
from rnncon_core.text.lexical import CHECKS, PENN_TO_WN, check_edits  # the checks, declared once

CLASS_NAMES = ("negative", "positive")        # IMDB: 0 = negative review, 1 = positive
POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


def class_name(c) -> str:
    c = int(c)
    return CLASS_NAMES[c] if 0 <= c < len(CLASS_NAMES) else str(c)


# ---------------------------------------------------------------- Gates

def first_word_step(x) -> int:
    """The earliest time step holding a word in any of the id rows (N, T): the reviews are
    padded at the front, so everything before is padding and the start mark."""
    x = np.atleast_2d(np.asarray(x))
    real = (x != PAD) & (x != START)
    starts = np.where(real.any(axis=1), real.argmax(axis=1), x.shape[1])
    return int(starts.min()) if len(starts) else 0


def fold_padding(table: pd.DataFrame, x, words: list[str] | None = None) -> pd.DataFrame:
    """A Gates table (one column per time step) from the first real word of the reviews ``x``
    on; the columns keep their step numbers, and with ``words`` (one review's, in order) each
    is labelled with its word ("123 great")."""
    start = min(first_word_step(x), table.shape[1] - 1)
    out = table.iloc[:, start:]
    if words is not None and len(words) == out.shape[1]:
        out = out.set_axis([f"{c} {w}" for c, w in zip(out.columns, words)], axis=1)
    return out


def fold_toggle(key: str = "gates_fold") -> bool:
    """The Gates page's switch: fold the padding steps before the first word (on by
    default)."""
    return st.toggle("Start at the first word", value=True, key=key,
                     help="IMDB reviews are padded at the front to 500 steps: the steps before "
                          "the first word are padding (and the start mark). Off: every step.")


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
    return Lexicon(_vocab, table={})


def show_pairs(outputs: dict, rows, vocab, key: str = "gen_text",
               seed_label: str = "test review") -> None:
    """Several seed / generated pairs, changed words marked, failed checks outlined."""
    lex = lexicon(vocab, str(len(vocab.words)))
    with st.spinner("Checking the edits (WordNet, tagger and sentiment lexicon load once)…"):
        for i, (seed_cap, gen_cap) in zip(rows, captions(outputs, rows)):
            view = side_by_side(lex.words_of(outputs["x_seed"][i])[0],
                                lex.words_of(outputs["x_gen"][i])[0], checked=True)
            with st.container(border=True, key=f"{key}_{i}"):
                st.markdown(f"**seed** ({seed_label} {int(outputs['seed_index'][i])}): "
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
               "substitutions": gen_cfg.get("constraints", "none (an older run)"),
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
