"""Rooms: a presenter's view shared with the learners who follow it (no Streamlit here).

A room lives in one server process: :mod:`dashboard.rooms.store` keeps every room in memory
(thread-safe, bounded, expiring), :mod:`dashboard.rooms.codes` checks the code a link names,
:mod:`dashboard.rooms.questions` holds each page's ready questions, and
:mod:`dashboard.rooms.presenter` owns the process's presenter key, its one store and its
server id. :mod:`dashboard.room_controls` draws the sidebar and the questions.
"""
