"""The yardstick of ``python -m bench.coldstart``: a bare Streamlit page with one Altair
heatmap (a title, one sidebar slider, a 10×10 softmax-normalised matrix), nothing else. With
``BARE_CHART_TORCH=1`` in its environment it imports torch before the heatmap (what torch
alone adds to a cold start).

Run it alone with ``streamlit run bench/bare_chart_app.py``.
"""

import os

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

SIZE = 10

TORCH_ENV = "BARE_CHART_TORCH"

st.set_page_config(page_title="Bare chart", layout="wide")
st.title("One Altair heatmap")
if os.environ.get(TORCH_ENV) == "1":
    import torch  # noqa: F401  (imported for its cost alone)

seed = st.sidebar.slider("Seed", 0, 10, 0)
scores = np.random.default_rng(seed).normal(size=(SIZE, SIZE))  # (queries, keys)
weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)  # rows sum to 1
frame = pd.DataFrame(
    [(q, k, weights[q, k]) for q in range(SIZE) for k in range(SIZE)],
    columns=["query", "key", "weight"],
)
chart = alt.Chart(frame).mark_rect().encode(x="key:O", y="query:O", color="weight:Q")
st.altair_chart(chart, width="stretch")
