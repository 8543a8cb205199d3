"""The dashboard's figure builders and tables: pure functions, checked against the data."""
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the dashboard package
from dashboard import tables  # noqa: E402
from rnncon_core.reports import charts, results  # noqa: E402


def _by_layer(rates):
    rows = [("lstm_1", "lstm", 100, 40), ("dense_32", "dense", 32, 8), ("output", "dense", 10, 5)]
    return pd.DataFrame([{"layer": l, "kind": k, "total": t, "covered": c, "rate": c / t}
                         for l, k, t, c in rows][: len(rates)])


def test_with_all_sums_covered_and_total():
    df = charts.with_all(_by_layer([1, 1, 1]))
    all_row = df[df["layer"] == "All"].iloc[0]
    assert all_row["total"] == 142 and all_row["covered"] == 53
    assert all_row["rate"] == pytest.approx(53 / 142)
    # an existing "All" row is kept, not added twice
    assert (charts.with_all(df)["layer"] == "All").sum() == 1


def test_coverage_by_layer_one_trace_per_criterion_with_all():
    fig = charts.coverage_by_layer({"RConC": _by_layer([1, 1, 1]), "NC": _by_layer([1, 1, 1])},
                                   threshold=0.25)
    assert [t.name for t in fig.data] == ["RConC", "NC"]
    assert fig.data[0].orientation == "h"             # labels on their own rows: no overlap
    assert list(fig.data[0].y) == ["lstm_1", "dense_32", "output", "All"]
    assert fig.data[0].x[-1] == pytest.approx(53 / 142)
    assert fig.data[0].text[-1] == f"{53 / 142:.1%}"
    assert "0.25" in fig.layout.title.text
    json.loads(fig.to_json())      # serializable (what st.plotly_chart sends)


def test_growth_curves_x_is_number_of_inputs():
    fig = charts.growth_curves({"RConC": [0.1, 0.2, 0.25], "NC": [0.3, 0.3, 0.4]})
    assert list(fig.data[0].x) == [1, 2, 3]
    assert list(fig.data[1].y) == [0.3, 0.3, 0.4]


def test_threshold_sweep_one_panel_per_layer_all_first():
    rows = [{"threshold": t, "criterion": c, "layer": l, "rate": 1 - t}
            for t in (0.1, 0.5, 0.9) for c in ("RConC", "NC") for l in ("lstm_1", "All")]
    fig = charts.threshold_sweep(pd.DataFrame(rows), chosen=0.5)
    titles = [a.text for a in fig.layout.annotations if a.text in ("All", "lstm_1")]
    assert titles == ["All", "lstm_1"]
    assert len(fig.data) == 4                          # 2 criteria x 2 layers
    assert sum(t.showlegend for t in fig.data) == 2    # one legend entry per criterion
    assert list(fig.data[0].x) == [0.1, 0.5, 0.9]


def test_threshold_selection_marks_the_chosen_threshold():
    scores = pd.DataFrame({"threshold": [0.5, 0.25, 0.75], "score": [0.2, 0.4, 0.1]})
    fig = charts.threshold_selection(scores, chosen=0.25)
    assert list(fig.data[0].x) == ["0.25", "0.5", "0.75"]
    colors = list(fig.data[0].marker.color)
    assert colors.count("#d62728") == 1 and colors[0] == "#d62728"


def _gate_table(values):
    return pd.DataFrame(values, index=["z·x", "z·h", "r·x", "r·h"],
                        columns=list(range(values.shape[1])))


def test_gate_heatmap_keeps_rows_columns_and_values():
    v = np.random.default_rng(0).random((4, 5))
    fig = charts.gate_heatmap(_gate_table(v))
    assert list(fig.data[0].y) == ["z·x", "z·h", "r·x", "r·h"]
    assert list(fig.data[0].x) == ["0", "1", "2", "3", "4"]
    np.testing.assert_allclose(np.asarray(fig.data[0].z), v)
    assert "%{z" in fig.data[0].hovertemplate


