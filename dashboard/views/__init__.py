"""One Streamlit page per module; ``dashboard/app.py`` lists them with ``st.navigation``."""

PAGES = (
    ("intuition", ":material/lightbulb:"),
    ("playground", ":material/play_circle:"),
    ("step_by_step", ":material/stairs:"),
    ("scaling", ":material/straighten:"),
    ("multihead", ":material/grid_view:"),
    ("variants", ":material/tune:"),
    ("properties", ":material/rule:"),
    ("gradients", ":material/trending_down:"),
    ("practice", ":material/build:"),
    ("real_model", ":material/psychology:"),
    ("decoder", ":material/keyboard_double_arrow_right:"),
)
"""``(file stem, icon)`` of every page, in navigation order; the first is the default."""
