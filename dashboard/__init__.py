"""Attention Lab dashboard: a Streamlit app over ``attention_core`` (see ``app.py``)."""
