"""Lessons: a guided walk through the lab's pages, one small TOML file per lesson.

:mod:`dashboard.lessons.model` reads and checks a lesson file (no Streamlit there); the
shipped lessons are the ``*.toml`` files of this folder; :mod:`dashboard.lesson_bar` draws a
lesson's bar on the page.
"""
