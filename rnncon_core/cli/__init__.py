"""The ``rnncon`` command. Each sub-command lives in its own module of this package.

Figures go to stdout (one JSON object with ``--json``); logs and progress go to stderr.
"""
from __future__ import annotations

import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import typer

from ..errors import RNNConError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="RNNCon-Test: coverage and test generation for recurrent networks.")
report_app = typer.Typer(no_args_is_help=True, help="Write the paper's tables and figures' data.")
app.add_typer(report_app, name="report")

# Sub-command modules register themselves on `app` / `report_app` when imported.
COMMAND_MODULES = ["models", "coverage", "generate", "report_html", "runs", "retrain", "text"]


def emit(obj: dict) -> None:
    """Print one JSON object on stdout."""
    from ..reports.writer import to_json
    print(to_json(obj))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_npy(path_text: str, option: str):
    """The array of a .npy file given as ``option`` (e.g. "--inputs"), or an InputError that
    says what is wrong with the file and how to write one."""
    from pathlib import Path

    from ..data import read_npy as read
    from ..errors import InputError
    path = Path(path_text)
    if not path.is_file():
        raise InputError(f"{option}: no such file: {path}")
    return read(path.read_bytes(), path.name, option)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


def main(argv: list[str] | None = None) -> None:
    """The `rnncon` entry point: a deliberate error (RNNConError) or a usage error prints one
    line ``error: ...`` on stderr and exits with code 2, never a traceback."""
    from typer.exceptions import Abort, TyperException
    _load_commands()
    try:
        code = app(args=argv, standalone_mode=False)
    except RNNConError as e:
        _fail(str(e))
    except TyperException as e:            # typer's (vendored click's) usage errors
        if type(e).__name__ == "NoArgsIsHelpError":     # `rnncon` alone: the help
            e.show()
            sys.exit(e.exit_code)
        ctx = getattr(e, "ctx", None)
        hint = f" (see `rnncon {ctx.info_name} --help`)" if ctx is not None and ctx.parent \
            else " (see `rnncon --help`)"
        _fail(e.format_message() + hint, e.exit_code if e.exit_code else 2)
    except (Abort, KeyboardInterrupt):
        _fail("interrupted", 130)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int = 2) -> None:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
