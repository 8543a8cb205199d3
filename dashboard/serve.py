"""The dashboard's server: Streamlit's own (``st.App``), with one addition.

Opened on a page's URL (``/campaign``), Streamlit's front end first looks for the server under
that path (``/campaign/_stcore/health`` and ``host-config``: two 404s in the browser console on
every new tab, streamlit/streamlit#7074), then at ``/``. The server is always at ``/`` (or at
``server.baseUrlPath``), so a page's HTML says so (``window.__streamlit.BACKEND_BASE_URL``, the
front end's own setting for where its server is) and the front end asks there only.

    python -m dashboard [streamlit options]      # what `make run` does (dashboard/__main__.py)
"""
from __future__ import annotations

import re
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse

# a page of st.navigation: one path segment under the server's base path, no dot (Streamlit's
# own routes start with "_" or are files such as /favicon.png) and no trailing slash (the
# index's relative script paths would then point under the page: Streamlit's own answer
# for /coverage/ handles that)
PAGE = r"[A-Za-z0-9][A-Za-z0-9_-]*"
PIN = ('<script>window.__streamlit={BACKEND_BASE_URL:window.location.origin+"%s/"}'
       '</script>')


def _base_path() -> str:
    """The server's base path ("" or "/NAME", from `server.baseUrlPath`)."""
    from streamlit import config
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def _index(base: str) -> str:
    html = (Path(st.__file__).parent / "static" / "index.html").read_text()
    return html.replace("<head>", "<head>" + PIN % base, 1)


class ServerAtRoot:
    """ASGI middleware: a page's URL gets Streamlit's index.html with the server pinned at its
    base path."""

    def __init__(self, app):
        self.app = app
        base = _base_path()
        self.page = re.compile(f"^{re.escape(base)}/{PAGE}$")
        self.html = _index(base)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") \
                and self.page.match(scope["path"]):
            response = HTMLResponse(self.html, headers={"Cache-Control": "no-cache"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


app = st.App(Path(__file__).with_name("app.py"), middleware=[Middleware(ServerAtRoot)])
