"""One parsed value per command: the user's .npz is read and checked once in `rnncon coverage`,
however many steps (the preflight check, the inputs, their kind, a profile's training split)
ask for it."""
from __future__ import annotations

import json

import numpy as np
import pytest


def test_coverage_reads_the_users_data_set_once(tiny_lstm, tmp_path, capsys, monkeypatch):
    from rnncon_core import data, paths
    from rnncon_core.cli import main
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "cache")
    rng = np.random.default_rng(0)
    x = rng.random((24, 5, 3)).astype(np.float32)
    y = rng.integers(0, 2, 24)
    np.savez(tmp_path / "mine.npz", x_train=x[:16], y_train=y[:16], x_test=x[16:],
             y_test=y[16:], kind=np.array("sequence"))
    tiny_lstm.save(tmp_path / "tiny.keras")
    reads = []
    real = data._read_dataset            # the file's one reader (read_dataset keeps its result)
    monkeypatch.setattr(data, "_read_dataset", lambda *a, **k: reads.append(a) or real(*a, **k))
    with pytest.raises(SystemExit) as e:     # kmnc: a profile from the training split too
        main(["coverage", "--model", str(tmp_path / "tiny.keras"), "--dataset",
              str(tmp_path / "mine.npz"), "--criterion", "kmnc", "--json"])
    out = capsys.readouterr()
    assert e.value.code == 0, out.err
    assert json.loads(out.out)["n_inputs"] == 8
    assert len(reads) == 1