def test_gate_heatmap_pair_difference_is_adv_minus_seed():
    rng = np.random.default_rng(1)
    a, b = rng.random((4, 6)), rng.random((4, 6))
    fig = charts.gate_heatmap_pair(_gate_table(a), _gate_table(b))
    assert len(fig.data) == 3
    np.testing.assert_allclose(np.asarray(fig.data[2].z), b - a)
    assert fig.data[2].zmin == pytest.approx(-np.abs(b - a).max())
    with pytest.raises(ValueError):
        charts.gate_heatmap_pair(_gate_table(a), _gate_table(b[:, :3]))


def test_image_triplets_rows_and_difference():
    rng = np.random.default_rng(2)
    seeds, gen = rng.random((3, 8, 8)), rng.random((3, 8, 8))
    fig = charts.image_triplets(seeds, gen, [("7", "1 (90 %)")] * 3)
    assert len(fig.data) == 9
    np.testing.assert_allclose(np.asarray(fig.data[5].z), gen[1] - seeds[1])
    l2 = np.sqrt(((gen[0] - seeds[0]) ** 2).sum())
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:3] == ["seed: 7", "generated: 1 (90 %)", f"difference (L2 {l2:.3f})"]
    with pytest.raises(ValueError):
        charts.image_triplets(seeds, gen[:2], [("a", "b")] * 3)


def test_image_grid_square_pixels_per_subplot():
    fig = charts.image_grid(np.zeros((5, 4, 4)), list("abcde"), cols=3)
    assert len(fig.data) == 5
    assert fig.layout.yaxis2.scaleanchor == "x2"
    assert [a.text for a in fig.layout.annotations] == list("abcde")


def test_perturbation_map_rows_as_customdata_and_discrete_colors():
    pts = np.array([[0, 0], [1, 1], [2, 0], [3, 1]], dtype=float)
    fig = charts.perturbation_map(pts, [1, 2, 1, 10], "class")
    names = [t.name for t in fig.data]
    assert names == ["1", "2", "10"]                  # numeric order, not "1", "10", "2"
    colors = [t.marker.color for t in fig.data]
    assert len(set(colors)) == 3                      # categorical: one distinct colour each
    rows = sorted(int(r[0]) for t in fig.data for r in t.customdata)
    assert rows == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        charts.perturbation_map(np.zeros((3, 3)), [1, 2, 3], "c")


def test_perturbation_map_counts_on_a_continuous_scale_and_selection_rows():
    pts = np.array([[0, 0], [1, 1], [2, 0], [3, 1]], dtype=float)
    fig = charts.perturbation_map(pts, [0, 3, 1, 3], "contributions activated", continuous=True)
    assert len(fig.data) == 1 and fig.data[0].marker.colorscale is not None
    assert fig.data[0].marker.colorbar.title.text == "contributions activated"
    assert list(fig.data[0].marker.color) == [0, 3, 1, 3]
    # a click (customdata) and a box selection (trace and index only) give the same rows
    assert charts.selected_rows(fig, [{"customdata": [2]}]) == [2]
    assert charts.selected_rows(fig, [{"curve_number": 0, "point_index": 1},
                                      {"curve_number": 0, "point_index": 3}]) == [1, 3]
    cat = charts.perturbation_map(pts, [1, 2, 1, 10], "class")
    assert charts.selected_rows(cat, [{"curve_number": 0, "point_index": 1}]) == [2]
    # customdata sent back in Plotly's typed-array form: the trace and index decide
    typed = {"customdata": {"dtype": "i8", "bdata": "AQ=="}, "curve_number": 0,
             "point_index": 1}
    assert charts.selected_rows(cat, [typed]) == [2]
    assert "dragmode" not in fig.layout.to_plotly_json()   # Streamlit's click selection stays on


