"""rnncon_core.io, the ground floor: atomic writes with unique temporary names, the JSON
encoder, file hashes."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from rnncon_core import io


def test_atomic_write_leaves_no_temporary_file_and_makes_the_folder(tmp_path):
    target = tmp_path / "a" / "b" / "x.json"
    io.atomic_write_json(target, {"v": np.float32(0.5), "p": Path("/p"), "s": {2, 1}})
    assert json.loads(target.read_text()) == {"v": 0.5, "p": "/p", "s": [1, 2]}
    assert sorted(os.listdir(target.parent)) == ["x.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "x.txt"
    io.atomic_write_text(target, "old")

    def fail(f):
        f.write(b"half")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError):
        io.atomic_write(target, fail)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["x.txt"]


def test_writers_of_one_file_never_share_a_temporary_name(tmp_path, monkeypatch):
    """Two threads writing the same file at once: each writes its own temporary file (a fixed
    name such as x.tmp would let one move the other's half-written file into place)."""
    target = tmp_path / "x.bin"
    names, barrier = [], threading.Barrier(2)
    real = io.tempfile.mkstemp

    def spy(**kw):
        fd, name = real(**kw)
        names.append(name)
        return fd, name
    monkeypatch.setattr(io.tempfile, "mkstemp", spy)

    def write(data):
        def slow(f):
            barrier.wait(timeout=5)         # both temporary files exist now
            f.write(data)
        io.atomic_write(target, slow)
    threads = [threading.Thread(target=write, args=(bytes([i]) * 1000,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 2 and all(Path(n).parent == tmp_path for n in names)
    assert target.read_bytes() in (b"\1" * 1000, b"\2" * 1000)
    assert os.listdir(tmp_path) == ["x.bin"]


def test_npz_round_trips(tmp_path):
    for compressed in (True, False):
        p = io.atomic_write_npz(tmp_path / f"s{compressed}.npz", {"a": np.arange(3)}, compressed)
        with np.load(p) as z:
            assert z["a"].tolist() == [0, 1, 2]


def test_file_sha256_is_the_file_hash_and_follows_changes(tmp_path):
    p = tmp_path / "m.keras"
    p.write_bytes(b"one")
    assert io.file_sha256(p) == hashlib.sha256(b"one").hexdigest()
    os.utime(p, ns=(1, 1))
    p.write_bytes(b"two!")                   # another size and time: hashed again
    assert io.file_sha256(p) == hashlib.sha256(b"two!").hexdigest()
    assert io.model_sha256(p) == io.file_sha256(p)
    assert io.model_sha256(tmp_path / "absent.keras") is None


def test_to_json_refuses_unknown_objects():
    with pytest.raises(TypeError):
        io.to_json(object())
