"""Validity of faults (issue "Faults a reader would accept"): the fitted checks flag what no
reader would accept and pass clean held-out inputs at the stated rate; fault rows keep their
verdict; only valid faults count, explore and reset a root's staleness; fault classes group
near-duplicates."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.campaign import CAMPAIGN_PARAMS, Campaign, make_guide
from rnncon_core.campaign.classes import class_counts, cluster_pair, fault_classes
from rnncon_core.campaign.prepare import make_abstraction
from rnncon_core.campaign.queue import FaultSet
from rnncon_core.errors import InputError
from rnncon_core.validity import (VALIDATORS, Oracle, Validator, Verdict, fit_validity,
                                  get_validator, oracle_for)


@pytest.fixture(scope="module")
def digits_checks(tmp_path_factory):
    """The two fitted checks of the built-in 8x8 digits, fitted briefly into a temp folder."""
    from rnncon_core.data import load_dataset
    from rnncon_core.validity.fitted import Distribution, Reference
    ds = load_dataset("digits")
    folder = tmp_path_factory.mktemp("validators")
    out = fit_validity(ds, flag_rate=0.02, folder=folder,
                       epochs={"distribution": 60, "reference": 10})
    return ds, Distribution.load(folder), Reference.load(folder), out


def _images(x):                       # (N, T, F) sequences whose image is the transpose
    return np.swapaxes(x, 1, 2)


def test_distribution_flags_out_of_distribution_and_passes_clean(digits_checks):
    ds, dist, _, out = digits_checks
    x = ds.x_test
    clean = dist.check(x, ds.y_test).valid.mean()
    assert clean >= 0.95                        # threshold: 2 % of held-out clean inputs
    rng = np.random.default_rng(0)
    noise = rng.random(x.shape).astype(np.float32)
    inverted = 1.0 - x
    rotated = _images(np.rot90(_images(x), 1, axes=(1, 2))).copy()
    for what, bad, least in (("noise", noise, 0.99), ("inverted", inverted, 0.99),
                             ("rotated 90°", rotated, 0.5)):
        flagged = (~dist.check(bad, ds.y_test).valid).mean()
        assert flagged >= least, f"{what}: only {flagged:.0%} flagged"
    v = dist.check(noise[:3], ds.y_test[:3])
    assert all(r.startswith("unlike the training data") for r in v.reason)
    assert "distribution" in v.scores and v.scores["distribution"].shape == (3,)


def test_reference_reads_labels_and_refuses_a_changed_digit(digits_checks):
    ds, _, ref, out = digits_checks
    assert ref.card["test_accuracy"] >= 0.9
    assert ref.check(ds.x_test, ds.y_test, ds.x_test).valid.all()   # unchanged: valid
    sure = ref.check(ds.x_test, ds.y_test).valid.mean()     # read with probability >= 0.95
    assert sure >= 0.6
    wrong = (ds.y_test + 1) % 10                 # the same digits, given another label
    v = ref.check(ds.x_test, wrong)
    assert (~v.valid).mean() >= 0.95
    assert "reference classifier reads" in v.reason[0]
    # with roots: a digit swapped for another class's digit no longer reads as its root
    other = np.array([np.flatnonzero(ds.y_test != t)[0] for t in ds.y_test[:60]])
    v = ref.check(ds.x_test[other], ds.y_test[:60], ds.x_test[:60])
    assert (~v.valid).mean() >= 0.9
    # the oracle's measured share of flagged clean test inputs is what its cards say
    assert out["test_flagged"] == pytest.approx(
        (~Oracle([digits_checks[1], ref]).check(ds.x_test, ds.y_test, ds.x_test).valid).mean())


def test_fitted_check_refuses_inputs_of_another_shape(digits_checks):
    _, dist, _, _ = digits_checks
    with pytest.raises(InputError, match="fitted on"):
        dist.check(np.zeros((2, 5, 5), np.float32), np.zeros(2, int))


def test_oracle_combines_checks_and_names_what_failed():
    class Even(Validator):
        name = "even"

        def check(self, x, labels, roots=None):
            ok = np.asarray(labels) % 2 == 0
            return Verdict(ok, np.array(["" if o else "odd" for o in ok]),
                           {"even": ok.astype(float)})

    class Small(Validator):
        name = "small"

        def check(self, x, labels, roots=None):
            ok = np.asarray(labels) < 3
            return Verdict(ok, np.array(["" if o else "big" for o in ok]), {})

    v = Oracle([Even(), Small()]).check(np.zeros((5, 1)), np.arange(5))
    np.testing.assert_array_equal(v.valid, [True, False, True, False, False])
    assert list(v.reason) == ["", "odd", "", "odd; big", "big"]
    rows = v.rows()
    assert set(rows) == {"valid", "reason", "score/even"}
    assert Oracle([], unchecked="why").check(np.zeros((2, 1)), [0, 1]).valid.all()


def test_registry_and_off():
    assert {"distribution", "reference", "reader-edits", "user-reference"} <= set(VALIDATORS)
    with pytest.raises(InputError, match="unknown validity check"):
        get_validator("no-such-check")
    off = oracle_for("mnist", checks="off")
    assert off.checks == [] and "off" in off.describe()[0]


def test_text_reader_edits_refuse_an_antonym():
    from rnncon_core.text.eda import Lexicon
    from rnncon_core.text.generators import load_vocabulary
    lex = Lexicon(load_vocabulary())
    check = VALIDATORS.load("reader-edits")(lex)
    root = lex.ids_of("the film was good and the actors were great".split(), True, 20)
    fine = lex.ids_of("the movie was good and the actors were great".split(), True, 20)
    bad = lex.ids_of("the film was bad and the actors were great".split(), True, 20)
    v = check.check(np.stack([fine, bad]), np.array([1, 1]), np.stack([root, root]))
    assert v.valid.tolist() == [True, False]
    assert "good->bad" in v.reason[1]


def test_faultset_counts_valid_apart():
    fs = FaultSet()
    lab, pred, st = np.array([1, 1, 2]), np.array([3, 3, 4]), np.array([7, 7, 9])
    new = fs.new_mask(lab, pred, st, np.array([False, True, True]))
    assert new.tolist() == [True, True, True]          # a valid fault beside an invalid twin
    fs.add(x=np.zeros((3, 2)), root=np.array([0, 0, 5]), label=lab, pred=pred, state=st,
           valid=np.array([False, True, True]), reason=np.array(["x", "", ""]))
    assert len(fs) == 3 and fs.n_valid == 2 and fs.states == 2
    assert fs.valid_pairs == {(1, 3), (2, 4)} and fs.valid_roots == {0, 5}
    assert fs.known_valid(lab, pred, st).tolist() == [True, True, True]
    assert not fs.new_mask(lab, pred, st, np.array([False, True, True])).any()


def test_fault_classes_group_near_duplicates():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0] * 8, [10.0] * 8, [-10.0] * 4 + [10.0] * 4])
    feat = np.concatenate([c + rng.normal(0, 0.3, (40, 8)) for c in centres])
    ids = cluster_pair(feat)
    assert len(np.unique(ids)) == 3
    # each blob is one class, whatever HDBSCAN left as noise
    for b in range(3):
        assert len(np.unique(ids[b * 40:(b + 1) * 40])) == 1
    assert cluster_pair(feat[:3]).tolist() == [0, 0, 0]       # too few: one class
    lab = np.array([1] * 120 + [2] * 2)
    pred = np.array([0] * 120 + [0] * 2)
    valid = np.ones(122, bool)
    valid[0] = False
    cls = fault_classes(lab, pred, np.concatenate([feat, feat[:2]]), valid)
    assert cls[0] == -1 and len(np.unique(cls[cls >= 0])) == 4
    c = class_counts({"label": lab, "pred": pred, "root": np.arange(122) % 7, "valid": valid,
                      "feature": np.concatenate([feat, feat[:2]])})
    assert (c["fault_classes"], c["valid_faults"], c["invalid_faults"], c["valid_pairs"],
            c["fault_roots"]) == (4, 121, 1, 2, 7)


class _Half(Validator):
    """Valid when the input's first value is below its median: half the faults invalid."""
    name = "half"

    def check(self, x, labels, roots=None):
        ok = np.asarray(x)[:, 0, 0] < 0.5
        return Verdict(ok, np.array(["" if o else "first value high" for o in ok]),
                       {"half": np.asarray(x)[:, 0, 0]})


