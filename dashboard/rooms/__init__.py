"""Rooms: a presenter's view shared with the learners who follow it (no widgets here).

A room lives in one server process, or in Redis for replicas: :mod:`dashboard.rooms.store`
keeps every room in memory (thread-safe, bounded, expiring),
:mod:`dashboard.rooms.redis_store` (with :mod:`dashboard.rooms.redis_scripts`) keeps them in
Redis, :mod:`dashboard.rooms.codes` checks the code a link names, :mod:`dashboard.rooms.link`
holds a room link's query keys, :mod:`dashboard.rooms.questions` holds each page's ready
questions, and :mod:`dashboard.rooms.presenter` owns the process's presenter key, its one
store and its server id. Streamlit is imported inside functions only: by
:mod:`dashboard.rooms.presenter` to read the secrets, and by :mod:`dashboard.rooms.push`, the
one module of Streamlit internals (waking following sessions). :mod:`dashboard.room_controls`
draws the sidebar and the questions.
"""
