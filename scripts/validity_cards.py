"""Re-measure the figures in the cards of a data set's fitted validity checks (the share of the
clean test split each check and the oracle flag), after a change of the checks' rules:

    .venv/bin/python scripts/validity_cards.py mnist digits fashion-mnist
"""
from __future__ import annotations

import sys

import numpy as np


def main(names) -> None:
    from rnncon_core.data import load_dataset
    from rnncon_core.validity import Oracle, validators_dir
    from rnncon_core.validity.fitted import Distribution, Reference
    for name in names:
        ds = load_dataset(name)
        folder = validators_dir(ds)
        dist, ref = Distribution.load(folder), Reference.load(folder)
        x, y = ds.x_test, ds.y_test
        flagged = float(np.mean(~Oracle([dist, ref]).check(x, y, x).valid))
        dist.card["test_flagged"] = float(np.mean(~dist.check(x, y).valid))
        ref.card["test_flagged"] = float(np.mean(~ref.check(x, y, x).valid))
        ref.card["test_flagged_absolute"] = float(np.mean(~ref.check(x, y).valid))
        for c in (dist, ref):
            c.card["oracle_test_flagged"] = flagged
            c.save(folder)
        print(f"{name}: the oracle flags {flagged:.2%} of {len(y):,} clean test inputs "
              f"(autoencoder {dist.card['test_flagged']:.2%}; reference, absolute "
              f"{ref.card['test_flagged_absolute']:.2%}, test accuracy "
              f"{ref.card['test_accuracy']:.2%})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["mnist", "digits", "fashion-mnist"])
