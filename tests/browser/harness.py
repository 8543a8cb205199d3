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
    """``python -m dashboard`` on a free localhost port, as `make run` starts it."""

    def __init__(self, runs: Path, log_path: Path, env: dict | None = None,
                 root: Path = ROOT):
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "w+")
        env = {**os.environ, "RNNCON_RUNS": str(runs), "TF_CPP_MIN_LOG_LEVEL": "2",
               **(env or {})}
        self.started = time.perf_counter()
        # `python -m dashboard` as `make run`; `streamlit run dashboard/app.py` where there is
        # no dashboard/__main__.py (a bare app, an older checkout)
        serve = (Path(root) / "dashboard" / "__main__.py").exists()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *(["dashboard"] if serve else
                                     ["streamlit", "run", "dashboard/app.py"]),
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


def _procs() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, name, CPU seconds so far) of every process (Linux /proc)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                text = (d / "stat").read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            f = text[text.rindex(")") + 2:].split()
            out[int(d.name)] = (int(f[1]), name, (int(f[11]) + int(f[12])) / tick)
    return out


def cpu_seconds(root: int, name: str | None = None) -> float:
    """CPU seconds used so far by ``root`` and the live processes under it (only those whose
    name contains ``name``, when given): the server's share, or the browser's."""
    procs, total, seen = _procs(), 0.0, set()
    for pid in procs:
        chain, p = [], pid
        while p in procs and p not in seen and p != root and p > 1:
            chain.append(p)
            p = procs[p][0]
        if p == root or p in seen:
            seen.update(chain)
    seen.add(root)
    for pid in seen:
        if pid in procs and (name is None or name in procs[pid][1]):
            total += procs[pid][2]
    return total


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
    """A JS predicate: the chart with this Streamlit key (a Plotly chart, or an inline SVG in a
    container with this key) has drawn its SVG."""
    return f"!!document.querySelector('.st-key-{key} :is(.main-svg, svg[role=img])')"


def wait_chart(page, key: str, timeout: float = 120) -> None:
    page.wait_for_function(chart_drawn(key), timeout=timeout * 1000, polling=100)


def images_drawn(key: str) -> str:
    """A JS predicate: the images inside the element with this Streamlit key are loaded."""
    return (f"(() => {{ const im = [...document.querySelectorAll('.st-key-{key} img')]; "
            f"return im.length > 0 && im.every(i => i.complete && i.naturalWidth > 0); }})()")


def wait_images(page, key: str, timeout: float = 120) -> None:
    page.wait_for_function(images_drawn(key), timeout=timeout * 1000, polling=100)


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


_WATCH = """([name, ms]) => {
    const seen = (window.__rnnconSeen = window.__rnnconSeen || {});
    if (name in seen) return;
    seen[name] = null;
    const check = () => { try { return !!(PREDICATE); } catch (e) { return false; } };
    const id = setInterval(() => { if (check()) { seen[name] = Date.now(); clearInterval(id); } },
                           ms);
}"""


def watch(sessions: list, predicate: str, interval_ms: int = 50) -> str:
    """Start a watcher in each session's page that notes the time (Date.now()) when the JS
    ``predicate`` first holds, checked every ``interval_ms`` by the page itself: the driver
    then reads the result a few times a second instead of asking every page 20 times a second
    (those round trips cost CPU on the cores the tabs share). Returns the watcher's name."""
    name = f"w{time.perf_counter_ns()}"
    for _, page, _ in sessions:
        _install(page, name, predicate, interval_ms)
    return name


def _install(page, name: str, predicate: str, interval_ms: int) -> None:
    try:
        page.evaluate(_WATCH.replace("PREDICATE", predicate), [name, interval_ms])
    except Exception:  # noqa: BLE001 - a page between documents: installed on the next read
        pass


def wait_all(sessions: list, predicate: str, timeout: float = 180, name: str | None = None,
             interval_ms: int = 50) -> list[float]:
    """Seconds from each session's start (its ``started``, perf_counter) until the JS
    ``predicate`` held in its page (index order), from the watcher ``name`` (one started
    now if None). Raises after ``timeout`` with how many were still waiting."""
    name = name or watch(sessions, predicate, interval_ms)
    to_epoch = time.time() - time.perf_counter()
    times: list[float | None] = [None] * len(sessions)
    deadline = time.perf_counter() + timeout
    while None in times:
        for i, (_, page, started) in enumerate(sessions):
            if times[i] is None:
                try:       # -1: no watcher in this document, 0: not yet, else Date.now()
                    seen = page.evaluate(f"(s => {name!r} in s ? (s[{name!r}] || 0) : -1)"
                                         f"(window.__rnnconSeen || {{}})")
                except Exception:  # noqa: BLE001 - a page between documents
                    seen = 0
                if seen > 0:
                    times[i] = seen / 1000 - to_epoch - started
                elif seen < 0:
                    _install(page, name, predicate, interval_ms)   # a new document: again
        if time.perf_counter() > deadline:
            raise AssertionError(f"{times.count(None)} of {len(sessions)} sessions did not "
                                 f"show it within {timeout} s")
        if None in times:
            time.sleep(0.25)
    return times


