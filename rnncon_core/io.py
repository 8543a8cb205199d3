"""The ground floor: writing files safely, one JSON encoder, version info, file hashes.

Every module that writes a file a reader may open at the same time (the run store, the data
caches, profiles, saved criteria, model cards, reports) writes it here, atomically: into a
temporary file with a unique name in the same folder, then ``os.replace`` onto the target, so
a reader sees the old file or the new one, never half of one, and two processes writing the
same file never share a temporary name. This module imports nothing from the package except
``paths``.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import paths

# key -> distributions that may provide it (the first one installed wins)
_DISTRIBUTIONS = {"tensorflow": ("tensorflow-cpu", "tensorflow"), "keras": ("keras",),
                  "numpy": ("numpy",), "rnncon": ("rnncon-test",)}


# ---------------------------------------------------------------- atomic writes

def atomic_write(path: str | Path, write: Callable, durable: bool = True) -> Path:
    """Write through ``write(file)`` (a binary file object) to a unique temporary file in
    ``path``'s folder, then move it onto ``path``. The folder is made if missing.
    ``durable=False`` skips the fsync: the file still survives the process being killed
    (the page cache holds it), not a crash of the machine."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_bytes(path, to_json(obj, indent=2).encode())


def atomic_write_npz(path: str | Path, arrays: dict[str, np.ndarray],
                     compressed: bool = True, durable: bool = True) -> Path:
    save = np.savez_compressed if compressed else np.savez
    return atomic_write(path, lambda f: save(f, **arrays), durable)


def atomic_save_keras(model, path: str | Path) -> Path:
    """``model.save`` to a unique temporary ``.keras`` file beside ``path``, then moved onto it
    (Keras picks the format from the suffix, so the temporary name keeps it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp.keras")
    os.close(fd)
    try:
        model.save(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


# ---------------------------------------------------------------- JSON

def json_default(o: Any):
    """``json.dumps(..., default=json_default)``: NumPy scalars and arrays, paths and sets."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def to_json(obj: Any, indent: int | None = None) -> str:
    return json.dumps(obj, indent=indent, default=json_default)


# ---------------------------------------------------------------- versions

def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Python's and the packages' versions, read from the installed metadata (nothing is
    imported): python, tensorflow, keras, numpy, rnncon, then the ``extra`` distributions."""
    from importlib import metadata
    out = {"python": platform.python_version()}
    for key, dists in {**_DISTRIBUTIONS, **{d: (d,) for d in extra}}.items():
        for dist in dists:
            try:
                out[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


# ---------------------------------------------------------------- hashes

_HASHES: dict = {}


def file_sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, read in chunks; remembered per path, size and
    modification time, so a model file is hashed once per change."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def model_file(model: str | Path) -> Path | None:
    """The file behind a model name or path: ``assets/models/<name>.keras`` for a shipped
    name, else the path itself; None when neither exists."""
    for candidate in (paths.MODELS_DIR / f"{model}.keras", Path(str(model))):
        if candidate.is_file():
            return candidate
    return None


def model_sha256(model: str | Path) -> str | None:
    """sha256 of the model's file (see ``model_file``), or None when there is no file."""
    p = model_file(model)
    return file_sha256(p) if p is not None else None
