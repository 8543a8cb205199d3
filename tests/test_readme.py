"""The README's code blocks as a newcomer pastes them (issue 41): every `rnncon` line names a
command and options that exist (fast); the Python quick start and the command-line quick
start run verbatim after the set-up and exit 0 (slow: minutes), in a scratch folder with its
own run store."""
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# blocks not run here: they start the server or the test suite themselves
NOT_RUN = ("make run", "RNNCON_SCREENSHOTS")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def commands(block: str) -> list[list[str]]:
    """The block's command lines (continuations joined, comments dropped) as argument lists."""
    text = block.replace("\\\n", " ")
    return [args for line in text.splitlines() if (args := shlex.split(line, comments=True))]


def test_every_rnncon_line_names_a_command_and_options_that_exist():
    from typer.testing import CliRunner

    from rnncon_core.cli import app
    runner = CliRunner()
    lines = [args for b in blocks("bash") for args in commands(b) if args[0] == "rnncon"]
    assert len(lines) >= 8, lines
    helps = {}
    for args in lines:
        words = [a for a in args[1:] if not a.startswith("-")]
        sub = words[:2] if words[:1] == ["report"] else words[:1]
        key = " ".join(sub)
        if key not in helps:
            got = runner.invoke(app, [*sub, "--help"], env={"COLUMNS": "200"})
            assert got.exit_code == 0, (key, got.output)
            helps[key] = got.output
        for opt in (a.split("=")[0] for a in args if a.startswith("--")):
            assert opt in helps[key], f"rnncon {key} has no option {opt}"


def test_the_blocks_say_how_to_reach_the_venv():
    for b in blocks("bash"):
        if any(n in b for n in NOT_RUN):
            continue
        lines = commands(b)
        assert lines[0][:2] == ["source", ".venv/bin/activate"] or \
            all(a[0].startswith(".venv/bin/") or a[0] == "make" for a in lines), b


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_quick_starts_run_verbatim(tmp_path):
    """In a scratch folder that holds only the set-up's .venv (and this checkout's code on
    PYTHONPATH, so a worktree runs its own code): each block, in one shell, exits 0; the
    time of each line is printed (the README's durations)."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "RNNCON_RUNS": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("VIRTUAL_ENV", None)
    (py,) = blocks("python")
    (tmp_path / "quickstart.py").write_text(py)
    started = time.perf_counter()
    out = subprocess.run([".venv/bin/python", "quickstart.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rate" in out.stdout, out.stdout             # it prints what it computed
    print(f"python quick start: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    for b in blocks("bash"):
        if any(n in b for n in NOT_RUN):
            continue
        script = "set -euo pipefail\n" + "\n".join(
            f'{line}\necho "__took $SECONDS {shlex.quote(line.split("#")[0].strip()[:60])}" >&2'
            for line in b.replace("\\\n", " ").splitlines() if shlex.split(line, comments=True))
        got = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=1500)
        took = [ln for ln in got.stderr.splitlines() if ln.startswith("__took")]
        print("\n".join(took), file=sys.stderr)
        assert got.returncode == 0, (b, got.stdout[-2000:], got.stderr[-4000:])
        assert "Traceback" not in got.stderr, got.stderr[-4000:]
        assert "WARNING:tensorflow" not in got.stderr and "retracing" not in got.stderr, \
            got.stderr[-4000:]
