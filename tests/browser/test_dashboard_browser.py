"""End to end in a real headless Chromium: `streamlit run` on a free localhost port with its own
run store, every page opened, two browser sessions each starting a small generation job at
once, the jobs watched to the end, the gallery checked, screenshots saved.

Screenshots go to test-artifacts/; with RNNCON_SCREENSHOTS=assets/screenshots they are also
written there (the README's images). Debian's /usr/bin/chromium is driven by Playwright; no
browser is downloaded.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts"
PAGES = [("", "Models"), ("coverage", "Coverage"), ("gates", "Gates"),
         ("generate", "Generate"), ("perturbations", "Perturbations"), ("retrain", "Retrain"),
         ("runs", "Runs")]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="Debian's chromium is not installed (scripts/setup.sh installs it)"),
    pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                       reason="needs the shipped mnist-lstm (assets/models)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The dashboard as a user starts it (config from .streamlit/config.toml: localhost)."""
    runs = tmp_path_factory.mktemp("browser-runs")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("log") / "streamlit.log", "w+")
    env = {**os.environ, "RNNCON_RUNS": str(runs), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "dashboard/app.py",
                             "--server.port", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}"
    deadline = time.time() + 90
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            log.seek(0)
            proc.kill()
            pytest.fail(f"streamlit did not start:\n{log.read()[-3000:]}")
        time.sleep(0.5)
    yield url, runs
    os.killpg(proc.pid, signal.SIGTERM)       # the process group this fixture started
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


DRAWN = """[...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
           .every(e => e.querySelector('.main-svg'))"""


def settle(page, title: str, timeout: float = 90) -> None:
    """Wait until the page shows its title and Streamlit has stopped running the script."""
    page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=timeout * 1000)
    deadline, quiet_since = time.time() + timeout, None
    while time.time() < deadline:
        drawn = page.evaluate(DRAWN)
        busy = page.locator('[data-testid="stStatusWidget"]').count() > 0 or \
            page.locator('[data-testid="stSpinner"]').count() > 0 or not drawn
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since > 1.5:
            return
        time.sleep(0.25)
    raise AssertionError(f"page {title!r} still running after {timeout} s")


def no_traceback(page, where: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception on {where}"
    body = page.locator("body").inner_text()
    assert "Traceback" not in body, f"traceback on {where}"


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"{name}.png").unlink(missing_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # Streamlit scrolls inside its main container: grow the viewport to show all of it
    size = page.viewport_size
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": min(int(height) + 20, 5000)})
    time.sleep(0.5)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    target = os.environ.get("RNNCON_SCREENSHOTS")
    if target:
        dest = ROOT / target if not Path(target).is_absolute() else Path(target)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest / f"{name}.png")


def open_page(context, url: str, path: str, title: str):
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(f"{url}/{path}")
    settle(page, title)
    no_traceback(page, title)
    return page


def start_generation(page, seeds: int, iterations: int) -> None:
    for label, value in (("Seeds", seeds), ("Iterations", iterations)):
        box = page.get_by_label(label, exact=True)
        box.fill(str(value))
        box.press("Tab")
    page.get_by_role("button", name="Start").click()


def test_every_page_two_jobs_at_once_and_the_gallery(server, browser):
    url, runs = server
    for stale in ARTIFACTS.glob("failed-*.png"):
        stale.unlink()
    first = browser.new_context(viewport={"width": 1400, "height": 1000})
    second = browser.new_context(viewport={"width": 1400, "height": 1000})

    # a deep link on a fresh server gets the frame too; the threshold slider redraws at once
    page = open_page(first, url, "coverage", "Coverage")
    assert "Model: mnist-lstm" in page.locator('[data-testid="stSidebar"]').inner_text()
    rconc = page.locator('[data-testid="stMetric"]').first
    before = rconc.inner_text()
    thumb = page.locator('.st-key-cov_threshold input[type="range"]')
    thumb.focus()
    for _ in range(8):
        thumb.press("ArrowRight")                        # 0.25 -> 0.65
    page.wait_for_function("([el, old]) => el.innerText !== old",
                           arg=[rconc.element_handle(), before], timeout=30_000)
    assert thumb.get_attribute("aria-valuetext") == "0.65"
    settle(page, "Coverage")
    no_traceback(page, "Coverage after the slider")
    shoot(page, "coverage")

    # the default view: mnist-lstm with MNIST, Table 1 and a data sample
    page.goto(url)
    settle(page, "Models")
    no_traceback(page, "Models")
    page.get_by_text("Table 1: the models").wait_for()
    shoot(page, "models")

    # two sessions start a small generation job each, at the same time
    gen_a = open_page(first, url, "generate", "Generate")
    gen_b = open_page(second, url, "generate", "Generate")
    start_generation(gen_a, seeds=4, iterations=3)
    start_generation(gen_b, seeds=2, iterations=2)
    try:
        for p in (gen_a, gen_b):
            p.get_by_text(re.compile(r"^(finished in|failed:)")).first.wait_for(timeout=240_000)
            errors = p.get_by_text(re.compile(r"^failed:")).all_inner_texts()
            assert not errors, errors
            settle(p, "Generate")
            no_traceback(p, "Generate after the job")
    except Exception:
        shoot(gen_a, "failed-generate-a")
        shoot(gen_b, "failed-generate-b")
        raise
    store = RunStore(runs)
    done = store.list(kind="generate")
    assert len(done) == 2 and {r.status for r in done} == {"finished"}
    assert sorted(r.config["n_seeds"] for r in done) == [2, 4]
    # after a reload (a new session) the store still lists both runs; the newest is shown
    newest = done[0].run_id
    for p in (gen_a, gen_b):
        p.reload()
        settle(p, "Generate")
        picked = p.locator(".st-key-gen_show")
        shown = picked.inner_text() + " ".join(
            i.input_value() for i in picked.locator("input").all())
        assert newest in shown
    # the gallery: seed, generated and difference side by side (every pair, not only the
    # adversarial ones, so a run that found none still shows its pairs)
    gen_a.get_by_text("Only adversarial inputs").click()
    settle(gen_a, "Generate")
    gen_a.get_by_text("Seed, generated input and their difference").first.wait_for()
    no_traceback(gen_a, "Generate gallery")
    shoot(gen_a, "generate")

    for path, title in PAGES:
        if path in ("", "coverage", "generate"):
            continue
        p = open_page(first, url, path, title)
        if path == "gates" and any(r.summary["n_adversarial"] for r in done):
            p.get_by_text("a seed vs its adversarial input").click()      # Figure 12
            settle(p, title)
            p.get_by_text(re.compile("seed vs adversarial")).first.wait_for()
            no_traceback(p, "Gates, seed vs adversarial")
        shoot(p, path)
        p.close()
    first.close()
    second.close()
