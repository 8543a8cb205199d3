"""The Campaign page walked as a demo would (issue 41): start a campaign, reload mid-run, cancel,
resume, reload after the end. At each step the job card, the metrics, the picker and the
fault groups say the same counts and status; across the whole walk the browser console shows
no error and the server log no traceback; the typed budget survives a reload (the URL)."""
import re
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
from harness import CHROMIUM, Server, chromium, no_traceback, settle  # noqa: E402
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

pytestmark = [
    pytest.mark.browser, pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                       reason="needs the shipped mnist-lstm (assets/models)"),
]

# one look at the page (one evaluate: a consistent DOM), or null while a run redraws it
SNAPSHOT = """() => {
  if (document.querySelector('[data-stale="true"]')) return null;
  const metric = label => { for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
      if (m.innerText.split('\\n')[0].trim() === label)
        return m.querySelector('[data-testid="stMetricValue"]').innerText.trim(); } return null; };
  const picker = document.querySelector('.st-key-camp_show');
  const card = [...document.querySelectorAll('[class*="st-key-card-campaign"]')]
      .map(e => e.innerText);
  const groups = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
      .map(e => e.innerText).find(t => / groups$/.test(t.trim()));
  const chosen = picker ? [picker.innerText, ...[...picker.querySelectorAll('input')]
      .map(i => i.value || i.getAttribute('aria-label') || '')].join(' ') : null;
  return {picker: chosen, status: metric('Status'),
          headline: metric('Fault classes') || metric('Distinct faults'),
          checked: !!metric('Fault classes'), calls: metric('Model calls'), card,
          groups: groups || null, nofault: document.body.innerText.includes('No fault found')};
}"""


def _n(text: str | None) -> int | None:
    m = re.search(r"[\d,]+", text or "")
    return int(m.group().replace(",", "")) if m else None


def _agree(page, run_id: str, status: str, timeout: float = 60) -> dict:
    """Wait for a snapshot where the shown run has ``status`` everywhere and its card says
    its counts (a running or cancelled card does; a finished one says how long it took);
    every snapshot on the way must not contradict itself: a count on the card is the
    metric's, and the groups hold every fault."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        s = page.evaluate(SNAPSHOT)
        if s and s["picker"] and run_id in s["picker"] and s["headline"]:
            last, head = s, _n(s["headline"])
            mine = [c for c in s["card"] if run_id.rsplit("-", 1)[-1] in c]
            said = [re.search(r"([\d,]+) (fault classes|distinct faults)", c) for c in mine]
            for c, m in zip(mine, said):
                if m and s["status"] == status:
                    assert _n(m.group(1)) == head, ("the card and the metrics", c, s)
            if s["groups"] and not s["checked"] and s["status"] == status:
                assert _n(s["groups"]) == head, ("the groups and the metrics", s)
            if s["status"] == status and (s["groups"] or s["nofault"]) and mine and \
                    (status == "finished" or all(said)):
                return s
        time.sleep(0.3)
    raise AssertionError(f"the page never showed {run_id} {status} everywhere: {last}")


@pytest.mark.timeout(900)
def test_campaign_walk_agrees_everywhere(tmp_path):
    runs = tmp_path / "runs"
    srv = Server(runs, tmp_path / "streamlit.log")
    store = RunStore(runs)
    errors: list[str] = []
    failed: list[str] = []          # the URLs of responses >= 400
    try:
        srv.wait_healthy()
        with chromium() as b:
            page = b.new_page(viewport={"width": 1440, "height": 1000})
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("response", lambda r: r.status >= 400 and failed.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(240_000)
            page.goto(f"{srv.url}/campaign")
            settle(page, "Campaign", timeout=240)
            box = page.get_by_role("textbox", name="Budget", exact=True)
            box.fill("3m")
            box.press("Tab")
            seeds = page.get_by_label("Seeds", exact=True)
            seeds.fill("20")
            seeds.press("Tab")
            page.get_by_role("button", name="Start").click()
            deadline = time.time() + 120
            while not store.list(kind="campaign") and time.time() < deadline:
                time.sleep(0.5)
            run_id = store.list(kind="campaign")[0].run_id
            page.wait_for_function("() => !!document.querySelector('.st-key-camp_curves')")
            _agree(page, run_id, "running")
            assert "budget=3m" in page.url, page.url
            page.reload()                                       # mid-run
            page.get_by_role("heading", name="Campaign", exact=True).wait_for()
            page.wait_for_function(                             # the typed budget is kept
                "() => [...document.querySelectorAll('.st-key-camp_budget input')]"
                ".some(i => i.value === '3m')", timeout=60_000)
            _agree(page, run_id, "running")
            page.get_by_role("button", name="Cancel").click()
            s = _agree(page, run_id, "cancelled")
            assert store.get(run_id).status == "cancelled"
            page.get_by_role("button", name="Resume").wait_for()
            spent = store.get(run_id).summary["calls"]
            total = page.get_by_role("textbox", name="Total budget", exact=True)
            total.fill(f"{spent + 400}calls")
            total.press("Tab")
            page.get_by_role("button", name="Resume").click()
            deadline = time.time() + 240
            while time.time() < deadline:
                done = [r for r in store.list(kind="campaign")
                        if (r.config or {}).get("resumed_from") == run_id]
                if done and done[0].status == "finished":
                    break
                time.sleep(1)
            assert done and done[0].status == "finished", done
            _agree(page, done[0].run_id, "finished", timeout=90)
            page.reload()                                       # after the end
            page.get_by_role("heading", name="Campaign", exact=True).wait_for()
            s = _agree(page, done[0].run_id, "finished", timeout=90)
            assert _n(s["calls"]) >= spent + 400, s
            no_traceback(page, "Campaign")
            rss = srv.rss_mb()
            print(f"server RSS after the walk: {rss:.0f} MB", file=sys.stderr)
            assert rss <= 1536, f"server RSS {rss:.0f} MB after the walk (target 1.5 GB)"
        log = srv.log()
        assert "Traceback" not in log, log[-3000:]
        # no failed request and no console error across the walk (dashboard/serve.py tells
        # the front end where the server is: no probe of /campaign/_stcore/... any more)
        assert failed == [], failed
        assert errors == [], errors
    finally:
        srv.stop()
