"""Uploaded models and data sets: kept in the run store's folder (``uploads/<digest>/<file>``,
under runs/ or RNNCON_RUNS), so they survive a restart, the model picker offers them again and
the URL names them by digest; shown by name and digest, never by their server path."""
from __future__ import annotations

import re
from pathlib import Path

from rnncon_core import runs


def upload_dir() -> Path:
    """Where uploads are kept: ``uploads/<digest>/<file>`` in the server's run store (runs/
    or RNNCON_RUNS), so they survive a restart and the runs made with them find them again."""
    return Path(runs.RUNS_DIR) / "uploads"


MODEL_SUFFIXES = (".keras", ".onnx")


def uploaded_models() -> dict[str, str]:
    """The models uploaded so far (newest first): path -> label."""
    root = upload_dir()
    found = [p for p in root.glob("*/*") if p.suffix.lower() in MODEL_SUFFIXES] \
        if root.is_dir() else []
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return {str(p): upload_label(str(p)) for p in found}


def upload_digest(path: str | None) -> str | None:
    """The digest folder of an uploaded file (None for anything else)."""
    if not path:
        return None
    p = Path(path)
    try:
        p.resolve().relative_to(upload_dir().resolve())
    except (ValueError, OSError):
        return None
    return p.parent.name


def upload_label(path: str) -> str:
    """How an uploaded file is shown: its name and a short digest, never its server path."""
    return f"upload: {Path(path).name} · {upload_digest(path)[:8]}"


def find_upload(digest: str, suffixes=MODEL_SUFFIXES) -> str | None:
    """The uploaded file (a model, or with ``suffixes=(".npz",)`` a data set) in the folder
    named by ``digest`` (a URL's ``upload:<digest>``), or None."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", digest or ""):
        return None
    folder = upload_dir() / digest
    hits = sorted(p for p in folder.glob("*") if p.suffix.lower() in suffixes) \
        if folder.is_dir() else []
    return str(hits[0]) if hits else None


def data_label(name: str | None) -> str:
    """A data set's name as the pages show it (an uploaded .npz by its file name)."""
    if name and upload_digest(name):
        return upload_label(name)
    return name or "—"


def public(text: str) -> str:
    """``text`` with every uploaded file's server path replaced by its label."""
    root = str(upload_dir().resolve())
    return re.sub(re.escape(root) + r"/[0-9a-f]+/[A-Za-z0-9._-]+",
                  lambda m: upload_label(m.group()), str(text))
