"""What the browser tests share: opening a page and waiting for what it really draws, its
painted charts, its error boxes, whether every Vega chart's text fits its box, and the links
a page shows. Test modules import from here, never from one another."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from bench.browser import CHART_SELECTOR, page_names, painted_fraction, patient, wait_idle

PAGES = page_names()
PAINT_TIMEOUT_MS = patient(30_000)
CHART_WAIT_MS = patient(60_000)  # a page at its extremes computes a while before its chart
SLOW_PAGE_MS = patient(240_000)  # the decoder loads its model on a first visit
SLACK_PX = 1.5  # Vega's text bounds are estimates; a pixel of anti-aliasing is not a cut
MIN_GAP_PX = 3.0  # between two values printed side by side in a matrix: about a space


def page_url(base: str, name: str, query: str = "") -> str:
    path = "" if name == PAGES[0] else name
    return f"{base}/{path}" + (f"?{query}" if query else "")


def open_page(page, url: str, idle_ms: int | None = None) -> None:
    """Go to ``url`` and wait until the page's first run has drawn its title and finished
    (right after ``goto`` the app reads as "not running" before that run has started), for
    at most ``idle_ms`` (default: ``wait_idle``'s)."""
    page.goto(url)
    page.wait_for_selector("h1", timeout=PAINT_TIMEOUT_MS)
    if idle_ms is None:
        wait_idle(page)
    else:
        wait_idle(page, timeout_ms=idle_ms)


def wait_painted(page) -> list[float]:
    """Wait until Vega has drawn every chart; return each chart's painted pixel fraction."""
    page.wait_for_function(
        """(sel) => Array.from(document.querySelectorAll(sel)).every(el => {
            const c = el.querySelector('canvas'); const s = el.querySelector('svg');
            return (c && c.width > 0) || (s && s.querySelectorAll('path, rect').length > 3);
        })""",
        arg=CHART_SELECTOR,
        timeout=PAINT_TIMEOUT_MS,
    )
    page.wait_for_timeout(300)
    return painted_fraction(page)


def assert_no_errors(page) -> None:
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, exceptions.first.inner_text()
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.first.inner_text()
    assert not page.errors, page.errors


# Every Vega chart on the page: its text items (absolute bounds in the chart's own pixels)
# checked against the drawn box (the canvas or SVG, cut by the chart's slot), the title
# against the legend, and each text mark's items against each other.
VEGA_SCAN_JS = """
  const isView = (o) => o && typeof o === 'object' && typeof o.scenegraph === 'function'
    && typeof o.runAsync === 'function';
  // the Vega view within three levels of obj (a React hook's state), or null
  function scanForView(obj, depth, seen) {
    if (!obj || typeof obj !== 'object' || depth > 3 || seen.has(obj)) return null;
    seen.add(obj);
    if (isView(obj)) return obj;
    for (const key of Object.keys(obj)) {
      let found = null;
      try { found = scanForView(obj[key], depth + 1, seen); } catch (e) { found = null; }
      if (found) return found;
    }
    return null;
  }
"""
"""JavaScript put at the top of a function that looks for a chart's Vega view: vega-embed
keeps it in a React hook's state, not on the element."""
FIND_VIEW_JS = (
    VEGA_SCAN_JS
    + """  function findView(el) {
    const seen = new Set();
    for (const node of [el, ...el.querySelectorAll('*')]) {
      const fiberKey = Object.keys(node).find((k) => k.startsWith('__reactFiber'));
      let fiber = fiberKey ? node[fiberKey] : null;
      for (let up = 0; fiber && up < 30; up++, fiber = fiber.return) {
        for (let hook = fiber.memoizedState, i = 0; hook && i < 60; hook = hook.next, i++) {
          const view = scanForView(hook.memoizedState, 0, seen);
          if (view) return view;
        }
      }
    }
    return null;
  }
"""
)
"""``findView(el)``: the Vega view of a Streamlit chart element, or null."""

FIT_JS = (
    """([slack, minGap]) => {"""
    + FIND_VIEW_JS
    + """  function texts(view) {
    const out = [];
    const origin = view._origin || [0, 0];
    function visit(mark, ox, oy, inLegend) {
      const legend = inLegend || mark.role === 'legend';
      for (const item of mark.items || []) {
        if (mark.marktype === 'text') {
          const text = Array.isArray(item.text) ? item.text.join(' ') : String(item.text ?? '');
          const b = item.bounds;
          if (text.trim() && b && b.x2 > b.x1 && item.opacity !== 0) {
            out.push({text, role: mark.role, legend, mark: mark,
                      x1: b.x1 + ox, x2: b.x2 + ox, y1: b.y1 + oy, y2: b.y2 + oy,
                      ax: (item.x || 0) + ox, ay: (item.y || 0) + oy,
                      angle: item.angle || 0, size: item.fontSize || 10});
          }
        }
        for (const child of item.items || []) {
          if (child && child.marktype !== undefined) {
            visit(child, ox + (item.x || 0), oy + (item.y || 0), legend);
          }
        }
      }
    }
    visit(view.scenegraph().root, origin[0], origin[1], false);
    return out;
  }
  const GLYPH_HEIGHT = 0.75;  // of the font size: a Latin or CJK glyph's height, about
  const meet = (a, b, px) => Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1) > px
    && Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1) > px;
  const charts = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'));
  return charts.map((el, index) => {
    const surface = el.querySelector('canvas, svg');
    const shown = surface ? surface.getBoundingClientRect() : null;
    if (!shown || shown.width === 0 || !el.offsetParent) return {index, hidden: true};
    const view = findView(el);
    if (!view) return {index, noView: true};
    // the slot Streamlit lays the chart out in: a wider drawing spills over its neighbours
    // and is cut at the window's edge
    const slot = el.closest('[data-testid="stElementContainer"]') || el;
    const cut = slot.getBoundingClientRect();
    // the size Vega laid the chart out at; the page may show it squeezed into its column
    const natural = surface.tagName === 'svg' ? parseFloat(surface.getAttribute('width'))
      : (parseFloat(surface.style.width) || surface.width / devicePixelRatio);
    const sx = shown.width / natural;
    const box = {x1: (Math.max(shown.left, cut.left) - shown.left) / sx,
                 x2: (Math.min(shown.right, cut.right) - shown.left) / sx,
                 y1: Math.max(shown.top, cut.top) - shown.top,
                 y2: Math.min(shown.bottom, cut.bottom) - shown.top};
    const all = texts(view);
    const title = all.filter((t) => t.role === 'title-text').map((t) => t.text).join(' ');
    const problems = [];
    if (Math.abs(shown.width - natural) > slack) {
      problems.push(`drawn ${shown.width.toFixed(0)} px wide but laid out at `
        + `${natural.toFixed(0)} px: squeezed, its text and cells narrowed`);
    }
    for (const t of all) {
      if (t.x1 < box.x1 - slack || t.x2 > box.x2 + slack
          || t.y1 < box.y1 - slack || t.y2 > box.y2 + slack) {
        problems.push(`clipped ${t.role} ${JSON.stringify(t.text)}: x ${t.x1.toFixed(0)}..`
          + `${t.x2.toFixed(0)}, y ${t.y1.toFixed(0)}..${t.y2.toFixed(0)} outside the box `
          + `${box.x1.toFixed(0)}..${box.x2.toFixed(0)} x ${box.y1.toFixed(0)}..`
          + `${box.y2.toFixed(0)}`);
      }
    }
    const titles = all.filter((t) => t.role === 'title-text' || t.role === 'title-subtitle');
    for (const t of titles) {
      for (const l of all.filter((x) => x.legend)) {
        if (meet(t, l, 0)) problems.push(`title ${JSON.stringify(t.text)} runs into the legend `
          + `text ${JSON.stringify(l.text)}`);
      }
    }
    // two tick labels of one axis overlap: level ones when their boxes meet; tilted ones
    // (which run side by side from their ticks) when their baselines are closer than the
    // glyphs are tall (a tilted label's upright box meets its neighbour's without overlap)
    const ticksMeet = (a, b) => {
      if (a.angle % 180 === 0 && b.angle % 180 === 0) return meet(a, b, slack);
      const rad = (a.angle * Math.PI) / 180;
      const apart = Math.abs(-(b.ax - a.ax) * Math.sin(rad) + (b.ay - a.ay) * Math.cos(rad));
      return apart < GLYPH_HEIGHT * Math.min(a.size, b.size) - slack;
    };
    const ticks = all.filter((t) => t.role === 'axis-label');
    for (let i = 0; i < ticks.length; i++) {
      for (let j = i + 1; j < ticks.length; j++) {
        if (ticks[i].mark === ticks[j].mark && ticksMeet(ticks[i], ticks[j])) {
          problems.push(`tick labels ${JSON.stringify(ticks[i].text)} and `
            + `${JSON.stringify(ticks[j].text)} overlap`);
          i = ticks.length;
          break;
        }
      }
    }
    const cellText = all.filter((t) => t.role === 'mark');
    for (let i = 0; i < cellText.length; i++) {
      for (let j = i + 1; j < cellText.length; j++) {
        const a = cellText[i], b = cellText[j];
        const gap = Math.max(a.x1, b.x1) - Math.min(a.x2, b.x2);
        const sameRow = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1) > 0;
        if (a.mark === b.mark && sameRow && gap < minGap) {
          problems.push(`values ${JSON.stringify(a.text)} and ${JSON.stringify(b.text)} `
            + `${gap < 0 ? 'overlap' : 'touch'} (${gap.toFixed(1)} px apart)`);
          i = cellText.length;
          break;
        }
      }
    }
    return {index, title, problems};
  });
}"""
)


TEXT_ABOVE_CHART_JS = """(sel) => {
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  const first = main.querySelector(sel);
  if (!first) return null;
  const top = first.getBoundingClientRect().top;
  // every leaf element of text in the main block that stands above the first chart
  let chars = 0;
  for (const el of main.querySelectorAll('[data-testid="stElementContainer"]')) {
    if (el.contains(first) || el.querySelector(sel)) continue;
    const box = el.getBoundingClientRect();
    if (box.height === 0 || box.bottom > top + 1) continue;
    chars += (el.innerText || '').trim().length;
  }
  return chars;
}"""
"""Characters of text a reader meets in the main block before the page's first chart."""
MAX_TEXT_ABOVE_CHART = 600


def text_above_first_chart(page) -> int | None:
    """How many characters of text stand above the page's first chart, or None when the
    page draws no chart."""
    return page.evaluate(TEXT_ABOVE_CHART_JS, CHART_SELECTOR)


FONT_SIZES_JS = (
    """() => {"""
    + FIND_VIEW_JS
    + """
  // the smallest font of each kind of text Vega draws in each visible chart
  const out = [];
  for (const el of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    if (!el.offsetParent) continue;
    const view = findView(el);
    if (!view) continue;
    const sizes = {};
    // a chart's own title is the 'title-text' of the 'title' group at the top of the
    // scenegraph; a facet's headers and their titles, deeper, count as 'header-text'
    (function visit(mark, depth) {
      for (const item of mark.items || []) {
        if (mark.marktype === 'text' && String(item.text ?? '').trim() && item.fontSize) {
          const role = mark.role === 'title-text' && depth !== 2 ? 'header-text' : mark.role;
          sizes[role] = Math.min(sizes[role] ?? Infinity, item.fontSize);
        }
        for (const child of item.items || []) {
          if (child && child.marktype) visit(child, depth + 1);
        }
      }
    })(view.scenegraph().root, 0);
    out.push(sizes);
  }
  return out;
}"""
)


def chart_font_sizes(page) -> list[dict[str, float]]:
    """For each visible Vega chart, the smallest font size Vega drew for each role of text
    (``axis-label``, ``axis-title``, ``legend-label``, ``title-text`` (the chart's title),
    ``header-text`` (a facet's panel headers), ``mark``, …), in px."""
    return page.evaluate(FONT_SIZES_JS)


CANVAS_LABELS_JS = """() => Array.from(
  document.querySelectorAll('.attn-heatmap canvas:not(.attn-heatmap-overlay)')
).filter((c) => c.offsetParent && c.dataset.labelPx).map((c) => {
  const natural = parseFloat(c.style.width);
  return +c.dataset.labelPx * c.getBoundingClientRect().width / natural;
})"""


def canvas_label_sizes(page) -> list[float]:
    """For each visible canvas heatmap, the size its tick labels are shown at, in CSS px: the
    size it drew them at, times how much the page shrank the canvas to fit its column."""
    return page.evaluate(CANVAS_LABELS_JS)


PAINTED_CELLS_JS = (
    """([tolerance]) => {"""
    + FIND_VIEW_JS
    + """
  // For every Vega chart that prints text over rect cells (an annotated matrix, a head grid):
  // the pixel the canvas shows just above each printed text, against the fill Vega gave the
  // rect of the same data row (its colour scale's colour for that row's value).
  const reports = [];
  const SIDE_PX = 1.5;  // how far beside a printed text its cell is read
  const key = (datum) => JSON.stringify(datum);
  Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]')).forEach((el, index) => {
    const canvas = el.querySelector('canvas');
    if (!canvas || !el.offsetParent) return;
    const view = findView(el);
    if (!view) return;
    const origin = view._origin || [0, 0];
    const fills = new Map();
    const texts = [];
    (function visit(mark, ox, oy) {
      for (const item of mark.items || []) {
        if (mark.role === 'mark' && mark.marktype === 'rect' && item.datum && item.fill) {
          fills.set(key(item.datum), item.fill);
        }
        if (mark.role === 'mark' && mark.marktype === 'text' && item.datum
            && String(item.text ?? '').trim()) {
          const b = item.bounds;
          texts.push({text: String(item.text), datum: key(item.datum), y: oy + item.y,
                      left: ox + (b ? b.x1 : item.x) - SIDE_PX,
                      right: ox + (b ? b.x2 : item.x) + SIDE_PX});
        }
        for (const child of item.items || []) {
          if (child && child.marktype) visit(child, ox + (item.x || 0), oy + (item.y || 0));
        }
      }
    })(view.scenegraph().root, origin[0], origin[1]);
    if (!texts.length || !fills.size) return;
    const k = canvas.width / canvas.getBoundingClientRect().width;
    const ctx = canvas.getContext('2d');
    const parse = (c) => {
      const probe = document.createElement('canvas').getContext('2d');
      probe.fillStyle = c;
      const hex = probe.fillStyle;  // '#rrggbb' for any CSS colour
      return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
    };
    let checked = 0;
    const wrong = [];
    for (const t of texts) {
      const fill = fills.get(t.datum);
      if (!fill) continue;
      // beside the glyphs, level with their middle, inside the text's own cell: the one on
      // either side nearer the cell's colour counts (a glyph's edge may bleed into the other)
      const want = parse(fill);
      const off = (x) => {
        const px = ctx.getImageData(Math.round(x * k), Math.round(t.y * k), 1, 1).data;
        return [Math.max(...want.map((v, i) => Math.abs(v - px[i]))), px];
      };
      const [[dl, pl], [dr, pr]] = [off(t.left), off(t.right)];
      const [worst, px] = dl <= dr ? [dl, pl] : [dr, pr];
      checked += 1;
      if (worst > tolerance) wrong.push(`${JSON.stringify(t.text)} painted on `
        + `rgb(${px[0]},${px[1]},${px[2]}), its cell's colour is rgb(${want.join(',')})`);
    }
    reports.push({index, checked, wrong});
  });
  return reports;
}"""
)
PIXEL_TOLERANCE = 6  # per RGB channel: a flat cell, read through canvas resampling


def painted_cell_problems(page) -> tuple[int, list[str]]:
    """Every printed cell of every visible Vega chart that prints text over rect cells,
    read as pixels in the browser (:data:`PAINTED_CELLS_JS`).

    Returns:
        (how many printed cells were checked, readable lines for each cell whose painted
        colour is not its own rect's colour).
    """
    reports = page.evaluate(PAINTED_CELLS_JS, [PIXEL_TOLERANCE])
    lines = [f"chart {r['index']}: {w}" for r in reports for w in r["wrong"]]
    return sum(r["checked"] for r in reports), lines


def chart_problems(page) -> list[str]:
    """Every fit problem of every visible Vega chart on ``page``, as readable lines.

    Raises:
        AssertionError: when a visible chart's Vega view cannot be found.
    """
    page.wait_for_timeout(500)  # Vega lays out after the element appears
    reports = page.evaluate(FIT_JS, [SLACK_PX, MIN_GAP_PX])
    missing = [r["index"] for r in reports if r.get("noView")]
    assert not missing, f"no Vega view found for charts {missing}: the check cannot measure them"
    return [
        f"chart {r['index']} ({r['title']!r}): {problem}"
        for r in reports
        if not r.get("hidden")
        for problem in r["problems"]
    ]


def open_charted(page, url: str) -> None:
    """Open ``url`` and wait for what the page really draws, a Vega chart or a canvas heatmap
    (:data:`CHART_SELECTOR`), painted; a page that never draws one fails here (Playwright's
    timeout)."""
    # a model page's first visit on a busy machine loads its model and computes a while
    open_page(page, url, idle_ms=SLOW_PAGE_MS)
    page.wait_for_selector(CHART_SELECTOR, timeout=CHART_WAIT_MS)
    wait_idle(page)
    wait_painted(page)


def open_shot(page, url: str, shot: Path, timeout_ms: int = PAINT_TIMEOUT_MS) -> list[float]:
    """Open ``url``, wait for its first chart (``timeout_ms``) and the finished run, check that
    no exception or error box shows, wait until every chart is painted and write a full-page
    screenshot to ``shot``.

    Returns:
        Each chart's painted pixel fraction (:func:`wait_painted`).
    """
    slow = timeout_ms if timeout_ms > PAINT_TIMEOUT_MS else None  # a model's first run
    open_page(page, url, idle_ms=slow)
    page.wait_for_selector(CHART_SELECTOR, timeout=timeout_ms)
    wait_idle(page) if slow is None else wait_idle(page, timeout_ms=slow)
    assert_no_errors(page)
    painted = wait_painted(page)
    page.screenshot(path=str(shot), full_page=True)
    return painted


HREFS_JS = "() => Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))"
CODE_JS = "() => Array.from(document.querySelectorAll('code')).map(c => c.textContent)"


def foreign_hrefs(hrefs: list[str | None], base: str) -> list[str]:
    """The hrefs that leave the app: anything but an in-page ``#`` anchor or a URL on the
    app's own scheme, host and port."""
    own = urlsplit(base)
    foreign = []
    for href in hrefs:
        if href is None or href.startswith("#"):
            continue
        parts = urlsplit(href)
        if (parts.scheme, parts.netloc) != (own.scheme, own.netloc):
            foreign.append(href)
    return foreign
