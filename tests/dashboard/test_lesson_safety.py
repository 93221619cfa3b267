"""Lesson files from outside (the operator's folder, a presenter's upload) are safe: their
texts are drawn as plain text in the lesson bar, on the landing page and in the take-home
record (escaped for Markdown and HTML); an upload belongs to its room, never replaces the
operator's file, and a server keeps a bounded number; a file left out says its whole reason
to the presenter, to the operator's log and to a learner whose link names it."""

from __future__ import annotations

import html
import logging
import re
import tomllib
import uuid

import pytest

from dashboard.i18n import t_in
from dashboard.lesson_record import record_markdown
from dashboard.lessons import library
from dashboard.lessons.model import LessonError, lesson_toml, shipped_lessons
from dashboard.rooms import presenter
from dashboard.rooms.store import RoomStore
from tests.dashboard.conftest import open_app, presenting_app
from tests.hostile import hostile_lesson

JOINER = "\u2060"  # an invisible character; a reader of the text sees nothing of it
ASCII_PUNCTUATION = r"[!-/:-@\[-`{-~]"  # CommonMark: each may be escaped with a backslash
BROKEN_TOML = "[lesson\nminutes = 5\n"
LOGGER = "dashboard.lessons.library"


def read_as_commonmark(markdown: str) -> str:
    """What a Markdown reader shows of ``markdown`` made only of text and escapes: each
    backslash-escaped ASCII punctuation character as itself, :data:`JOINER` unseen."""
    return re.sub(r"\\(" + ASCII_PUNCTUATION + ")", r"\1", markdown).replace(JOINER, "")


def unescaped_marks(markdown: str, allowed: str = "") -> list[str]:
    """The ASCII punctuation characters of ``markdown`` not escaped by a backslash (those in
    ``allowed`` aside): any of them could start markup."""
    found, index = [], 0
    while index < len(markdown):
        char = markdown[index]
        if char == "\\":
            index += 2
            continue
        if re.fullmatch(ASCII_PUNCTUATION, char) and char not in allowed:
            found.append(char)
        index += 1
    return found


def assert_plain(markdown: str, text: str) -> None:
    """``markdown`` shows exactly ``text`` and holds no markup, raw link, shortcode or maths."""
    assert read_as_commonmark(markdown) == text, markdown
    assert unescaped_marks(markdown) == [], markdown
    for whole in ("://", "www.", "@evil", ":red", ":smile:"):  # a raw link or shortcode
        assert whole not in markdown.replace("\\", ""), (whole, markdown)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(library.DIR_ENV, str(tmp_path))
    return tmp_path


def _room() -> str:
    code = f"t-{uuid.uuid4().hex[:10]}"
    presenter.shared_store().open(code)
    return code


def _lesson_queries(at) -> list[str]:
    return [link.proto.query_string for link in at.get("page_link")]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_folder_lesson_s_texts_are_plain_text_in_the_bar_and_on_the_landing_page(folder, lang):
    lesson = hostile_lesson()
    (folder / "hostile.toml").write_text(lesson_toml(lesson), encoding="utf-8")
    host = presenting_app("scaling", _room(), lang=lang, lesson="hostile")
    assert not host.exception and not host.warning
    step = lesson.steps[0]
    drawn = [m.value for m in host.markdown] + [c.value for c in host.caption]
    with_text = [value for value in drawn if "evil" in value]
    step_of = t_in(lang, "lesson.step_of", k=1, n=1) + " · **"  # the bar's row
    title = next(value for value in with_text if value.startswith(step_of))
    assert_plain(title.removeprefix(step_of).removesuffix("**"), step.title(lang))
    label = t_in(lang, "lesson.notice") + " "
    notice = next(value for value in with_text if value.startswith(label))
    assert_plain(notice.removeprefix(label), step.notice(lang))
    caption = next(c.value for c in host.caption if "evil" in c.value)  # the lesson's title
    assert_plain(caption, lesson.title(lang))
    notes = next(value for value in with_text if value.startswith("x"))
    assert_plain(notes, step.notes(lang))
    assert len(with_text) == 4, with_text  # nothing else of the file, nowhere raw
    landing = open_app(None, lang=lang)
    labels = [link.proto.label for link in landing.get("page_link") if "Head" in link.proto.label]
    assert len(labels) == 1
    assert_plain(labels[0].removeprefix("**").removesuffix("**"), lesson.title(lang))


