"""Models: Table 1, the model under test (shipped or uploaded), its data set and provenance."""
import hashlib
import re

import streamlit as st

from dashboard import images, state, warmup
from rnncon_core import data, zoo
from rnncon_core.errors import RNNConError
from rnncon_core.trace import check_model_inputs

st.title("Models")
st.caption("Pick the model under test and the data set it reads; every other page works on "
           "this choice.")



def own_dataset(model_path: str) -> str | None:
    """The user's own data set, uploaded as one .npz with x_train, y_train, x_test, y_test
    (optional kind, class_names, vocabulary; as `--dataset DATA.npz`): saved beside the
    uploads, read by data.load_dataset (its name is its path, so runs and retraining find it
    again) and its test inputs checked against the model. None until one is given."""
    up = st.file_uploader("Or your own data set (.npz with x_train, y_train, x_test, y_test; "
                          "retraining needs one)", type=["npz"], key="models_own_npz",
                          max_upload_size=state.MAX_UPLOAD_MB)
    if up is None:
        return None
    content = up.getvalue()
    path = state.upload_dir() / hashlib.sha256(content).hexdigest()[:16] / \
        re.sub(r"[^A-Za-z0-9._-]", "_", up.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(content)
    ds = state.dataset(str(path.resolve()))
    check_model_inputs(state.model(model_path), ds.x_test, f"the test inputs of {up.name}",
                       "sequence" if ds.kind == "sequence" else None)
    return ds.name


def own_test_set(model_path: str) -> str | None:
    """The user's own test set, uploaded as .npy inputs and labels beside an uploaded model:
    checked against the model (the CLI's checks and messages) and registered as a data set
    named "own: <file> <hash>"; None until both files are given. One-hot labels are read as
    their argmax (said under the uploads)."""
    cols = st.columns(2)
    xs = cols[0].file_uploader("Your own test inputs (.npy)", type=["npy"],
                               key="models_own_x", max_upload_size=state.MAX_UPLOAD_MB)
    ys = cols[1].file_uploader("Their labels (.npy, one class index per input)", type=["npy"],
                               key="models_own_y", max_upload_size=state.MAX_UPLOAD_MB)
    if xs is None or ys is None:
        return None
    model = state.model(model_path)
    x = check_model_inputs(model, data.read_npy(xs.getvalue(), xs.name, "inputs"),
                           f"the inputs ({xs.name})")
    y, note = data.class_labels(data.read_npy(ys.getvalue(), ys.name, "labels"), len(x),
                                f"the labels ({ys.name})")
    if note:
        st.caption(note)
    head = zoo.output_head(model)
    if head.classifier:
        y = head.check_labels(y)
    digest = hashlib.sha256(xs.getvalue() + ys.getvalue()).hexdigest()[:8]
    name = f"own: {xs.name} {digest}"
    data.user_dataset(x, y, name, source=f"uploaded {xs.name} and {ys.name} "
                                         f"({len(x):,} inputs)")
    return name


current = state.current()
names = state.shipped()
uploaded = state.uploaded_models()      # earlier uploads, kept in the run store
missing = [n for n in zoo.ARCHITECTURES if n not in names]

left, right = st.columns([1, 1], gap="large")
with left:
    st.subheader("Model under test")
    sources = ["Shipped model", "Upload a .keras file", "Upload an .onnx file (PyTorch)"]
    onnx_selected = bool(current.model) and current.model.lower().endswith(".onnx")
    source = st.radio("Source", sources, horizontal=True, key="models_source",
                      index=0 if current.shipped or current.model is None
                      else 2 if onnx_selected else 1)
    if source == sources[0]:
        if not names:
            st.info("No trained model is in `assets/models` yet: the shipped models are being "
                    "trained and appear here as they finish. Meanwhile, upload a `.keras` file.")
        else:
            picks = names + list(uploaded)
            name = st.selectbox("Model", picks, key="models_pick",
                                index=picks.index(current.model) if current.model in picks
                                else 0, format_func=lambda n: uploaded.get(n, n),
                                help="The shipped models, then the models uploaded before.")
            if name != current.model and name in uploaded:
                try:
                    state.select(name, uploaded[name], state.datasets_for(name)[0])
                except (RNNConError, IndexError):
                    st.error(f"{uploaded[name]} fits none of the data sets: upload it again "
                             f"with your own test set.")
            elif name != current.model:
                state.select(name, name, zoo.ARCHITECTURES[name].dataset)
        if missing:
            st.caption("Not trained yet: " + ", ".join(missing) + ".")
    else:
        st.caption("Beside the model you may upload your own test set; without one, a data "
                   "set whose inputs fit the model is used.")
        if source == sources[1]:
            upload = st.file_uploader(f"A Keras 3 `.keras` model (at most {state.MAX_UPLOAD_MB} "
                                      "MB; models with Lambda layers or custom code are refused)",
                                      type=["keras"], key="models_upload",
                                      max_upload_size=state.MAX_UPLOAD_MB)
        else:
            upload = st.file_uploader(
                f"An `.onnx` file of a recurrent model, as `torch.onnx.export` writes it (at "
                f"most {state.MAX_UPLOAD_MB} MB): imported as the equivalent Keras model and "
                "checked against onnxruntime (docs/onnx.md)", type=["onnx"],
                key="models_upload_onnx", max_upload_size=state.MAX_UPLOAD_MB)
        if upload is not None:
            try:
                path = state.save_upload(upload.name, upload.getvalue())
                state.check_upload(str(path))          # loads and checks it (cached)
                own = own_test_set(str(path)) \
                    or own_dataset(str(path))             # the user's .npy or .npz, if given
                fits = ([own] if own else []) + state.datasets_for(str(path))
                if not fits:
                    raise RNNConError(
                        f"{upload.name}: its input shape {state.model(str(path)).input_shape} "
                        "fits none of the data sets (28×28 images, 8×8 digits or 500 IMDB word "
                        "ids); upload your own test set (.npy) above")
            except RNNConError as e:
                state.show_error(e)
            else:
                if str(path) != current.model or (own and own != current.dataset):
                    if own:     # the Inputs box below shows it (its key keeps the old choice)
                        st.session_state["models_dataset"] = own
                    state.select(str(path), state.upload_label(str(path)), fits[0])
                st.success(f"Loaded {upload.name}.")
        elif not current.shipped and current.model:
            st.caption(f"Using {current.label}.")

current = state.current()
with right:
    st.subheader("Data set")
    if current.model is None:
        st.info("Choose a model first.")
    else:
        try:
            options = state.datasets_for(current.model)
        except RNNConError as e:
            state.show_error(e)
            options = []
        if current.dataset and current.dataset not in options and \
                current.dataset not in data.DATASETS:         # the user's own (.npy or .npz)
            options = [current.dataset] + options
        if options:
            ds_name = st.selectbox("Inputs", options, key="models_dataset",
                                   format_func=state.data_label,
                                   index=options.index(current.dataset)
                                   if current.dataset in options else 0,
                                   help="Test inputs come from the test split of this data set.")
            if ds_name != current.dataset:
                state.select(current.model, current.label, ds_name)
            try:
                ds = state.dataset(ds_name)
            except RNNConError as e:
                state.show_error(e)
            else:
                st.markdown(f"**Provenance of the data:** {state.public(ds.source)}")
                s = ds.summary()
                st.caption(f"{s['train']:,} training and {s['test']:,} test inputs, each "
                           f"{' × '.join(map(str, s['input_shape']))}, {s['num_classes']} "
                           "classes.")



if current.model is not None and current.dataset is not None:
    st.subheader("Provenance of the model")
    if current.shipped:
        card = state.model_card(current.model)
        if card is None:
            st.info(f"{current.model} has no model card yet.")
        else:
            cols = st.columns(4)
            cols[0].metric("Test accuracy (ours)", f"{100 * card['test_accuracy']:.2f} %",
                           help=f"measured on our test split of {card['test_size']:,} inputs")
            paper = zoo.ARCHITECTURES[current.model].paper_accuracy
            cols[1].metric("Paper's accuracy", f"{paper:.2f} %" if paper else "—",
                           help="trained on the full data set: not comparable one to one")
            cols[2].metric("Parameters", f"{card['params']:,}")
            cols[3].metric("Epochs", f"{card['epochs_run']} of {card['epochs_requested']}")
            st.markdown(f"{card['architecture']}; trained on {card['data_source']}; "
                        f"{card['early_stopping']}; augmentation: {card['augmentation']}; "
                        f"{card['optimizer']}, batch {card['batch_size']}, seed {card['seed']}; "
                        f"{card['training_seconds']:.0f} s of training on "
                        f"{card['trained_at']}.")
            st.caption("Versions: " + ", ".join(f"{k} {v}" for k, v in card["versions"].items()))
    else:
        m = state.model(current.model)
        st.markdown(f"Uploaded file `{current.label.removeprefix('upload: ')}` (kept in the "
                    f"run store): "
                    f"{m.count_params():,} parameters, input {m.input_shape}, layers "
                    + " → ".join(f"{type(layer).__name__}" for layer in m.layers) + ".")
        onnx_card = state.onnx_card(m)
        if onnx_card is not None:
            st.markdown(
                f"Imported from ONNX (producer {onnx_card['producer']}, opset "
                f"{onnx_card['opset']}, input {onnx_card['input_layout']}); sha256 "
                f"`{onnx_card['sha256'][:16]}…`. The Keras model differs from onnxruntime by "
                f"at most **{onnx_card['max_difference']:.2g}** on "
                f"{onnx_card['checked_on']}.")
            st.caption("Layers from ONNX nodes: " + ", ".join(
                f"{layer['layer']} ({layer['class']}) ← {layer['onnx_node']}"
                for layer in onnx_card["layers"]))


def waiting_for_tensorflow(current) -> tuple[bool, bool]:
    """(sample, Table 1): which of them the server's warm-up is still computing. While it
    loads TensorFlow the page shows what needs none of it and polls for the rest."""
    if not warmup.busy():
        return False, False
    sample = current == state.default_selection() \
        and not state.ready("sample", current.model, current.dataset, state.SAMPLE_SIZE)
    return sample, not state.table1_ready()


def sample_and_table1(current, polling: bool) -> None:
    """The sample (labels, the model's predictions) and Table 1; reruns every second while
    the warm-up computes them, then reruns the page once to stop polling."""
    wait_sample, wait_table = waiting_for_tensorflow(current)
    if polling and not (wait_sample or wait_table):
        st.rerun()
    if current.model is not None and current.dataset is not None:
        st.subheader("A sample of the test inputs")
        n = state.SAMPLE_SIZE
        s = None
        try:
            if wait_sample:
                x, y = state.test_inputs(current.dataset, n)
                s = {"x": x, "y": y, "pred": None, "conf": None}
            else:
                s = state.sample(current.model, current.dataset, n)
        except RNNConError as e:
            state.show_error(e)
        if s is not None:
            ds = state.dataset(current.dataset)
            pred, conf = s["pred"], s["conf"]
            if ds.kind != "text":
                caps = [f"{t} → …" for t in s["y"]] if pred is None else \
                    [f"{t} → {p} ({c:.0%})" for t, p, c in zip(s["y"], pred, conf)]
                # plain HTML with the images inline, not a Plotly figure: the first page a
                # visitor sees loads no chart library (Plotly's script is 4.7 MB to parse in
                # every new tab) and fetches nothing more
                with st.container(key="models_sample"):
                    st.caption("label → prediction (confidence)")
                    st.html(images.image_strip(data.to_images(s["x"]), caps))
            else:
                st.dataframe([{"label": int(t),
                               "prediction": None if pred is None else int(pred[i]),
                               "confidence": None if pred is None else f"{conf[i]:.0%}",
                               "review (start)": (" ".join(ds.vocab.decode(row)) if ds.vocab
                                                  else " ".join(map(str, row)))[:200]}
                              for i, (t, row) in enumerate(zip(s["y"], s["x"]))],
                             width="stretch")
            if pred is None:
                st.caption(":material/hourglass_top: the predictions appear as soon as the "
                           "model has loaded (the server loads TensorFlow in the background "
                           "when it starts).")

    st.subheader("Table 1: the models")
    st.caption("Our counts are computed from the built architectures; accuracies are measured "
               "on our test split (see each model card). The paper's figures are shown beside "
               "them.")
    if wait_table:
        st.caption(":material/hourglass_top: Table 1 builds the eight architectures: it appears "
                   "as soon as TensorFlow has loaded.")
    else:
        from dashboard import tables           # pandas: not before Table 1 is ready
        st.table(tables.table1_text(tables.table1(state.table1())))
        st.caption("cons per step: contributions per time step; cons (paper's count): "
                   "counted as the paper's Table 1 does (its steps × per step); cons (all "
                   "steps): every recurrent step, Dense layers once, what coverage counts here.")
        # below the first view, so Plotly's script loads while the visitor reads this page
        # (not when the Coverage page is opened)
        st.plotly_chart(state.accuracy_figure(), width="stretch", key="models_accuracy")


polling = any(waiting_for_tensorflow(current))
st.fragment(sample_and_table1, run_every=1.0 if polling else None)(current, polling)
