"""Pictures drawn without a chart library, for the first view of a page: the Models page's data
sample (plain HTML with the PNGs inline: no request per image; Pillow and NumPy only) and the
Coverage page's headline figures and per-layer bars (HTML and one inline SVG). A new browser tab
that shows them loads no Plotly script (4.7 MB to load and compile in every new tab: about 1.8 s
of CPU on the 2-core machine; reports/bench/dashboard_load.txt) and no metric widgets."""
from __future__ import annotations

import base64
import html
import io
from typing import Sequence

import numpy as np


def pixel_images(images: np.ndarray, scale: int = 3) -> np.ndarray:
    """Images with values in [0, 1] (N, rows, cols) as 8-bit grey pixels, each pixel repeated
    ``scale`` times both ways (sharp edges at any zoom)."""
    img = np.clip(np.asarray(images, dtype=float), 0.0, 1.0)
    img = np.repeat(np.repeat(img, scale, axis=-2), scale, axis=-1)
    return np.round(img * 255).astype(np.uint8)


def png_data_uri(pixels: np.ndarray) -> str:
    """One 8-bit grey image as a ``data:image/png;base64,...`` URI."""
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(np.asarray(pixels, dtype=np.uint8), mode="L").save(buf, format="PNG",
                                                                        optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image_strip(images: np.ndarray, captions: Sequence[str], scale: int = 3) -> str:
    """Images in [0, 1] with a caption under each, as one HTML block (they wrap to the width)."""
    if len(images) != len(captions):
        raise ValueError(f"{len(images)} images but {len(captions)} captions")
    cells = []
    for px, cap in zip(pixel_images(images, scale), captions):
        text = html.escape(str(cap))
        cells.append(f'<figure style="margin:0;text-align:center">'
                     f'<img src="{png_data_uri(px)}" alt="{text}" width="{px.shape[1]}" '
                     f'height="{px.shape[0]}" style="image-rendering:pixelated">'
                     f'<figcaption style="font-size:0.8rem">{text}</figcaption></figure>')
    return ('<div style="display:flex;flex-wrap:wrap;gap:0.6rem 0.9rem">' + "".join(cells)
            + "</div>")


def headline(figures: Sequence[tuple[str, str, str]]) -> str:
    """Headline figures (label, value, hover text) as one row of HTML, drawn like metric cards
    in one Markdown block: a new tab loads and lays out no metric widget for them."""
    esc = html.escape
    cells = "".join(f'<div title="{esc(tip)}" style="flex:1 1 9rem">'
                    f'<div style="font-size:0.875rem">{esc(label)}</div>'
                    f'<div style="font-size:2.25rem;line-height:1.3">{esc(value)}</div></div>'
                    for label, value, tip in figures)
    return f'<div style="display:flex;flex-wrap:wrap;gap:1rem">{cells}</div>'


def coverage_bars(tables: dict, threshold: float | None = None, title: str | None = None,
                  colors: dict | None = None) -> str:
    """Figures 7/8 at one threshold as one inline SVG: the per-layer bars of ``charts.
    coverage_by_layer`` (one group per layer and "All", one horizontal bar per criterion, the
    rate written at its end), drawn by the browser with no chart script. Hovering a bar shows
    the criterion, the layer, the rate and covered / total (the SVG's own tooltips)."""
    from rnncon_core.reports.charts import COLORS, with_all
    colors = {**COLORS, **(colors or {})}
    frames = {name: with_all(df) for name, df in tables.items()}
    layers = list(dict.fromkeys(x for df in frames.values() for x in df["layer"]))
    names = list(frames)
    bar, gap, label_w = 17, 12, 9 + 7 * max(len(str(x)) for x in layers)
    top, axis_h, width = 64, 30, 440
    plot_w = width - label_w - 16
    group = bar * len(names) + gap
    height = top + group * len(layers) + axis_h
    x = lambda v: label_w + plot_w * v / 1.18                      # noqa: E731 - 0..118 %
    title = title or ("Coverage per layer" + (f" at threshold {threshold:g}"
                                              if threshold is not None else ""))
    esc = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="100%" role="img" aria-label="{esc(title)}" '
           f'style="max-width:{width * 1.5:.0f}px;font-family:inherit;font-size:12px">',
           f'<text x="0" y="18" font-size="15">{esc(title)}</text>']
    for i, name in enumerate(names):                                 # the legend
        lx = label_w + 90 * i
        out.append(f'<rect x="{lx}" y="32" width="12" height="12" '
                   f'fill="{colors.get(name, "#7f7f7f")}"/>'
                   f'<text x="{lx + 17}" y="42">{esc(name)}</text>')
    for v in (0, 0.25, 0.5, 0.75, 1.0):                              # grid and ticks
        out.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top - 6}" '
                   f'y2="{height - axis_h + 4}" stroke="#e5e5e5"/>'
                   f'<text x="{x(v):.1f}" y="{height - axis_h + 18}" '
                   f'text-anchor="middle" fill="#555">{v:.0%}</text>')
    out.append(f'<text x="{x(0.5):.1f}" y="{height - 2}" text-anchor="middle" fill="#555">'
               'coverage</text>')
    for j, layer in enumerate(layers):
        y0 = top + group * j
        out.append(f'<text x="{label_w - 8}" y="{y0 + bar * len(names) / 2 + 4:.1f}" '
                   f'text-anchor="end">{esc(str(layer))}</text>')
        for i, name in enumerate(names):
            rows = frames[name][frames[name]["layer"] == layer]
            if rows.empty:
                continue
            r = rows.iloc[0]
            y = y0 + bar * i
            tip = (f"{name} · {layer}: {r['rate']:.2%} — {int(r['covered']):,} of "
                   f"{int(r['total']):,}")
            out.append(f'<g><title>{esc(tip)}</title>'
                       f'<rect x="{x(0):.1f}" y="{y + 1}" width="{x(r["rate"]) - x(0):.1f}" '
                       f'height="{bar - 2}" fill="{colors.get(name, "#7f7f7f")}"/>'
                       f'<text x="{x(r["rate"]) + 4:.1f}" y="{y + bar - 4}">{r["rate"]:.1%}'
                       '</text></g>')
    return "".join(out) + "</svg>"