def test_campaign_keeps_verdicts_and_explores_only_valid_faults(tiny_lstm):
    from rnncon_core.coverage import build_profile
    x = np.random.default_rng(11).random((24, 5, 3)).astype("float32")
    build_profile(tiny_lstm, x)
    y = np.asarray(tiny_lstm(x)).argmax(1)
    values = CAMPAIGN_PARAMS.check("test", {"parents": 4, "mutants": 4, "max_linf": 0.5,
                                            "noise": 0.3})
    camp = Campaign(tiny_lstm, x, y, None, values, 3, "sequence",
                    make_abstraction(tiny_lstm, values), validity=Oracle([_Half()]))
    camp.start()
    for _ in range(40):
        camp.step()
    f = camp.faults.rows
    valid = f["valid"].astype(bool)
    assert valid.any() and (~valid).any()
    np.testing.assert_array_equal(valid, f["x"][:, 0, 0] < 0.5)
    assert all(r == "first value high" for r in f["reason"][~valid])
    assert f["feature"].shape == (len(f), tiny_lstm.layers[-1].input.shape[-1])
    # a valid new fault becomes a parent (explore_faults), an invalid one never does
    q = camp.queue.rows["x"].reshape(len(camp.queue), -1)
    inq = [bool((q == fx.ravel()).all(1).any()) for fx in f["x"]]
    assert all(inq[i] for i in np.flatnonzero(valid))
    assert not any(inq[i] for i in np.flatnonzero(~valid))
    assert camp.curve[-1][8] == camp.faults.n_valid
    assert camp.validity_seconds > 0


