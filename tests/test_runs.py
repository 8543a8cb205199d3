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
    assert set(row) == {"run_id", "kind", "status", "model", "method", "created", "summary",
                        "parent", "name", "tags"}
    assert (row["parent"], row["name"], row["tags"]) == (None, None, [])
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


# ---------------------------------------------------------------- faults and repair

def _cli(args, capsys):
    """`rnncon ...` in this process: (exit code, stdout, stderr)."""
    from rnncon_core.cli import main
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_corrupt_index_is_one_clear_error_and_repair_rebuilds_it(tmp_path, capsys):
    from rnncon_core.errors import RunStoreError
    from rnncon_core.runs import repair_store
    store = RunStore(tmp_path)
    with store.start("generate", model="m", method="fgsm", config={"method": "fgsm"}) as run:
        run.finish({"adv_rate": 0.5})
    done = run.run_id
    with pytest.raises(ZeroDivisionError):
        with store.start("retrain", model="m") as run:
            1 / 0
    crashed = run.run_id
    run = store.start("generate", model="m", method="pgd", config={"method": "pgd"})
    with pytest.raises(JobCancelled):
        with run:
            raise JobCancelled("stop")
    cancelled = run.run_id
    (tmp_path / "index.sqlite").write_bytes(b"this is not a database" * 100)
    for side in ("index.sqlite-wal", "index.sqlite-shm"):
        (tmp_path / side).unlink(missing_ok=True)
    with pytest.raises(RunStoreError) as e:
        RunStore(tmp_path).list()
    assert str(tmp_path / "index.sqlite") in str(e.value) and "--repair" in str(e.value)
    code, out, err = _cli(["runs", "--runs-dir", str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "--repair" in err
    code, out, err = _cli(["runs", "--repair", "--runs-dir", str(tmp_path), "--json"], capsys)
    assert code == 0, err
    rep = json.loads(out)["repair"]
    assert rep["recovered"] == 3 and rep["moved_aside"]
    runs = {r.run_id: r for r in RunStore(tmp_path).list()}
    assert runs[done].status == "finished" and runs[done].summary == {"adv_rate": 0.5}
    assert runs[done].method == "fgsm" and runs[done].model == "m" and runs[done].kind == "generate"
    assert runs[crashed].status == "failed" and "ZeroDivisionError" in runs[crashed].error
    assert runs[cancelled].status == "cancelled"
    assert repair_store(tmp_path)["recovered"] == 0        # a sound index: nothing to add


def test_unwritable_store_is_one_clear_error(tmp_path, capsys):
    from rnncon_core.errors import RunStoreError
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RunStoreError, match="cannot be written.*--runs-dir"):
        RunStore(blocker / "runs")
    code, out, err = _cli(["runs", "--runs-dir", str(blocker / "runs")], capsys)
    assert code == 2 and str(blocker / "runs") in err and "Traceback" not in err


def test_reused_process_id_is_not_alive(tmp_path):
    """A run is alive only while the process that started it runs: same id and start time."""
    store = RunStore(tmp_path)
    run = store.start("generate")
    assert store.get(run.run_id).status == "running"
    # the recorded process id now belongs to a process that started at another time
    store._execute("UPDATE runs SET proc_start = '1' WHERE run_id = ?", (run.run_id,))
    info = store.get(run.run_id)
    assert info.status == "failed" and "ended without finishing" in info.error
    assert json.loads((info.path / "status.json").read_text())["status"] == "failed"


def test_mark_failed_delete_and_cancel_json(tmp_path, capsys):
    store = RunStore(tmp_path)
    stuck = store.start("generate", model="m")
    code, out, err = _cli(["runs", "--delete", stuck.run_id, "--runs-dir", str(tmp_path)], capsys)
    assert code == 2 and "--cancel" in err and "running" in err
    code, out, err = _cli(["runs", "--cancel", stuck.run_id, "--json", "--runs-dir",
                           str(tmp_path)], capsys)
    assert code == 0 and json.loads(out) == {"run_id": stuck.run_id, "action": "cancel",
                                             "status": "running", "cancel_requested": True}
    # a live run (this process) is never marked failed or deleted, not even with --force
    for action in ("--mark-failed", "--delete"):
        code, out, err = _cli(["runs", action, stuck.run_id, "--force", "--runs-dir",
                               str(tmp_path)], capsys)
        assert code == 2 and "is alive" in err and "--cancel" in err
        assert store.get(stuck.run_id).status == "running" and stuck.path.is_dir()
    # a run started on another host: its process cannot be checked here, so only --force
    store._execute("UPDATE runs SET host = 'elsewhere' WHERE run_id = ?", (stuck.run_id,))
    code, out, err = _cli(["runs", "--mark-failed", stuck.run_id, "--runs-dir",
                           str(tmp_path)], capsys)
    assert code == 2 and "--force" in err and "elsewhere" in err
    code, out, err = _cli(["runs", "--mark-failed", stuck.run_id, "--force", "--json",
                           "--runs-dir", str(tmp_path)], capsys)
    assert code == 0 and json.loads(out)["status"] == "failed"
    assert store.get(stuck.run_id).error == "marked failed by hand"
    stuck.finish({"n": 1})          # the job ending later does not turn it back to finished
    assert store.get(stuck.run_id).status == "failed"
    code, out, err = _cli(["runs", "--mark-failed", stuck.run_id, "--runs-dir", str(tmp_path)],
                          capsys)
    assert code == 2 and "not running" in err
    code, out, err = _cli(["runs", "--delete", stuck.run_id, "--json", "--runs-dir",
                           str(tmp_path)], capsys)
    assert code == 0 and json.loads(out)["status"] == "deleted"
    assert store.list() == [] and not stuck.path.exists()


def test_retraining_source_run_checks(tmp_path):
    """A run generated for another model is refused (force overrides); a partial run gives a
    note. Models are told apart by their file's sha256 where both are files."""
    from rnncon_core.runs import check_source_run
    a, b = tmp_path / "a.keras", tmp_path / "b.keras"
    a.write_bytes(b"model a")
    b.write_bytes(b"model b")
    store = RunStore(tmp_path / "runs")
    with store.start("generate", model=str(a), method="fgsm") as run:
        run.finish({"n_seeds": 3})
    info = store.get(run.run_id)
    assert check_source_run(info, str(a)) is None
    with pytest.raises(InputError, match="another model|not .*b.keras.*--force"):
        check_source_run(info, str(b))
    assert check_source_run(info, str(b), force=True) is None
    same_bytes = tmp_path / "copy.keras"
    same_bytes.write_bytes(b"model a")                 # the same model under another path
    assert check_source_run(info, str(same_bytes)) is None
    with pytest.raises(ZeroDivisionError):
        with store.start("generate", model=str(a), method="fgsm") as run:
            run.save_json("summary", {"n_seeds": 2, "partial": True})
            1 / 0
    note = check_source_run(store.get(run.run_id), str(a))
    assert "failed (partial)" in note and "2 finished seeds" in note


def test_an_index_from_before_start_times_is_upgraded(tmp_path):
    import sqlite3
    con = sqlite3.connect(tmp_path / "index.sqlite")
    con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT "
                "NULL, model TEXT, method TEXT, created TEXT NOT NULL, updated TEXT NOT NULL, "
                "summary TEXT, error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, pid "
                "INTEGER, host TEXT)")
    con.execute("INSERT INTO runs (run_id, kind, status, created, updated) VALUES "
                "('20260101-000000-generate-abcdef', 'generate', 'finished', 't', 't')")
    con.commit()
    con.close()
    store = RunStore(tmp_path)
    assert [r.status for r in store.list()] == ["finished"]
    with store.start("generate") as run:
        run.finish({})
    assert store.get(run.run_id).status == "finished"


