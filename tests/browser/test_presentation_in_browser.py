"""The presentation view in Chromium, as a room's projector shows it: a 1280×720 projector at
150 % zoom is 853×480 CSS pixels. With ``present=1`` in the link the sidebar starts folded
away, the page's controls sit in a box above it, every Vega chart draws its axis and legend
text at 16 px or more and its titles at 20 px or more, every canvas heatmap shows its tick
labels at 16 px or more (not shrunk to fit), and no chart spills out of its column
or overlaps its own tick labels (``helpers.chart_problems``); the whole head grid of a model
fits the width. Screenshots at 853×480 and 1920×1080 go to the screenshot folder."""

from __future__ import annotations

import pytest

from tests.browser.helpers import (
    assert_no_errors,
    canvas_label_sizes,
    chart_font_sizes,
    chart_problems,
    open_charted,
    page_url,
)

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 853, "height": 480}
FULL_HD = {"width": 1920, "height": 1080}
MIN_LABEL_PX = 16
MIN_TITLE_PX = 20
LABEL_ROLES = ("axis-label", "axis-title", "legend-label", "legend-title", "header-text")
SUBPIXEL = 0.25  # a canvas a fraction of a pixel narrower than its drawing
# (page, language): the five pages a workshop shows most, two of them in both languages
VIEWS = [
    ("intuition", "en"),
    ("playground", "en"),
    ("step_by_step", "en"),
    ("step_by_step", "zh"),
    ("real_model", "en"),
    ("real_model", "zh"),
    ("heads", "en"),
]
SIDEBAR_OPEN_JS = """() => {
  const bar = document.querySelector('[data-testid="stSidebar"]');
  if (!bar) return false;
  const box = bar.getBoundingClientRect();
  return bar.getAttribute('aria-expanded') !== 'false' && box.right > 1 && box.width > 1;
}"""


def _open(browser, url: str, viewport: dict):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    open_charted(page, url)
    return context, page


@pytest.mark.parametrize(("name", "lang"), VIEWS)
def test_the_presentation_view_reads_from_the_back_of_the_room(
    server, browser, screenshot_dir, name, lang
):
    url = page_url(server.url, name, f"lang={lang}&present=1")
    context, page = _open(browser, url, PROJECTOR)
    try:
        assert_no_errors(page)
        assert "present=true" in page.url  # a link's 1 is read, and written back as true
        assert not page.evaluate(SIDEBAR_OPEN_JS), "the sidebar is open in the presentation view"
        controls = page.locator('[data-testid="stExpander"]').first
        assert controls.inner_text().strip().endswith(("Controls", "控件"))  # folded
        problems = chart_problems(page)
        assert not problems, "\n".join(problems)
        sizes, canvases = chart_font_sizes(page), canvas_label_sizes(page)
        assert sizes or canvases, f"no chart visible on {name}"
        shrunk = [round(px, 1) for px in canvases if px < MIN_LABEL_PX - SUBPIXEL]
        assert not shrunk, f"canvas heatmaps' tick labels shown at {shrunk} px"
        small = [
            (index, role, px)
            for index, chart in enumerate(sizes)
            for role, px in chart.items()
            if (role in LABEL_ROLES and px < MIN_LABEL_PX)
            or (role == "title-text" and px < MIN_TITLE_PX)
        ]
        assert not small, small
        titled = [chart for chart in sizes if "title-text" in chart]
        assert titled or not sizes, f"no chart title found on {name}: {sizes}"
        page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
        page.screenshot(path=str(screenshot_dir / f"present-{name}-{lang}-853x480.png"))
    finally:
        context.close()
    if lang == "en":
        context, page = _open(browser, url, FULL_HD)
        try:
            assert_no_errors(page)
            problems = chart_problems(page)
            assert not problems, "\n".join(problems)
            page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
            page.screenshot(path=str(screenshot_dir / f"present-{name}-en-1920x1080.png"))
        finally:
            context.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_next_to_a_step_on_another_page_keeps_the_presentation_view(
    server, browser, screenshot_dir, lang
):
    """A lesson walked in the presentation view at 853×480: Next from step 2 (Intuition) to
    step 3 (Step by step) shows step 3 with the view still on (the controls folded in their
    box, ``present=true`` in the link) and no error: the page once went blank ("Bad delta
    path index") when the switch was drawn into the box of the run before the change."""
    from dashboard.i18n import t_in
    from dashboard.lessons.model import shipped_lessons

    url = f"{server.url}/intuition?lesson=self-attention-20&lesson.step=2&present=1&lang={lang}"
    context, page = _open(browser, url, PROJECTOR)
    try:
        page.get_by_role("button", name=t_in(lang, "lesson.next"), exact=True).click()
        step = shipped_lessons()["self-attention-20"].steps[2]
        page.get_by_text(step.title(lang), exact=True).wait_for(timeout=60_000)
        page.wait_for_url("**/step_by_step?*present=true*", timeout=60_000)
        body = page.inner_text("body")
        assert t_in(lang, "lesson.step_of", k=3, n=10) in body
        assert t_in(lang, "common.present_controls") in body
        assert not page.errors, page.errors
        assert_no_errors(page)
        page.screenshot(path=str(screenshot_dir / f"lesson-step3-presentation-853-{lang}.png"))
    finally:
        context.close()


CANVAS_LAYOUTS_JS = """() => Array.from(document.querySelectorAll('.attn-heatmap'))
  .filter((el) => el.dataset.layout).map((el) => JSON.parse(el.dataset.layout))"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_map_is_smaller_than_its_legend_or_its_y_title_when_presenting(
    server, browser, screenshot_dir, lang
):
    """At 853×480 the Playground's maps (every head, the head average, the output) are as
    wide as their legend and, panels together, as tall, and a turned y title is no longer than its
    map, so it never reaches the chart's title: the head average was once 70 px under a
    legend taller than itself, its y title over its title."""
    url = page_url(server.url, "playground", f"lang={lang}&present=1")
    context, page = _open(browser, url, PROJECTOR)
    try:
        assert_no_errors(page)
        page.wait_for_function(CANVAS_LAYOUTS_JS + ".length >= 3", timeout=60_000)
        layouts = page.evaluate(CANVAS_LAYOUTS_JS)
        for layout in layouts:
            width, height = layout["panel_size"]
            tops = [y for _x, y in layout["panels"]]
            grid_h = max(tops) + height - min(tops)  # the legend stands beside the whole grid
            title_top, bar_top, bar_h = layout["legend"]
            assert grid_h >= bar_top + bar_h - title_top, layout
            assert min(width, height) >= layout["legend_width"], layout
            assert layout["y_title_turned_px"] <= height, layout
        page.screenshot(path=str(screenshot_dir / f"present-playground-maps-{lang}-853x480.png"))
    finally:
        context.close()
