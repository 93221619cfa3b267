"""Rooms: codes, the store's bounds and expiry (in memory and in a real ``redis-server`` the
tests start on a free loopback port), replicas sharing a Redis, the presenter key, ready
questions against the figures their pages measure, and a presenter with followers through
Streamlit's AppTest."""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import threading
import time
import uuid

import numpy as np
import pytest
import torch

from dashboard import i18n
from dashboard.literal import literal
from dashboard.room_questions import TYPED
from dashboard.rooms import presenter
from dashboard.rooms.codes import MAX_CODE_LEN, parse_room_code
from dashboard.rooms.questions import (
    READY_QUESTIONS,
    find_ready,
    ready_to_ask,
    typed_question,
)
from dashboard.rooms.redis_store import RedisRoomStore, RoomServerUnreachable
from dashboard.rooms.store import (
    PRESENTER_AWAY_S,
    VIEWER_WINDOW_S,
    LessonLimitError,
    Question,
    QuestionClosedError,
    RoomEndedError,
    RoomLimitError,
    RoomStore,
    View,
)
from tests.dashboard.conftest import open_app
from tests.hostile import HOSTILE

# ---------------------------------------------------------------- codes


@pytest.mark.parametrize("code", ["a", "week3-group-B", "X" * MAX_CODE_LEN, "2026-05-01"])
def test_room_codes_of_letters_digits_and_dashes_are_taken_as_given(code):
    assert parse_room_code(code) == code


@pytest.mark.parametrize(
    "raw",
    ["", "X" * (MAX_CODE_LEN + 1), "a b", "a_b", "raum-ä", "a/b", "<b>x</b>", "x\n"]
    + list(HOSTILE.values()),
)
def test_anything_else_is_refused_naming_the_value(raw):
    with pytest.raises(ValueError, match="room code"):
        parse_room_code(raw)


# ---------------------------------------------------------------- the store


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def view(page="scaling", **params) -> View:
    return View.of(page, {f"{page}.{k}": str(v) for k, v in params.items()})


REDIS_START_S = 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A ``redis-server`` of the test's own on a loopback port, writing nothing to disk."""

    def __init__(self, directory):
        self.port, self.directory, self.process = free_port(), directory, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(port=self.port, socket_timeout=1.0)

    def start(self) -> None:
        import redis

        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + REDIS_START_S
        with self.client() as client:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        self.stop()
                        raise
                    time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(REDIS_START_S)
            self.process = None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_stores(redis_server):
    """Makes stores on the session's Redis, emptied first; closes them after the test."""
    with redis_server.client() as client:
        client.flushdb()
    stores = []

    def make(**kwargs) -> RedisRoomStore:
        stores.append(RedisRoomStore(redis_server.url, **kwargs))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


@pytest.fixture(params=["memory", "redis"])
def make_store(request):
    """``RoomStore`` or a maker of ``RedisRoomStore`` s: the same tests hold for both."""
    if request.param == "memory":
        return RoomStore
    return request.getfixturevalue("redis_stores")


def test_a_view_change_bumps_the_version_and_the_same_view_does_not(make_store):
    store = make_store()
    assert store.get("r") is None
    store.open("r")
    assert store.get("r").version == 0 and store.get("r").view is None
    assert store.publish("r", view(seq_len=10)).version == 1
    assert store.publish("r", view(seq_len=10)).version == 1
    snap = store.publish("r", view(seq_len=12))
    assert (snap.version, snap.view.params) == (2, (("scaling.seq_len", "12"),))


def test_a_room_ends_after_its_time_without_activity_and_polls_do_not_keep_it(make_store):
    clock = Clock()
    store = make_store(ttl_s=60.0, clock=clock)
    store.open("r")
    clock.now += 59.0
    assert store.get("r", "learner") is not None  # a poll is not activity
    clock.now += 2.0
    assert store.get("r") is None
    with pytest.raises(RoomEndedError):
        store.publish("r", view())
    store.open("r")
    clock.now += 40.0
    store.publish("r", view())  # activity
    clock.now += 40.0
    assert store.get("r") is not None


def test_one_presenter_at_a_time_the_newer_takes_over_and_the_older_cannot_keep_it(make_store):
    """Regression: two tabs with the key both read "You present room …"."""
    clock = Clock()
    store = make_store(clock=clock)
    assert store.present("r", "tab-a", take_over=True).presenter == "tab-a"
    assert store.present("r", "tab-a", take_over=False).presenter == "tab-a"
    assert store.present("r", "tab-b", take_over=True).presenter == "tab-b"  # the newer
    assert store.present("r", "tab-a", take_over=False).presenter == "tab-b"  # a heartbeat
    assert store.present("r", "tab-a", take_over=True).presenter == "tab-a"  # "Present here"
    with pytest.raises(ValueError, match="session"):
        store.present("r", "", take_over=True)


