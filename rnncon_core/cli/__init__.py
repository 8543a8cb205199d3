"""The ``rnncon`` command. Each sub-command lives in its own module of this package (they
import the engine inside the commands, so ``rnncon --help`` stays fast).

Figures go to stdout (one JSON object with ``--json``); logs and progress go to stderr. What
every command shares lives in ``common``: one name per flag (``--runs-dir``, ``--out-dir``; the old
``--root`` and ``--out`` still work for one release, with a note), lists read by one helper,
and the declared parameters of a method or criterion read from ``--NAME VALUE``.

Every command checks all its arguments, paths and files first (:func:`preflight`: model files,
data sets read whole, output paths probed), before TensorFlow is imported and before any model
call. Exit codes (docs/errors.md): 0 done (a gate passed), 1 a gate's bound failed (`rnncon
check`), 2 a usage or input error (one line ``error: ...``), 3 an internal error (a bug: one
line naming the log that holds the traceback), 130 interrupted.
"""
from __future__ import annotations

from .common import app, main, names, numbers, report_app  # noqa: F401  (the entry point)

# the sub-commands register themselves on `app` / `report_app` (engine imports stay inside them)
from . import (campaign, coverage, generate, models, report_html, retrain, runs,  # noqa: E402,F401
               prioritize, text, validity)
