"""The view in the URL: model, data set, the run shown and a page's settings (``st.query_params``).

The frame calls :func:`restore` before the page runs: a new session (a reload, a second tab, a
shared link) takes the model, data set and the page's settings from its URL, each one checked
(an unknown model, a value off the page's choices: ignored, never an error). After the page ran,
:func:`publish` writes the view back, so the address bar always holds it. An uploaded model
is named by the digest of its folder in the run store (``model=upload:<digest>``,
``data=upload:<digest>``; never by its server path), so a reload or a shared link on the
same server opens it again; a test set uploaded as .npy files is not kept (the view then
falls back to a data set that fits).
"""
from __future__ import annotations

import streamlit as st

from dashboard import state
from rnncon_core import zoo


def _choice(options):
    def parse(v: str):
        return v if v in options else None
    return parse


def _number(kind, lo, hi, grid=None):
    def parse(v: str):
        try:
            x = kind(v)
        except (TypeError, ValueError):
            return None
        if not lo <= x <= hi:
            return None
        return round(round(x / grid) * grid, 2) if grid else x
    return parse


def _run_id(v: str):
    """A run id as the store makes them (the run picker checks it exists)."""
    return v if v and len(v) < 80 and all(c.isalnum() or c == "-" for c in v) else None


def _text(limit: int = 40):
    """A short value typed in a box (a budget such as 30s, a group such as "class 3")."""
    def parse(v: str):
        v = str(v).strip()
        return v if 0 < len(v) <= limit and all(c.isalnum() or c in " →-_.,:" for c in v) \
            else None
    return parse


def _campaign_guide(v: str):
    from rnncon_core.campaign import guide_names
    return v if v in guide_names() else None


UPLOAD = "upload:"          # model=upload:<digest>: a file in the run store's uploads


def _data(v: str | None) -> str | None:
    """A data set named in the URL: a built-in name, or an uploaded .npz by its digest."""
    if v and v.startswith(UPLOAD):
        return state.find_upload(v.removeprefix(UPLOAD), (".npz",))
    return v


def _threshold():
    return _number(float, 0.0, 0.95, 0.05)


def _inputs():
    def parse(v: str):
        n = _number(int, 1, 10 ** 6)(v)
        return n if n in state.INPUT_CHOICES else None
    return parse


# page -> {URL parameter: (widget key, parser)}
PAGE_PARAMS = {
    "coverage": {"threshold": ("cov_threshold", _threshold()), "inputs": ("cov_n", _inputs()),
                 "granularity": ("cov_gran", _choice(("unit", "edge"))),
                 "normalize": ("cov_norm", _choice(state.NORMALIZATIONS)),
                 "values": ("cov_values", _choice(state.VALUES)),
                 "rows": ("cov_by", _choice(("layer", "source")))},
    "gates": {"threshold": ("gates_threshold", _threshold()), "inputs": ("gates_n", _inputs()),
              "run": ("gates_run", _run_id)},
    "generate": {"run": ("gen_show", _run_id)},
    "perturbations": {"run": ("pert_run", _run_id)},
    "campaign": {"guide": ("camp_guide", _campaign_guide), "budget": ("camp_budget", _text()),
                 "seeds": ("camp_seeds", _number(int, 1, 2000)),
                 "seed": ("camp_seed", _number(int, 0, 2 ** 31 - 1)),
                 "run": ("camp_show", _run_id), "against": ("camp_axis",
                                                             _choice(("seconds", "calls"))),
                 "show": ("camp_filter", _choice(("valid", "invalid", "all"))),
                 "group": ("camp_group", _text())},
    "prioritize": {"inputs": ("prio_n", _inputs())},
    "retrain": {"source": ("retrain_from", _run_id), "run": ("retrain_show", _run_id)},
    "runs": {"run": ("runs_one", _run_id)},
}
_APPLIED = "_url_restored"
_PAGE = "_url_page"


def page_name(page) -> str:
    return str(getattr(page, "title", "") or "").lower()


def restore(page) -> None:
    """Once per browser session: the model, data set and this page's settings from the URL."""
    ss = st.session_state
    ss[_PAGE] = page_name(page)          # what sync() publishes from inside a fragment
    if ss.get(_APPLIED):
        return
    ss[_APPLIED] = True
    q = st.query_params
    model = q.get("model")
    if model and model in state.shipped():
        own = zoo.ARCHITECTURES[model].dataset
        data = _data(q.get("data")) or own
        if data != own and data not in zoo.model_datasets(model):
            data = own
        ss["selection"] = state.Selection(model, model, data)
    elif model and model.startswith(UPLOAD):
        path = state.find_upload(model.removeprefix(UPLOAD))
        try:
            fits = state.datasets_for(path) if path else []
        except Exception:  # noqa: BLE001 - a file that no longer loads: the default model
            fits = []
        data = _data(q.get("data"))
        if fits or data:
            ss["selection"] = state.Selection(path, state.upload_label(path), data or fits[0])
    for param, (key, parse) in PAGE_PARAMS.get(page_name(page), {}).items():
        value = parse(q.get(param)) if q.get(param) is not None else None
        if value is not None and key not in ss:
            ss[key] = value


def view(page) -> dict:
    """What the URL holds for this session and page (a page, or its name) now."""
    sel = state.current()
    out = {}
    if sel.model is not None:
        digest = state.upload_digest(sel.model)
        out["model"] = sel.model if sel.shipped else f"{UPLOAD}{digest}" if digest else "upload"
        data_digest = state.upload_digest(sel.dataset)
        if data_digest:
            out["data"] = f"{UPLOAD}{data_digest}"
        elif sel.shipped and sel.dataset and not sel.dataset.startswith("own: "):
            out["data"] = sel.dataset
    ss = st.session_state
    name = page if isinstance(page, str) else page_name(page)
    for param, (key, _) in PAGE_PARAMS.get(name, {}).items():
        value = ss.get(key)
        if value is not None and not isinstance(value, (list, dict)):
            out[param] = str(value)
    return out


def publish(page) -> None:
    """Write the view to the address bar (only when it changed)."""
    try:
        want = view(page)
        q = st.query_params
        if {k: q.get(k) for k in q.keys()} != want:
            q.from_dict(want)
    except Exception:  # noqa: BLE001 - the address bar is a convenience: never break a page
        pass


def sync() -> None:
    """Publish from inside a fragment (a slider or a picker that reruns only its fragment):
    the frame's publish runs only after a whole page."""
    name = st.session_state.get(_PAGE)
    if name:
        publish(name)
