"""Serving the lab to many learners: a light websocket client of Streamlit's own protocol
(:mod:`dashboard.serving.stream_client`), the warm-up that opens pages and lesson steps
through it before learners reach them (:mod:`dashboard.serving.warm`), and the lessons' own
pre-warm inside a running server (:mod:`dashboard.serving.prewarm`).

``scripts/warm.py`` (which ``scripts/serve.py`` runs) and the benchmarks under ``bench/``
import the client from here. Nothing here runs on import.
"""
