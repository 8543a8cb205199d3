"""The CLI's shared pieces: a method's or criterion's declared parameters as options (read and
checked by the declaration), the listings, one list helper for every comma-separated option,
and the old flag names (--root, --out, --params) kept for one release with a note."""
from __future__ import annotations

import json

import pytest

from rnncon_core.errors import InputError
from tests.test_coverage import _cli  # the CLI through its real entry point


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """run_generation and the report builders replaced by recorders (nothing runs)."""
    import rnncon_core.jobs as gen
    calls = {}

    def record(name, result):
        def fake(*args, **kw):
            calls[name] = (args, kw)
            return result
        return fake
    run = {"run_id": "r", "method": "m", "n_seeds": 1, "n_adversarial": 0, "adv_rate": 0.0,
           "seconds": 1.0, "adv_per_second": 0.0, "outputs": "o", "avg_l2": None,
           "avg_l1": None, "avg_linf": None}
    monkeypatch.setattr(gen, "run_generation", record("generate", run), raising=False)
    for module, fn in (("coverage", "build_coverage"), ("criteria", "build_criteria"),
                       ("generation", "build_generation"), ("text", "build_text"),
                       ("retraining", "build_retraining")):
        monkeypatch.setattr(f"rnncon_core.reports.{module}.{fn}",
                            record(module, {"files": []}))
    monkeypatch.setenv("RNNCON_RUNS", str(tmp_path / "runs"))
    return calls


def _generate(capsys, monkeypatch, method, *args):
    return _cli(capsys, monkeypatch, "generate", "--model", "mnist-lstm", "--method", method,
                *args, "--json")


def test_declared_parameters_are_options(captured, capsys, monkeypatch):
    code, _, err = _generate(capsys, monkeypatch, "rconc", "--k", "3", "--threshold=0.4",
                             "--stop-on-target", "--granularity", "edge", "--param",
                             "pool=seed", "--step", "-0.5e-2")
    assert code == 2 and "step must be a number in (0, 1], got -0.005" in err
    code, _, err = _generate(capsys, monkeypatch, "rconc", "--k", "3", "--threshold=0.4",
                             "--stop-on-target", "--granularity", "edge", "--param",
                             "pool=seed", "--no-stop-on-target")
    assert code == 2 and "stop_on_target is given twice (--stop-on-target true and " \
        "--stop-on-target false)" in err
    code, _, err = _generate(capsys, monkeypatch, "rconc", "--k", "3", "--threshold=0.4",
                             "--granularity", "edge", "--param", "pool=seed",
                             "--no-stop-on-target")
    assert code == 0, err
    params = captured["generate"][1]
    assert {k: params[k] for k in ("k", "threshold", "granularity", "pool", "stop_on_target")} \
        == {"k": 3, "threshold": 0.4, "granularity": "edge", "pool": "seed",
            "stop_on_target": False}
    assert params["workers"] == 0 and params["dataset"] is None and params["others"] == []


def test_text_methods_take_every_parameter(captured, capsys, monkeypatch):
    code, _, err = _generate(capsys, monkeypatch, "synonym-gradient", "--max-fraction", "0.2",
                             "--objective", "contribution", "--n-targets", "4",
                             "--constraint", "none", "--rescore", "2")
    assert code == 0, err
    params = captured["generate"][1]
    assert {k: params[k] for k in ("max_fraction", "objective", "n_targets", "constraints",
                                   "rescore")} == {"max_fraction": 0.2,
                                                   "objective": "contribution",
                                                   "n_targets": 4, "constraints": "none",
                                                   "rescore": 2}


def test_a_text_run_reports_its_validity_beside_the_flips(captured, capsys, monkeypatch):
    """The summary line and --json of a text run carry the valid adversarial rate and the share
    of substitutions passing each check (issue 17), not only the adversarial rate."""
    import rnncon_core.jobs as gen
    text_run = {"run_id": "r", "method": "synonym-gradient", "n_seeds": 20, "n_adversarial": 7,
                "adv_rate": 0.35, "seconds": 39.4, "adv_per_second": 0.18, "outputs": "o",
                "avg_words_changed": 8.0, "valid_adv_rate": 0.3,
                "checks": {"antonym": 1.0, "polarity": 0.95, "number": None}}
    monkeypatch.setattr(gen, "run_generation", lambda *a, **k: text_run, raising=False)
    code, out, err = _cli(capsys, monkeypatch, "generate", "--model", "imdb-lstm", "--method",
                          "synonym-gradient", "--seeds", "20")
    assert code == 0, err
    assert ("7/20 adversarial (35.0 %), valid adversarial 30.0 % (every substitution passing "
            "the checks), substitutions passing antonym 100.0 %, polarity 95.0 %, number -; "
            "avg words changed 8.000") in out + err
    code, out, err = _generate(capsys, monkeypatch, "synonym-gradient")
    assert code == 0, err
    got = json.loads(out)
    assert got["valid_adv_rate"] == 0.3 and got["checks"] == text_run["checks"]


