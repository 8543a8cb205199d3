"""What every sub-command of the ``rnncon`` command shares: the app, one name per flag,
lists read by one helper, the declared parameters read from ``--NAME VALUE``, the
entry point ``main`` (the package re-exports it) and TensorFlow's quiet start."""
from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's Python warnings (a tf.function retraced as a loop calls a model on new shapes)
# say nothing a user of these commands can act on
logging.getLogger("tensorflow").setLevel(logging.ERROR)


class _QuietLoader(importlib.abc.Loader):
    """Runs TensorFlow's import with the process's stderr (fd 2) sent to a temporary file:
    its C++ start-up lines (absl's "All log messages before absl::InitializeLog()", oneDNN's
    notice) ignore TF_CPP_MIN_LOG_LEVEL. If the import fails, what it wrote is replayed."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                self.inner.exec_module(module)
            except BaseException:
                os.dup2(saved, 2)
                sink.seek(0)
                sys.stderr.write(sink.read().decode(errors="replace"))
                raise
            finally:
                os.dup2(saved, 2)
                os.close(saved)

    def __getattr__(self, name):        # resources, is_package, ...: the real loader's
        return getattr(self.inner, name)


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Wraps the loader of the first ``import tensorflow`` of the `rnncon` process."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def quiet_tensorflow() -> None:
    """Silence TensorFlow's start-up lines before it loads (the CLI's errors stay one line)."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlow)
                                                   for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())


import typer

from ..data import check_dataset, class_labels, read_npy as read
from ..errors import InputError, JobCancelled, RNNConError
from ..io import check_writable, check_writable_folder, to_json
from ..params import check_args, split_list
from ..zoo import check_model_file

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="RNNCon-Test: coverage and test generation for recurrent networks.")
report_app = typer.Typer(no_args_is_help=True, help="Write the paper's tables and figures' data.")
app.add_typer(report_app, name="report")

RUNS_DIR_OPT = typer.Option(None, "--runs-dir", help="Run store (default: RNNCON_RUNS or "
                                                     "./runs).")
ROOT_OPT = typer.Option(None, "--root", hidden=True, help="Old name of --runs-dir.")
OUT_OPT = typer.Option(None, "--out", hidden=True, help="Old name of --out-dir.")
JSON_OPT = typer.Option(False, "--json", help="Print one JSON object.")
NAME_OPT = typer.Option(None, "--name", help="A name for the run (shown instead of its id "
                                             "in the dashboard and `rnncon runs`).")
TAGS_OPT = typer.Option(None, "--tags", help="Tags for the run, comma separated.")
RAY_OPT = typer.Option(None, "--ray-address", help="Join this Ray cluster instead of a local "
                                                   "runtime (with --workers).")
# the declared parameters of a method or criterion come after the command's own options
DECLARED = {"ignore_unknown_options": True, "allow_extra_args": True}
SEED_INPUTS_OPT = typer.Option(None, "--inputs", help="Your own seed inputs (.npy), with "
                                                     "--labels.")
SEED_LABELS_OPT = typer.Option(None, "--labels", help="Their class labels (.npy, one int per "
                                                     "input, or one-hot rows).")
PARAM_OPT = typer.Option(None, "--param", help="NAME=VALUE: a parameter of the method or "
                                               "criterion (repeatable; the same as --NAME "
                                               "VALUE).")


EXIT_PASSED, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def preflight(model: str | None = None, models=(), dataset: str | None = None,
              kind: str | None = None, outputs=(), folders=()) -> None:
    """A command's names, paths and files checked before any work, without TensorFlow: each
    model file (``zoo.check_model_file``: exists, a sane .keras archive of built-in Keras
    classes), the data set (a built-in name, or the user's .npz read and checked whole),
    ``outputs`` (option, file) and ``folders`` (option, folder) probed for writing. The first
    problem is an RNNConError (one line)."""
    for option, path in outputs:
        if path is not None:
            check_writable(path, option)
    for option, path in folders:
        if path is not None:
            check_writable_folder(path, option)
    for name in (model, *models):
        if name is not None:
            check_model_file(name)
    if dataset is not None:
        check_dataset(dataset, kind)


def internal_log() -> Path:
    """Where this process writes the traceback of an internal error (one file a process)."""
    if not _LOG:
        _LOG.append(Path(tempfile.gettempdir()) / f"rnncon-error-"
                    f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    return _LOG[0]


_LOG: list = []


def _internal(e: BaseException) -> str:
    """The one line of an internal error; its traceback goes to :func:`internal_log`."""
    path = internal_log()
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        path.write_text(f"rnncon {' '.join(sys.argv[1:])}\n\n{text}")
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback could not be saved"
        sys.stderr.write(text)
    first = next((line for line in str(e).splitlines() if line.strip()), "")[:200]
    return (f"internal error ({type(e).__name__}{': ' + first if first else ''}); this is a "
            f"bug, not your input: {where}; please report it")


def emit(obj: dict) -> None:
    """Print one JSON object on stdout."""
    print(to_json(obj))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_npy(path_text: str, option: str):
    """The array of a .npy file given as ``option`` (e.g. "--inputs"), or an InputError that
    says what is wrong with the file and how to write one."""

    path = Path(path_text)
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder, not a .npy file: give the file, e.g. "
                         f"{path / 'x.npy'}")
    if path.exists() and not path.is_file():
        raise InputError(f"{option} {path} is not a regular file (a device, pipe or socket): "
                         f"save the array with numpy.save('x.npy', x) and give that file")
    if not path.is_file():
        raise InputError(f"{option}: no such file: {path}")
    try:
        content = path.read_bytes()
    except OSError as e:
        raise InputError(f"{option} {path} cannot be read ({e.strerror or e})") from None
    return read(content, path.name, option)


