"""A user's own reference classifier as a validity check (a .keras file, loaded safely)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..zoo import class_labels, load_model
from .base import Validator, Verdict


class UserReference(Validator):
    name = "user-reference"
    kinds = ("image", "sequence", "text")
    title = "the user's reference classifier reads the seed's label"

    def __init__(self, path):
        if path is None:
            raise InputError("user-reference: give the path of your reference model (.keras)")
        self.path = str(path)
        self.model = load_model(self.path)

    def check(self, x, labels, roots=None) -> Verdict:
        if tuple(self.model.input_shape[1:]) != tuple(np.shape(x)[1:]):
            raise InputError(f"the reference model {self.path} reads inputs of shape "
                             f"{tuple(self.model.input_shape[1:])}, not {np.shape(x)[1:]}")
        p = np.asarray(self.model.predict(np.asarray(x), verbose=0, batch_size=512))
        read = class_labels(p)
        labels = np.asarray(labels, np.int64)
        ok = read == labels
        reason = np.array(["" if o else f"your reference model reads {r}, not {t}"
                           for o, r, t in zip(ok, read, labels)])
        return Verdict(ok, reason, {"user-reference": read.astype(np.float32)})

    def get_config(self) -> dict:
        return {"name": self.name, "path": self.path}
