"""Small images drawn without a chart library: the Models page's data sample is the first thing
a visitor sees, so it is plain HTML with the PNGs inline (no Plotly script to load, no request
per image; Pillow and NumPy only)."""
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
