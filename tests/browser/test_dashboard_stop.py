"""Ctrl-C stops the server within 2 s after use: a page opened (the warm-up and the page's
models loaded), a generation job running, then SIGINT to the server's process group as a
terminal sends it. The running job's run is marked cancelled with the seeds it had finished."""
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
from harness import CHROMIUM, Server, chromium, settle  # noqa: E402
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                       reason="needs the shipped mnist-lstm (assets/models)"),
]


@pytest.mark.timeout(600)
def test_ctrl_c_stops_the_server_within_2_s_and_cancels_the_running_job(tmp_path):
    runs = tmp_path / "runs"
    srv = Server(runs, tmp_path / "streamlit.log")
    try:
        srv.wait_healthy()
        with chromium() as b:
            page = b.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(240_000)
            page.goto(f"{srv.url}/generate")
            settle(page, "Generate", timeout=240)
            for label, value in (("Seeds", 400), ("Iterations", 2)):
                box = page.get_by_label(label, exact=True)
                box.fill(str(value))
                box.press("Tab")
            page.get_by_role("button", name="Start").click()
            page.get_by_text(re.compile(r"^running: [1-9]")).first.wait_for()
            t = time.perf_counter()
            os.killpg(srv.proc.pid, signal.SIGINT)
            srv.proc.wait(30)
            took = time.perf_counter() - t
        print(f"\nCtrl-C during a job: the server exited after {took:.2f} s")
        assert took <= 2.0, srv.log()[-2000:]
        assert srv.proc.returncode == 0 and "Aborted!" not in srv.log(), srv.log()[-2000:]
        run = RunStore(runs).list(kind="generate")[0]
        assert run.status == "cancelled", (run.status, run.error)
        assert (run.summary or {}).get("n_seeds", 1) > 0 or run.load_npz("outputs") is not None
    finally:
        srv.stop()


@pytest.mark.timeout(300)
@pytest.mark.skipif(not zoo.model_path("imdb-lstm").exists(), reason="needs the shipped imdb-lstm")
@pytest.mark.parametrize("after", [1.5, 2.2, 3.0])
def test_ctrl_c_while_the_first_page_loads_tensorflow(tmp_path, after):
    """SIGINT ``after`` seconds into the first page on imdb-lstm, when the page and the warm-up
    import TensorFlow and load the IMDB model and data (an import holds the interpreter for
    up to 1.6 s at a stretch on two loaded cores): the server ends within 2 s all the same."""
    srv = Server(tmp_path / "runs", tmp_path / "streamlit.log")
    try:
        srv.wait_healthy()
        with chromium() as b:
            page = b.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{srv.url}/?model=imdb-lstm", wait_until="commit")
            time.sleep(after)
            t = time.perf_counter()
            os.killpg(srv.proc.pid, signal.SIGINT)
            srv.proc.wait(30)
            took = time.perf_counter() - t
        print(f"\nCtrl-C {after} s into the first page: the server exited after {took:.2f} s")
        assert took <= 2.0, srv.log()[-2000:]
        assert srv.proc.returncode == 0, srv.log()[-2000:]
    finally:
        srv.stop()


@pytest.mark.timeout(120)
def test_ctrl_c_before_any_page_stops_cleanly(tmp_path):
    """`make run`, then Ctrl-C with no browser ever connected: "Stopping...", exit code 0
    (uvicorn re-raises the signal after its shutdown; `python -m dashboard` takes it)."""
    srv = Server(tmp_path / "runs", tmp_path / "streamlit.log")
    try:
        srv.wait_healthy()
        os.killpg(srv.proc.pid, signal.SIGINT)
        srv.proc.wait(30)
        assert srv.proc.returncode == 0, srv.log()[-2000:]
        assert "Stopping..." in srv.log() and "Aborted!" not in srv.log(), srv.log()[-2000:]
    finally:
        srv.stop()