def test_before_after_draws_dots_and_arrows_coloured_by_better_or_worse():
    m = pd.DataFrame({"metric": ["Accuracy", "F1"], "before": [0.9712, 0.85],
                      "after": [0.9734, 0.80], "control": [0.9700, 0.84]})
    fig = charts.before_after(m)
    dots = [t for t in fig.data if t.x and t.x[0] is not None and t.mode == "markers+text"]
    assert [(t.name, t.x[0]) for t in dots] == [
        ("before", 0.9712), ("after", 0.9734), ("control", 0.97),
        ("before", 0.85), ("after", 0.80), ("control", 0.84)]
    assert dots[1].marker.color == charts.BETTER and dots[4].marker.color == charts.WORSE
    assert dots[1].text[0] == "0.9734"
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    assert [(a.ax, a.x, a.arrowcolor) for a in arrows] == [
        (0.9712, 0.9734, charts.BETTER), (0.85, 0.80, charts.WORSE)]
    lo, hi = fig.layout.xaxis.range                   # each row zooms to its own values
    assert lo < 0.97 and 0.9734 < hi < 0.98
    titles = [a.text for a in fig.layout.annotations if not a.showarrow]
    assert "Δ +0.0022" in titles[0] and "after − control +0.0034" in titles[0]
    bare = charts.before_after(m.drop(columns="control"))   # no control arm: no diamond
    assert not [t for t in bare.data if t.name == "control"]


def test_repeats_panels():
    r = pd.DataFrame({"metric": ["Accuracy"] * 3, "stage": ["before", "after", "after"],
                      "value": [0.9, 0.91, 0.93]})
    fig = charts.repeats(r)
    assert {t.name for t in fig.data} == {"before", "after"}


def test_every_heatmap_of_an_image_triplet_has_a_colour_bar():
    seeds = np.zeros((2, 4, 4))
    gen = seeds + 0.1
    fig = charts.image_triplets(seeds, gen, [("a", "b"), ("c", "d")])
    shown = [t.colorbar.title.text for t in fig.data if t.showscale]
    assert shown == ["pixel", "gen − seed"]


def test_compare_runs_skips_missing_keys():
    fig = charts.compare_runs({"run-aaaaaa": {"adv_rate": 0.5, "avg_l2": 0.1},
                               "run-bbbbbb": {"adv_rate": 0.7}}, ["adv_rate", "avg_l2", "nope"])
    assert [a.text for a in fig.layout.annotations] == ["adv_rate", "avg_l2"]
    assert len(fig.data) == 4


def test_table1_puts_ours_beside_the_papers():
    row = {"name": "mnist-lstm", "architecture": "LSTM(128) -> ...", "params": 84842,
           "neurons": 170, "contributions_per_step": 1066, "cons_paper_convention": 29848,
           "contributions_total": 28714, "test_accuracy": 0.9695,
           "paper": {"params": 84842, "neurons": 170, "cons": 29848, "accuracy": 98.76}}
    df = tables.table1([row, {**row, "name": "x", "test_accuracy": None}])
    assert df.loc[0, "test acc. % (ours)"] == 96.95
    assert df.loc[0, "test acc. % (paper)"] == 98.76
    assert pd.isna(df.loc[1, "test acc. % (ours)"])


def test_per_input_norms_match_numpy():
    rng = np.random.default_rng(3)
    xs, xg = rng.random((4, 3, 3)).astype(np.float32), rng.random((4, 3, 3)).astype(np.float32)
    out = {"x_seed": xs, "x_gen": xg, "y_seed": np.arange(4), "adversarial": np.ones(4, bool),
           "targets": np.zeros((4, 2))}
    df = tables.per_input(out)
    assert "targets" not in df and "x_seed" not in df
    d = (xg.astype(np.float64) - xs).reshape(4, -1)
    np.testing.assert_allclose(df["l2"], np.linalg.norm(d, axis=1), rtol=1e-6)
    np.testing.assert_allclose(df["linf"], np.abs(d).max(1), rtol=1e-6)
    ids = {"x_seed": np.array([[1, 2, 3], [1, 2, 3]]), "x_gen": np.array([[1, 5, 3], [1, 2, 3]]),
           "y_seed": np.array([0, 1]), "adversarial": np.array([True, False])}
    assert list(tables.per_input(ids)["ids_changed"]) == [1, 0]


