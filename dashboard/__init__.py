"""The Streamlit dashboard over rnncon_core (run it with `streamlit run dashboard/app.py`)."""
