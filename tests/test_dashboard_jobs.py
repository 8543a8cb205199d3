"""The dashboard's job glue: worker threads, the run store as the truth, cards, cancel."""
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the dashboard package
from dashboard import jobs  # noqa: E402
from rnncon_core.errors import InputError  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setattr("rnncon_core.runs.RUNS_DIR", tmp_path)
    return tmp_path


def counting_job(store, n=5, pause=0.02, gate: threading.Event | None = None, crash_at=None):
    """A real job on the real store: n steps, progress after each, cancellable."""
    with store.start("generate", model="tiny", method="count", config={"n": n}) as run:
        for i in range(n):
            if gate is not None:
                gate.wait(5)
            run.check_cancel()
            if crash_at == i:
                raise ValueError("boom at step %d" % i)
            time.sleep(pause)
            run.progress(i + 1, n, f"step {i + 1}")
        run.finish({"n": n})


def wait(job, timeout=10):
    job.thread.join(timeout)
    assert not job.thread.is_alive()


def test_a_job_runs_in_a_thread_and_its_card_follows_the_store(runs_dir):
    gate = threading.Event()
    job = jobs.start("generate", "count to 5", counting_job, n=5, gate=gate)
    assert job.thread.name != threading.current_thread().name
    deadline = time.time() + 5
    while job.run_id is None and time.time() < deadline:
        time.sleep(0.01)
    card = jobs.card_for_job(job)
    assert card.state == "running" and card.run_id == job.run_id and card.done == 0
    gate.set()
    wait(job)
    card = jobs.card_for_job(job)
    assert card.state == "finished" and (card.done, card.total) == (5, 5)
    assert card.fraction == 1.0 and card.ident == job.job_id
    info = RunStore(runs_dir).get(job.run_id)      # the store is the truth
    assert info.status == "finished" and info.summary == {"n": 5}


def test_a_crash_shows_on_its_own_card_and_others_finish():
    bad = jobs.start("generate", "crasher", counting_job, n=5, crash_at=2)
    good = jobs.start("generate", "fine", counting_job, n=3)
    wait(bad)
    wait(good)
    bad_card, good_card = jobs.card_for_job(bad), jobs.card_for_job(good)
    assert bad_card.state == "failed" and "boom at step 2" in bad_card.error
    assert "Traceback" not in bad_card.error
    assert bad_card.done == 2                        # what it had done is kept
    assert good_card.state == "finished"


def test_an_error_before_the_run_exists_is_shown():
    def refuse(store, **kw):
        raise InputError("no seeds: ask for at least one")
    job = jobs.start("generate", "refused", refuse)
    wait(job)
    card = jobs.card_for_job(job)
    assert card.state == "failed" and card.run_id is None
    assert card.error == "no seeds: ask for at least one"


def test_cancel_goes_through_the_store():
    gate = threading.Event()
    job = jobs.start("generate", "to cancel", counting_job, n=50, gate=gate)
    deadline = time.time() + 5
    while job.run_id is None and time.time() < deadline:
        time.sleep(0.01)
    jobs.cancel(job.run_id)
    gate.set()
    wait(job)
    assert jobs.card_for_job(job).state == "cancelled"
    jobs.cancel(job.run_id)                          # not running any more: no error


def test_cards_list_this_sessions_jobs_then_runs_started_elsewhere(runs_dir):
    mine = jobs.start("generate", "mine", counting_job, n=2)
    wait(mine)
    other = RunStore(runs_dir).start("generate", model="m", method="rconc")   # another process
    RunStore(runs_dir).start("retrain", model="m")                            # another kind
    cards = jobs.cards("generate", [mine.job_id, "unknown-id"])
    assert [c.title.split(" · ")[0] for c in cards] == ["mine", "rconc"]
    assert cards[1].title.endswith(" on m")
    assert cards[0].mine and not cards[1].mine and cards[1].run_id == other.run_id
    assert cards[1].origin.startswith("outside this dashboard")
    assert cards[1].state == "running"
    other.progress(3, 4)
    assert jobs.cards("generate", [])[0].done == 3


