"""The ground floor: writing files safely, one JSON encoder, version info, file hashes.

Every module that writes a file a reader may open at the same time (the run store, the data
caches, profiles, saved criteria, model cards, reports) writes it here, atomically: into a
temporary file with a unique name in the same folder, then ``os.replace`` onto the target, so
a reader sees the old file or the new one, never half of one, and two processes writing the
same file never share a temporary name. ``check_writable`` / ``check_writable_folder`` probe an
output path before the work whose result goes there. This module imports nothing from the
package except ``paths`` and ``errors``.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import zipfile
import zlib
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import paths
from .errors import InputError

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


# ---------------------------------------------------------------- output paths, probed

def _existing_folder(folder: Path, target: Path, what: str) -> Path:
    """The nearest folder of ``folder`` and its parents that exists (where a missing folder
    would be made), or an InputError when a file stands where a folder should be."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"{what} {target}: cannot create the folder {folder} ({probe} is a "
                         f"file, not a folder): give a path in a writable folder")
    return probe


def _probe(folder: Path, target: Path, what: str) -> None:
    """Write and remove a temporary file in ``folder`` (os.access says yes to root, and a
    read-only file system is only seen by writing), or an InputError naming ``target``."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".rnncon-probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise InputError(f"{what} {target} cannot be written ({e.strerror or e} in {folder}): "
                         f"give a path in a writable folder") from None


def check_writable(path: str | Path, what: str = "the output file") -> Path:
    """``path`` as a Path that a file can be written to, checked before the work whose result
    goes there: not a folder, its folder existing (or makeable under a folder that exists) and
    writable, probed with a temporary file that is removed; nothing is left behind. An
    InputError (one line naming ``what``, e.g. "--junit") otherwise."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise InputError(f"{what} {path} is a folder: give a file name, e.g. "
                         f"{path / 'out'}")
    if path.exists() and not path.is_file():
        raise InputError(f"{what} {path} is not a regular file (a device, pipe or socket): "
                         f"give a file name")
    _probe(_existing_folder(path.parent, path, what), path, what)
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{what} {path} cannot be written (permission denied): give a path "
                         f"in a writable folder")
    return path


def check_writable_folder(path: str | Path, what: str = "the output folder") -> Path:
    """``path`` as a Path of a folder that files can be written into (existing, or makeable
    under a folder that exists), probed as :func:`check_writable` does; nothing is left."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path} is a file, not a folder: give a folder")
    _probe(path if path.is_dir() else _existing_folder(path, path, what), path, what)
    return path


# ---------------------------------------------------------------- reading .npz archives

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")      # an archive with files, an empty one


def read_npz(path: str | Path, kind: str = "archive",
             fix: str = "save it again with numpy.savez") -> dict[str, np.ndarray]:
    """Every array of an .npz archive, read whole and without pickles, or an InputError (one
    line) that says what the file is instead: missing, a folder, a single .npy array, not an
    archive at all, truncated or damaged, or holding Python objects. ``kind`` names what the
    file should be ("data set", "checkpoint"), ``fix`` what to do."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputError(f"no {kind} file {path}" if not path.exists() else
                         f"{path} is not a file: give an .npz {kind}")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise InputError(f"{path} cannot be read ({e.strerror or e})") from None
    if head.startswith(NPY_MAGIC):
        why = "it holds one array (a .npy file), not an archive of named arrays"
    elif not head.startswith(ZIP_MAGICS):
        why = "the file is empty" if not head else "it is not an archive (no .npz header)"
    else:
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except ValueError as e:
            why = "it holds Python objects (dtype object), which are not read for safety" \
                if "pickle" in str(e) or "Object arrays" in str(e) else \
                f"damaged: {str(e).splitlines()[0][:120]}"
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error, KeyError) as e:
            why = f"truncated or damaged: {type(e).__name__}"
    raise InputError(f"{path} is not a readable .npz {kind} ({why}): {fix}")


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
