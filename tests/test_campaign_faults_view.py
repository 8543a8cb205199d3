"""What the Campaign page reads from a run's fault rows (rnncon_core.reports.faults): the
headline counts, the gallery's groups and members, the curves from zero; for runs whose rows
carry the validity oracle's verdicts and for older runs without them."""
import numpy as np
import pytest

from rnncon_core.reports import faults as fview


def _rows(checked: bool) -> dict:
    rows = {"label": np.array([3, 3, 3, 5, 5, 1]), "pred": np.array([8, 8, 2, 6, 6, 7]),
            "root": np.array([0, 1, 1, 2, 2, 4]), "op": np.array(["noise"] * 6),
            "x": np.zeros((6, 4, 4), np.float32), "state": np.arange(6),
            "seconds": np.array([1.0, 2.0, 2.0, 3.5, 5.0, 6.0]),
            "calls": np.array([100, 200, 200, 350, 500, 600])}
    if checked:
        rows |= {"valid": np.array([True, True, True, True, False, False]),
                 "reason": np.array(["", "", "", "", "reference reads 6, not 5",
                                     "out of distribution"]),
                 "fault_class": np.array([0, 0, 1, 2, -1, -1])}
    return rows


CURVE = {"seconds": np.array([1.0, 4.0, 7.0]), "calls": np.array([100, 400, 700]),
         "coverage": np.array([0.5, 0.6, 0.65]), "distinct_faults": np.array([1, 4, 6])}


def test_headline_of_checked_rows_counts_classes_roots_and_valid_pairs():
    h = fview.headline(_rows(True), CURVE)
    assert (h["fault_classes"], h["fault_roots"], h["valid_pairs"]) == (3, 3, 3)
    assert (h["valid_faults"], h["invalid_faults"], h["distinct_faults"]) == (4, 2, 6)
    assert h["coverage"] == 0.65 and h["calls"] == 700
    assert fview.headline_text(h).startswith("3 fault classes (4 valid of 6 distinct faults)")


def test_older_rows_count_distinct_faults_and_pairs():
    h = fview.headline(_rows(False), CURVE)
    assert not h["checked"] and (h["distinct_faults"], h["distinct_pairs"]) == (6, 4)
    assert fview.headline_text(h).startswith("6 distinct faults, coverage 0.6500")
    t = fview.groups(_rows(False), "all")
    assert t["faults"].sum() == 6 and t["group"].iloc[0] == "3 → 8"
    assert fview.members(_rows(False), "3 → 8", "all") == [0, 1]


@pytest.mark.parametrize("which,total,first", [("valid", 4, "class 0"),
                                               ("invalid", 2, "invalid 1 → 7"),
                                               ("all", 6, "class 0")])
def test_groups_filter_and_members(which, total, first):
    rows = _rows(True)
    t = fview.groups(rows, which)
    assert t["faults"].sum() == total and t["group"].iloc[0] == first
    for g in t["group"]:           # every group's members are its faults, none twice
        assert len(fview.members(rows, g, which)) == int(t.set_index("group").loc[g, "faults"])
    assert fview.members(rows, "invalid 5 → 6", which) == ([] if which == "valid" else [4])


def test_caption_names_the_root_seed_and_an_invalid_faults_reason():
    rows = _rows(True)
    assert fview.caption(rows, 1) == "3 → 8 · seed 1 · noise"
    assert fview.caption(rows, 4).endswith("invalid: reference reads 6, not 5")


def test_curves_start_at_zero_and_reach_the_last_batch():
    over = fview.over_time(_rows(True), CURVE, "seconds")
    for name in ("distinct faults", "valid faults", "fault classes"):
        x, y = over[name]
        assert x[0] == 0 and y[0] == 0 and x[-1] == 7.0
    assert over["fault classes"][1][-1] == 3 and over["valid faults"][1][-1] == 4
    fig = fview.curves_figure(_rows(True), CURVE, "calls")
    assert fig.layout.yaxis.rangemode == "tozero" and fig.layout.yaxis2.rangemode == "tozero"
    assert fig.layout.xaxis.rangemode == "tozero"
    assert {t.name for t in fig.data} == {"distinct faults", "valid faults", "fault classes",
                                          "coverage"}
    empty = fview.curves_figure({}, {"seconds": np.zeros(0), "calls": np.zeros(0),
                                     "coverage": np.zeros(0),
                                     "distinct_faults": np.zeros(0)})
    assert not empty.data and fview.groups({}, "all").empty