def _retrain_summary():
    spread = lambda vals: {"mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)),
                           "values": vals}
    return {"before": {"accuracy": 0.9, "f1": 0.89, "rconc": 0.3},
            "after": {"accuracy": spread([0.92, 0.94]), "f1": spread([0.9, 0.92]),
                      "rconc": spread([0.31, 0.33])},
            "gain": {"accuracy": spread([0.02, 0.04]), "f1": spread([0.01, 0.03]),
                     "rconc": spread([0.01, 0.03])},
            "control": {"accuracy": spread([0.91, 0.91]), "f1": spread([0.9, 0.9]),
                        "rconc": spread([0.3, 0.3])},
            "gain_over_control": {"accuracy": spread([0.01, 0.03]), "f1": spread([0.0, 0.02]),
                                  "rconc": spread([0.01, 0.03])}}


def test_table6_and_retrain_frames():
    s = _retrain_summary()
    t6 = results.table6(s)
    assert list(t6["metric"]) == ["Accuracy", "F1", "RConC"]
    assert t6.loc[0, "after (mean)"] == 0.93 and t6.loc[0, "gain"] == 0.03
    assert t6.loc[0, "control (mean)"] == 0.91
    ba = results.before_after_frame(s)
    assert list(ba["after"]) == pytest.approx([0.93, 0.91, 0.32])
    rep = results.repeats_frame(s)
    acc = rep[rep["metric"] == "Accuracy"]
    assert list(acc["stage"]) == ["before", "after", "after", "control", "control"]


def _with_transfer(s: dict) -> dict:
    spread = lambda vals: {"mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)),
                           "values": vals}
    return {**s, "transfer_by_method": {
        "rconc": {"n": 40, "original": 0.0, "retrained": spread([0.8, 0.9]),
                  "control": spread([0.2, 0.3]),
                  "retrained_minus_control": {"mean": 0.6, "std": 0.0, "p_value": 0.0123}},
        "nc": {"n": 0}},
        "transfer": {"method": "rconc", "n": 40, "original": 0.0, "retrained": 0.85,
                     "control": 0.25},
        "accuracy_after_minus_control": 0.02}


def test_transfer_table_reads_every_measured_method():
    t = results.transfer_table(_with_transfer(_retrain_summary()))
    assert list(t["method"]) == ["rconc"]                    # nc had no adversarial input
    row = t.iloc[0]
    assert (row["inputs"], row["original %"]) == (40, 0.0)
    assert row["retrained %"] == "85.0 ± 7.1" and row["control %"] == "25.0 ± 7.1"
    assert row["retrained − control (points)"] == 60.0 and row["p (paired t-test)"] == 0.012
    assert results.transfer_table(_retrain_summary()).empty


def test_gallery_order_and_captions():
    out = {"adversarial": np.array([False, True, False, True]), "y_seed": np.array([1, 2, 3, 4]),
           "pred_seed": np.array([1, 2, 3, 4]), "pred_gen": np.array([1, 7, 3, 9]),
           "conf_gen": np.array([0.9, 0.8, 0.7, 0.6])}
    assert list(results.gallery_order(out, True)) == [1, 3]
    assert list(results.gallery_order(out, False)) == [1, 3, 0, 2]
    caps = results.captions(out, np.array([1, 0]))
    assert caps[0] == ("label 2, predicted 2", "predicted 7 (80%) ✗ adversarial")
    assert caps[1][1] == "predicted 1 (90%)"


