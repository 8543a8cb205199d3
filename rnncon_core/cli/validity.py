"""`rnncon validity`: fit, list and apply the checks that decide whether a generated input is
still a valid input of its seed's class (docs/validity.md)."""
from __future__ import annotations

from collections import Counter
from typing import Optional

import typer

from .common import JSON_OPT, app, checked, emit, log, preflight, read_labels, read_npy
from ..errors import InputError

validity_app = typer.Typer(no_args_is_help=True, help="Validity checks of generated inputs: "
                           "would a reader still give a fault its seed's label?")
app.add_typer(validity_app, name="validity")


@validity_app.command("list")
def list_cmd(json_out: bool = JSON_OPT):
    """Every validity check, the input kinds it reads, and the default checks per kind."""
    from ..validity import DEFAULT_CHECKS, VALIDATORS
    rows = [{"name": n, "kinds": list(c.kinds), "what": c.title}
            for n, c in VALIDATORS.classes().items()]
    if json_out:
        emit({"checks": rows, "default": {k: list(v) for k, v in DEFAULT_CHECKS.items()}})
        return
    for r in rows:
        typer.echo(f"{r['name']:16s} {','.join(r['kinds']):22s} {r['what']}")
    for kind, names in DEFAULT_CHECKS.items():
        typer.echo(f"default for {kind}: {', '.join(names)}")


@validity_app.command("train")
def train_cmd(
    dataset: str = typer.Option(..., "--dataset", help="A built-in data set or your own .npz "
                                "(x_train, y_train, x_test, y_test)."),
    flag_rate: float = typer.Option(0.01, "--flag-rate", help="Share of held-out clean "
                                    "training inputs the autoencoder flags (sets its "
                                    "threshold)."),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = JSON_OPT,
):
    """Fit the data set's autoencoder and reference classifier (minutes on 2 cores); campaigns
    and checks on this data set use them from then on."""
    from ..validity import fit_validity
    if not 0 < flag_rate < 0.5:
        raise InputError(f"--flag-rate {flag_rate}: give a share in (0, 0.5), e.g. 0.01")
    checked(seed=seed)
    preflight(dataset=dataset)
    out = fit_validity(dataset, flag_rate=flag_rate, seed=seed, log=log)
    if json_out:
        emit(out)
        return
    d, r = out["distribution"], out["reference"]
    log(f"fitted in {out['folder']}: autoencoder threshold {d['threshold']:.4g} (flags "
        f"{d['test_flagged']:.2%} of the clean test split), reference classifier "
        f"{r['test_accuracy']:.2%} accurate (flags {r['test_flagged']:.2%}); together they "
        f"flag {out['test_flagged']:.2%} of the clean test inputs")


@validity_app.command("check")
def check_cmd(
    inputs: str = typer.Option(..., "--inputs", help="Generated inputs (.npy)."),
    labels: str = typer.Option(..., "--labels", help="Their seeds' labels (.npy)."),
    dataset: str = typer.Option(..., "--dataset", help="The data set the checks were fitted "
                                "on (built-in name or your .npz)."),
    roots: Optional[str] = typer.Option(None, "--roots", help="The root seeds (.npy, one per "
                                        "input; text checks compare with them)."),
    reference_model: Optional[str] = typer.Option(None, "--reference-model",
                                                  help="Your own reference classifier "
                                                       "(.keras)."),
    json_out: bool = JSON_OPT,
):
    """Check inputs: how many are valid, and why the others are not."""

    from ..validity import oracle_for
    preflight(models=[reference_model] if reference_model else (), dataset=dataset)
    x = read_npy(inputs, "--inputs")
    y = read_labels(labels, len(x))
    r = read_npy(roots, "--roots") if roots else None
    if r is not None and len(r) != len(x):
        raise InputError(f"{len(x)} inputs but {len(r)} roots: give one root per input")
    oracle = oracle_for(dataset, train=False, reference_model=reference_model)
    v = oracle.check(x, y, r)
    reasons = Counter(s.split(" (")[0] for s in v.reason.tolist() if s)
    out = {"inputs": len(x), "valid": int(v.valid.sum()), "invalid": int((~v.valid).sum()),
           "checks": oracle.describe(), "reasons": dict(reasons.most_common(10))}
    if json_out:
        emit(out)
        return
    log(f"{out['valid']:,} of {out['inputs']:,} inputs valid ({out['invalid']:,} invalid)")
    for line in oracle.describe():
        log(f"  check {line}")
    for why, n in reasons.most_common(10):
        log(f"  {n:,} {why}")
