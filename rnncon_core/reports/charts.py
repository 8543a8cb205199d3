"""The figures of the dashboard and of the HTML reports: pure functions, data in, a Plotly figure out (no Streamlit here).

Each builder takes what the engine returns (``by_layer()`` DataFrames, ``curve()`` arrays,
``by_gate_step()`` DataFrames, run summaries, image arrays, t-SNE points) and draws it the way
the paper's figures do; the figure numbers in the docstrings are the paper's.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = {"RConC": "#1f77b4", "NC": "#ff7f0e", "HS_C": "#2ca02c", "CS_C": "#9467bd"}
ALL = "All"
_LAYOUT = dict(template="plotly_white", margin=dict(l=10, r=10, t=50, b=10))


def _color(name: str, i: int) -> str:
    return COLORS.get(name, px.colors.qualitative.Plotly[i % 10])


def with_all(by_layer: pd.DataFrame) -> pd.DataFrame:
    """A by_layer() table with an "All" row (covered and total summed) if it has none."""
    df = by_layer.copy()
    if ALL in set(df["layer"]):
        return df
    total, covered = int(df["total"].sum()), int(df["covered"].sum())
    row = {"layer": ALL, "total": total, "covered": covered,
           "rate": covered / total if total else 0.0}
    if "kind" in df:
        row["kind"] = "all"
    return pd.concat([df, pd.DataFrame([row])], ignore_index=True)


def coverage_by_layer(tables: Mapping[str, pd.DataFrame], threshold: float | None = None,
                      title: str | None = None) -> go.Figure:
    """Figures 7/8 at one threshold: coverage of each layer and of the whole model ("All"),
    one bar group per layer, one bar per criterion; hovering shows covered / total. The bars
    are horizontal, so each value label sits on its own row and never overlaps another."""
    fig = go.Figure()
    n_rows = 0
    for i, (name, df) in enumerate(tables.items()):
        df = with_all(df)
        n_rows = max(n_rows, len(df))
        fig.add_bar(y=df["layer"], x=df["rate"], name=name, orientation="h",
                    marker_color=_color(name, i),
                    customdata=np.stack([df["covered"], df["total"]], axis=1),
                    text=[f"{r:.1%}" for r in df["rate"]], textposition="outside",
                    textfont=dict(size=13), cliponaxis=False,
                    hovertemplate=f"{name}<br>%{{y}}: %{{x:.2%}}<br>"
                                  "%{customdata[0]:,} of %{customdata[1]:,}<extra></extra>")
    t = title or ("Coverage per layer" + (f" at threshold {threshold:g}" if threshold is not None
                                          else ""))
    fig.update_layout(title=t, barmode="group", bargap=0.25,
                      xaxis=dict(title="coverage", range=[0, 1.18], tickformat=".0%",
                                 tickvals=[0, 0.25, 0.5, 0.75, 1.0]),
                      yaxis=dict(title="layer", autorange="reversed", automargin=True),
                      legend_title="criterion", height=max(360, 70 * n_rows + 140),
                      **{**_LAYOUT, "margin": dict(l=10, r=30, t=50, b=10)})
    return fig


def accuracy_beside_paper(table: pd.DataFrame) -> go.Figure:
    """Table 1's test accuracies: ours beside the paper's, one bar pair per model (horizontal,
    values written on the bars; the axis zoomed to the data, where the differences are)."""
    fig = go.Figure()
    cols = {"ours": "test acc. % (ours)", "paper": "test acc. % (paper)"}
    values = table[list(cols.values())].to_numpy(dtype=float)
    for i, (name, col) in enumerate(cols.items()):
        fig.add_bar(y=table["model"], x=table[col], name=name, orientation="h",
                    marker_color=px.colors.qualitative.Plotly[i],
                    text=[f"{v:.2f} %" if np.isfinite(v) else "—" for v in table[col]],
                    textposition="outside", cliponaxis=False,
                    hovertemplate=f"{name}<br>%{{y}}: %{{x:.2f}} %<extra></extra>")
    low = np.nanmin(values) if np.isfinite(values).any() else 0.0
    fig.update_layout(title="Test accuracy: ours beside the paper's", barmode="group",
                      bargap=0.25,
                      xaxis=dict(title="test accuracy (%)", range=[5 * np.floor(low / 5) - 5,
                                                                   104]),
                      yaxis=dict(autorange="reversed", automargin=True),
                      height=max(320, 50 * len(table) + 120),
                      **{**_LAYOUT, "margin": dict(l=10, r=30, t=50, b=10)})
    return fig


def growth_curves(curves: Mapping[str, Sequence[float]], threshold: float | None = None
                  ) -> go.Figure:
    """Figure 6: coverage after the first 1, 2, ..., N inputs, one line per criterion."""
    fig = go.Figure()
    for i, (name, ys) in enumerate(curves.items()):
        ys = np.asarray(ys, dtype=float)
        fig.add_scatter(x=np.arange(1, len(ys) + 1), y=ys, mode="lines", name=name,
                        line=dict(color=_color(name, i), width=2),
                        hovertemplate=f"{name}<br>%{{x}} inputs: %{{y:.2%}}<extra></extra>")
    t = "Coverage vs number of test inputs"
    fig.update_layout(title=t + (f" (threshold {threshold:g})" if threshold is not None else ""),
                      xaxis_title="number of test inputs",
                      yaxis=dict(title="coverage", tickformat=".0%", rangemode="tozero"),
                      legend_title="criterion", **_LAYOUT)
    return fig


def threshold_sweep(sweep: pd.DataFrame, chosen: float | None = None) -> go.Figure:
    """Figures 7/8 over thresholds: ``sweep`` has columns threshold, criterion, layer, rate;
    one panel per layer (and "All"), one line per criterion; ``chosen`` marks a threshold."""
    layers = list(dict.fromkeys(sweep["layer"]))
    if ALL in layers:                                  # the whole model first
        layers = [ALL] + [x for x in layers if x != ALL]
    fig = make_subplots(rows=1, cols=len(layers), subplot_titles=layers, shared_yaxes=True,
                        horizontal_spacing=0.03)
    for i, (name, part) in enumerate(sweep.groupby("criterion", sort=False)):
        for col, layer in enumerate(layers, start=1):
            d = part[part["layer"] == layer].sort_values("threshold")
            if d.empty:
                continue
            fig.add_scatter(x=d["threshold"], y=d["rate"], mode="lines+markers", name=name,
                            legendgroup=name, showlegend=col == 1,
                            line=dict(color=_color(name, i)), row=1, col=col,
                            hovertemplate=f"{name} · {layer}<br>threshold %{{x:g}}: "
                                          "%{y:.2%}<extra></extra>")
    if chosen is not None:
        for col in range(1, len(layers) + 1):
            fig.add_vline(x=chosen, line=dict(color="gray", dash="dot"), row=1, col=col)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.02])
    fig.update_yaxes(title_text="coverage", row=1, col=1)
    fig.update_xaxes(title_text="threshold")
    fig.update_layout(title="Coverage vs threshold, per layer", legend_title="criterion",
                      **{**_LAYOUT, "margin": dict(l=10, r=10, t=90, b=10)})
    return fig


def threshold_selection(scores: pd.DataFrame, chosen: float | None = None) -> go.Figure:
    """The threshold-selection helper (paper §5.2): for each candidate threshold, the largest
    difference of RConC between labels; ``scores`` has columns threshold, score."""
    d = scores.sort_values("threshold")
    fig = go.Figure(go.Bar(x=d["threshold"].astype(str), y=d["score"],
                           marker_color=[("#d62728" if chosen is not None
                                          and np.isclose(t, chosen) else "#1f77b4")
                                         for t in d["threshold"]],
                           hovertemplate="threshold %{x}<br>largest difference between "
                                         "labels: %{y:.3f}<extra></extra>"))
    fig.update_layout(title="Threshold selection: largest RConC difference between labels",
                      xaxis_title="threshold", yaxis_title="max difference of RConC", **_LAYOUT)
    return fig


def gate_heatmap(table: pd.DataFrame, title: str = "Gate coverage per time step",
                 zmax: float | None = 1.0) -> go.Figure:
    """Figure 12, one panel: ``by_gate_step()`` (one row per gate part, one column per step)
    as a heatmap; hovering shows the gate part, the step and the value."""
    z = table.to_numpy(dtype=float)
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(c) for c in table.columns], y=[str(r) for r in table.index],
        colorscale="Viridis", zmin=0, zmax=zmax, colorbar=dict(title="coverage"),
        hovertemplate="gate part %{y}<br>step %{x}<br>coverage %{z:.3f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="time step", yaxis_title="gate part",
                      yaxis=dict(autorange="reversed"), **_LAYOUT)
    return fig


def gate_heatmap_pair(seed: pd.DataFrame, adversarial: pd.DataFrame,
                      title: str = "Gate coverage: seed vs adversarial input") -> go.Figure:
    """Figure 12: the seed's and the adversarial input's gate coverage and their difference
    (adversarial minus seed: red where the adversarial input activates more)."""
    if seed.shape != adversarial.shape:
        raise ValueError(f"the two tables differ in shape: {seed.shape} vs {adversarial.shape}")
    xs = [str(c) for c in seed.columns]
    ys = [str(r) for r in seed.index]
    a, b = seed.to_numpy(dtype=float), adversarial.to_numpy(dtype=float)
    diff = b - a
    lim = float(np.abs(diff).max()) or 1.0
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=["seed", "adversarial", "difference (adv − seed)"])
    for col, (z, kw) in enumerate([
            (a, dict(colorscale="Viridis", zmin=0, zmax=1, showscale=False)),
            (b, dict(colorscale="Viridis", zmin=0, zmax=1,
                     colorbar=dict(title="coverage", x=1.01, y=0.77, len=0.46))),
            (diff, dict(colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim,
                        colorbar=dict(title="Δ", x=1.01, y=0.23, len=0.46)))], start=1):
        name = ["seed", "adversarial", "difference"][col - 1]
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, name=name, **kw,
                                 hovertemplate=f"{name}<br>gate part %{{y}}<br>step %{{x}}"
                                               "<br>%{z:.3f}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="time step")
    fig.update_layout(title=title, **{**_LAYOUT, "margin": dict(l=10, r=10, t=90, b=10)})
    return fig


def image_grid(images: np.ndarray, captions: Sequence[str], cols: int = 8,
               title: str | None = None) -> go.Figure:
    """A few images (N, rows, cols) in a grid, a caption over each (a data sample)."""
    images = np.asarray(images, dtype=float)
    n = len(images)
    rows = max(1, -(-n // cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(captions),
                        horizontal_spacing=0.01, vertical_spacing=0.08)
    for i, img in enumerate(images):
        fig.add_trace(go.Heatmap(z=img, colorscale="gray", zmin=0, zmax=1, showscale=False,
                                 hovertemplate="row %{y}, column %{x}: %{z:.2f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    _image_axes(fig)
    fig.update_layout(title=title, height=110 * rows + 60, **_LAYOUT)
    return fig


def sequence_pair(seed: np.ndarray, changed: np.ndarray, title: str,
                  features: int = 6) -> go.Figure:
    """A real-valued sequence (steps, features) and a changed copy of it: one line per feature
    (the first ``features``), the seed solid and the changed copy dashed in the same colour."""
    seed, changed = np.asarray(seed, dtype=float), np.asarray(changed, dtype=float)
    seed, changed = seed.reshape(len(seed), -1), changed.reshape(len(changed), -1)
    fig = go.Figure()
    steps = np.arange(len(seed))
    for j in range(min(features, seed.shape[1])):
        color = px.colors.qualitative.Plotly[j % 10]
        fig.add_trace(go.Scatter(x=steps, y=seed[:, j], name=f"feature {j} (seed)",
                                 line=dict(color=color)))
        fig.add_trace(go.Scatter(x=steps, y=changed[:, j], name=f"feature {j} (changed)",
                                 line=dict(color=color, dash="dash")))
    fig.update_layout(title=title, height=320, xaxis_title="time step", **_LAYOUT)
    return fig


def image_triplets(seeds: np.ndarray, generated: np.ndarray, captions: Sequence[tuple[str, str]],
                   title: str = "Seed, generated input and their difference") -> go.Figure:
    """Figure 9: one row per pair: the seed, the generated input and generated − seed.
    ``captions[i]`` = (seed caption, generated caption), e.g. "7 (99 %)"."""
    seeds, generated = np.asarray(seeds, dtype=float), np.asarray(generated, dtype=float)
    if seeds.shape != generated.shape:
        raise ValueError(f"seeds {seeds.shape} and generated {generated.shape} differ in shape")
    n = len(seeds)
    diff = generated - seeds
    lim = float(np.abs(diff).max()) or 1.0
    titles = []
    for i in range(n):
        titles += [f"seed: {captions[i][0]}", f"generated: {captions[i][1]}",
                   f"difference (L2 {np.sqrt((diff[i] ** 2).sum()):.3f})"]
    fig = make_subplots(rows=n, cols=3, subplot_titles=titles, horizontal_spacing=0.03,
                        vertical_spacing=0.3 / max(n, 1))
    pixel_bar = dict(title="pixel", x=1.02, y=1.0, yanchor="top", len=min(0.45, 0.9 / n + 0.1),
                     thickness=14)
    diff_bar = dict(title="gen − seed", x=1.02, y=0.0, yanchor="bottom",
                    len=min(0.45, 0.9 / n + 0.1), thickness=14)
    for i in range(n):
        for col, (z, kw) in enumerate([
                (seeds[i], dict(colorscale="gray", zmin=0, zmax=1, showscale=i == 0,
                                colorbar=pixel_bar)),
                (generated[i], dict(colorscale="gray", zmin=0, zmax=1, showscale=False)),
                (diff[i], dict(colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim,
                               showscale=i == 0, colorbar=diff_bar))], start=1):
            fig.add_trace(go.Heatmap(z=z, **kw, hovertemplate="row %{y}, column %{x}: %{z:.3f}"
                                                              "<extra></extra>"),
                          row=i + 1, col=col)
    _image_axes(fig)
    fig.update_layout(title=title, height=230 * n + 60,
                      **{**_LAYOUT, "margin": dict(l=10, r=90, t=50, b=10)})
    return fig


def _image_axes(fig: go.Figure) -> None:
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed",
                     constrain="domain")
    # square pixels: each subplot's y axis keeps the scale of its own x axis
    for key in [k for k in fig.layout if k.startswith("yaxis")]:
        fig.layout[key].scaleanchor = "x" + key[len("yaxis"):]


def perturbation_map(points: np.ndarray, color: Sequence, color_label: str,
                     hover: Sequence[str] | None = None, continuous: bool = False) -> go.Figure:
    """Figure 10: t-SNE of the perturbations (2-D points). ``continuous``: one trace coloured
    on a continuous scale with a colour bar (a count, e.g. contributions activated); else one
    trace per value in categorical colours (a class). Each point's row number is its
    ``customdata`` so a click or a box / lasso selection can find its seed / generated pair.
    No dragmode here: with one set to "select", Streamlit turns click selection off; left
    unset, a click selects and the box and lasso tools are in the mode bar."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"expected (N, 2) points, got {points.shape}")
    rows = np.arange(len(points))
    info = list(hover) if hover is not None else [""] * len(points)
    template = ("point %{customdata[0]}<br>%{text}<br>" + color_label + ": %{marker.color}"
                "<extra></extra>")
    fig = go.Figure()
    if continuous:
        values = np.asarray(color, dtype=float)
        fig.add_scatter(x=points[:, 0], y=points[:, 1], mode="markers", name=color_label,
                        customdata=[[int(r)] for r in rows], text=info,
                        hovertemplate=template,
                        marker=dict(color=values, colorscale="Viridis", size=10,
                                    cmin=float(values.min()), cmax=float(values.max()),
                                    line=dict(width=0.5, color="white"),
                                    colorbar=dict(title=color_label)))
    else:
        labels = np.asarray([str(c) for c in color])
        order = sorted(set(labels), key=lambda v: (len(v), v))
        palette = px.colors.qualitative.Plotly + px.colors.qualitative.D3
        for i, value in enumerate(order):
            m = labels == value
            fig.add_scatter(x=points[m, 0], y=points[m, 1], mode="markers", name=value,
                            customdata=[[int(r)] for r in rows[m]],
                            text=np.asarray(info, dtype=object)[m],
                            hovertemplate=template.replace("%{marker.color}", value),
                            marker=dict(color=palette[i % len(palette)], size=10,
                                        line=dict(width=0.5, color="white")))
    fig.update_layout(title=f"t-SNE of the perturbations, coloured by {color_label}",
                      xaxis_title="t-SNE 1", yaxis_title="t-SNE 2",
                      legend_title=color_label, **_LAYOUT)
    return fig