def chart_title_has(key: str, text: str) -> str:
    """A JS predicate: the chart with this key is drawn and its title contains ``text``."""
    return (f"(() => {{ const t = document.querySelector('.st-key-{key} .gtitle') || "
            f"document.querySelector('.st-key-{key} svg[aria-label]'); "
            f"return !!t && (t.getAttribute('aria-label') || t.textContent).includes({text!r});"
            f" }})()")


def move_threshold(sessions: list, key: str = "cov_threshold", presses: int = 1) -> list:
    """Press → on the threshold slider of every session, one after the other; returns the
    sessions with each one's start replaced by the time of its own (last) key press: one
    driver presses them in turn, so on a loaded machine the last press comes a second or
    more after the first."""
    out = []
    for ctx, page, _ in sessions:
        thumb = page.locator(f'.st-key-{key} input[type="range"]')
        thumb.focus()
        for _ in range(presses):
            pressed = time.perf_counter()
            thumb.press("ArrowRight")
        out.append((ctx, page, pressed))
    return out


def close_sessions(sessions: list) -> None:
    for ctx, _, _ in sessions:
        ctx.close()


# ---------------------------------------------------------------- the server alone

def protocol_round(url: str, path: str, key: str, n: int, threshold: float | None = None,
                   slider: str = "cov_threshold", timeout: float = 120) -> list[dict]:
    """n sessions that speak Streamlit's websocket protocol as a browser tab does (open the
    page, move the slider) but draw nothing: what the server alone costs. For each session, in
    seconds: ``shown`` (from its connection to the delta that carries the chart ``key``: a Plotly
    chart, or what a container with that key holds),
    ``finished`` (the script run's end), ``bytes`` received, and with ``threshold`` ``settled``
    (from sending the slider's new value, all sessions at once, to the chart's new delta)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    work = lambda: asyncio.run(asyncio.wait_for(                        # noqa: E731
        _protocol_round(url, path, key, n, threshold, slider), timeout))
    with ThreadPoolExecutor(1) as pool:         # its own event loop (Playwright runs one here)
        return pool.submit(work).result()


async def _protocol_round(url, path, key, n, threshold, slider_key) -> list[dict]:
    import asyncio

    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    moved = asyncio.Event()

    async def until_finished(ws, out: dict, since: float, name: str) -> None:
        """Read messages until the script (or fragment) run ends; note the chart's delta (a
        Plotly chart with this key, or an element inside a container with this key)."""
        inside = None                   # the delta path of the container with this key
        while True:
            raw = await ws.recv()
            out["bytes"] = out.get("bytes", 0) + len(raw)
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            path = list(msg.metadata.delta_path)
            if kind == "delta" and msg.delta.WhichOneof("type") == "add_block" and \
                    msg.delta.add_block.id.endswith(key):
                inside = path
            if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                which = el.WhichOneof("type")
                chart = (which == "plotly_chart" and key in el.plotly_chart.id) or \
                    (inside is not None and path[:len(inside)] == inside)
                if chart and name not in out:
                    out[name] = time.perf_counter() - since
                if which == "slider" and slider_key in el.slider.id:
                    out["_slider"] = (el.slider.id, msg.delta.fragment_id)
            elif kind == "script_finished":
                return

    async def one(out: dict) -> None:
        started = time.perf_counter()
        async with websockets.connect(stream, subprotocols=["streamlit"], max_size=None) as ws:
            msg = BackMsg()
            msg.rerun_script.page_name = path
            await ws.send(msg.SerializeToString())
            await until_finished(ws, out, started, "shown")
            out["finished"] = time.perf_counter() - started
            if threshold is None or "_slider" not in out:
                return
            await moved.wait()                       # every session moves at the same moment
            widget, fragment = out["_slider"]
            msg = BackMsg()
            msg.rerun_script.page_name = path
            msg.rerun_script.fragment_id = fragment
            state = msg.rerun_script.widget_states.widgets.add()
            state.id = widget
            state.double_array_value.data.append(threshold)
            sent = time.perf_counter()
            await ws.send(msg.SerializeToString())
            await until_finished(ws, out, sent, "settled")

    outs = [{} for _ in range(n)]
    tasks = [asyncio.create_task(one(o)) for o in outs]
    while threshold is not None and sum("finished" in o for o in outs) < n:
        if any(t.done() and t.exception() for t in tasks):
            break
        await asyncio.sleep(0.02)
    moved.set()
    await asyncio.gather(*tasks)
    for o in outs:
        o.pop("_slider", None)
    return outs
