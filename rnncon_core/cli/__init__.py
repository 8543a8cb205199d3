"""The ``rnncon`` command. Each sub-command lives in its own module of this package.

Figures go to stdout (one JSON object with ``--json``); logs and progress go to stderr.
"""
from __future__ import annotations

import importlib
import json
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
COMMAND_MODULES = ["models", "coverage", "generate", "runs", "retrain", "text"]


def emit(obj: dict) -> None:
    """Print one JSON object on stdout."""
    print(json.dumps(obj, default=_json_default))


def _json_default(o):
    import numpy as np
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


def main() -> None:
    _load_commands()
    try:
        app()
    except RNNConError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