def selected_rows(figure: go.Figure, points: Sequence[Mapping]) -> list[int]:
    """The row numbers of a Plotly selection's points (Streamlit's ``event.selection.points``):
    from each point's customdata, else from its trace and index in that trace."""
    out = []
    for p in points:
        cd = p.get("customdata")
        if isinstance(cd, (list, tuple, int, float)) and len(np.atleast_1d(cd)):
            out.append(int(np.atleast_1d(cd)[0]))
            continue
        curve, index = p.get("curve_number"), p.get("point_index", p.get("point_number"))
        if curve is not None and index is not None and curve < len(figure.data):
            out.append(int(figure.data[curve].customdata[index][0]))
    return list(dict.fromkeys(out))


HIGHER_IS_BETTER = ("Accuracy", "Precision", "Recall", "F1", "AUC")
BETTER, WORSE, NEUTRAL = "#2ca02c", "#d62728", "#9467bd"


def before_after(metrics: pd.DataFrame, title: str = "Before and after retraining",
                 cols: int | None = None) -> go.Figure:
    """Table 6 / Figure 13 as dots and arrows: one row per metric, a grey dot before, an arrow
    to the dot after (green when the metric got better, red when worse; violet where higher
    is not better or worse, e.g. RConC) and the control arm's dot (a blue diamond) beside.
    Positions, not bar heights, carry the values, so each row's axis may zoom to its own
    values without exaggerating a change; the values are written beside the dots and the
    change in the row's title. ``metrics`` has columns metric, before, after and optionally
    control. (``cols`` is accepted for the callers of the old bar grid and ignored.)"""
    names = list(metrics["metric"])
    n = max(1, len(names))
    has_control = "control" in metrics and metrics["control"].notna().any()
    titles = []
    for _, r in metrics.iterrows():
        t = f"{r['metric']} · Δ {r['after'] - r['before']:+.4f}"
        if has_control and pd.notna(r.get("control")):
            t += f" · after − control {r['after'] - r['control']:+.4f}"
        titles.append(t)
    fig = make_subplots(rows=n, cols=1, subplot_titles=titles, vertical_spacing=0.45 / n)
    for i, (_, r) in enumerate(metrics.iterrows(), start=1):
        before, after = float(r["before"]), float(r["after"])
        control = float(r["control"]) if has_control and pd.notna(r.get("control")) else None
        if r["metric"] in HIGHER_IS_BETTER:
            color = BETTER if after > before else WORSE if after < before else "#7f7f7f"
        else:
            color = NEUTRAL
        up = after >= before            # each value written on the outer side of its dot
        dots = [("before", before, "#7f7f7f", "circle", "retrained",
                 "middle left" if up else "middle right"),
                ("after", after, color, "circle", "retrained",
                 "middle right" if up else "middle left")]
        if control is not None:
            dots.append(("control", control, "#1f77b4", "diamond", "control",
                         "middle right" if control >= before else "middle left"))
        for name, v, c, symbol, lane, where in dots:
            fig.add_scatter(x=[v], y=[lane], mode="markers+text", name=name, legendgroup=name,
                            showlegend=i == 1 and name != "after",
                            marker=dict(color=c, size=13, symbol=symbol),
                            text=[f"{v:.4f}"], textposition=where,
                            hovertemplate=f"{r['metric']} {name}: %{{x:.4f}}<extra></extra>",
                            row=i, col=1)
        if control is not None:
            fig.add_scatter(x=[before], y=["control"], mode="markers", showlegend=False,
                            marker=dict(color="#7f7f7f", size=9, symbol="circle-open"),
                            hoverinfo="skip", row=i, col=1)
        axis = "" if i == 1 else str(i)
        fig.add_annotation(x=after, y="retrained", ax=before, ay="retrained",
                           xref=f"x{axis}", yref=f"y{axis}", axref=f"x{axis}",
                           ayref=f"y{axis}", showarrow=True, arrowhead=3, arrowsize=1.2,
                           arrowwidth=2, arrowcolor=color, text="")
        values = [before, after] + ([control] if control is not None else [])
        lo, hi = min(values), max(values)
        pad = max(hi - lo, 0.002) * 0.45          # room for the values beside the dots
        fig.update_xaxes(range=[lo - pad, hi + pad], tickformat=".3f", nticks=5, row=i, col=1)
        fig.update_yaxes(categoryorder="array",
                         categoryarray=["control", "retrained"] if control is not None
                         else ["retrained"], row=i, col=1)
    fig.add_scatter(x=[None], y=[None], mode="markers", name="after (better)",
                    marker=dict(color=BETTER, size=13), legendgroup="after")
    fig.add_scatter(x=[None], y=[None], mode="markers", name="after (worse)",
                    marker=dict(color=WORSE, size=13), legendgroup="after")
    fig.update_annotations(font_size=13)
    height = 110 + (150 if has_control else 110) * n
    fig.update_layout(title=title, height=height,
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1.0,
                                  xanchor="right"),
                      **{**_LAYOUT, "margin": dict(l=10, r=10, t=110, b=30)})
    return fig