def test_a_presenter_who_stops_saying_they_are_there_is_away_until_they_are_back(make_store):
    clock = Clock()
    store = make_store(clock=clock)
    assert not store.get("r") and not store.open("r").presenter_away  # no presenter yet
    store.present("r", "tab-a", take_over=True)
    clock.now += PRESENTER_AWAY_S
    assert not store.get("r").presenter_away
    store.present("r", "tab-b", take_over=False)  # not the presenter: no heartbeat for a
    clock.now += 1.0
    snap = store.get("r")
    assert snap.presenter_away and snap.presenter_seen_s == PRESENTER_AWAY_S + 1.0
    store.present("r", "tab-a", take_over=False)
    assert not store.get("r").presenter_away and store.get("r").presenter_seen_s == 0.0


def test_rooms_are_bounded_and_an_expired_room_makes_space(make_store):
    clock = Clock()
    store = make_store(max_rooms=2, ttl_s=60.0, clock=clock)
    store.open("a")
    clock.now += 30.0
    store.open("b")
    store.open("a")  # an open room opens again
    with pytest.raises(RoomLimitError):
        store.open("c")
    clock.now += 61.0
    store.open("c")
    assert store.rooms() == 1


def test_answers_one_per_learner_bounded_and_closed_by_the_reveal(make_store):
    store = make_store(max_answers=3)
    store.open("r")
    first = store.ask("r", ready_to_ask("scaling_peak"))
    number = first.poll.number
    store.answer("r", "ann", 1, number)
    store.answer("r", "ann", 0, number)  # ann changes her mind: one answer each
    store.answer("r", "bo", 0, number)
    snap = store.answer("r", "cy", 1, number)
    assert snap.poll.tally == (2, 1) and snap.poll.answers == 3
    with pytest.raises(RoomLimitError):
        store.answer("r", "dee", 0, number)
    store.answer("r", "cy", 0, number)  # a counted learner may still change
    with pytest.raises(ValueError, match="answer 2"):
        store.answer("r", "ann", 2, number)
    with pytest.raises(ValueError, match="question 99"):
        store.answer("r", "ann", 0, 99)
    assert store.reveal("r").poll.revealed
    with pytest.raises(ValueError, match="takes no answers"):
        store.answer("r", "ann", 1, number)
    again = store.ask("r", typed_question("Which?", "x\ny", None))
    assert again.poll.number == number + 1 and again.poll.tally == (0, 0)
    assert store.clear_question("r").poll is None


def test_viewers_are_those_who_polled_lately(make_store):
    clock = Clock()
    store = make_store(clock=clock)
    store.open("r")
    store.get("r", "a")
    store.get("r", "b")
    clock.now += VIEWER_WINDOW_S / 2
    assert store.get("r", "a").viewers == 2
    clock.now += VIEWER_WINDOW_S / 2 + 1.0
    assert store.get("r").viewers == 1  # b last polled more than the window ago


def test_the_store_counts_every_answer_from_many_threads(make_store):
    store = make_store()
    store.open("r")
    number = store.ask("r", typed_question("Q", "a\nb\nc", 2)).poll.number

    def learner(i: int) -> None:
        for _ in range(20):
            store.get("r", f"v{i}")
            store.answer("r", f"v{i}", i % 3, number)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get("r").poll.tally == (10, 10, 10)


def run_threads(target, count: int) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_answers_and_rooms_from_many_threads_never_pass_the_bounds(make_store):
    store = make_store(max_answers=10, max_rooms=5)
    store.open("r")
    number = store.ask("r", typed_question("Q", "a\nb", None)).poll.number
    refused = []

    def learner(i: int) -> None:
        for choice in (0, 1):  # a second answer replaces the first
            try:
                store.answer("r", f"v{i}", choice, number)
            except RoomLimitError:
                refused.append(i)
        try:
            store.open(f"room-{i}")
        except RoomLimitError:
            refused.append(-i)

    run_threads(learner, 40)
    assert store.get("r").poll.tally == (0, 10)
    assert len([i for i in refused if i > 0]) == 2 * 30
    assert store.rooms() == 5