@pytest.mark.parametrize("args, says", [
    (["--k", "0"], "k must be an integer in [1, 1000], got 0"),
    (["--k"], "--k needs a value (an integer in [1, 1000])"),
    (["--pool", "everywhere"], "pool must be one of 'auto', 'set', 'seed', got 'everywhere'"),
    (["--wobble", "3"], "No such option: --wobble; method 'rconc' takes --target, --k"),
    (["--param", "k"], "--param 'k': method 'rconc' takes NAME=VALUE"),
    (["stray"], "unexpected argument 'stray'"),
    (["--constraint", "light", "--size", "4,4"], "--size is a parameter of the occlusion and "
     "blackout constraints, but the constraint is 'light': add --constraint occlusion"),
    (["--param", "patches=2"], "--patches is a parameter of the blackout constraint, but the "
     "constraint is 'none'"),
    (["--constraint", "occlusion", "--size", "0,4"], "size must be two integers ROWS,COLUMNS"),
])
def test_bad_declared_values_are_one_clear_line(captured, capsys, monkeypatch, args, says):
    code, out, err = _generate(capsys, monkeypatch, "rconc", *args)
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: "), err
    assert says in err and out == "" and "generate" not in captured


def test_the_chosen_constraints_parameters_are_options(captured, capsys, monkeypatch):
    code, _, err = _generate(capsys, monkeypatch, "rconc", "--constraint", "occlusion",
                             "--size", "4,5", "--position", "1,2")
    assert code == 0, err
    kw = captured["generate"][1]
    assert (kw["constraint"], kw["size"], kw["position"]) == ("occlusion", [4, 5], [1, 2])


def test_another_methods_parameter_is_ignored_with_a_note(captured, capsys, monkeypatch):
    code, _, err = _generate(capsys, monkeypatch, "rconc", "--eps", "0.1", "--k", "2")
    assert code == 0, err
    assert "--eps does not apply to method 'rconc' and is ignored" in err
    assert "eps" not in captured["generate"][1] and captured["generate"][1]["k"] == 2


def test_listings_come_from_the_declarations(capsys, monkeypatch):
    from rnncon_core.coverage import CRITERIA
    from rnncon_core.generate import generator_class, list_generators
    code, out, err = _cli(capsys, monkeypatch, "methods", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert set(listed) == set(list_generators())
    for method, row in listed.items():
        assert [p["name"] for p in row["params"]] == generator_class(method).params.names
    k = next(p for p in listed["rconc"]["params"] if p["name"] == "k")
    assert k == {"name": "k", "type": "int", "default": 1, "allowed": "an integer in [1, 1000]",
                 "help": "Items activated at once (per seed).", "kinds": ["image", "text"],
                 "level": "form"}
    code, out, err = _cli(capsys, monkeypatch, "criteria", "--json")
    assert code == 0 and set(json.loads(out)) == set(CRITERIA), err
    code, out, err = _cli(capsys, monkeypatch, "methods", "rconc")
    assert code == 0 and "--granularity" in out and "one of unit | edge" in out


def test_one_list_helper():
    from rnncon_core.cli import names, numbers
    assert names(" a, b,,c ,", "--models") == ["a", "b", "c"]
    assert names(None, "--models") is None and names(" , ", "--models") is None
    assert numbers("0, 0.5,", "--thresholds") == [0.0, 0.5]
    with pytest.raises(InputError, match=r"--sizes must be integers separated by commas, got "
                                         r"'25,x'"):
        numbers("25,x", "--sizes", int)


@pytest.mark.parametrize("command, key, where", [
    (["report", "generation"], "generation", "models"),
    (["report", "coverage"], "coverage", 1),
    (["report", "criteria"], "criteria", 1),
    (["report", "text"], "text", "models"),
    (["report", "retraining"], "retraining", 0),
])
def test_every_models_list_is_read_the_same(captured, capsys, monkeypatch, command, key, where):
    """`--models "a, b"` (with a space) failed in one command before one helper read them."""
    code, _, err = _cli(capsys, monkeypatch, *command, "--models", " mnist-lstm, mnist-gru,")
    assert code == 0, err
    args, kw = captured[key]
    got = kw[where] if isinstance(where, str) else args[where]
    assert list(got) == ["mnist-lstm", "mnist-gru"]


def test_old_flag_names_work_with_a_note(captured, capsys, monkeypatch, tmp_path):
    code, out, err = _cli(capsys, monkeypatch, "runs", "--root", str(tmp_path / "old"),
                          "--json")
    assert code == 0 and json.loads(out) == {"runs": []}, err
    assert "note: --root is deprecated and goes in the next release; use --runs-dir" in err
    code, _, err = _cli(capsys, monkeypatch, "runs", "--root", "a", "--runs-dir", "b")
    assert code == 2 and "give --runs-dir only (--root is its old name)" in err
    code, _, err = _cli(capsys, monkeypatch, "report", "coverage", "--out", str(tmp_path / "c"))
    assert code == 0 and "use --out-dir" in err, err
    assert str(captured["coverage"][0][0]) == str(tmp_path / "c")
    code, _, err = _cli(capsys, monkeypatch, "report", "coverage")
    assert code == 0 and "deprecated" not in err
    assert str(captured["coverage"][0][0]) == "reports/coverage"


def test_help_is_fast_and_lists_the_commands():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "rnncon_core", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "methods" in out.stdout and "criteria" in out.stdout
    loaded = out.stderr
    for heavy in ("tensorflow", "keras", "rnncon_core.generate.guided", "pandas"):
        assert f" {heavy}\n" not in loaded, heavy


@pytest.mark.parametrize("args,want", [(["--minimize", "false"], False),
                                       (["--minimize", "no"], False),
                                       (["--minimize", "true"], True),
                                       (["--no-minimize"], False), (["--minimize"], True)])
def test_a_switch_also_takes_a_spelled_value(captured, capsys, monkeypatch, args, want):
    code, _, err = _generate(capsys, monkeypatch, "rconc", *args)
    assert code == 0, err
    assert captured["generate"][1]["minimize"] is want