def test_table2_reads_target_and_constraint_from_the_generator_config():
    class Info:
        def __init__(self, run_id, config, summary):
            self.run_id, self.config, self.summary = run_id, config, summary
            self.status, self.model, self.method = "finished", "m", "rconc"
    # a stored config as run_generation writes it (the method beside the generator's settings)
    runs = [Info("a", {"method": "rconc",
                       "generator": {"target": "lstm_1", "constraint": {"name": "light"}}},
                 {"n_seeds": 10, "n_adversarial": 4, "adv_rate": 0.4, "avg_l2": 0.1}),
            Info("b", {"method": "rconc",
                       "generator": {"target": "random", "constraint": {"name": "none"}}},
                 {"n_seeds": 5, "n_adversarial": 0, "adv_rate": 0.0})]
    df = tables.table2(runs)
    assert list(df["layer"]) == ["lstm_1", "Random"]
    assert list(df["constraint"]) == ["light", "none"]
    assert list(df["adv. rate %"]) == [40.0, 0.0]


def test_a_kept_profile_is_read_back_and_never_from_another_model(tmp_path, monkeypatch,
                                                                   tiny_lstm):
    """The Coverage page's profiles are kept on disk between server starts: read back equal,
    and a file saved on other weights (same key) is recomputed, not trusted."""
    import keras

    from dashboard import state
    from rnncon_core.coverage import ContributionCoverage
    monkeypatch.setattr(state, "PROFILE_DIR", tmp_path)
    x = np.random.default_rng(0).normal(size=(6, 5, 3)).astype("float32")
    calls = []

    def inputs():
        calls.append(1)
        return x
    key = ("tiny", "data", 6, "unit", "step", "abs")
    first = state.kept_profile(ContributionCoverage(tiny_lstm), key, "RConC", inputs)
    again = state.kept_profile(ContributionCoverage(tiny_lstm), key, "RConC", inputs)
    assert len(calls) == 1                                     # read back, no forward pass
    assert again.rate(0.3) == first.rate(0.3) and again.n_inputs == 6
    other = keras.models.clone_model(tiny_lstm)                # same layers, new weights
    fresh = state.kept_profile(ContributionCoverage(other), key, "RConC", inputs)
    assert len(calls) == 2
    assert fresh.rate(0.3) == ContributionCoverage(other).update(x).rate(0.3)


@pytest.mark.parametrize("name", ["RConC", "NC", "HS_C", "CS_C"])
def test_a_profile_computed_in_slices_equals_one_update(tmp_path, monkeypatch, tiny_lstm, name):
    """kept_profile feeds the inputs in slices (bounded memory on long reviews): every figure
    the page reads equals one update over all of them."""
    from dashboard import state
    from rnncon_core.coverage import (CellStateCoverage, ContributionCoverage,
                                      HiddenStateCoverage, NeuronCoverage)
    make = {"RConC": lambda: ContributionCoverage(tiny_lstm, curve_thresholds=(0.0, 0.5)),
            "NC": lambda: NeuronCoverage(tiny_lstm, curve_thresholds=(0.0, 0.5)),
            "HS_C": lambda: HiddenStateCoverage(tiny_lstm),
            "CS_C": lambda: CellStateCoverage(tiny_lstm)}[name]
    monkeypatch.setattr(state, "PROFILE_DIR", tmp_path)
    monkeypatch.setattr(state, "PROFILE_SLICE_STEPS", 10)    # 5 steps a input: slices of 8
    x = np.random.default_rng(1).normal(size=(21, 5, 3)).astype("float32")
    sizes = []
    crit = make()
    real = crit.update
    monkeypatch.setattr(crit, "update", lambda part: sizes.append(len(part)) or real(part))
    sliced = state.kept_profile(crit, ("tiny", name, 21), name, lambda: x)
    whole = make().update(x)
    assert sizes == [8, 8, 5]
    assert sliced.rate() == whole.rate() and sliced.covered == whole.covered
    if name in ("RConC", "NC"):
        np.testing.assert_array_equal(sliced.curve(0.5), whole.curve(0.5))


