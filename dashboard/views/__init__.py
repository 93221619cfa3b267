"""One Streamlit page per module; ``dashboard/app.py`` lists them with ``st.navigation``."""

APP_ICON = "👀"
"""The browser tab's icon: an emoji, which Streamlit draws as an inline SVG (a Material
Symbols name would be fetched from a web font service, which a room offline cannot reach)."""
PAGES = (
    ("intuition", "💡"),
    ("playground", "▶️"),
    ("step_by_step", "🔢"),
    ("scaling", "📏"),
    ("multihead", "🧩"),
    ("variants", "🎛️"),
    ("properties", "✅"),
    ("gradients", "📉"),
    ("watch", "🏋️"),
    ("practice", "🛠️"),
    ("real_model", "🧠"),
    ("decoder", "⏩"),
    ("heads", "🔌"),
    ("writes", "✍️"),
)
"""``(file stem, icon)`` of every page, in navigation order; the first is the default. The
icons are emoji, drawn from the browser's own fonts: nothing is fetched for them."""
PAGE_SECTIONS = {
    "intuition": ("dance", "reading", "meeting", "library"),
    "step_by_step": ("scores", "masked"),
    "scaling": ("table", "saturation"),
    "multihead": ("gallery", "real"),
    "variants": ("cost",),
    "properties": ("equivariance", "rows", "leak", "chunk", "softmax"),
    "gradients": ("variant", "dk"),
    "real_model": ("tokens", "grid", "pronoun"),
    "decoder": ("generation", "maps", "rope", "sink"),
    "heads": ("census", "why"),
    "writes": ("lens", "parts", "head", "copying"),
}
"""The sections of a page that a lesson step may name (``section = "meeting"``): each page
draws the section's header with the anchor :func:`section_anchor` gives (or, for a chart with
no header of its own, a box keyed with it: its class ``st-key-<anchor>``), and arriving at the
step shows that section first."""
SECTIONS = (
    ("basics", ("intuition", "playground", "step_by_step", "scaling", "multihead")),
    ("lab", ("variants", "properties", "gradients", "watch", "practice")),
    ("real", ("real_model", "decoder", "heads", "writes")),
)
"""The sidebar's sections (``common.nav_<section>``) and their pages, in :data:`PAGES`' order:
every page is listed in the open sidebar, the real-model pages among them (a flat list of 13
hid the last three under "View 3 more")."""


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


def section_anchor(page: str, section: str) -> str:
    """The HTML id of ``section`` of ``page`` (the anchor of its header): ``"<page>-<section>"``."""
    return f"{page}-{section}"
