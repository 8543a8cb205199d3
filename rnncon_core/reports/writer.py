"""One writer for every report's files, one JSON encoder for NumPy types, one versions block.

    files = write_files(out_dir, {"table2.csv": rows, "generation.json": report,
                                  "README.md": markdown}, report="generation")

writes each file atomically (a reader never sees half a file), by its extension: ``.json``
(NumPy scalars and arrays and paths converted), ``.csv`` (a DataFrame, or a list of dicts
written as they are) and anything else as UTF-8 text, then ``provenance.json`` beside them
(which report, when, the package versions and the git commit of the code). The run store
(``runs.py``), the model cards (``zoo.py``), the CLI's ``--json`` and the HTML reports use the
same encoder and versions, from ``rnncon_core.io``.
"""
from __future__ import annotations

import csv
import io
import subprocess
import time
from pathlib import Path
from typing import Any

from ..io import atomic_write_bytes, to_json, versions

def _commit() -> str | None:
    """The git commit of this code (with ``+dirty`` when files differ from it), or None."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no", "--", "rnncon_core"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def provenance(report: str) -> dict:
    """The block every report folder carries: which report, when, with which code."""
    return {"report": report, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": _commit(), "versions": versions()}


def _encode(name: str, content: Any, float_format: str | None) -> bytes:
    if name.endswith(".json"):
        return (to_json(content, indent=2) + "\n").encode()
    if name.endswith(".csv"):
        buf = io.StringIO(newline="")
        if hasattr(content, "to_csv"):                       # a DataFrame
            content.to_csv(buf, index=False, float_format=float_format)
        else:                                                # rows: a list of dicts
            # every row's columns, in order of appearance (rows of an earlier version lack
            # the newer columns: left empty)
            w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in content
                                                                  for k in r)))
            w.writeheader()
            w.writerows(content)
        return buf.getvalue().encode()
    return str(content).encode()


def write_files(out_dir: str | Path, files: dict[str, Any], report: str,
                float_format: str | None = None) -> list[str]:
    """Write ``files`` (name -> content) under ``out_dir`` and the report's ``provenance.json``;
    returns the paths written. An empty list of CSV rows writes no file. ``float_format``:
    pandas' format for the DataFrames' floats (default: full precision)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in {**files, "provenance.json": provenance(report)}.items():
        if name.endswith(".csv") and not hasattr(content, "to_csv") and not content:
            continue
        atomic_write_bytes(out / name, _encode(name, content, float_format))
        written.append(str(out / name))
    return written