def seed_inputs(inputs: str | None, labels: str | None, dataset: str | None):
    """The user's own seeds (--inputs / --labels, given together, not with --dataset):
    (x, y, their resolved paths), or (None, None, None)."""

    if (inputs is None) != (labels is None):
        raise InputError("give --inputs X.npy and --labels Y.npy together (one label per input)")
    if inputs is not None and dataset is not None:
        raise InputError("give either --dataset NAME or --inputs X.npy --labels Y.npy, not both")
    x = read_npy(inputs, "--inputs") if inputs is not None else None
    y = read_labels(labels, len(x)) if labels is not None else None
    source = {"inputs": str(Path(inputs).resolve()), "labels": str(Path(labels).resolve())} \
        if inputs is not None else None
    return x, y, source


def read_labels(path_text: str, n_inputs: int | None = None):
    """Class labels from a .npy file (``--labels``): one int per input, or one-hot rows (read
    as their argmax, with a note on stderr)."""
    y, note = class_labels(read_npy(path_text, "--labels"), n_inputs, "--labels")
    if note:
        log(f"note: {note}")
    return y


def checked(**values) -> dict:
    """The command's own arguments checked against their one declaration
    (rnncon_core.params.ARGS): e.g. ``--seed`` >= 0, ``--n`` >= 1."""
    return check_args(**values)


def renamed(value, old_value, new: str, old: str):
    """The value of a flag given by its new name, or by its old one (with a note on stderr
    that the old name goes in the next release)."""
    if old_value is None:
        return value
    if value is not None:
        raise InputError(f"give {new} only ({old} is its old name)")
    log(f"note: {old} is deprecated and goes in the next release; use {new}")
    return old_value


_STARTED: list = []          # the runs this process started (Ctrl-C names them)


def store(runs_dir: str | None, root: str | None = None):
    """The run store of ``--runs-dir`` (old name ``--root``); an unusable one fails here,
    before any work."""
    from ..runs import RunStore
    return RunStore(renamed(runs_dir, root, "--runs-dir", "--root"), on_start=_STARTED.append)


def names(text: str | None, option: str) -> list[str] | None:
    """A comma-separated option ("a, b,,c") as a list (items stripped, empty ones dropped);
    None where it was not given or holds no item."""
    return split_list(text, option) or None


def numbers(text: str | None, option: str, kind=float) -> list | None:
    """A comma-separated list of numbers, or an InputError that shows the list."""
    try:
        return [kind(t) for t in names(text, option) or []] or None
    except ValueError:
        raise InputError(f"{option} must be {'integers' if kind is int else 'numbers'} "
                         f"separated by commas, got {text!r}") from None


def declared_values(params, args: list[str], pairs: list[str] | None, owner: str,
                    elsewhere) -> dict:
    """The values of ``params`` (a method's or criterion's declaration) given after the
    command's own options as ``--NAME VALUE``, ``--NAME=VALUE``, ``--FLAG`` / ``--no-FLAG``
    (true / false) or ``--param NAME=VALUE``, each read and checked by its declaration. A name
    that only ``elsewhere()`` (the other methods or criteria) declares is ignored with a note;
    any other is an InputError."""
    items, ignored, i = [], [], 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or token == "--":
            raise InputError(f"unexpected argument {token!r}")
        key, eq, value = token[2:].partition("=")
        name = key.replace("-", "_")
        flag = params.resolve(name)
        negated = flag is None and name.startswith("no_") and params.resolve(name[3:]) is not None
        if negated:
            flag = params.resolve(name[3:])
        is_bool = flag is not None and params[flag].type == "bool"
        words = (*params[flag].check.TRUE, *params[flag].check.FALSE) if is_bool else ()
        spelled = is_bool and not eq and not negated and i + 1 < len(args) \
            and args[i + 1].lower() in words                   # --minimize false
        takes_value = spelled or (not eq and not is_bool and i + 1 < len(args)
                                  and (flag is not None or not args[i + 1].startswith("--")))
        if takes_value:
            value = args[i + 1]
            i += 1
        i += 1
        if flag is None:
            ignored.append(key)
        elif is_bool and not eq and not spelled:
            items.append((flag, "false" if negated else "true"))
        elif not eq and not takes_value:
            raise InputError(f"--{key} needs a value ({params[flag].check.describe()})")
        else:
            items.append((flag, value))
    given = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        flag = params.resolve(key.strip().replace("-", "_"))
        if not eq or flag is None:
            raise InputError(f"--param {pair!r}: {owner} takes NAME=VALUE with NAME one of "
                             f"{', '.join(params.names) or 'none'}")
        items.append((flag, value.strip()))
    for n, (flag, value) in enumerate(items):
        if flag in given:
            raise InputError(f"{flag} is given twice ({given[flag]} and "
                             f"{_spelling(flag, value, n, items, pairs)}): give it once")
        given[flag] = _spelling(flag, value, n, items, pairs)
    if ignored:
        unknown = [k for k in ignored if k.replace("-", "_") not in elsewhere()]
        if unknown:
            raise InputError(f"No such option: {', '.join('--' + k for k in unknown)}; "
                             f"{owner} takes "
                             f"{', '.join('--' + n.replace('_', '-') for n in params.names)}")
        log(f"note: {', '.join('--' + k for k in ignored)} does not apply to {owner} and is "
            f"ignored")
    return {flag: params[flag].validate(params[flag].parse(value)) for flag, value in items}


