"""Seed review and generated review side by side, changed words marked (for the dashboard).

``side_by_side(seed_words, gen_words)`` gives plain data (each word with its status:
``same``, ``replaced``, ``deleted`` on the seed side, ``inserted`` on the generated side;
``checked=True`` adds the checks each edit failed, :func:`rnncon_core.text.lexical.check_edits`);
``to_html(view)`` renders it as a two-column HTML table (words escaped) for
``st.html`` / ``st.markdown(..., unsafe_allow_html=True)``.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np

from ..textdiff import align
from .lexical import check_edits

STATUS_STYLE = {
    "replaced": "background:#fde68a;border-radius:3px;padding:0 2px",
    "deleted": "background:#fecaca;text-decoration:line-through;border-radius:3px;padding:0 2px",
    "inserted": "background:#bbf7d0;border-radius:3px;padding:0 2px",
}
FAILED_STYLE = "outline:2px solid #dc2626;"


def side_by_side(seed_words: Sequence[str], gen_words: Sequence[str],
                 checked: bool = False) -> dict:
    """Both reviews as lists of {"word", "status"} plus the counts; with ``checked``, edited
    words also carry ``"failed"`` (the checks their edit failed) and the view ``"valid"``."""
    seed, gen, changed = [], [], 0
    for tag, i1, i2, j1, j2 in align(seed_words, gen_words):
        if tag == "equal":
            seed += [{"word": w, "status": "same"} for w in seed_words[i1:i2]]
            gen += [{"word": w, "status": "same"} for w in gen_words[j1:j2]]
            continue
        changed += max(i2 - i1, j2 - j1)
        old = "replaced" if tag == "replace" else "deleted"
        new = "replaced" if tag == "replace" else "inserted"
        seed += [{"word": w, "status": old} for w in seed_words[i1:i2]]
        gen += [{"word": w, "status": new} for w in gen_words[j1:j2]]
    n = len(seed_words)
    out = {"seed": seed, "generated": gen, "words_changed": changed, "n_words": n,
           "share_changed": changed / n if n else 0.0}
    if checked:
        res = check_edits(seed_words, gen_words)
        for e in res["edits"]:
            if not e["failed"]:
                continue
            if e["kind"] == "substitution":
                seed[e["position"]]["failed"] = gen[e["gen_position"]]["failed"] = e["failed"]
            elif e["kind"] == "deletion":
                seed[e["position"]]["failed"] = e["failed"]
            else:
                gen[e["position"]]["failed"] = e["failed"]
        out["valid"] = res["valid"]
        out["failed_edits"] = sum(bool(e["failed"]) for e in res["edits"])
    return out


def ids_side_by_side(lexicon, x_seed_row: np.ndarray, x_gen_row: np.ndarray,
                     checked: bool = False) -> dict:
    """The same from two padded id rows (OOV words show as ``<unk>``)."""
    return side_by_side(lexicon.words_of(x_seed_row)[0], lexicon.words_of(x_gen_row)[0],
                        checked)


def _words_html(items: list[dict]) -> str:
    out = []
    for it in items:
        w = html.escape(it["word"])
        style = STATUS_STYLE.get(it["status"])
        title = it["status"]
        if it.get("failed"):
            style = FAILED_STYLE + (style or "")
            title += ": failed " + ", ".join(it["failed"])
            w += f'<sup style="color:#dc2626">✗ {html.escape(", ".join(it["failed"]))}</sup>'
        out.append(f'<span style="{style}" title="{html.escape(title)}">{w}</span>'
                   if style else w)
    return " ".join(out)


def to_html(view: dict, titles: tuple[str, str] = ("Seed review", "Generated review")) -> str:
    """A two-column table: the seed with replaced/deleted words marked, the generated review
    with replaced/inserted words marked, and a caption with the number of words changed."""
    a, b = (html.escape(t) for t in titles)
    caption = (f"{view['words_changed']} of {view['n_words']} words changed "
               f"({100 * view['share_changed']:.1f} %)")
    if "valid" in view:
        caption += (" · every edit passed the checks" if view["valid"] else
                    f" · {view['failed_edits']} edit(s) failed a check (outlined in red)")
    cell = 'style="vertical-align:top;padding:6px;width:50%;line-height:1.6"'
    return ('<table style="width:100%;border-collapse:collapse">'
            f'<caption style="caption-side:bottom;text-align:left">{caption}</caption>'
            f"<tr><th>{a}</th><th>{b}</th></tr>"
            f"<tr><td {cell}>{_words_html(view['seed'])}</td>"
            f"<td {cell}>{_words_html(view['generated'])}</td></tr></table>")