class _Run:
    """A finished generation run as retraining reads it (outputs.npz only)."""
    kind, run_id, status, config = "generate", "r1", "done", {"split": "test"}

    def __init__(self, out):
        self.out = out

    def load_npz(self, name):
        return self.out if name == "outputs" else None


def test_retraining_takes_only_valid_adversarial_inputs():
    from rnncon_core.retrain import adversarial_inputs
    out = {"x_gen": np.arange(5, dtype=np.float32)[:, None], "y_seed": np.arange(5),
           "adversarial": np.array([1, 1, 1, 0, 1], bool), "seed_index": np.arange(5) + 10,
           "valid": np.array([1, 0, 1, 1, 0], bool)}
    got = adversarial_inputs(_Run(out))
    assert got["seed_index"].tolist() == [10, 12] and got["dropped_invalid"] == 2
    every = adversarial_inputs(_Run(out), valid_only=False)
    assert every["seed_index"].tolist() == [10, 11, 12, 14] and every["dropped_invalid"] == 0
    out["valid"][:] = False
    with pytest.raises(InputError, match="no adversarial"):
        adversarial_inputs(_Run(out))


def test_generation_summary_splits_valid_adversarial():
    from rnncon_core.generate.base import GenerationResult
    import dataclasses
    names = {f.name for f in dataclasses.fields(GenerationResult)}
    n = 4
    kw = {"method": "m", "x_seed": np.zeros((n, 2, 2), np.float32),
          "x_gen": np.ones((n, 2, 2), np.float32), "y_seed": np.zeros(n, np.int64),
          "pred_seed": np.zeros(n, np.int64), "pred_gen": np.array([1, 1, 0, 1]),
          "conf_gen": np.ones(n), "adversarial": np.array([1, 1, 0, 1], bool),
          "iterations": np.ones(n), "n_activated": np.full(n, -1),
          "targets": np.zeros((n, 1)), "seconds": 1.0, "input_kind": "image",
          "extras": {"valid": np.array([1, 0, 1, 1], bool)}}
    r = GenerationResult(**{k: v for k, v in kw.items() if k in names})
    s = r.summary("x")
    assert s["n_adversarial"] == 3 and s["n_valid_adversarial"] == 2
    assert s["valid_adv_rate"] == pytest.approx(0.5)


def test_a_stop_request_ends_the_fit_at_the_next_batch_and_keeps_nothing(tmp_path):
    """Ctrl-C while a campaign fits a data set's checks: the fit ends within a batch of the
    request (JobCancelled, which says how to go on), and no half-fitted check is saved."""
    from rnncon_core.data import load_dataset
    from rnncon_core.errors import JobCancelled
    ds = load_dataset("digits")
    batches = []

    def stop_after_three():
        batches.append(1)
        return len(batches) > 3
    with pytest.raises(JobCancelled, match="validity train --dataset digits"):
        fit_validity(ds, folder=tmp_path, should_stop=stop_after_three,
                     epochs={"distribution": 60, "reference": 10})
    assert len(batches) == 5        # asked after each of 4 batches (stopped at the 4th), then
    #                                 once after the autoencoder's fit: the reference never ran
    assert list(tmp_path.iterdir()) == []