def test_append_npz_writes_each_row_once_and_reads_as_one(tmp_path):
    """Outputs saved batch by batch are appended (never rewritten); the parts read as one
    array until the whole is saved, which replaces them."""
    from rnncon_core.runs import RunStore
    store = RunStore(tmp_path)
    with store.start("generate", model="m", method="pgd", config={}) as run:
        run.append_npz("outputs", x=np.zeros((2, 3)), y=np.array([0, 1]))
        run.append_npz("outputs", x=np.ones((1, 3)), y=np.array([2]))
        got = store.get(run.run_id).load_npz("outputs")
        assert got["x"].shape == (3, 3) and got["y"].tolist() == [0, 1, 2]
        run.save_npz("outputs", x=np.ones((3, 3)), y=np.array([5, 6, 7]))
        assert sorted(p.name for p in run.path.glob("outputs*")) == ["outputs.npz"]
        assert store.get(run.run_id).load_npz("outputs")["y"].tolist() == [5, 6, 7]
        run.finish({"ok": True})


def test_threads_opening_a_fresh_store_at_once_all_start_their_runs(tmp_path):
    """Two dashboard jobs starting together on a fresh store: opening it switches the index to
    WAL, which could fail at once with 'database is locked' (no busy wait) in one of them."""
    import threading
    errors = []
    for trial in range(20):
        root = tmp_path / f"store{trial}"

        def work():
            try:
                with RunStore(root).start("generate", model="t", method="m", config={}) as run:
                    run.finish({"n": 1})
            except Exception as e:          # noqa: BLE001 - any failure is the bug
                errors.append(repr(e))
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_a_removed_run_stops_its_job_with_one_line(tmp_path):
    """A job whose run folder was removed stops at its next write with one RunStoreError."""
    import shutil

    from rnncon_core.errors import RunStoreError
    store = RunStore(tmp_path)
    with pytest.raises(RunStoreError, match="was removed while it ran"):
        with store.start("generate") as run:
            run.progress(1, 3)
            shutil.rmtree(run.path)
            run.progress(2, 3)
    assert not run.path.exists()


