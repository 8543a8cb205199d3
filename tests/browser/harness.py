"""Starting the dashboard and driving it in headless Chromium: shared by the browser tests and the
dashboard benchmarks (benchmarks/bench_dashboard_*.py). Localhost only; every server started
here is stopped by its process group.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

DRAWN = """[...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
           .every(e => e.querySelector('.main-svg'))"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``streamlit run dashboard/app.py`` on a free localhost port, as a user starts it."""

    def __init__(self, runs: Path, log_path: Path, env: dict | None = None,
                 root: Path = ROOT):
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "w+")
        env = {**os.environ, "RNNCON_RUNS": str(runs), "TF_CPP_MIN_LOG_LEVEL": "2",
               **(env or {})}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "dashboard/app.py",
             "--server.port", str(self.port), "--server.address", "localhost"],
            cwd=root, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.healthy_after: float | None = None

    def wait_healthy(self, timeout: float = 90) -> float:
        """Seconds from the start of the process to the health endpoint's "ok"."""
        deadline = time.perf_counter() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2).read() == b"ok":
                    self.healthy_after = time.perf_counter() - self.started
                    return self.healthy_after
            except OSError:
                pass
            if self.proc.poll() is not None or time.perf_counter() > deadline:
                self.stop()
                raise RuntimeError(f"streamlit did not start:\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def rss_mb(self) -> float:
        """Resident memory of the server process (MB), from /proc."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)     # the group this object started
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()


@contextmanager
def chromium():
    """Debian's Chromium driven by Playwright (no browser is downloaded)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def busy(page) -> bool:
    """A script or fragment run in progress: the status widget, a spinner, an element left
    stale by the run (faded; fragment runs show no status widget) or a chart not drawn yet."""
    return page.locator('[data-testid="stStatusWidget"]').count() > 0 or \
        page.locator('[data-testid="stSpinner"]').count() > 0 or \
        page.locator('[data-stale="true"]').count() > 0 or not page.evaluate(DRAWN)


def settle(page, title: str, timeout: float = 90) -> None:
    """Wait until the page shows its title and Streamlit has stopped running the script."""
    page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=timeout * 1000)
    deadline, quiet_since = time.time() + timeout, None
    while time.time() < deadline:
        if busy(page):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since > 1.5:
            return
        time.sleep(0.25)
    raise AssertionError(f"page {title!r} still running after {timeout} s")


def chart_drawn(key: str) -> str:
    """A JS predicate: the Plotly chart with this Streamlit key has drawn its SVG."""
    return f"!!document.querySelector('.st-key-{key} .main-svg')"


def wait_chart(page, key: str, timeout: float = 120) -> None:
    page.wait_for_function(chart_drawn(key), timeout=timeout * 1000, polling=100)


def no_traceback(page, where: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception on {where}"
    body = page.locator("body").inner_text()
    assert "Traceback" not in body, f"traceback on {where}"


def exceptions(page) -> int:
    return page.locator('[data-testid="stException"]').count()


# ---------------------------------------------------------------- several sessions at once

def open_sessions(browser, url: str, path: str, n: int, width: int = 1280) -> list:
    """n new browser sessions (one context each) navigating to url/path at the same time;
    returns [(context, page, started)] without waiting for the pages to draw."""
    out = []
    for _ in range(n):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(180_000)
        out.append((ctx, page, time.perf_counter()))
        page.goto(f"{url}/{path}", wait_until="commit")
    return out


def wait_all(sessions: list, predicate: str, timeout: float = 180) -> list[float]:
    """Poll every session until the JS ``predicate`` holds; seconds from each session's start
    (index order). Raises after ``timeout`` with how many were still waiting."""
    times: list[float | None] = [None] * len(sessions)
    deadline = time.perf_counter() + timeout
    while None in times:
        for i, (_, page, started) in enumerate(sessions):
            if times[i] is None:
                try:
                    ok = page.evaluate(predicate)
                except Exception:  # noqa: BLE001 - a page still loading its scripts
                    ok = False
                if ok:
                    times[i] = time.perf_counter() - started
        if time.perf_counter() > deadline:
            raise AssertionError(f"{times.count(None)} of {len(sessions)} sessions did not "
                                 f"show it within {timeout} s")
        time.sleep(0.05)
    return times


def chart_title_has(key: str, text: str) -> str:
    """A JS predicate: the chart with this key is drawn and its title contains ``text``."""
    return (f"(() => {{ const t = document.querySelector('.st-key-{key} .gtitle'); "
            f"return !!t && t.textContent.includes({text!r}); }})()")


def move_threshold(sessions: list, key: str = "cov_threshold", presses: int = 1) -> float:
    """Press → on the threshold slider of every session, one after the other; returns the
    time of the first press (perf_counter)."""
    first = None
    for _, page, _ in sessions:
        thumb = page.locator(f'.st-key-{key} input[type="range"]')
        thumb.focus()
        if first is None:
            first = time.perf_counter()
        for _ in range(presses):
            thumb.press("ArrowRight")
    return first


def close_sessions(sessions: list) -> None:
    for ctx, _, _ in sessions:
        ctx.close()