def test_cards_are_per_model_and_a_retrainings_children_have_none(runs_dir):
    parent = RunStore(runs_dir).start("retrain", model="m", method="rconc")
    RunStore(runs_dir).children_of(parent.run_id).start("generate", model="m", method="pgd")
    other = RunStore(runs_dir).start("generate", model="other", method="nc")
    assert [c.run_id for c in jobs.cards("generate", [])] == [other.run_id]
    assert jobs.cards("generate", [], model="m") == []
    job = jobs.start("generate", "on tiny", counting_job, n=1)
    job.model = "tiny"
    wait(job)
    assert [c.title for c in jobs.cards("generate", [job.job_id], model="other")][:1] != \
        ["on tiny"]
    assert jobs.cards("generate", [job.job_id], model="tiny")[0].title == "on tiny"


def test_started_by_says_who_only_when_true(runs_dir):
    job = jobs.start("generate", "j", counting_job, n=1)
    job.session = "tab-1"
    wait(job)
    assert jobs.started_by(job.run_id, session="tab-1") == ""
    assert jobs.started_by(job.run_id, session="tab-2").startswith("another tab")
    elsewhere = RunStore(runs_dir).start("generate", model="m")
    assert jobs.started_by(elsewhere.run_id, session="tab-1").startswith("outside")


def test_a_card_says_what_its_progress_counts(runs_dir):
    """A campaign in seconds said "20 of 600", which a user could not read as time."""
    from rnncon_core.campaign.record import parse_budget, report_progress

    from rnncon_core.campaign.queue import FaultSet
    two = FaultSet()
    two.add(x=np.zeros((2, 1)), root=np.array([0, 1]), label=np.array([0, 0]),
            pred=np.array([1, 2]), state=np.array([0, 0]))

    class Camp:
        faults, calls = two, 3000

        def coverage(self):
            return 0.5

        def elapsed(self):
            return 20.4
    store = RunStore(runs_dir)
    for budget, said in (("10m", "20 of 600 s"), ("12000calls", "3,000 of 12,000 model calls")):
        run = store.start("campaign", model="m")
        report_progress(run, Camp(), parse_budget(budget), None)
        card = jobs.card_for_run(store.get(run.run_id), "c", mine=True)
        assert card.count == said
    run = store.start("generate", model="m")
    run.progress(8, 40)                                   # a run that names no unit
    assert jobs.card_for_run(store.get(run.run_id), "g", mine=True).count == "8 of 40"


def test_eta_from_the_pace_so_far():
    assert jobs.eta_seconds(10.0, 2, 10) == pytest.approx(40.0)
    assert jobs.eta_seconds(10.0, 0, 10) is None
    assert jobs.eta_seconds(5.0, 10, 10) == 0.0


def test_eta_from_the_recent_batches_leaves_the_start_up_out():
    """8 s of start-up (model, first trace), then a batch of 10 every 2 s: after 3 of 10
    batches the pace so far says 32.7 s are left, the recent batches say 14 s (the truth)."""
    pace = jobs.Pace()
    assert pace.observe("r", 0, now=0.0) is None                # starting: no rate yet
    assert pace.observe("r", 10, now=10.0) is None              # one batch: not yet
    pace.observe("r", 10, now=11.0)                             # polled again, no change
    pace.observe("r", 20, now=12.0)
    rate = pace.observe("r", 30, now=14.0)
    assert rate == pytest.approx(5.0)                           # items per second
    assert jobs.eta_seconds(14.0, 30, 100, rate) == pytest.approx(14.0)
    assert jobs.eta_seconds(14.0, 30, 100) == pytest.approx(14.0 * 70 / 30)
    card = jobs.Card("t", "running", done=30, total=100, elapsed=14.0, rate=rate)
    assert card.eta == pytest.approx(14.0)
    # before two batches: from the first batch's pace over the run's own time (not the loading)
    first = jobs.Card("t", "running", done=10, total=100, elapsed=40.0, busy=10.0)
    assert first.eta == pytest.approx(90.0)
    assert jobs.Card("t", "running", done=0, total=100, elapsed=10.0).eta is None


