"""Placeholder until the page lands."""

import streamlit as st

from dashboard.i18n import t

st.title(t("common.page_step_by_step"))
st.info(t("common.placeholder_page"))
