"""A follower's request sent before its browser had the view it was sent to is no move of the
learner's (``room.view``, :mod:`dashboard.room_follow`).

The browser's poll timer can fire while the server's run sending a follower on is queued:
Streamlit runs the poll's request (or merges the two) with the query and widget values the
browser still had, and that run shows the previous view. Before ``room.view``, such a run
turned following off (test_room_cache, under load: a follower left on an old page with
``room.follow=false``). Here AppTest sends that request by hand: the link's ``room.view``
names the previous version and the slider holds the previous value.
"""

from __future__ import annotations

import uuid

from dashboard.rooms import presenter
from dashboard.rooms.link import VIEW_KEY
from tests.dashboard.conftest import open_app

SEQ = "scaling.seq_len"


def presenting(code: str, **params):
    at = open_app("scaling", room=code, **params)
    key, _source = presenter.presenter_key()
    at.text_input(key="_room.presenter_key").input(key).run()
    assert not at.exception
    return at


def following(code: str):
    learner = open_app(None, room=code)
    assert not learner.exception
    assert learner.toggle(key="room.follow").value is True
    return learner


def test_each_follower_run_writes_the_version_of_the_view_it_shows():
    code = f"t-{uuid.uuid4().hex[:10]}"
    host = presenting(code, **{SEQ: "12"})
    learner = following(code)
    first = presenter.shared_store().get(code).version
    assert learner.query_params[VIEW_KEY] == str(first)
    host.slider(key=SEQ).set_value(14).run()
    learner.run()
    second = presenter.shared_store().get(code).version
    assert second != first
    assert learner.slider(key=SEQ).value == 14
    assert learner.query_params[VIEW_KEY] == str(second)
    assert VIEW_KEY not in host.query_params  # the presenter's link has none


def test_a_request_with_the_previous_view_sends_the_follower_again_and_keeps_following():
    code = f"t-{uuid.uuid4().hex[:10]}"
    host = presenting(code, **{SEQ: "12"})
    learner = following(code)
    first = learner.query_params[VIEW_KEY]
    host.slider(key=SEQ).set_value(14).run()
    learner.run()
    assert learner.slider(key=SEQ).value == 14
    # the request a browser sends before it had that run's messages
    learner.query_params[VIEW_KEY] = first
    learner.query_params[SEQ] = "12"
    learner.slider(key=SEQ).set_value(12).run()
    assert not learner.exception
    assert learner.toggle(key="room.follow").value is True
    assert "following is off" not in " ".join(str(e.value) for e in learner.info)
    assert learner.slider(key=SEQ).value == 14  # sent back to the presenter's view
    assert learner.query_params[VIEW_KEY] == str(presenter.shared_store().get(code).version)


def test_the_learner_s_own_move_from_the_view_shown_still_stops_following():
    """The same move as above, from a browser that had the view: the link names its
    version, so it is the learner's, and following turns off (the check can fail)."""
    code = f"t-{uuid.uuid4().hex[:10]}"
    host = presenting(code, **{SEQ: "12"})
    learner = following(code)
    host.slider(key=SEQ).set_value(14).run()
    learner.run()
    learner.slider(key=SEQ).set_value(12).run()
    assert learner.toggle(key="room.follow").value is False
    assert any("following is off" in str(e.value) for e in learner.info)
    assert learner.slider(key=SEQ).value == 12


def test_a_bad_view_version_in_the_link_is_refused_with_a_notice_and_rewritten():
    code = f"t-{uuid.uuid4().hex[:10]}"
    presenting(code, **{SEQ: "12"})
    learner = open_app("scaling", room=code, **{VIEW_KEY: "<b>9</b>"})
    assert not learner.exception
    assert any(VIEW_KEY in str(w.value) for w in learner.warning)
    assert learner.query_params[VIEW_KEY] == str(presenter.shared_store().get(code).version)
    assert learner.toggle(key="room.follow").value is True