def test_a_finished_run_keeps_its_card_in_a_new_session(runs_dir):
    """A reload is a new session with no jobs of its own: the run it watched (running when it
    was started elsewhere) keeps its card after it ends, finished; RECENT_SECONDS later not."""
    store = RunStore(runs_dir)
    run = store.start("generate", model="m", method="rconc")
    assert [c.state for c in jobs.cards("generate", [])] == ["running"]
    run.progress(4, 4)
    run.finish({"n_seeds": 4})
    cards = jobs.cards("generate", [])
    assert [(c.state, c.run_id) for c in cards] == [("finished", run.run_id)]
    later = time.time() + jobs.RECENT_SECONDS + 5
    assert jobs.cards("generate", [], now=later) == []


def test_partial_runs_are_never_the_default(runs_dir):
    from rnncon_core.reports import results
    store = RunStore(runs_dir)
    done = store.start("generate", model="m", method="rconc")
    done.finish({"n_seeds": 4})
    cut = store.start("generate", model="m", method="rconc")
    cut.progress(12, 40)
    cut.fail("JobCancelled: stop", status="cancelled")
    runs = store.list(kind="generate")
    assert runs[0].run_id == cut.run_id                          # the newest is the partial
    assert results.default_run(runs) == done.run_id
    assert results.default_run(runs[:1]) is None                 # only partial: none chosen
    assert not results.complete(runs[0]) and "partial" in results.run_label(runs[0])
    assert "after 12 of 40" in results.partial_note(runs[0])
    retrain = store.start("retrain", model="m")
    retrain.finish({"repeats": 3, "repeats_done": 2})
    assert not results.complete(store.get(retrain.run_id))


def test_job_parameters_may_share_names_with_the_glues_own():
    seen = {}

    def fn(store, **kw):
        seen.update(kw)
    job = jobs.start("generate", "named", fn, target="lstm_1", kind="x", label="y", fn="z")
    wait(job)
    assert seen == {"target": "lstm_1", "kind": "x", "label": "y", "fn": "z"}


def test_streamlit_no_longer_clears_the_keras_session_after_each_run():
    import keras
    from streamlit.runtime.scriptrunner import script_runner
    from dashboard import runtime
    assert runtime.keep_keras_session()
    first = keras.layers.Dense(1).name
    script_runner._clean_problem_modules()            # what Streamlit calls after each run
    second = keras.layers.Dense(1).name
    assert second != first                  # clear_session would have reset the counter
    assert script_runner._clean_problem_modules is runtime._clean_without_keras


def test_a_multi_line_error_becomes_one_line():
    def crash(store):
        raise TypeError("in user code:\n\n    File \"x.py\", line 3\n\nTypeError: bad thing")
    job = jobs.start("generate", "multi", crash)
    wait(job)
    card = jobs.card_for_job(job)
    assert card.error == "TypeError: bad thing"
    assert "File" not in card.error and "\n" not in card.error


def test_one_store_per_root_shared_and_the_run_id_comes_back_by_callback(runs_dir):
    assert jobs.store() is jobs.store() and jobs.store().root == runs_dir
    seen = []

    def two_runs(store):
        assert type(store) is RunStore                 # the engine gets a plain store
        for _ in range(2):
            with store.start("generate", model="tiny", method="count") as run:
                seen.append(run.run_id)
                run.finish()
    job = jobs.start("generate", "two", two_runs)
    wait(job)
    assert job.run_id == seen[0] and len(set(seen)) == 2   # the first run is the job's