def test_the_html_report_is_self_contained_with_figures_tables_and_versions():
    from rnncon_core.reports import html as report
    by_layer = {"RConC": _by_layer([1, 1, 1]), "NC": _by_layer([1, 1, 1])}
    view = {"n_inputs": 50, "grid_threshold": 0.25, "rconc": (0.5, 71, 142),
            "nc": (0.25, 10, 40), "hsc": 0.4, "by_layer": by_layer,
            "curves": {"RConC": np.array([0.1, 0.5]), "NC": np.array([0.2, 0.25])},
            "sections": None, "csc_boundary": None}
    sweep = pd.DataFrame({"threshold": [0.0, 0.5] * 2, "criterion": ["RConC"] * 2 + ["NC"] * 2,
                          "layer": ["All"] * 4, "rate": [1.0, 0.5, 0.9, 0.2]})
    doc = report.coverage(view, sweep, {"model": "mnist-lstm", "data": "mnist"},
                          {"threshold": 0.25, "granularity": "unit"})
    assert doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>")
    assert "<script src=" not in doc                    # plotly.js inline: works offline
    assert doc.count("Plotly.newPlot") == 3                # per layer, growth, sweep
    assert "Coverage per layer at threshold 0.25" in doc and "mnist-lstm" in doc
    assert "<table" in doc and "keras" in doc and "granularity" in doc


def test_table2_columns_show_their_headers_whole_in_streamlits_font():
    """Each Table 2 column is wide enough for its header (and a typical widest value) set in
    the font Streamlit's data grid draws with (Source Sans, 14 px), plus the cell's padding."""
    from pathlib import Path

    import streamlit
    from PIL import ImageFont
    media = Path(streamlit.__file__).parent / "static" / "static" / "media"
    font = ImageFont.truetype(str(next(media.glob("SourceSansVF-Upright*.woff2"))), 14)
    widest = {"run": tables.RUN_ID_EXAMPLE, "adv. rate %": "100.0 %", "seconds": "1234.5"}
    for key, col in tables.TABLE2_COLUMNS.items():
        if col is None:                                   # hidden (the page's own model)
            continue
        text = max(col["label"], widest.get(key, ""), key=font.getlength)
        assert isinstance(col["width"], int), key
        assert col["width"] >= font.getlength(text) + 2 * 8 + 16, (key, col["width"])


def test_accuracy_beside_paper_zooms_to_the_data_and_writes_the_values():
    table = pd.DataFrame({"model": ["a", "b"], "test acc. % (ours)": [97.2, 86.46],
                          "test acc. % (paper)": [98.76, np.nan]})
    fig = charts.accuracy_beside_paper(table)
    ours, paper = fig.data
    assert list(ours.y) == ["a", "b"] and list(ours.x) == [97.2, 86.46]
    assert list(ours.text) == ["97.20 %", "86.46 %"] and list(paper.text) == ["98.76 %", "—"]
    low, high = fig.layout.xaxis.range
    assert 75 <= low < 86.46 and high > 100                  # not 0-100: the gaps show


def test_retraining_report_leads_with_the_held_out_result_and_shows_no_path(tmp_path):
    from types import SimpleNamespace

    from rnncon_core.reports import html as report
    s = {**_with_transfer(_retrain_summary()), "repeats": 2, "repeats_done": 2,
         "best_model": "/srv/secret/runs/r1/retrained-r1.keras", "from_run": "g1",
         "note": "kept in /srv/secret/runs/r1 for later"}
    info = SimpleNamespace(run_id="20260101-000000-retrain-abcdef", status="finished",
                           kind="retrain", model="/srv/secret/uploads/my.keras", summary=s,
                           config={"model": "/srv/secret/uploads/my.keras", "epochs": 1},
                           progress=lambda: {})
    page = report.retraining(info)
    assert "/srv/secret" not in page and "my.keras" in page
    heads = re.findall(r"<h2>([^<]+)</h2>", page)
    assert heads[0] == "Held-out result against the control arm"
    assert "+60.0 points" in page                      # retrained 85 % vs control 25 %
    assert "best_model" not in page
    assert "<dt>trained on</dt>" not in page           # not recorded by this run
    s.update(trained_on={"clean": 4000, "extra": 1333, "batches": 42, "of": 22500},
             stage_seconds={"loading": 0.6, "generated arm": 53.8})
    page = report.retraining(info)
    assert ("each epoch trained on a fresh sample of 4,000 of the 22,500 clean training "
            "inputs + 1,333 generated ones mixed in; took loading 1 s, generated arm 54 s"
            in page)


