"""The dashboard's inline images (the Models page's sample): pixels, PNG data URIs, HTML."""
import base64
import io
import sys
from pathlib import Path

import numpy as np
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
