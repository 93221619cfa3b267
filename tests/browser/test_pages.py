"""End-to-end: every page in headless Chromium, in both languages.

For each page, in one visit per (page, language): it loads with no exception or error box,
every chart is painted (canvas pixels, not only the element), a screenshot is written, the
heading speaks the language, no chart's text is cut off and no two tick labels overlap
(``helpers.chart_problems``), every number printed in a chart's cell stands on its cell's
colour as the canvas paints it (``helpers.painted_cell_problems``), at most 600 characters of
text stand above the first chart; in
the English visit, moving a slider with the keyboard then changes a chart. The 中文 switch
shows Chinese; a copied link reproduces the controls.
"""

from __future__ import annotations

import re

import pytest

from bench.browser import CHART_SELECTOR, chart_signatures, patient, wait_idle
from tests.browser.helpers import (
    MAX_TEXT_ABOVE_CHART,
    PAGES,
    PAINT_TIMEOUT_MS,
    SLOW_PAGE_MS,
    assert_no_errors,
    chart_problems,
    open_page,
    open_shot,
    page_url,
    painted_cell_problems,
    text_above_first_chart,
    wait_painted,
)
from tests.conftest import MODEL_PAGES

pytestmark = pytest.mark.browser

CJK = re.compile(r"[\u4e00-\u9fff]")
MIN_PAINTED = 0.005
SLIDER = '[data-testid="stSlider"] input[type="range"]'
SLIDER_WAIT_MS = patient(20_000)
MAX_SLIDERS_TRIED = 4


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", PAGES)
def test_page_loads_paints_speaks_fits_and_moves(server, page, screenshot_dir, name, lang):
    url = page_url(server.url, name, f"lang={lang}")
    wait_ms = SLOW_PAGE_MS if name in MODEL_PAGES else PAINT_TIMEOUT_MS  # a model's first run
    painted = open_shot(page, url, screenshot_dir / f"{name}-{lang}.png", wait_ms)
    assert page.locator(CHART_SELECTOR).count() >= 1, f"page {name} shows no chart"
    assert any(frac is not None for frac in painted), f"no chart of {name} is visible"
    blank = [i for i, frac in enumerate(painted) if frac is not None and frac < MIN_PAINTED]
    assert not blank, f"charts {blank} of {name} are blank: {painted}"
    heading = page.locator("h1").first.inner_text()
    if lang == "zh":
        assert CJK.search(heading), f"no Chinese in the {name} heading: {heading!r}"
    else:
        assert not CJK.search(heading), f"Chinese in the English {name} heading: {heading!r}"
    problems = chart_problems(page)
    assert not problems, "\n".join(problems)
    checked, wrong = painted_cell_problems(page)  # the colour under every printed number
    assert not wrong, f"{len(wrong)} of {checked} printed cells off their colour: {wrong[:5]}"
    if name == "step_by_step":
        assert checked >= 300, f"only {checked} printed cells found on Step by step"
    above = text_above_first_chart(page)
    assert above is not None and above <= MAX_TEXT_ABOVE_CHART, (
        f"{above} characters of text above the first chart of {name}"
    )
    if lang == "en":  # the keyboard check once per page: a move repaints in either language
        # the sidebar's sliders can land a moment after the run reads as finished
        page.wait_for_selector(SLIDER, timeout=SLIDER_WAIT_MS)
        assert _move_slider_changes_chart(page), f"no slider on {name} changed a chart"
        assert_no_errors(page)


def _move_slider_changes_chart(page) -> bool:
    sliders = page.locator(SLIDER)
    for index in range(min(sliders.count(), MAX_SLIDERS_TRIED)):
        before = chart_signatures(page)
        thumb = sliders.nth(index)
        at_max = thumb.input_value() == thumb.get_attribute("max")
        thumb.focus()
        page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
        wait_idle(page)
        wait_painted(page)
        if chart_signatures(page) != before:
            return True
    return False


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_is_listed_in_the_open_sidebar(server, page, lang):
    """The sidebar's sections show every page's link at once, the real-model pages too (a flat
    list of 13 hid the last three under "View 3 more")."""
    import json

    from bench.browser import REPO_ROOT

    common = json.loads(
        (REPO_ROOT / "dashboard" / "locales" / lang / "common.json").read_text("utf-8")
    )
    open_page(page, page_url(server.url, PAGES[0], f"lang={lang}"))
    nav = page.locator('[data-testid="stSidebarNav"]')
    for name in PAGES:
        link = nav.get_by_text(common[f"page_{name}"], exact=True)
        assert link.count() == 1 and link.first.is_visible(), name
    assert nav.get_by_text("View", exact=False).filter(has_text="more").count() == 0


def test_language_switch_shows_chinese(server, page):
    open_page(page, page_url(server.url, PAGES[0]))
    assert not CJK.search(page.locator("h1").first.inner_text())
    page.locator('[data-testid="stSidebar"] label').filter(has_text="中文").first.click()
    wait_idle(page)
    assert CJK.search(page.locator("h1").first.inner_text())
    assert "lang=zh" in page.url


def _slider_values(page) -> list[str]:
    sliders = page.locator(SLIDER)
    return [sliders.nth(i).input_value() for i in range(sliders.count())]


def test_copied_link_reproduces_controls(server, browser, page):
    open_page(page, page_url(server.url, PAGES[0]))
    thumb = page.locator(SLIDER).first
    thumb.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
        wait_idle(page)
    values = _slider_values(page)
    link = page.locator('[data-testid="stSidebar"] [data-testid="stCode"]').first.inner_text()
    link = link.strip()
    assert link.startswith("http"), link
    fresh = browser.new_context().new_page()
    try:
        open_page(fresh, link)
        # every slider drawn before they are read (a run can end with the title drawn first)
        fresh.wait_for_function(
            "([sel, n]) => document.querySelectorAll(sel).length >= n",
            arg=[SLIDER, len(values)],
            timeout=PAINT_TIMEOUT_MS,
        )
        wait_idle(fresh)
        assert _slider_values(fresh) == values
    finally:
        fresh.context.close()


def test_playground_figure_downloads_are_the_drawn_grid(server, browser):
    """The grid is drawn on the canvas; its PNG and SVG downloads are rendered on click from
    the Altair heatmap of the same table: one panel per head."""
    from io import BytesIO
    from pathlib import Path

    from PIL import Image

    context = browser.new_context(accept_downloads=True, viewport={"width": 1440, "height": 2000})
    page = context.new_page()
    try:
        open_page(
            page, page_url(server.url, "playground", "playground.heads=2&playground.seq_len=6")
        )
        files = {}
        for kind in ("PNG", "SVG"):
            with page.expect_download(timeout=PAINT_TIMEOUT_MS) as download:
                page.get_by_role("button", name=f"Figure ({kind})").click()
            files[kind] = Path(download.value.path()).read_bytes()
        image = Image.open(BytesIO(files["PNG"]))
        assert image.format == "PNG" and image.width > image.height
        svg = files["SVG"].decode("utf-8")
        assert svg.startswith("<svg") and "Head 0" in svg and "Head 1" in svg
        assert "Head 2" not in svg
    finally:
        context.close()
