"""`rnncon campaign`, `rnncon check` and `rnncon report campaign`: bad input is one line and exit
code 2; the CI gate exits 1 when a bound fails and writes JUnit XML and the HTML report."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from rnncon_core.cli import main


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr()


@pytest.mark.parametrize("argv,words", [
    (["campaign", "--model", "mnist-lstm", "--budget", "ten"], "budget"),
    (["campaign", "--model", "mnist-lstm", "--guide", "nope"], "unknown guide"),
    (["campaign"], "--model"),
    (["campaign", "--model", "mnist-lstm", "--max-linf", "3"], "max_linf"),
    (["campaign", "--model", "mnist-lstm", "--guide", "none", "--guide-param", "threshold=0.3"],
     "no parameters"),
    (["campaign", "--model", "mnist-lstm", "--guide", "faults", "--guide-param", "k=3"],
     "no parameters"),
    (["check", "--model", "mnist-lstm"], "at least one bound"),
    (["check", "--model", "mnist-lstm", "--min-coverage", "rconc=2"], "--min-coverage"),
    (["check", "--model", "mnist-lstm", "--min-coverage", "zzz=0.5"], "--min-coverage"),
    (["check", "--model", "mnist-lstm", "--max-faults", "-1"], "--max-faults"),
    (["campaign", "--model", "mnist-lstm", "--inputs", "x.npy"], "--labels"),
    (["check", "--model", "mnist-lstm", "--max-faults", "0", "--labels", "y.npy"], "--inputs"),
    (["campaign", "--resume", "r1", "--inputs", "x.npy", "--labels", "y.npy"], "--resume"),
])
def test_bad_input_is_one_line(argv, words, capsys, tmp_path):
    code, out = _run(argv + ["--runs-dir", str(tmp_path)], capsys)
    assert code == 2
    assert out.err.startswith("error: ") and words in out.err
    assert "Traceback" not in out.err


def test_bounds_and_junit(tmp_path):
    from types import SimpleNamespace

    from rnncon_core.reports.campaign import check_bounds, junit_xml, parse_bounds
    assert parse_bounds(["rconc=0.8,nc=0.5", "kmnc=0"]) == {"rconc": 0.8, "nc": 0.5, "kmnc": 0.0}
    info = SimpleNamespace(run_id="r1", summary={"guide": "rconc", "coverage": 0.75,
                                                 "distinct_faults": 3, "model": "m"})
    table = check_bounds(info, None, {"rconc": 0.8}, 5)
    assert list(table["passed"]) == [False, True]
    root = ET.fromstring(junit_xml(table, info, 1.0))
    suite = root.find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert cases[0].find("failure") is not None and cases[1].find("failure") is None


def test_report_statistics():
    from rnncon_core.reports.campaign import summarize, t_interval, welch
    m, lo, hi = t_interval([10, 12, 14])
    assert m == 12 and lo < 12 < hi
    d, lo, hi = welch([20, 21, 22, 20, 21], [10, 11, 10, 12, 11])
    assert d > 0 and lo > 0
    rows = pd.DataFrame({"model": "m", "guide": ["rconc"] * 3 + ["none"] * 3,
                         "distinct_faults": [30, 31, 32, 10, 11, 12],
                         "distinct_pairs": [5, 5, 6, 5, 6, 5], "coverage": 0.5, "calls": 100,
                         "overhead": 2.0})
    table, verdicts = summarize(rows)
    assert list(verdicts["verdict"]) == ["beats none"]
    assert len(table) == 2


def test_report_budgets_per_model_in_model_calls(tmp_path):
    import numpy as np

    from rnncon_core.errors import InputError
    from rnncon_core.reports.campaign import _grid, _grid_values, budgets_of, write_report
    models = ["a", "b"]
    assert budgets_of("100calls,b=20calls", models) == {"a": "100calls", "b": "20calls"}
    assert budgets_of("30s", models) == {"a": "30s", "b": "30s"}
    for bad in ("c=5calls,100calls", "b=20calls", "100calls,b=ten"):
        with pytest.raises(InputError, match="budget"):
            budgets_of(bad, models)
    axis, grid = _grid("100calls")
    assert axis == "calls" and grid[-1] == 100
    curve = {"calls": np.array([10, 50, 100]), "seconds": np.array([1.0, 2.0, 3.0]),
             "distinct_faults": np.array([1, 4, 9])}
    np.testing.assert_array_equal(_grid_values(curve, np.array([0, 10, 60, 100]), "calls"),
                                  [0, 1, 4, 9])
    # a report whose rows have two budgets keeps each model's own
    rows = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4 + ["a"],
                         "guide": ["rconc", "rconc", "none", "none"] * 2 + ["none"],
                         "repeat": [0, 1] * 4 + [2], "budget": ["100calls"] * 4 +
                         ["20calls"] * 4 + ["30s"], "distinct_faults": [5, 6, 3, 4] * 2 + [99],
                         "distinct_pairs": 2, "coverage": 0.5, "calls": 100, "overhead": 2.0})
    rows.to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame({"model": ["a", "b"], "guide": "none", "repeat": 0,
                  "budget": ["100calls", "20calls"], "axis": "calls", "at": [100, 20],
                  "faults": [3, 3]}).to_csv(tmp_path / "curves.csv", index=False)
    settings = {"budget": "100calls,b=20calls", "budgets": {"a": "100calls", "b": "20calls"},
                "seeds": 10, "repeats": 2, "models": models, "guides": ["rconc", "none"],
                "params": {}}
    rep = write_report(tmp_path, settings)
    assert [r["repeats"] for r in rep["table"]] == [2, 2, 2, 2]     # the 30s row left out
    text = (tmp_path / "summary.md").read_text()
    assert "Budget 100calls (b: 20calls)" in text and "Budgets in model calls" in text
    assert "model calls" in (tmp_path / "curves.svg").read_text()


@pytest.mark.slow
def test_check_exits_1_and_writes_reports(tmp_path, capsys):
    junit = tmp_path / "out.xml"
    code, out = _run(["check", "--model", "mnist-lstm", "--budget", "150calls", "--seeds", "20",
                      "--min-coverage", "rconc=0.01", "--max-faults", "0", "--junit", str(junit),
                      "--runs-dir", str(tmp_path / "runs")], capsys)
    root = ET.fromstring(junit.read_text())
    failures = int(root.find("testsuite").get("failures"))
    assert (code == 1) == (failures > 0)
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    assert "PASS coverage rconc" in out.err
    assert np.isfinite(float(root.find("testsuite").get("time")))


@pytest.mark.slow
def test_campaign_then_resume_with_a_larger_budget(tmp_path, capsys):
    import json
    runs = ["--runs-dir", str(tmp_path / "runs")]
    code, out = _run(["campaign", "--model", "mnist-lstm", "--budget", "150calls", "--seeds",
                      "20", "--guide", "nc", "--json", *runs], capsys)
    assert code == 0
    first = json.loads(out.out)
    assert first["calls"] >= 150 and first["guide"] == "nc"
    assert "of 150 model calls" in out.err          # progress says what it counts
    code, out = _run(["campaign", "--resume", first["run_id"], "--budget", "300calls", "--json",
                      *runs], capsys)
    assert code == 0
    second = json.loads(out.out)
    assert second["resumed_from"] == first["run_id"] and second["calls"] >= 300
    assert "of 300 model calls" in out.err
    assert second["distinct_faults"] >= first["distinct_faults"]


def test_report_campaign_on_your_own_model_and_data(tmp_path, capsys, tiny_lstm):
    """`report campaign --models mine.keras --dataset mine.npz`: a user's model whose input no
    shipped data set fits."""
    rng = np.random.default_rng(5)
    x = rng.random((30, 5, 3)).astype("float32")
    y = np.asarray(tiny_lstm(x)).argmax(1)
    tiny_lstm.save(tmp_path / "mine.keras")
    np.savez(tmp_path / "mine.npz", x_train=x, y_train=y, x_test=x, y_test=y)
    out_dir = tmp_path / "report"

    def report(repeats: int) -> pd.DataFrame:
        code, out = _run(["report", "campaign", "--models", str(tmp_path / "mine.keras"),
                          "--dataset", str(tmp_path / "mine.npz"), "--guides", "nc,none",
                          "--repeats", str(repeats), "--budget", "60calls", "--seeds", "10",
                          "--max-linf", "0.5", "--out-dir", str(out_dir),
                          "--runs-dir", str(tmp_path / "runs")], capsys)
        assert code in (0, None), out.err
        return pd.read_csv(out_dir / "runs.csv")
    rows = report(2)
    assert len(rows) == 4 and set(rows.guide) == {"nc", "none"}
    assert f"from {tmp_path / 'mine.npz'}" in (out_dir / "summary.md").read_text()
    # a report written before the loop column goes on: its rows are the old loop's, kept
    for name in ("runs.csv", "curves.csv"):
        pd.read_csv(out_dir / name).drop(columns="loop").to_csv(out_dir / name, index=False)
    rows = report(1)
    assert len(rows) == 6 and rows.loop.str.startswith("explore_faults=False").sum() == 4


def test_campaign_and_check_on_your_own_inputs(tmp_path, capsys, tiny_lstm):
    """`campaign`/`check --inputs X.npy --labels Y.npy`: a user's model no shipped data set
    fits, its own seeds (the error without them names these options)."""
    import json
    rng = np.random.default_rng(6)
    x = rng.random((30, 5, 3)).astype("float32")
    y = np.asarray(tiny_lstm(x)).argmax(1)
    tiny_lstm.save(tmp_path / "mine.keras")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    mine = ["--model", str(tmp_path / "mine.keras"), "--runs-dir", str(tmp_path / "runs")]
    code, out = _run(["campaign", *mine, "--budget", "60calls"], capsys)
    assert code == 2 and "--inputs X.npy --labels Y.npy" in out.err
    own = ["--inputs", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy")]
    code, out = _run(["campaign", *mine, *own, "--budget", "60calls", "--max-linf", "0.5",
                      "--json"], capsys)
    assert code in (0, None), out.err
    run = json.loads(out.out)
    assert "of 60 model calls" in out.err          # progress says what it counts
    from rnncon_core.runs import RunStore
    seeds = RunStore(tmp_path / "runs").get(run["run_id"]).load_npz("seeds")
    np.testing.assert_array_equal(seeds["x"], x[:len(seeds["x"])])
    assert run["seeds"] == len(seeds["x"])
    code, out = _run(["check", *mine, *own, "--budget", "60calls", "--min-coverage", "nc=0.0",
                      "--junit", str(tmp_path / "out.xml")], capsys)
    assert code in (0, None), out.err
    assert ET.parse(tmp_path / "out.xml").getroot().find("testsuite").get("failures") == "0"


def test_guide_faults_from_the_cli(tmp_path, capsys, tiny_lstm):
    """`campaign --guide faults` and `check --guide faults` on a user's own seeds: the queue
    grows only by the distinct faults (seeds + faults), coverage is not measured."""
    import json
    pool = np.random.default_rng(11).random((4000, 5, 3)).astype("float32")
    p = np.asarray(tiny_lstm(pool))
    x = pool[np.argsort(np.abs(p[:, 1] - p[:, 0]))[:20]]      # near the decision boundary
    y = p.argmax(1)[np.argsort(np.abs(p[:, 1] - p[:, 0]))[:20]]
    tiny_lstm.save(tmp_path / "mine.keras")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    mine = ["--model", str(tmp_path / "mine.keras"), "--runs-dir", str(tmp_path / "runs"),
            "--inputs", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
            "--budget", "200calls", "--max-linf", "0.5", "--noise", "0.3", "--mutations",
            "noise", "--guide", "faults", "--seeds", "20"]
    code, out = _run(["campaign", *mine, "--json"], capsys)
    assert code in (0, None), out.err
    run = json.loads(out.out)
    assert run["guide"] == "faults" and run["distinct_faults"] > 0
    assert run["queue"] == 20 + run["distinct_faults"] and np.isnan(run["coverage"])
    code, out = _run(["check", *mine, "--max-faults", "100000", "--html",
                      str(tmp_path / "check.html")], capsys)
    assert code in (0, None), out.err


def test_report_defaults_and_help_name_every_guide(capsys):
    """The report runs every baseline by default; `report campaign --help` and `campaign
    --help` name every default guide."""
    from rnncon_core.campaign import BASELINES, guide_names
    from rnncon_core.reports.campaign import GUIDES
    assert set(BASELINES) <= set(GUIDES) <= set(guide_names())
    for argv, names in ((["report", "campaign", "--help"], GUIDES),
                        (["campaign", "--help"], BASELINES)):
        code, out = _run(argv, capsys)
        text = " ".join(out.out.split())
        assert all(g in text for g in names), argv


def test_summary_compares_with_both_baselines(tmp_path):
    """Every criterion guide against none and against faults (faults against none only);
    the verdict names which guide beats each baseline."""
    from rnncon_core.reports.campaign import write_report
    faults = {"rconc": [30, 31, 32], "nc": [19, 20, 21], "none": [10, 11, 12],
              "faults": [20, 21, 22]}
    rows = pd.DataFrame([{"model": "a", "guide": g, "repeat": r, "budget": "100calls",
                          "distinct_faults": v, "distinct_pairs": 2, "coverage": 0.5,
                          "calls": 100, "overhead": 2.0, "loop": "L"}
                         for g, vs in faults.items() for r, v in enumerate(vs)]).sample(
        frac=1, random_state=0)                                 # any order in the file
    rows.to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame({"model": "a", "guide": list(faults), "repeat": 0, "budget": "100calls",
                  "axis": "calls", "at": 100, "faults": 3, "loop": "L"}).to_csv(
        tmp_path / "curves.csv", index=False)
    rep = write_report(tmp_path, {"budget": "100calls", "budgets": {"a": "100calls"},
                                  "seeds": 10, "repeats": 3, "models": ["a"],
                                  "guides": list(faults), "params": {}, "loop": "L"})
    got = {(r["guide"], r["baseline"]): r["verdict"] for r in rep["against_baselines"]}
    assert got == {("rconc", "none"): "beats none", ("rconc", "faults"): "beats faults",
                   ("nc", "none"): "beats none", ("nc", "faults"): "no difference shown",
                   ("faults", "none"): "beats none"}
    text = (tmp_path / "summary.md").read_text()
    assert "## Against the unguided baseline none" in text
    assert "## Against the unguided baseline faults" in text
    verdict = text.split("**Verdict:**")[1]
    assert "Against none: rconc on a; nc on a; faults on a beat it" in verdict
    assert "Against faults: rconc on a beats it" in verdict
    assert text.index("| a | nc |") < text.index("| a | none |") < text.index("| a | faults |")


@pytest.mark.parametrize("command", ["campaign", "check"])
def test_a_stopped_campaign_exits_130_and_check_records_it(command, tmp_path, capsys,
                                                           monkeypatch):
    """Ctrl-C (or `rnncon runs --cancel`) stops a campaign with JobCancelled: exit code 130,
    "interrupted" as docs/errors.md says, not 2 (an input error); check's JUnit file says 130."""
    from rnncon_core.cli import campaign as cli_campaign
    from rnncon_core.errors import JobCancelled

    def stopped(*args, **kwargs):
        raise JobCancelled("campaign r1 was stopped after 3 batches; resume it with --resume r1")
    import rnncon_core.campaign
    monkeypatch.setattr(rnncon_core.campaign, "run_campaign", stopped)
    monkeypatch.setattr(cli_campaign, "run_campaign", stopped, raising=False)
    junit = tmp_path / "check.xml"
    argv = [command, "--model", "mnist-lstm", "--budget", "100calls", "--runs-dir",
            str(tmp_path)] + (["--max-faults", "0", "--junit", str(junit)]
                              if command == "check" else [])
    code, out = _run(argv, capsys)
    assert code == 130 and out.err.startswith("error: campaign r1 was stopped"), out.err
    if command == "check":
        assert 'name="exit_code" value="130"' in junit.read_text()
