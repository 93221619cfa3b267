"""No chart text cut off or run together, in either language: every Vega chart's title,
legend, axis titles and labels lie inside the chart's own box (what Vega clips at), a chart's
title does not run into its legend, the chart is shown at the width it was laid out at (not
squeezed), and the values printed in a small matrix's cells keep a gap between them. At the
pages' defaults the check runs in ``test_pages.py``'s one visit per (page, language); here, at
the settings that stretch each page's charts.

Streamlit keeps each chart's Vega ``View`` in React state, not on ``window``: the check finds
it through the chart element's React fiber (an object with ``scenegraph`` and ``runAsync``)
and walks the scenegraph, adding each group's offset to its children's bounds. This reads
canvas charts (the heatmaps draw on a canvas) as well as SVG ones. A chart whose view cannot
be found fails the test rather than passing unmeasured. ``fit_app.py`` draws a fitting and two
deliberately clipped charts: the check must flag exactly those two.
"""

from __future__ import annotations

import pytest

from bench.browser import streamlit_server, wait_idle
from tests.browser.helpers import chart_problems, open_charted, page_url

pytestmark = pytest.mark.browser


# Each page at settings that stretch its charts: many heads, long sequences, the widest
# head dimension, many variants and layers.
EXTREMES = {
    "playground": "playground.d_model=256&playground.heads=16&playground.seq_len=128",
    "step_by_step": "step_by_step.tokens=8&step_by_step.d_k=8&step_by_step.causal=true",
    # 2 x trials x L x d_k at the library's bound (measure_scaling refuses more)
    "scaling": "scaling.d_ks=1%2C4%2C16%2C64%2C256%2C1024&scaling.seq_len=64&scaling.trials=128",
    "multihead": "multihead.d_model=128&multihead.heads=16&multihead.seq_len=64",
    "variants": "variants.seq_len=128&variants.d_model=128&variants.heads=16",
    "properties": (
        "properties.seq_len=16&properties.d_model=64&properties.heads=16"
        "&properties.logit_scale=10000.0&properties.dtype=bfloat16"
    ),
    "gradients": (
        "gradients.embed_dim=256&gradients.seq_len=32&gradients.d_ks=1%2C4%2C16%2C64%2C256%2C1024"
    ),
    "watch": (
        "watch.task=induction&watch.seq_len=32&watch.d_model=64&watch.heads=16&watch.layers=2"
        "&watch.steps=50&watch.trained=true"
    ),
    "practice": "practice.seq_len=512&practice.d_model=256&practice.heads=16",
}


def test_check_flags_deliberately_clipped_charts(browser, tmp_path_factory):
    """fit_app.py: the fitting chart passes; the long title, the long legend and the level
    tick labels that run into each other are flagged; tilted labels side by side are not."""
    log = tmp_path_factory.mktemp("fit") / "server.log"
    with streamlit_server(log_path=log, app="tests/browser/fit_app.py") as server:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        page = context.new_page()
        try:
            page.goto(server.url)
            wait_idle(page)
            page.wait_for_function(
                "() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]').length === 5"
            )
            problems = chart_problems(page)
        finally:
            context.close()
    flagged = {line.split(" ", 2)[1] for line in problems}
    assert flagged == {"1", "2", "3"}, problems
    assert any("tick labels" in line and "overlap" in line for line in problems), problems
    assert any("title-text" in line and "TTTT" in line for line in problems), problems
    assert any("legend-label" in line for line in problems), problems


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_page_charts_fit_at_extremes(server, page, name, lang):
    open_charted(page, page_url(server.url, name, f"lang={lang}&{EXTREMES[name]}"))
    problems = chart_problems(page)
    assert not problems, "\n".join(problems)
