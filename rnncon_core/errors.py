"""Errors the tool raises on purpose: each says what is wrong and what to do."""

import difflib


class RNNConError(Exception):
    """Base class: every error the engine raises for bad input or missing pieces."""


class DataMissingError(RNNConError):
    """A data set is not installed here; the message names the command that installs it."""


class ModelLoadError(RNNConError):
    """A model file is missing, corrupt, unsafe or of the wrong kind."""


class UnsupportedModelError(RNNConError):
    """A model holds a layer or a structure the tracer does not support."""


class InputError(RNNConError):
    """Inputs of the wrong shape, dtype, range, or containing NaN/inf."""


class RunStoreError(RNNConError):
    """The run store cannot be used (unwritable, or its index is corrupt); the message names
    the path and what to do."""


class JobCancelled(RNNConError):
    """Raised inside a job when its cancel flag was set."""


def did_you_mean(name: str, choices) -> str:
    """The hint `` (did you mean NEAREST?)`` for a misspelt name (the nearest of ``choices``),
    or "" when none is near."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
