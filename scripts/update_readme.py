"""Rewrite the generated blocks of README.md from what the code measured (model cards).

Usage: .venv/bin/python scripts/update_readme.py   (run after training; CI never edits README)
"""
from __future__ import annotations

import re
from pathlib import Path

from rnncon_core.zoo import models_table, read_card

README = Path(__file__).resolve().parent.parent / "README.md"


def models_block() -> str:
    lines = ["| model | architecture | params | #neurons | #cons (paper's convention) | "
             "#cons (real) | test acc. ours | paper |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in models_table():
        p = r["paper"]
        card = read_card(r["name"])
        ours = (f"{100 * r['test_accuracy']:.2f} % ({card['epochs_run']} ep., "
                f"{card['training_seconds'] / 60:.0f} min)" if r["test_accuracy"] is not None
                else "not trained")
        paper = f"{p['accuracy']:.2f} %" if p["accuracy"] is not None else "-"
        lines.append(f"| {r['name']} | {r['architecture']} | {r['params']:,} | "
                     f"{r['neurons']:,} | {r['cons_paper_convention']:,} | "
                     f"{r['contributions_total']:,} | {ours} | {paper} |")
    feat = read_card("mnist-features")
    if feat:
        lines.append(f"\nFID/IS feature network (`mnist-features`, a small CNN on the same split): "
                     f"{100 * feat['test_accuracy']:.2f} % test accuracy.")
    return "\n".join(lines)


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(\n<!-- END {name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no '<!-- BEGIN {name} -->' block")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


if __name__ == "__main__":
    text = README.read_text()
    text = replace_block(text, "MODELS", models_block())
    README.write_text(text)
    print("README.md: models table updated")
