"""The Gates page for a text model: a review starts at its first word (the padding steps are
folded, with a toggle), classes by name, and a seed/generated pair shown as text."""
import json

import numpy as np
import pandas as pd

from dashboard import text_views
from test_text_dashboard import _app, needs_imdb, text_run  # noqa: F401  (the fixture)


def test_first_word_step_and_fold():
    x = np.array([[0, 0, 1, 5, 6, 7], [0, 0, 0, 1, 8, 9]])
    assert text_views.first_word_step(x) == 3 and text_views.first_word_step(x[1]) == 4
    assert text_views.first_word_step(np.zeros((1, 4), int)) == 4      # no word at all
    table = pd.DataFrame(np.arange(12.0).reshape(2, 6), index=["f:x", "f:h"])
    folded = text_views.fold_padding(table, x)
    assert list(folded.columns) == [3, 4, 5] and folded.iloc[0].tolist() == [3.0, 4.0, 5.0]
    named = text_views.fold_padding(table, x[1], ["great", "fun"])
    assert list(named.columns) == ["4 great", "5 fun"]
    assert list(text_views.fold_padding(table, x[1], ["too", "many", "words"]).columns) == [4, 5]
    assert list(text_views.fold_padding(table, np.zeros((1, 6), int)).columns) == [5]


def _heatmap_steps(at, key) -> list:
    chart = next(c for c in at.get("plotly_chart") if key in str(c.proto.id))
    return json.loads(chart.proto.spec)["data"][0]["x"]


@needs_imdb
def test_gates_page_starts_at_the_first_word(text_run):  # noqa: F811
    from rnncon_core.data import load_dataset
    ds = load_dataset("imdb")
    n_words = len(ds.vocab.decode(ds.x_test[3]))
    at = _app("gates", gates_n=50, gates_mode="one input", gates_input=3)
    steps = _heatmap_steps(at, "gates_one")
    assert len(steps) == n_words and steps[0].endswith(" " + ds.vocab.decode(ds.x_test[3])[0])
    assert any("label negative" in c.value or "label positive" in c.value for c in at.caption)
    at.toggle(key="gates_fold").set_value(False).run()
    assert len(_heatmap_steps(at, "gates_one")) == ds.x_test.shape[1]
    at.toggle(key="gates_fold").set_value(True).run()
    at.radio(key="gates_mode").set_value("a seed vs its adversarial input").run()
    assert not at.exception, [e.value for e in at.exception]
    steps = _heatmap_steps(at, "gates_pair_chart")
    assert 0 < len(steps) < ds.x_test.shape[1]
    html = " ".join(h.proto.body for h in at.get("html"))
    assert "test review" in " ".join(m.value for m in at.markdown) and html