def test_ctrl_c_marks_the_run_cancelled_and_keeps_its_outputs(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with store.start("generate") as run:
            run.append_npz("outputs", x=np.zeros((2, 3)))
            raise KeyboardInterrupt
    info = store.get(run.run_id)
    assert info.status == "cancelled" and "interrupted" in info.error
    assert info.load_npz("outputs")["x"].shape == (2, 3)


def test_parent_name_and_tags_are_kept_and_filtered(tmp_path):
    from rnncon_core.runs import display_name, repair_store
    store = RunStore(tmp_path).named("  baseline   run ", tags="demo, mnist,demo")
    with store.start("retrain", model="m", method="rconc") as parent:
        kid = store.children_of(parent.run_id).start("generate", model="m", method="pgd")
        kid.finish({"n_seeds": 1})
    top = RunStore(tmp_path).start("generate", model="m", method="nc")
    info = store.get(parent.run_id)
    assert (info.name, info.tags, info.parent) == ("baseline run", ("demo", "mnist"), None)
    assert store.get(kid.run_id).parent == parent.run_id and store.get(kid.run_id).name is None
    assert [r.run_id for r in store.list(parent=parent.run_id)] == [kid.run_id]
    assert kid.run_id not in {r.run_id for r in store.list(children=False)}
    assert display_name(info).startswith("baseline run [demo, mnist] · ")
    assert display_name(store.get(top.run_id)).startswith("nc · ")
    assert display_name(RunStore(tmp_path).get(parent.run_id)).startswith("baseline")
    store.label(top.run_id, "second", ["x"])
    assert store.get(top.run_id).name == "second"
    with pytest.raises(InputError, match="80 characters"):
        store.label(top.run_id, "n" * 81)
    # a lost index is rebuilt with the relations (they live in the run folders too)
    (tmp_path / "index.sqlite").write_bytes(b"garbage")
    repair_store(tmp_path)
    again = RunStore(tmp_path)
    assert again.get(kid.run_id).parent == parent.run_id
    assert again.get(parent.run_id).tags == ("demo", "mnist")


def test_an_old_index_gains_the_new_columns(tmp_path):
    import sqlite3
    con = sqlite3.connect(tmp_path / "index.sqlite")
    con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT "
                "NULL, model TEXT, method TEXT, created TEXT NOT NULL, updated TEXT NOT NULL, "
                "summary TEXT, error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, "
                "pid INTEGER, host TEXT)")
    con.execute("INSERT INTO runs (run_id, kind, status, created, updated) VALUES "
                "('20260101-000000-generate-abcdef', 'generate', 'finished', "
                "'2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')")
    con.commit()
    con.close()
    store = RunStore(tmp_path)
    old = store.get("20260101-000000-generate-abcdef")
    assert (old.parent, old.name, old.tags) == (None, None, ())
    assert [r.run_id for r in store.list(children=False)] == [old.run_id]