def _spelling(flag, value, n, items, pairs) -> str:
    """How the user wrote item ``n`` (``--threshold 0.1`` or ``--param threshold=0.9``)."""
    n_pairs = len(pairs or [])
    if n >= len(items) - n_pairs:
        return f"--param {(pairs or [])[n - (len(items) - n_pairs)]}"
    return f"--{flag.replace('_', '-')} {value}"


def show_params(title: str, entries: dict, json_out: bool) -> None:
    """``rnncon methods`` / ``rnncon criteria``: each one's declared parameters (entries:
    name -> (data kinds, Params))."""
    rows = {name: {"kinds": kinds, "params": params.describe()}
            for name, (kinds, params) in entries.items()}
    if json_out:
        emit(rows)
        return
    from rich.console import Console
    from rich.table import Table
    console = Console(width=140)
    for name, row in rows.items():
        table = Table(title=f"{title} {name} ({row['kinds']})", title_justify="left")
        for col in ("option", "type", "default", "allowed", "help"):
            table.add_column(col, overflow="fold")
        for p in row["params"]:
            table.add_row("--" + p["name"].replace("_", "-"), p["type"],
                          "auto" if p["default"] is None else str(p["default"]), p["allowed"],
                          p["help"] + (f" (with {p['when']})" if "when" in p else ""))
        if not row["params"]:
            table.add_row("(none)", "", "", "", "")
        console.print(table)


def main(argv: list[str] | None = None) -> None:
    """The `rnncon` entry point: a deliberate error (RNNConError) or a usage error prints one
    line ``error: ...`` on stderr and exits with code 2 (a stopped job: 130); any other exception is a bug: one line
    naming the log that holds its traceback, exit code 3. Never a traceback on the screen."""
    from typer.exceptions import Abort, TyperException
    quiet_tensorflow()
    try:
        code = app(args=argv, standalone_mode=False)
    except RNNConError as e:
        _fail(str(e), error_exit_code(e))
    except TyperException as e:            # typer's (vendored click's) usage errors
        if type(e).__name__ == "NoArgsIsHelpError":     # `rnncon` alone: the help
            e.show()
            sys.exit(e.exit_code)
        ctx, words = getattr(e, "ctx", None), []
        while ctx is not None and ctx.parent is not None:      # report html: both words
            words.insert(0, ctx.info_name)
            ctx = ctx.parent
        hint = f" (see `rnncon {' '.join(words)} --help`)" if words else " (see `rnncon --help`)"
        _fail(e.format_message() + hint, e.exit_code if e.exit_code else 2)
    except (Abort, KeyboardInterrupt):
        _fail(_interrupted(), EXIT_INTERRUPTED)
    except Exception as e:          # a bug: one line, the traceback in a log
        _fail(_internal(e), EXIT_INTERNAL)
    if code == EXIT_INTERRUPTED:    # typer turns Ctrl-C into a silent exit code 130
        _fail(_interrupted(), EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else EXIT_PASSED)


def error_exit_code(e: RNNConError) -> int:
    """The exit code of a deliberate error: 130 for a stopped job (Ctrl-C, `rnncon runs
    --cancel`), 2 for any other (bad input)."""
    return EXIT_INTERRUPTED if isinstance(e, JobCancelled) else EXIT_INPUT


def _interrupted() -> str:
    """The one line of a Ctrl-C: the runs it cancelled (their finished outputs are kept)."""
    runs = [r for r in _STARTED if r._closed]
    if not runs:
        return "interrupted"
    return "interrupted: " + "; ".join(f"run {r.run_id} marked cancelled, its finished "
                                       f"outputs are kept in {r.path}" for r in runs)


def _fail(message: str, code: int = 2) -> None:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
