"""The run store: statuses, atomic files, cancellation across processes, concurrent writers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from rnncon_core.errors import InputError, JobCancelled
from rnncon_core.runs import RunStore


def test_finished_run_roundtrip(tmp_path):
    store = RunStore(tmp_path)
    with store.start("generate", model="mnist-lstm", method="rconc", config={"n": 3}) as run:
        run.progress(1, 3, "batch 1")
        run.save_npz("outputs", seed_index=np.arange(3), x_gen=np.zeros((3, 2, 2)))
        run.save_json("summary", {"n_seeds": 1, "partial": True})
        assert store.get(run.run_id).summary == {"n_seeds": 1, "partial": True}
        run.finish({"n_seeds": 3, "adv_rate": 0.5})
    info = store.get(run.run_id)
    assert info.status == "finished"
    assert info.summary == {"n_seeds": 3, "adv_rate": 0.5}
    assert info.config == {"n": 3}
    assert info.progress()["done"] == 1
    assert set(info.files()) >= {"config.json", "versions.json", "model.json", "progress.json",
                                 "outputs.npz", "summary.json"}
    assert info.load_npz("outputs")["seed_index"].tolist() == [0, 1, 2]
    assert info.load_json("versions")["numpy"] == np.__version__
    row = info.to_dict()
    assert set(row) == {"run_id", "kind", "status", "model", "method", "created", "summary"}
    assert [r.run_id for r in store.list(kind="generate")] == [run.run_id]
    assert store.list(kind="retrain") == []
    # no temporary files left behind
    assert not [p for p in info.path.iterdir() if p.name.endswith(".tmp")]


def test_crash_keeps_partial_outputs(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(ZeroDivisionError):
        with store.start("generate", model="m") as run:
            run.save_npz("outputs", seed_index=np.arange(2))
            1 / 0
    info = store.get(run.run_id)
    assert info.status == "failed"
    assert "ZeroDivisionError" in info.error
    assert "ZeroDivisionError" in (info.path / "error.txt").read_text()
    assert info.load_npz("outputs")["seed_index"].tolist() == [0, 1]


def test_cancel_marks_cancelled(tmp_path):
    store = RunStore(tmp_path)
    run = store.start("generate")
    assert not run.cancel_requested()
    RunStore(tmp_path).request_cancel(run.run_id)     # another handle on the same store
    assert run.cancel_requested()
    with pytest.raises(JobCancelled):
        with run:
            run.check_cancel()
    assert store.get(run.run_id).status == "cancelled"
    with pytest.raises(InputError, match="not running"):
        store.request_cancel(run.run_id)


def test_cancel_from_another_process(tmp_path):
    store = RunStore(tmp_path)
    run = store.start("generate")
    code = (f"from rnncon_core.runs import RunStore; "
            f"RunStore({str(tmp_path)!r}).request_cancel({run.run_id!r})")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert run.cancel_requested()
    run.finish({})


def test_dead_process_is_marked_failed(tmp_path):
    store = RunStore(tmp_path)
    code = (f"import os; from rnncon_core.runs import RunStore; "
            f"r = RunStore({str(tmp_path)!r}).start('generate'); print(r.run_id); os._exit(0)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    info = store.get(out.stdout.strip())
    assert info.status == "failed"
    assert "ended without finishing" in info.error


def test_unknown_run(tmp_path):
    with pytest.raises(InputError, match="no run"):
        RunStore(tmp_path).get("nope")


def test_threads_write_at_once(tmp_path):
    store = RunStore(tmp_path)
    errors = []

    def job(i):
        try:
            with store.start("generate", method=f"m{i}") as run:
                for k in range(5):
                    run.progress(k, 5)
                    run.check_cancel()
                run.finish({"i": i})
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    runs = store.list()
    assert len(runs) == 8 and {r.status for r in runs} == {"finished"}
    assert sorted(r.summary["i"] for r in runs) == list(range(8))


def test_runs_cli_json(tmp_path):
    store = RunStore(tmp_path)
    with store.start("generate", model="m", method="fgsm") as run:
        run.finish({"adv_rate": 1.0})
    env = dict(os.environ, RNNCON_RUNS=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "rnncon_core", "runs", "--json"], env=env,
                         capture_output=True, text=True, check=True)
    obj = json.loads(out.stdout)
    assert obj["runs"][0]["run_id"] == run.run_id
    assert obj["runs"][0]["status"] == "finished"
    assert obj["runs"][0]["summary"] == {"adv_rate": 1.0}