def test_a_bad_answer_or_bound_is_refused_with_a_value_error(redis_stores):
    store = redis_stores()
    store.open("r")
    number = store.ask("r", typed_question("Q", "a\nb", None)).poll.number
    with pytest.raises(ValueError, match="numbers"):
        store.answer("r", "v", "0", number)
    with pytest.raises(ValueError, match="max_answers"):
        redis_stores(max_answers=0)
    with pytest.raises(ValueError, match="scheme"):
        RedisRoomStore("http://127.0.0.1:1/0")


def test_two_replicas_share_rooms_a_presenter_on_one_and_followers_on_the_other(redis_stores):
    here, there = redis_stores(), redis_stores()
    assert here.present("r", "tab-1", take_over=True).presenter == "tab-1"
    here.publish("r", view(seq_len=12))
    seen = there.get("r", "learner")
    assert (seen.version, seen.view, seen.presenter) == (1, view(seq_len=12), "tab-1")
    number = here.ask("r", typed_question("Q", "a\nb\nc", 2)).poll.number
    there.answer("r", "learner", 2, number)
    snap = here.get("r")
    assert (snap.poll.tally, snap.viewers) == ((0, 0, 1), 1)
    assert there.present("r", "tab-2", take_over=False).presenter == "tab-1"  # a heartbeat
    assert there.present("r", "tab-2", take_over=True).presenter == "tab-2"  # takes it over
    assert here.present("r", "tab-1", take_over=False).presenter == "tab-2"
    assert here.reveal("r").poll.revealed and there.get("r").poll.revealed
    assert there.clear_question("r").poll is None and here.get("r").poll is None
    assert here.rooms() == there.rooms() == 1


def test_a_room_keeps_its_lesson_files_bounded_per_room_and_in_all(make_store):
    clock = Clock()
    store = make_store(max_room_lessons=2, max_lessons=3, ttl_s=60.0, clock=clock)
    for code in ("a", "b", "c"):
        store.open(code)
    store.keep_lesson("a", "one", "text 1")
    store.keep_lesson("a", "two", "text 2")
    store.keep_lesson("a", "two", "text 2, again")  # its own name: replaced, not counted
    with pytest.raises(LessonLimitError) as refused:
        store.keep_lesson("a", "three", "text 3")
    assert (refused.value.scope, refused.value.limit) == ("room", 2)
    store.keep_lesson("b", "one", "b's own")
    with pytest.raises(LessonLimitError) as refused:
        store.keep_lesson("c", "one", "text")
    assert (refused.value.scope, refused.value.limit) == ("server", 3)
    assert store.lesson_texts("a") == {"one": "text 1", "two": "text 2, again"}
    assert (store.lesson_text("b", "one"), store.lesson_text("c", "one")) == ("b's own", None)
    assert store.lesson_text("nowhere", "one") is None and store.lesson_texts("nowhere") == {}
    clock.now += 61.0  # the rooms end, and their files with them: space again
    store.open("c")
    store.keep_lesson("c", "one", "text")
    assert store.lesson_text("a", "one") is None and store.lesson_text("c", "one") == "text"
    with pytest.raises(RoomEndedError):
        store.keep_lesson("a", "one", "text")


def test_a_room_s_lesson_file_reaches_the_other_replica(redis_stores):
    here, there = redis_stores(), redis_stores()
    here.open("r")
    here.keep_lesson("r", "mine", "[lesson]\nminutes = 5\n")
    assert there.lesson_text("r", "mine") == "[lesson]\nminutes = 5\n"
    assert there.lesson_texts("r") == {"mine": "[lesson]\nminutes = 5\n"}
    assert there.lesson_text("other", "mine") is None


def wait_for(predicate, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.01)


def subscribers(server) -> int:
    """How many connections listen on a pattern (PUBSUB NUMPAT counts patterns, not them)."""
    with server.client() as client:
        return sum(int(entry["psub"]) > 0 for entry in client.client_list())


def test_the_subscriber_hears_the_other_replicas_changes_not_its_own(redis_server, redis_stores):
    here, there = redis_stores(), redis_stores()
    heard_here, heard_there = [], []
    here.subscribe(lambda code, version: heard_here.append((code, version)))
    there.subscribe(lambda code, version: heard_there.append((code, version)))
    wait_for(lambda: subscribers(redis_server) == 2)
    here.open("r")
    here.publish("r", view(seq_len=12))
    here.publish("r", view(seq_len=12))  # no change: nothing sent
    here.publish("r", view(seq_len=14))
    here.ask("r", typed_question("Q", "a\nb", None))
    wait_for(lambda: len(heard_there) == 3)
    there.publish("r", view(seq_len=16))
    wait_for(lambda: heard_here == [("r", 3)])
    assert heard_there == [("r", 1), ("r", 2), ("r", 2)]
    here.close()
    there.close()
    assert "rooms-redis-subscriber" not in {thread.name for thread in threading.enumerate()}