def test_the_coverage_caches_take_one_frozen_profile(monkeypatch):
    """The Coverage and Gates pages' cached functions take one key, a frozen ``Profile``: two
    equal profiles are one cache entry, another setting is another, and the threshold (a
    view's argument, not the profile's) reads the same profile again."""
    import dataclasses

    from dashboard import state
    p = state.Profile("mnist-lstm", "mnist", 50)
    assert p == state.Profile("mnist-lstm", "mnist", 50, "unit", *state.DEFAULT_NORM)
    assert hash(p) == hash(state.Profile("mnist-lstm", "mnist", 50))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.n_inputs = 100
    # the tuple the kept profiles on disk were named by before the key was an object
    assert dataclasses.astuple(p) == ("mnist-lstm", "mnist", 50, "unit", "step", "abs")
    profiles, views = [], []
    monkeypatch.setattr(state, "coverage", lambda profile: profiles.append(profile) or {})
    monkeypatch.setattr(results, "coverage_view",    # what state.coverage_at reads
                        lambda crits, t, by, grid: views.append((by, t)) or {"threshold": t})
    cached = state.coverage_at.__wrapped__      # under perf.timed: the st.cache_data function
    cached.clear()
    try:
        assert state.coverage_at(p, "layer", 0.25) == {"threshold": 0.25}
        state.coverage_at(state.Profile("mnist-lstm", "mnist", 50), "layer", 0.25)
        assert views == [("layer", 0.25)]                        # equal profiles: one entry
        state.coverage_at(p, "layer", 0.5)
        state.coverage_at(dataclasses.replace(p, granularity="edge"), "layer", 0.25)
        assert views == [("layer", 0.25), ("layer", 0.5), ("layer", 0.25)]
        assert profiles == [p, p, dataclasses.replace(p, granularity="edge")]
    finally:
        cached.clear()


def _build_profiles_script():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "scripts" / "build_profiles.py"
    spec = importlib.util.spec_from_file_location("build_profiles", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_setup_builds_the_profiles_the_first_open_reads(tmp_path, monkeypatch):
    """scripts/build_profiles.py (run by the set-up) keeps a shipped model's default profiles
    with the page's own function: a server's first call then reads them, no forward pass."""
    from dashboard import state
    from rnncon_core.coverage import Criterion
    monkeypatch.setattr(state, "PROFILE_DIR", tmp_path)
    monkeypatch.setattr(sys, "argv", ["build_profiles.py", "--models", "mnist-gru"])
    assert _build_profiles_script().main() == 0
    kept = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.npz"))
    assert kept == ["HS_C", "NC", "RConC"]                   # a GRU has no cell state
    monkeypatch.setattr(Criterion, "update", lambda *a, **k: pytest.fail("recomputed"))
    state.coverage.clear()
    crits = state.coverage(state.Profile("mnist-gru", "mnist", state.DEFAULT_INPUTS))
    state.coverage.clear()
    assert crits["RConC"].n_inputs == state.DEFAULT_INPUTS and crits["CS_C"] is None


def test_build_profiles_refuses_a_model_that_is_not_shipped(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["build_profiles.py", "--models", "mnist-lstn"])
    assert _build_profiles_script().main() == 2
    assert "not a shipped model: mnist-lstn" in capsys.readouterr().err
