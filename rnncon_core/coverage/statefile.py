"""A criterion's state in a file: one .npz archive with the state's arrays, the
configuration and the model's fingerprint (``save``, ``load``; ``--save-state`` /
``--state``), and the checks made before long work (``check_writable``, ``check_state``)."""
from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io import atomic_write_npz
from ..io import check_writable as probe_writable
from ..registry import CRITERIA
from ..trace import fingerprint


def check_writable(path, what: str = "the coverage state") -> "Path":
    """``path`` as a Path a coverage state can be written to (``io.check_writable``: not a
    folder, its folder writable or makeable, probed without leaving anything), or an
    InputError naming it: call it before long work whose result goes there."""
    return probe_writable(path, what)


def check_state(path) -> "Path":
    """A saved coverage state (``--state``) read and checked as a file before the work (the
    criterion and model are checked when it is loaded): its path, or an InputError."""
    path = Path(path)
    if not path.exists() and path.with_suffix(".npz").is_file():
        path = path.with_suffix(".npz")          # saved by an older version (it added .npz)
    read_state(path)
    return path


def read_state(path) -> tuple[dict, dict]:
    """(meta, state arrays) of a saved coverage state, or an InputError saying what is wrong
    with the file (missing, not an archive, truncated, no or broken meta)."""
    if not path.is_file():
        raise InputError(f"no coverage state file {path}" if not path.exists() else
                         f"{path} is not a file: give a coverage state saved by --save-state")
    bad = f"{path} is not a coverage state saved by rnncon (--save-state / statefile.save)"
    try:
        f = np.load(path, allow_pickle=False)
        if not hasattr(f, "files"):
            raise InputError(f"{bad}: it holds one array, not an archive")
        with f:
            if "meta" not in f.files:
                raise InputError(f"{bad}: it has no meta record")
            meta = json.loads(str(f["meta"]))
            arrays = {k[len("state/"):]: f[k] for k in f.files if k.startswith("state/")}
    except InputError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise InputError(f"{bad}: the archive is truncated or damaged "
                         f"({type(e).__name__})") from None
    except (OSError, ValueError, KeyError, RecursionError) as e:
        why = "not an .npz archive" if "pickle" in str(e) else \
            f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        raise InputError(f"{bad} ({why})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict) \
            or not isinstance(meta.get("criterion"), str) or "fingerprint" not in meta:
        raise InputError(f"{bad}: its meta record lacks the criterion, config or fingerprint")
    return meta, arrays


def save(crit, path) -> Path:
    """One .npz archive at exactly ``path`` (whatever its suffix: ``x.state`` writes
    ``x.state``): the state's arrays, the configuration and the model's fingerprint.
    An unwritable path is an InputError (:func:`check_writable` tells before the work)."""
    path = check_writable(path)
    meta = {"criterion": crit.name, "config": crit.get_config(),
            "fingerprint": fingerprint(crit.tracer), "n_inputs": crit.n_inputs,
            "format": 1}
    arrays = {f"state/{k}": v for k, v in crit.state().items()}
    try:            # written through a file object: numpy adds no suffix
        return atomic_write_npz(path, {"meta": np.array(json.dumps(meta)), **arrays})
    except OSError as e:
        raise InputError(f"cannot write the coverage state {path} "
                         f"({e.strerror or e})") from None


def load(model, path, cls=None):
    """A criterion with the state saved by ``save`` (on the same model: its weights'
    fingerprint must match): of class ``cls``, or (None) the class the file names. A file
    that is not such a state (truncated, not an archive, its meta missing or broken) is
    an InputError."""
    path = Path(path)
    if not path.exists() and path.with_suffix(".npz").is_file():
        path = path.with_suffix(".npz")      # saved by an older version (it added .npz)
    meta, arrays = read_state(path)
    klass = CRITERIA.get(meta.get("criterion")) if cls is None else cls
    if klass is None or klass.name != meta.get("criterion"):
        raise InputError(f"{path} holds a {meta.get('criterion')!r} state, not "
                         f"{getattr(cls, 'name', '')!r}")
    crit = klass.from_config(model, {k: v for k, v in meta["config"].items()})
    if fingerprint(crit.tracer) != meta["fingerprint"]:
        raise InputError(f"{path} was saved on another model (fingerprint "
                         f"{meta['fingerprint']}); load it with the model it was made on")
    try:
        crit.load_state(arrays)
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise InputError(f"{path} is a damaged coverage state (its arrays do not fit the "
                         f"{klass.name} state: {type(e).__name__}); save it again") from None
    return crit
