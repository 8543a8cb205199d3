"""Off the scripted path, in a real headless Chromium (issue 26's demo walk): a generation, a
retraining of it (whose held-out sets must never become anyone's default), every default
checked after it, imdb-lstm picked and the page reloaded (the view stays in the URL), a second
tab on the same link, and Ctrl-C (the server ends within 2 s). Every request the pages make
must stay on localhost. Slow (a retraining runs): `pytest -m slow tests/browser`.
"""
import os
import re
import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
from harness import CHROMIUM, Server, chromium, no_traceback, settle  # noqa: E402
from test_dashboard_browser import pick, shown_run  # noqa: E402
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

FINISHED = re.compile(r"^(finished in|failed:)")
pytestmark = [
    pytest.mark.browser, pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not (zoo.model_path("mnist-lstm").exists()
                            and zoo.model_path("imdb-lstm").exists()),
                       reason="needs the shipped mnist-lstm and imdb-lstm (assets/models)"),
]


def fill(page, values: dict) -> None:
    for label, value in values.items():
        box = page.get_by_label(label, exact=True)
        box.fill(str(value))
        box.press("Tab")


def go(page, url: str, path: str, title: str) -> None:
    page.goto(f"{url}/{path}")
    settle(page, title, timeout=240)
    no_traceback(page, title)


@pytest.mark.timeout(1800)
def test_off_script_walk_retrain_defaults_reload_second_tab_ctrl_c(tmp_path):
    runs = tmp_path / "runs"
    srv = Server(runs, tmp_path / "streamlit.log")
    outside: list[str] = []
    try:
        srv.wait_healthy()
        with chromium() as b:
            ctx = b.new_context(viewport={"width": 1280, "height": 1000})
            ctx.on("request", lambda r: outside.append(r.url)
                   if urlparse(r.url).hostname not in ("localhost", "127.0.0.1")
                   and not r.url.startswith(("data:", "blob:")) else None)
            page = ctx.new_page()
            page.set_default_timeout(240_000)
            walk(page, srv.url, runs)
            # the second tab on the same link: the same model, not the default one
            link = page.url
            assert "model=imdb-lstm" in link, link
            other = ctx.new_page()
            other.set_default_timeout(240_000)
            other.goto(link)
            settle(other, "Coverage", timeout=240)
            assert "Model: imdb-lstm" in other.locator('[data-testid="stSidebar"]').inner_text()
            assert not outside, outside                      # nothing left this machine
            t = time.perf_counter()
            os.killpg(srv.proc.pid, signal.SIGINT)
            srv.proc.wait(30)
            took = time.perf_counter() - t
        print(f"\nCtrl-C after the walk: the server exited after {took:.2f} s")
        assert took <= 2.0
    finally:
        srv.stop()


def walk(page, url: str, runs: Path) -> None:
    # a generation, then a retraining with it (small: held-out sets of a few seeds)
    go(page, url, "generate", "Generate")
    fill(page, {"Seeds": 16, "Iterations": 3})
    page.get_by_role("textbox", name="Name of the run (optional)").fill("demo source")
    page.get_by_role("button", name="Start").click()
    page.get_by_text(FINISHED).first.wait_for(timeout=600_000)
    store = RunStore(runs)
    source = store.list(kind="generate")[0]
    assert source.status == "finished" and source.name == "demo source"
    if not (source.summary or {}).get("n_adversarial"):
        pytest.skip("the 16-seed run found no adversarial input: nothing to retrain with")
    go(page, url, "retrain", "Retrain")
    assert "demo source" in shown_run(page, "retrain_from")
    fill(page, {"Epochs per retraining": 1, "Repeats": 1, "Inputs for RConC": 50,
                "Held-out seeds per method": 8})
    page.get_by_role("button", name="Start retraining").click()
    page.locator('[class*="st-key-card-retrain"]').get_by_text(FINISHED).first.wait_for(
        timeout=1_200_000)
    retraining = store.list(kind="retrain")[0]
    assert retraining.status == "finished", retraining.error
    children = store.list(parent=retraining.run_id)
    assert children, "the held-out sets are stored as the retraining's children"
    kids = [c.run_id[-6:] for c in children]

    # every default after it: the user's own run, never a held-out set
    page.reload()
    settle(page, "Retrain", timeout=240)
    shown = shown_run(page, "retrain_from")
    assert source.run_id[-6:] in shown and not any(k in shown for k in kids), shown
    go(page, url, "generate", "Generate")
    # one card: the user's own job (a new session since: it says so, truly); none for the
    # held-out sets the retraining generated
    cards = page.locator('[class*="st-key-card-generate"]')
    assert cards.count() == 1, [cards.nth(i).inner_text() for i in range(cards.count())]
    card = cards.first.inner_text()
    assert "demo source" in card and "another tab (or this one before a reload)" in card, card
    shown = shown_run(page, "gen_show")
    assert source.run_id[-6:] in shown and not any(k in shown for k in kids), shown
    go(page, url, "perturbations", "Perturbations")
    assert not any(k in shown_run(page, "pert_run") for k in kids)
    go(page, url, "gates", "Gates")
    page.get_by_text("a seed vs its adversarial input").click()
    settle(page, "Gates", timeout=240)
    assert not any(k in shown_run(page, "gates_run") for k in kids)
    go(page, url, "runs", "Runs")
    compare = page.locator(".st-key-runs_compare").inner_text()
    assert not any(k in compare for k in kids), compare

    # imdb-lstm, then a reload: the view stays (model in the URL), the one-unit note shows
    go(page, url, "", "Models")
    pick(page, "models_pick", "imdb-lstm")
    page.locator('[data-testid="stSidebar"]').get_by_text("imdb-lstm", exact=True).first \
        .wait_for(timeout=240_000)
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Coverage", exact=True).click()
    settle(page, "Coverage", timeout=300)
    page.reload()
    settle(page, "Coverage", timeout=300)
    assert "Model: imdb-lstm" in page.locator('[data-testid="stSidebar"]').inner_text()
    assert page.get_by_text("One-unit output").count() >= 1
    no_traceback(page, "Coverage on imdb-lstm after a reload")