def test_a_lost_room_server_is_said_at_once_and_a_restarted_one_has_forgotten_its_rooms(tmp_path):
    """Redis unreachable, hung or restarted: the store says so within a second,
    and works again by itself once Redis is back, its rooms ended."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(tmp_path)
    server.start()
    store = RedisRoomStore(server.url, retry_after_s=0.2)
    heard = []
    try:
        store.subscribe(lambda code, version: heard.append((code, version)))
        store.publish(store.open("r").code, view(seq_len=12))
        server.process.send_signal(subprocess.signal.SIGSTOP)  # hung: replies never come
        started = time.monotonic()
        with pytest.raises(RoomServerUnreachable):
            store.get("r")
        assert time.monotonic() - started < 1.0
        with pytest.raises(RoomServerUnreachable):
            store.publish("r", view())  # at once, without waiting on Redis again
        server.process.send_signal(subprocess.signal.SIGCONT)
        server.stop()  # gone
        time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(RoomServerUnreachable):
            store.get("r")
        assert time.monotonic() - started < 1.0
        server.start()  # the same port, an empty Redis
        time.sleep(0.2)
        assert store.get("r") is None
        with pytest.raises(RoomEndedError):
            store.publish("r", view())
        assert store.open("r").version == 0
        wait_for(lambda: subscribers(server) == 1)  # the subscriber is back
        other = RedisRoomStore(server.url)
        other.publish("r", view(seq_len=20))
        other.close()
        wait_for(lambda: heard == [("r", 1)])
    finally:
        store.close()
        server.stop()


def test_the_process_store_is_in_redis_when_a_url_is_set(redis_server, monkeypatch):
    assert presenter.redis_url({presenter.REDIS_ENV: " redis://a/0 "}, lambda: "x") == "redis://a/0"
    assert presenter.redis_url({}, lambda: "redis://b/1") == "redis://b/1"
    assert presenter.redis_url({presenter.REDIS_ENV: ""}, lambda: None) is None
    assert type(presenter.new_store(None)) is RoomStore
    monkeypatch.setattr(presenter, "_PROCESS", {})
    monkeypatch.setenv(presenter.REDIS_ENV, redis_server.url)
    store = presenter.shared_store()
    try:
        assert isinstance(store, RedisRoomStore) and presenter.shared_store() is store
        assert store.open(new_code()).version == 0
    finally:
        store.close()


def test_a_view_too_large_to_share_is_refused():
    with pytest.raises(ValueError, match="at most"):
        View.of("scaling", {f"k{i}": "1" for i in range(100)})
    with pytest.raises(ValueError, match="longer"):
        View.of("scaling", {"k": "x" * 5000})


# ---------------------------------------------------------------- questions


def test_typed_questions_take_two_to_four_answers():
    question = typed_question("  Which   head? ", "band\n\n uniform \ncausal", 1)
    assert question == Question("", "Which head?", ("band", "uniform", "causal"), 1)
    for answers in ("only one", "a\nb\nc\nd\ne"):
        with pytest.raises(ValueError, match="answers"):
            typed_question("Q", answers, None)
    with pytest.raises(ValueError, match="characters"):
        typed_question(" ", "a\nb", None)
    with pytest.raises(ValueError, match="right answer 2"):
        typed_question("Q", "a\nb", 2)
    with pytest.raises(ValueError, match="no ready question"):
        find_ready("nope")


def test_every_ready_question_has_its_strings_in_both_languages():
    from dashboard.i18n import load_namespace

    for lang in ("en", "zh"):
        strings = load_namespace(lang, "room")
        for questions in READY_QUESTIONS.values():
            for ready in questions:
                assert f"q_{ready.id}" in strings and f"q_{ready.id}_why" in strings
                for i in range(ready.options):
                    assert strings[f"q_{ready.id}_a{i}"]
                assert f"q_{ready.id}_a{ready.options}" not in strings
    assert {"scaling", "playground", "multihead", "variants", "properties"} <= set(READY_QUESTIONS)


def answer_of(question_id: str) -> int:
    return find_ready(question_id).correct


def test_the_scaling_answers_are_what_the_page_measures():
    from attention_core.experiments.scaling import measure_scaling

    table = measure_scaling()  # the page's defaults: d_k 32..256, L 10, 200 trials, seed 0
    at_256 = table[table["d_k"] == 256].iloc[0]
    assert (at_256["max_weight_unscaled"] > 0.9) == (answer_of("scaling_peak") == 0)
    assert np.allclose(table["std_scaled"], 1.0, atol=0.1) and answer_of("scaling_std") == 0
    ratio = table["std_unscaled"] / np.sqrt(table["d_k"])
    assert np.allclose(ratio, 1.0, atol=0.1)


def test_the_multihead_answers_are_what_the_gallery_measures():
    from attention_core.experiments.head_stats import head_entropy, mean_distance
    from attention_core.experiments.patterns import head_patterns

    patterns = head_patterns()  # the page's gallery at L = 10
    entropy = {name: float(np.mean(head_entropy(w))) for name, w in patterns.items()}
    order = ["local", "global", "backward"]  # the answers' order
    highest = max(order, key=entropy.get)
    assert order.index(highest) == answer_of("multihead_entropy")
    assert math.isclose(entropy["global"], math.log(10), rel_tol=1e-9)
    assert float(np.mean(mean_distance(patterns["local"]))) < 1.5
    assert answer_of("multihead_distance") == 0


def test_the_properties_and_playground_answers_hold_in_pytorch():
    assert torch.isinf(torch.exp(torch.tensor(11.1, dtype=torch.float16)))
    assert torch.isfinite(torch.exp(torch.tensor(11.0, dtype=torch.float16)))
    assert answer_of("properties_overflow") == 0
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 6, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    perm = torch.randperm(6, generator=gen)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    shuffled = torch.nn.functional.scaled_dot_product_attention(q[:, perm], k[:, perm], v[:, perm])
    assert torch.allclose(shuffled, out[:, perm]) and answer_of("properties_shuffle") == 0
    from attention_core import attend

    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    result = attend(q, k, v, variant="scaled", mask=causal, need_weights=True)
    assert torch.equal(result.weights.triu(1), torch.zeros_like(result.weights))
    assert answer_of("playground_causal") == 0


# ---------------------------------------------------------------- the presenter key


def test_the_key_comes_from_the_environment_then_the_secrets_then_is_made_once():
    shown = []
    env = {presenter.KEY_ENV: " from-env "}
    found = presenter.resolve_key(env, lambda: "from-secrets", shown.append)
    assert found == ("from-env", "environment")
    assert presenter.resolve_key({}, lambda: "s3cret", shown.append) == ("s3cret", "secrets")
    assert shown == []
    key, source = presenter.resolve_key({presenter.KEY_ENV: ""}, lambda: None, shown.append)
    assert source == "generated" and shown == [key] and len(key) >= 16


def test_the_key_is_compared_whole():
    key, _source = presenter.presenter_key()
    assert presenter.key_matches(key)
    for wrong in ("", key[:-1], key + "x", key.upper() if key.upper() != key else key + "A"):
        assert not presenter.key_matches(wrong)


# ---------------------------------------------------------------- AppTest: a room


def new_code() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def all_text(at) -> str:
    parts = []
    for kind in ("markdown", "caption", "code", "success", "info", "warning", "error", "title"):
        parts += [str(e.value) for e in getattr(at, kind)]
    return "\n".join(parts)


def presenting(code: str, page: str = "scaling", **params):
    at = open_app(page, room=code, **params)
    key, _source = presenter.presenter_key()
    at.text_input(key="_room.presenter_key").input(key).run()
    assert not at.exception
    return at


def test_a_follower_in_chinese_follows_the_presenter_and_keeps_their_language():
    code = new_code()
    host = presenting(code, "scaling")
    host.text_input(key="scaling.d_ks").input("64,256").run()
    snap = presenter.shared_store().get(code)
    assert snap.view.page == "scaling" and ("scaling.d_ks", "64,256") in snap.view.params
    key, _source = presenter.presenter_key()
    assert key not in all_text(host)  # not in the copy-link box either
    assert all(key not in v for v in host.query_params.values())

    learner = open_app(None, room=code, lang="zh")  # the landing page's link plus room=CODE
    assert not learner.exception
    assert learner.query_params["scaling.d_ks"] == "64,256"
    assert learner.query_params["lang"] == "zh" and learner.query_params["room"] == code
    assert learner.text_input(key="scaling.d_ks").value == "64,256"
    assert learner.text_input(key="scaling.d_ks").disabled  # locked while following
    assert learner.radio(key="lang").disabled is False  # their language stays theirs
    assert learner.button(key="_room.explore").label == "自己探索"
    assert "🔒 已锁定" in all_text(learner) and key not in all_text(learner)
    assert code in learner.code[-1].value  # the copy-link box keeps the room

    host.slider(key="scaling.seq_len").set_value(20).run()  # the presenter moves a slider
    learner.run()
    assert learner.slider(key="scaling.seq_len").value == 20


def test_a_reconnected_follower_takes_the_room_s_value_over_its_old_link():
    """A follower's tab that reconnects (its replica died, the balancer sent it to another)
    opens a new session with its old link; Streamlit seeds a bound slider from the link on
    its first draw, so the room's value must be put into the URL too, or the follower stays
    on the old one (failed before: 11 against the presenter's 20)."""
    code = new_code()
    host = presenting(code, "scaling")
    host.slider(key="scaling.seq_len").set_value(20).run()
    old_link = {"room.follow": "true", "scaling.seq_len": "11"}
    learner = open_app("scaling", room=code, **old_link)
    assert not learner.exception
    assert learner.slider(key="scaling.seq_len").value == 20
    assert learner.query_params["scaling.seq_len"] == "20"
    assert not learner.warning  # the old value is the room's business, not a refused link


def test_a_wrong_key_is_refused_and_drives_nothing():
    code = new_code()
    at = open_app("playground", room=code)
    at.text_input(key="_room.presenter_key").input("not-the-key").run()
    assert not at.exception
    assert any("not right" in e.value for e in at.error)
    assert presenter.shared_store().get(code) is None
    assert "waiting for its presenter" in all_text(at)
    assert all("not-the-key" not in v for v in at.query_params.values())


@pytest.mark.parametrize(
    ("lang", "locked_line", "exploring"),
    [
        ("en", "You follow the presenter", "You explore on your own"),
        ("zh", "你正在跟随主持人", "你正在自己探索"),
    ],
)
def test_a_follower_is_locked_explores_on_their_own_and_follows_again(lang, locked_line, exploring):
    """The follow rule's states: following (controls locked, one line says so; a value
    a request carries, such as an old link, changes nothing and following stays on), exploring (the
    controls unlock and keep the view; the presenter's moves leave it), following again
    (that run shows the presenter's view, locked again)."""
    code = new_code()
    host = presenting(code, "scaling", **{"scaling.seq_len": "12"})
    learner = open_app(None, room=code, lang=lang)
    slider = learner.slider(key="scaling.seq_len")
    assert slider.value == 12 and slider.disabled
    assert locked_line in all_text(learner) and exploring not in all_text(learner)
    learner.query_params["scaling.seq_len"] = "30"  # a request with an older link
    learner.run()
    assert learner.slider(key="scaling.seq_len").value == 12
    assert learner.query_params["room.follow"] == "true"

    learner.button(key="_room.explore").click().run()
    slider = learner.slider(key="scaling.seq_len")
    assert not slider.disabled and slider.value == 12  # their view is kept
    assert exploring in all_text(learner) and locked_line not in all_text(learner)
    assert learner.query_params["room.follow"] == "false"
    slider.set_value(30).run()
    host.slider(key="scaling.seq_len").set_value(14).run()
    learner.run()
    assert learner.slider(key="scaling.seq_len").value == 30  # stays on their own view

    learner.button(key="_room.follow_again").click().run()
    slider = learner.slider(key="scaling.seq_len")
    assert slider.value == 14 and slider.disabled
    assert learner.query_params["room.follow"] == "true"


def test_a_follower_on_another_page_is_taken_to_the_presenter_s_page():
    """Every run of a follower applies the room's view first: a presenter on another page
    takes the follower there, with the presenter's values."""
    code = new_code()
    presenting(code, "scaling")
    learner = open_app(None, room=code)  # following, on Scaling
    assert learner.slider(key="scaling.seq_len").disabled
    newer = presenting(code, "multihead")  # a newer tab, on Multi-head
    newer.slider(key="multihead.gallery_seed").set_value(7).run()
    learner.run()
    assert not learner.exception
    assert learner.slider(key="multihead.gallery_seed").value == 7
    assert learner.slider(key="multihead.gallery_seed").disabled


def test_a_question_answered_by_three_followers_is_tallied_and_revealed():
    code = new_code()
    host = presenting(code, "scaling")
    host.radio(key="_room.pick.scaling").set_value("scaling_peak")
    host.button(key="_room.ask").click().run()
    number = presenter.shared_store().get(code).poll.number
    learners = [open_app(None, room=code, lang=lang) for lang in ("en", "zh", "en")]
    assert "最大权重" in all_text(learners[1])
    for learner, choice in zip(learners, (0, 0, 1), strict=True):
        learner.button(key=f"_room.answer.{number}.{choice}").click().run()
        assert not learner.exception
    assert presenter.shared_store().get(code).poll.tally == (2, 1)
    host.run()
    assert "Answers so far: 3" in all_text(host)
    host.button(key="_room.reveal").click().run()
    learners[1].run()
    assert "答案：是" in all_text(learners[1]) and "0.94" in all_text(learners[1])


@pytest.mark.parametrize("name", ["markdown-link", "http-url", "img-tag"])
def test_a_hostile_room_code_is_refused_with_a_notice_and_no_room(name):
    raw = HOSTILE[name]
    at = open_app("playground", room=raw)
    assert not at.exception
    assert any("room" in w.value for w in at.warning)
    assert "room" not in at.query_params
    assert not [ti for ti in at.text_input if ti.key == "_room.presenter_key"]


@pytest.mark.parametrize("raw", ["x" * 33, "房间一", "week 3"])
def test_a_bad_room_code_is_told_the_rule_in_both_languages(raw):
    """The notice states what a code is, not "not a value this setting
    accepts"."""
    rules = {"en": "1 to 32 characters, each a letter", "zh": "1 到 32 个字符"}
    for lang, rule in rules.items():
        at = open_app("playground", room=raw, lang=lang)
        assert not at.exception
        notice = " ".join(w.value for w in at.warning)
        assert rule in notice and "week3-group-B" in notice, notice
        assert "not a value this setting accepts" not in notice
        assert "不是这个设置能接受的取值" not in notice


@pytest.mark.parametrize(
    ("answers", "english", "chinese"),
    [
        ("only one", "needs 2 to 4 answers, one per line, and this one has 1", "2 到 4 个答案"),
        ("a\nb\n" + "c" * 81, "answer 3 has 81 characters", "第 3 个答案有 81 个字符"),
    ],
)
def test_a_typed_question_refused_names_the_rule_in_the_page_language(answers, english, chinese):
    """Regression: a typed question with one answer read "1 answers; 2 to 4" in English
    on both pages."""
    for lang, rule in (("en", english), ("zh", chinese)):
        code = new_code()
        host = presenting(code, "scaling", lang=lang)
        host.radio(key="_room.pick.scaling").set_value(TYPED).run()
        host.text_input(key="_room.typed_text").input("Which head?")
        host.text_area(key="_room.typed_answers").input(answers)
        host.button(key="_room.ask").click().run()
        assert not host.exception
        notice = " ".join(w.value for w in host.warning)
        assert rule in notice, notice
        assert "answers;" not in notice
        assert presenter.shared_store().get(code).poll is None


def test_an_answer_after_the_reveal_is_refused_as_closed(make_store):
    """The page tells this case in its language (``room.answer_closed``): a click that
    reaches the store after the presenter revealed the answer or asked another."""
    store = make_store()
    store.present("r", "tab-1", take_over=True)
    number = store.ask("r", typed_question("Q", "a\nb", 0)).poll.number
    store.reveal("r")
    with pytest.raises(QuestionClosedError, match="takes no answers now"):
        store.answer("r", "v1", 0, number)
    store.ask("r", typed_question("Q2", "a\nb", None))
    with pytest.raises(QuestionClosedError):
        store.answer("r", "v1", 0, number)


def test_a_link_from_a_server_that_ended_says_the_room_has_ended():
    at = open_app("playground", room=new_code(), **{"room.server": "0badc0de"})
    assert not at.exception
    assert "The room has ended" in all_text(at)
    assert at.selectbox(key="playground.input").value == "preset_zh"  # their own view


def test_a_generated_key_is_printed_when_the_first_page_opens(monkeypatch, capfd):
    """The README: without a key set, the server makes one when the first page opens and
    prints it once in its terminal, before anyone types into the key box."""
    monkeypatch.delenv(presenter.KEY_ENV, raising=False)
    monkeypatch.setattr(presenter, "_PROCESS", {})
    monkeypatch.setattr(presenter, "_streamlit_secret", lambda: None)
    open_app("intuition")
    printed = capfd.readouterr().err  # before anything here asks for the key
    key, source = presenter.presenter_key()
    assert source == "generated"
    assert f"presenter key for this server run: {key}" in printed
    open_app("intuition")
    assert "presenter key" not in capfd.readouterr().err  # once


def test_a_second_presenter_tab_takes_over_and_the_first_is_told():
    """One presenter at a time, in the app: the newer tab presents; the older says so and stops
    publishing; its "Present here" takes the room back. (In English: AppTest formats the
    presenter's question picker with English labels, so a Chinese presenter's second run
    cannot be driven; the Chinese strings are checked in test_i18n's key parity.)"""
    code = new_code()
    older = presenting(code, "scaling", **{"scaling.seq_len": "12"})
    newer = presenting(code, "scaling")  # it followed the older one before the key
    assert "You present room" in all_text(newer)
    newer.slider(key="scaling.seq_len").set_value(16).run()
    older.slider(key="scaling.seq_len").set_value(20).run()
    assert "Another tab now presents room" in all_text(older)
    assert "You present room" not in all_text(older)
    snap = presenter.shared_store().get(code)
    assert ("scaling.seq_len", "16") in snap.view.params  # the older one published nothing
    older.button(key="_room.take_back").click().run()
    assert "You present room" in all_text(older)
    assert ("scaling.seq_len", "20") in presenter.shared_store().get(code).view.params
    newer.run()
    assert "Another tab now presents room" in all_text(newer)


@pytest.mark.parametrize(
    ("lang", "away", "back"), [("en", "has been away for", "is back"), ("zh", "已离开", "回来了")]
)
def test_followers_read_that_the_presenter_is_away_and_then_back(lang, away, back, monkeypatch):
    code = new_code()
    host = presenting(code, "scaling")
    learner = open_app(None, room=code, lang=lang)
    assert away not in all_text(learner)
    store = presenter.shared_store()
    later = store._clock() + PRESENTER_AWAY_S + 5.0
    monkeypatch.setattr(store, "_clock", lambda: later)  # the presenter's tab closed
    learner.run()
    assert away in all_text(learner), all_text(learner)
    host.run()  # the presenter is back
    learner.run()
    assert back in all_text(learner) and away not in all_text(learner)
    learner.run()
    assert back not in all_text(learner)  # said once


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_room_in_redis_says_when_its_server_is_away_and_resumes_when_back(
    tmp_path, monkeypatch, lang
):
    """Redis stopped under a room: the presenter's and the follower's pages keep working
    (the follower on the last view) and say in one line that the room server cannot be
    reached; Redis started again empty (an external Redis that lost its data): every tab
    says the room has ended and none says it follows; the presenter opens it again with one
    click and the follower follows again."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(tmp_path)
    server.start()
    monkeypatch.setattr(presenter, "_PROCESS", {})
    monkeypatch.setenv(presenter.REDIS_ENV, server.url)
    code = new_code()
    unreachable = i18n.t_in(lang, "room.unreachable", code=literal(code))
    try:
        host = presenting(code, "scaling", lang=lang)
        learner = open_app("scaling", room=code, lang=lang)
        assert not learner.exception and unreachable not in all_text(learner)
        server.stop()
        time.sleep(0.3)
        learner.run()  # the page goes on, on the last view, still locked
        assert not learner.exception, learner.exception
        assert all_text(learner).count(unreachable) == 1
        assert learner.slider(key="scaling.seq_len").disabled
        host.slider(key="scaling.seq_len").set_value(24).run()
        assert not host.exception, host.exception
        assert unreachable in all_text(host)
        server.start()  # the same port, an empty Redis: the room is gone
        time.sleep(1.2)  # the store asks again after its pause
        learner.run()
        text = all_text(learner)
        assert not learner.exception and unreachable not in text
        assert i18n.t_in(lang, "room.ended", code=literal(code)) in text
        assert i18n.t_in(lang, "room.following", code=literal(code)) not in text
        assert i18n.t_in(lang, "room.locked_line") not in text
        assert not learner.slider(key="scaling.seq_len").disabled
        host.run()
        ended_here = i18n.t_in(lang, "room.ended_here", code=literal(code))
        assert not host.exception and ended_here in all_text(host)
        assert presenter.shared_store().get(code) is None  # not opened again behind anyone's back
        host.button(key="_room.take_back").click().run()  # "Open the room again"
        assert presenter.shared_store().get(code) is not None
        learner.run()
        assert learner.slider(key="scaling.seq_len").value == 24  # following again
    finally:
        presenter.shared_store().close()
        server.stop()