def repeats(values: pd.DataFrame, title: str = "Over repeated retrainings") -> go.Figure:
    """Figure 14: the spread over repeated retrainings; ``values`` has columns metric, stage
    ("before"/"after"/"control") and value, one row per repeat; one panel per metric, each
    with its own zoomed axis."""
    fig = px.box(values, x="stage", y="value", color="stage", points="all", facet_col="metric",
                 color_discrete_map={"before": "#7f7f7f", "after": "#2ca02c",
                                     "control": "#1f77b4"})
    fig.update_yaxes(matches=None, showticklabels=True, tickformat=".3f")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_layout(title=title, legend_title="", **_LAYOUT)
    return fig


def compare_runs(summaries: Mapping[str, Mapping], keys: Sequence[str],
                 labels: Mapping[str, str] | None = None,
                 names: Mapping[str, str] | None = None) -> go.Figure:
    """Two or more runs side by side: one panel per summary key (titled by ``names``), one bar
    per run (labelled by ``labels``: a run's name, or what it did and when)."""
    labels, names = labels or {}, names or {}
    keys = [k for k in keys if any(isinstance(s.get(k), (int, float)) for s in summaries.values())]
    fig = make_subplots(rows=1, cols=max(1, len(keys)),
                        subplot_titles=[names.get(k, k) for k in keys], horizontal_spacing=0.06)
    for i, (run_id, summary) in enumerate(summaries.items()):
        label = labels.get(run_id, run_id)
        for col, key in enumerate(keys, start=1):
            v = summary.get(key)
            fig.add_bar(x=[label], y=[v if isinstance(v, (int, float)) else None],
                        name=label, legendgroup=run_id, showlegend=col == 1,
                        marker_color=px.colors.qualitative.Plotly[i % 10], row=1, col=col,
                        hovertemplate=f"{label}<br>{names.get(key, key)}: "
                                      f"%{{y:.4g}}<extra></extra>")
    fig.update_xaxes(showticklabels=False)          # the legend names the bars
    fig.update_layout(title="Runs compared", legend_title="run",
                      **{**_LAYOUT, "legend": dict(orientation="h", y=-0.1)})
    return fig
