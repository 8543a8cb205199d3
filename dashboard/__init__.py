"""The Streamlit dashboard over rnncon_core (serve it with `python -m dashboard`, as `make run` does)."""