def test_a_shipped_lesson_stays_markdown():
    at = open_app("scaling", lesson="why-sqrt-dk")
    step = shipped_lessons()["why-sqrt-dk"].steps[0]
    assert any(m.value.endswith(f" · **{step.title('en')}**") for m in at.markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_record_escapes_a_folder_lesson_for_markdown_and_html(lang):
    lesson = hostile_lesson()
    record = record_markdown(lesson, lang, lambda k: f"http://lab.example/step{k}", {})
    lines = record.splitlines()
    step = lesson.steps[0]
    notice = lines[lines.index("<http://lab.example/step1>") + 2]  # after the step's link
    parts = [
        (next(x for x in lines if x.startswith("# ")).removeprefix("# "), lesson.title(lang)),
        (next(x for x in lines if x.startswith("## 1. ")).removeprefix("## 1. "), step.title(lang)),
        (notice.split("** ", 1)[1], step.notice(lang)),  # after "**What to notice:**"
    ]
    for shown, text in parts:
        # a viewer reads the escapes and the entities back as the text, and nothing else
        assert html.unescape(read_as_commonmark(shown)) == text, shown
        assert unescaped_marks(shown, allowed="&;") == [], shown
        assert not re.search(r"&(?!(lt|gt|amp);)", shown), shown  # "&" only in an entity
        assert "<" not in shown and ">" not in shown
        for whole in ("://", "www.", "javascript:a"):
            assert whole not in shown.replace("\\", ""), (whole, shown)
    assert "<http://lab.example/step1>" in lines  # the step's own link stays a link


def test_an_upload_belongs_to_its_room_alone(folder):
    name = f"up-{uuid.uuid4().hex[:6]}"
    here, other = _room(), _room()
    library.load_lesson(lesson_toml(hostile_lesson(name)).encode(), f"{name}.toml", here)
    assert list(folder.iterdir()) == []  # nothing written into the operator's folder
    assert any(f"lesson={name}&" in q for q in _lesson_queries(open_app(None, room=here)))
    for room in ("", other):  # the landing page of a visitor outside the room
        at = open_app(None, **({"room": room} if room else {}))
        assert not any(name in q for q in _lesson_queries(at))
    for room in ("", other):  # a link from outside the room
        at = open_app("scaling", lesson=name, **({"room": room} if room else {}))
        assert not at.exception and len(at.warning) == 1
        unknown = t_in("en", "common.url_reason_unknown_lesson", lessons="")
        assert unknown.split("(")[0] in at.warning[0].value
        assert not any(name in m.value for m in at.markdown)  # no lesson bar
    at = open_app("scaling", lesson=name, room=here)
    assert not at.exception and at.query_params["lesson"] == name


@pytest.mark.parametrize("kept", [lesson_toml(shipped_lessons()["why-sqrt-dk"]), BROKEN_TOML])
def test_an_upload_of_a_name_the_folder_has_is_refused(folder, kept):
    (folder / "taken.toml").write_text(kept, encoding="utf-8")
    data = lesson_toml(hostile_lesson("taken")).encode()
    with pytest.raises(LessonError) as refused:
        library.load_lesson(data, "taken.toml", _room())
    assert str(refused.value) == t_in("en", "lesson.upload_folder_has", file="taken.toml")
    assert (folder / "taken.toml").read_text(encoding="utf-8") == kept


def test_the_presenter_reads_why_a_lesson_of_a_name_the_folder_has_is_refused(folder):
    (folder / "taken.toml").write_text(BROKEN_TOML, encoding="utf-8")
    code = _room()
    host = presenting_app("scaling", code)
    host.text_input(key="_author.title_en").input("One")
    host.text_input(key="_author.notice_en").input("Look")
    host.button(key="FormSubmitter:_author.add-" + t_in("en", "lesson.author_add")).click().run()
    host.text_input(key="_author.name").input("taken").run()
    host.button(key="_author.use").click().run()
    said = t_in("en", "lesson.upload_folder_has", file="taken.toml")
    refused = t_in("en", "lesson.author_refused", detail=said)
    assert [read_as_commonmark(w.value) for w in host.warning] == [refused]
    assert (folder / "taken.toml").read_text(encoding="utf-8") == BROKEN_TOML
    assert presenter.shared_store().lesson_texts(code) == {}


def test_a_server_keeps_a_bounded_number_of_uploads_per_room_and_in_all(monkeypatch):
    store = RoomStore(max_room_lessons=2, max_lessons=3)
    monkeypatch.setitem(presenter._PROCESS, "store", store)
    for code in ("a", "b", "c"):
        store.open(code)
    data = lesson_toml(hostile_lesson()).encode()
    library.load_lesson(data, "one.toml", "a")
    library.load_lesson(data, "two.toml", "a")
    with pytest.raises(LessonError) as refused:
        library.load_lesson(data, "three.toml", "a")
    assert str(refused.value) == t_in("en", "lesson.upload_full_room", n=2)
    library.load_lesson(data, "two.toml", "a")  # its own name: replaced
    library.load_lesson(data, "one.toml", "b")
    with pytest.raises(LessonError) as refused:
        library.load_lesson(data, "one.toml", "c")
    assert str(refused.value) == t_in("en", "lesson.upload_full_server", n=3)
    assert sorted(library.room_lessons("a")) == ["one", "two"]
    with pytest.raises(LessonError):  # a room that is not open keeps nothing
        library.load_lesson(data, "one.toml", "never-opened")


def _toml_reason(text: str) -> str:
    """tomllib's own words for ``text`` (the reference the whole reason must hold)."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return str(err)
    raise AssertionError("the text is TOML")


def test_the_presenter_reads_a_left_out_file_s_whole_reason(folder):
    (folder / "malformed.toml").write_text(BROKEN_TOML, encoding="utf-8")
    whole = f"malformed.toml: not TOML ({_toml_reason(BROKEN_TOML)})"
    assert len(whole) > 60
    host = presenting_app("scaling", _room())
    shown = [read_as_commonmark(c.value) for c in host.caption if "malformed" in c.value]
    assert shown == [t_in("en", "lesson.author_left_out", reason=whole)]


def test_the_operator_s_log_names_each_left_out_file_once_per_change(folder, caplog):
    (folder / "malformed.toml").write_text(BROKEN_TOML, encoding="utf-8")
    (folder / "fine.toml").write_text(lesson_toml(hostile_lesson("fine")), encoding="utf-8")
    whole = f"malformed.toml: not TOML ({_toml_reason(BROKEN_TOML)})"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        library.folder_lessons()
        library.folder_lessons()  # no change: said once
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1 and said[0].endswith(whole) and str(folder) in said[0]
    caplog.clear()
    (folder / "late.toml").write_text("[lesson]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        library.folder_lessons()
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 2  # the folder changed: each file left out is said again
    assert any("late.toml: field 'minutes'" in line for line in said)
    assert any(line.endswith(whole) for line in said)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_link_to_a_left_out_lesson_says_it_was_left_out_and_why(folder, lang):
    (folder / "broken.toml").write_text(BROKEN_TOML, encoding="utf-8")
    whole = f"broken.toml: not TOML ({_toml_reason(BROKEN_TOML)})"
    at = open_app("scaling", lang=lang, lesson="broken")
    assert not at.exception and len(at.warning) == 1
    said = read_as_commonmark(at.warning[0].value)
    assert t_in(lang, "common.url_reason_left_out_lesson", why=whole) in said
    unknown = t_in(lang, "common.url_reason_unknown_lesson", lessons="")
    assert unknown.split("(")[0] not in said
