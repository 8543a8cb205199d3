"""The dashboard's inline pictures: the Models page's sample (pixels, PNG data URIs, HTML) and the
Coverage page's headline figures (HTML) and per-layer bars (SVG)."""
import base64
import io
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dashboard import images  # noqa: E402


def test_pixel_images_are_sharp_8_bit_and_clipped():
    out = images.pixel_images(np.array([[[0.0, 1.0], [0.5, 2.0]]]), scale=2)
    assert out.dtype == np.uint8 and out.shape == (1, 4, 4)
    assert out[0, :2, :2].tolist() == [[0, 0], [0, 0]]
    assert out[0, 0, 2] == 255 and out[0, 2, 0] == 128 and out[0, 3, 3] == 255


def test_the_strip_holds_each_image_as_a_png_with_its_caption():
    x = np.random.default_rng(0).random((3, 5, 4))
    doc = images.image_strip(x, ["7 → 7 (99%)", "<b>", "1 → 2 (51%)"], scale=2)
    assert doc.count("<figure") == 3 and "&lt;b&gt;" in doc and "<b>" not in doc
    uri = doc.split('src="')[1].split('"')[0]
    png = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert png.format == "PNG" and png.size == (8, 10)               # width 4×2, height 5×2
    assert np.array_equal(np.asarray(png), images.pixel_images(x[:1], 2)[0])
    with pytest.raises(ValueError, match="3 images but 2 captions"):
        images.image_strip(x, ["a", "b"])


def test_the_per_layer_bars_are_one_svg_with_a_bar_and_a_tooltip_per_criterion_and_layer():
    layers = pd.DataFrame({"layer": ["lstm_1", "<dense>"], "total": [100, 30],
                           "covered": [40, 30], "rate": [0.4, 1.0]})
    nc = layers.assign(covered=[100, 15], rate=[1.0, 0.5])
    svg = images.coverage_bars({"RConC": layers, "NC": nc}, threshold=0.25)
    root = ET.fromstring(svg)                       # well-formed: the text is escaped
    ns = "{http://www.w3.org/2000/svg}"
    assert root.get("aria-label") == "Coverage per layer at threshold 0.25"
    tips = [t.text for t in root.iter(ns + "title")]
    assert tips == ["RConC · lstm_1: 40.00% — 40 of 100", "NC · lstm_1: 100.00% — 100 of 100",
                    "RConC · <dense>: 100.00% — 30 of 30", "NC · <dense>: 50.00% — 15 of 30",
                    "RConC · All: 53.85% — 70 of 130", "NC · All: 88.46% — 115 of 130"]
    bars = [r for g in root.iter(ns + "g") for r in g.iter(ns + "rect")]
    widths = [float(r.get("width")) for r in bars]
    assert widths[1] == widths[2] == pytest.approx(widths[0] / 0.4, abs=0.2)      # to scale
    labels = [t.text for g in root.iter(ns + "g") for t in g.iter(ns + "text")]
    assert labels == ["40.0%", "100.0%", "100.0%", "50.0%", "53.8%", "88.5%"]
    assert re.search(r'fill="#1f77b4"', svg) and re.search(r'fill="#ff7f0e"', svg)


def test_the_headline_is_one_row_with_each_figure_its_value_and_hover_text():
    doc = images.headline([("RConC", "86.65%", "24,880 of 28,714 contributions"),
                           ("CS_C <x>", "—", 'only "LSTM" models')])
    root = ET.fromstring(doc)                                  # well-formed: one block
    cells = list(root)
    assert [c.get("title") for c in cells] == ["24,880 of 28,714 contributions",
                                               'only "LSTM" models']
    assert [[d.text for d in c] for c in cells] == [["RConC", "86.65%"], ["CS_C <x>", "—"]]
    assert "<x>" not in doc and "&lt;x&gt;" in doc
