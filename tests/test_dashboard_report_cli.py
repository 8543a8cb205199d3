"""`rnncon report html`: the dashboard's HTML report from the command line."""
import json
from types import SimpleNamespace

import pytest

from rnncon_core.cli import main


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory):
    import keras
    keras.utils.set_random_seed(0)
    path = tmp_path_factory.mktemp("html") / "tiny-digits.keras"
    keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(3),
                      keras.layers.Dense(10, activation="softmax")]).save(path)
    return path


@pytest.fixture
def rnncon(capsys):
    """``rnncon report html ARGS`` in this process: exit code, stdout, stderr."""
    def run(*args):
        try:
            main(["report", "html", *map(str, args)])
            code = 0
        except SystemExit as e:
            code = e.code or 0
        out = capsys.readouterr()
        return SimpleNamespace(exit_code=code, stdout=out.out, output=out.out + out.err)
    return run


def test_the_coverage_of_a_model_as_one_self_contained_file(rnncon, digits_model, tmp_path):
    r = rnncon("--model", digits_model, "--dataset", "digits", "--n", 30, "--threshold", 0.3,
               "--out-dir", tmp_path, "--json")
    assert r.exit_code == 0, r.output
    path = tmp_path / "report-coverage-tiny-digits.html"
    assert json.loads(r.stdout.strip().splitlines()[-1])["report"] == str(path)
    doc = path.read_text()
    assert doc.startswith("<!DOCTYPE html>") and "<script src=" not in doc
    assert doc.count("Plotly.newPlot") == 3 and "digits: the first 30 test inputs" in doc
    assert "0.3" in doc and "tiny-digits.keras" in doc


@pytest.mark.parametrize("args, message", [
    ((), "give --run RUN_ID"),
    (("--run", "x", "--model", "mnist-lstm"), "one of the two"),
    (("--model", "mnist-lstm", "--granularity", "cell"), "--granularity must be one of"),
])
def test_bad_requests_say_what_to_give(rnncon, args, message):
    r = rnncon(*args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_an_unknown_run_is_an_error_naming_it(rnncon, tmp_path):
    r = rnncon("--run", "no-such-run", "--runs-dir", tmp_path)
    assert r.exit_code == 2 and "no-such-run" in r.output
