"""The Streamlit dashboard over rnncon_core (run it with `streamlit run dashboard/serve.py`, as `make run` does)."""
