"""One Streamlit page per module; ``dashboard/app.py`` lists them with ``st.navigation``."""
