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
    ("watch", ":material/model_training:"),
    ("practice", ":material/build:"),
    ("real_model", ":material/psychology:"),
    ("decoder", ":material/keyboard_double_arrow_right:"),
)
"""``(file stem, icon)`` of every page, in navigation order; the first is the default."""


def default_page(query_keys: list[str]) -> str:
    """The page a URL without a page path opens: the page whose controls the query names
    first (a link copied from the root before Intuition became the landing page, such as
    ``/?playground.seq_len=64``, still opens the Playground), else the first page.

    Args:
        query_keys: the URL's query keys in order (``"lang"``, ``"playground.seq_len"``, …).

    Returns:
        A page name of :data:`PAGES`.
    """
    names = [name for name, _icon in PAGES]
    for key in query_keys:
        prefix = key.split(".", 1)[0]
        if "." in key and prefix in names:
            return prefix
    return names[0]
