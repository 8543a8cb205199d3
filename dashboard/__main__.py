"""Serve the dashboard: ``python -m dashboard [streamlit options]`` (what `make run` does).

The same as ``streamlit run dashboard/serve.py [options]``, with a clean stop: the server
(uvicorn, under ``st.App``) shuts down gracefully on Ctrl-C or SIGTERM and then raises the
signal again to the handler it found at its start; Python's own turns that into
KeyboardInterrupt, which Streamlit's command line reports as "Aborted!" with exit code 1. The
handler set here ends the process with "Stopping..." and exit code 0 instead (a stop before the
server is up too).
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path


def _stop(signum, frame) -> None:
    print("  Stopping...", file=sys.stderr, flush=True)
    raise SystemExit(0)


def main() -> None:
    from streamlit.web import cli
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    sys.argv = ["streamlit", "run", str(Path(__file__).with_name("serve.py")), *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