def test_a_store_calls_on_start_with_each_run_it_starts(tmp_path):
    started = []
    store = RunStore(tmp_path, on_start=started.append)
    run = store.start("generate", model="tiny")
    assert [r.run_id for r in started] == [run.run_id]
    assert RunStore(tmp_path).start("generate").run_id not in [r.run_id for r in started]


def test_the_server_skips_streamlits_full_garbage_collection_after_each_run():
    """.streamlit/config.toml turns off runner.postScriptGC (a full gc.collect after every
    script and fragment run: about 0.3 s with TensorFlow loaded, under the interpreter lock);
    the option must still exist in this Streamlit, or the setting silently does nothing."""
    import tomllib

    from streamlit import config
    root = Path(__file__).resolve().parents[1]
    settings = tomllib.loads((root / ".streamlit" / "config.toml").read_text())
    assert settings["runner"]["postScriptGC"] is False
    assert "runner.postScriptGC" in config._config_options_template


def test_stop_all_cancels_running_jobs_and_keeps_their_outputs(runs_dir):
    gate = threading.Event()

    def stuck(store):           # a job that never checks for cancel while the server stops
        with store.start("generate", model="tiny", method="slow") as run:
            run.append_npz("outputs", seed_index=[0, 1])
            run.progress(2, 10)
            gate.wait(10)
            run.check_cancel()
    job = jobs.start("generate", "stuck", stuck)
    while job.run_id is None or not (RunStore(runs_dir).get(job.run_id).path
                                     / "outputs.part00000.npz").exists():
        time.sleep(0.01)
    t = time.perf_counter()
    assert jobs.stop_all(grace=0.2, reason="test stop") == 1
    assert time.perf_counter() - t < 2
    info = RunStore(runs_dir).get(job.run_id)
    assert info.status == "cancelled" and "test stop" in info.error
    assert info.load_npz("outputs")["seed_index"].tolist() == [0, 1]
    gate.set()
    wait(job)
    assert RunStore(runs_dir).get(job.run_id).status == "cancelled"


def test_the_exit_watcher_never_starts_outside_a_real_server():
    from dashboard import shutdown
    assert shutdown.start() is False         # no Streamlit server here: pytest's exit stands


def test_a_signal_ends_the_server_at_once_unless_a_job_runs(runs_dir, monkeypatch):
    """The wrapped SIGINT / SIGTERM handler: no running job, the process ends in the handler
    (no wait for the runtime, whose stop a thread importing TensorFlow can hold for seconds);
    a running job, Streamlit's handler stops the server and the watcher cancels the job."""
    from dashboard import shutdown
    exits, passed = [], []
    monkeypatch.setattr(shutdown, "exit_now", lambda code=0: exits.append(code))
    shutdown.on_signal(2, None, prev=lambda *a: passed.append(a))
    assert exits == [0] and passed == []
    gate = threading.Event()
    job = jobs.start("generate", "waits", counting_job, n=2, gate=gate)
    while job.run_id is None:
        time.sleep(0.01)
    exits.clear()
    shutdown.on_signal(15, None, prev=lambda *a: passed.append(a))
    assert exits == [] and passed == [(15, None)]
    gate.set()
    wait(job)


def test_a_generation_card_moves_seed_by_seed(runs_dir, tmp_path):
    """A 6-seed batch of a real generation run: the card, read from the store while the run
    works, counts the seeds as they finish (never 0 -> 6 at once, never back)."""
    import keras
    from rnncon_core.jobs import run_generation
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(6),
                              keras.layers.Dense(10, activation="softmax")])
    path = tmp_path / "tiny.keras"
    model.save(path)
    store, seen = RunStore(runs_dir), []

    def progress(done, total):
        (info,) = store.list(status="running")
        seen.append(jobs.card_for_run(info, "pgd", True).done)
    run_generation(str(path), "pgd", 6, store=store, batch_size=6, eps=0.3, step=0.01,
                   iterations=40, progress=progress)
    assert seen == sorted(seen) and seen[-1] == 6 and any(0 < d < 6 for d in seen), seen
