"""Instructors make their own lessons (:mod:`dashboard.lesson_author`,
:mod:`dashboard.lessons.library`): the presenter adds the view on the screen as a step,
reorders and removes steps, downloads the file (read back by ``tomllib`` as the same lesson)
and uses it in the room, where a follower's bar shows it; a lesson file is refused with its
reason (file, step, field); the operator's folder is read, its bad files left out with their
reasons; a loaded lesson is kept by the presenter's room, never written into the folder."""

from __future__ import annotations

import tomllib
import uuid

import pytest

from dashboard.i18n import t_in
from dashboard.lessons import library
from dashboard.lessons.model import LessonError, lesson_toml, parse_lesson, shipped_lessons
from dashboard.rooms import presenter
from tests.dashboard.conftest import open_app, presenting_app

WHY = shipped_lessons()["why-sqrt-dk"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(library.DIR_ENV, str(tmp_path))
    return tmp_path


def _add_step(host, title_en: str, notice_zh: str, question: str = "") -> None:
    host.text_input(key="_author.title_en").input(title_en)
    host.text_input(key="_author.notice_zh").input(notice_zh)
    if question:
        host.selectbox(key="_author.question").select(question)
    host.button(key="FormSubmitter:_author.add-" + t_in("en", "lesson.author_add")).click()
    host.run()


def test_a_presenter_makes_a_lesson_from_two_views_and_the_room_follows_it(folder):
    code = f"t-{uuid.uuid4().hex[:10]}"
    name = f"made-{uuid.uuid4().hex[:6]}"
    host = presenting_app("scaling", code, **{"scaling.d_ks": "64,256"})
    assert t_in("en", "lesson.author_title") in [e.label for e in host.expander]
    _add_step(host, "Saturation", "看最大的权重", "scaling_peak")
    assert not host.exception and not host.warning
    host.slider(key="scaling.seq_len").set_value(12).run()
    _add_step(host, "Longer sequences", "更长的序列")
    host.button(key="_author.up.1").click().run()  # the second step goes first
    host.text_input(key="_author.name").input(name).run()
    label = t_in("en", "lesson.author_download")
    download = [b for b in host.get("download_button") if b.proto.label == label]
    text = host.session_state["_author.steps"]
    assert [s.title("en") for s in text] == ["Longer sequences", "Saturation"]
    first, second = text
    assert dict(first.query)["scaling.seq_len"] == "12" and first.title("zh") == "Longer sequences"
    assert dict(second.query)["scaling.d_ks"] == "64,256" and second.question == "scaling_peak"
    assert first.notice("en") == "更长的序列"  # written in one language: both show it
    assert len(download) == 1
    host.button(key="_author.use").click().run()
    assert not host.exception
    assert not host.warning, [w.value for w in host.warning]
    assert not (folder / f"{name}.toml").exists()  # the room keeps it, not the folder
    kept = presenter.shared_store().lesson_text(code, name)
    lesson = parse_lesson(kept, name)
    assert tomllib.loads(kept)["step"][1]["question"] == "scaling_peak"
    assert [s.title("en") for s in lesson.steps] == ["Longer sequences", "Saturation"]
    assert host.query_params["lesson"] == name and host.query_params["lesson.step"] == "1"
    learner = open_app(None, room=code, lang="zh")
    assert not learner.exception
    assert learner.query_params["lesson"] == name
    assert any("更长的序列" in m.value for m in learner.markdown)
    assert learner.slider(key="scaling.seq_len").value == 12


def test_removing_a_step_and_an_empty_draft_offers_no_file():
    code = f"t-{uuid.uuid4().hex[:10]}"
    host = presenting_app("scaling", code)
    _add_step(host, "One", "一")
    assert len(host.session_state["_author.steps"]) == 1
    host.button(key="_author.drop.0").click().run()
    assert host.session_state["_author.steps"] == []
    assert not [b for b in host.button if b.key == "_author.use"]


def test_a_follower_never_sees_make_a_lesson():
    code = f"t-{uuid.uuid4().hex[:10]}"
    presenting_app("scaling", code)
    learner = open_app(None, room=code)
    assert t_in("en", "lesson.author_title") not in [e.label for e in learner.expander]


def test_every_shipped_lesson_is_written_and_read_back_unchanged():
    for name, lesson in shipped_lessons().items():
        assert parse_lesson(lesson_toml(lesson), name) == lesson


@pytest.mark.parametrize(
    ("data", "filename", "words"),
    [
        (b"[lesson]\nminutes = 5\n", "a.toml", "a.toml: field 'level'"),
        (b"not toml [", "b.toml", "b.toml: not TOML"),
        (b"\xff\xfe", "c.toml", "c.toml: not UTF-8"),
        (b"x" * (library.MAX_FILE_BYTES + 1), "d.toml", "64 KiB"),
        (b"", "e.txt", "ends in .toml"),
        (lesson_toml(WHY).encode(), "why-sqrt-dk.toml", "shipped"),
        (
            lesson_toml(shipped_lessons()["why-sqrt-dk"])
            .replace('"scaling"', '"nowhere"', 1)
            .encode(),
            "f.toml",
            "f.toml: step 1, field 'page': 'nowhere' is not a page",
        ),
    ],
)
def test_a_bad_lesson_file_is_refused_naming_file_step_and_field(data, filename, words):
    with pytest.raises(LessonError, match=words.replace("(", r"\(")):
        library.read_lesson_file(data, filename)


def test_the_folder_is_read_its_bad_files_left_out_with_their_reasons(folder):
    good = lesson_toml(shipped_lessons()["why-sqrt-dk"])
    (folder / "mine.toml").write_text(good, encoding="utf-8")
    (folder / "broken.toml").write_text("[lesson", encoding="utf-8")
    (folder / "notes.txt").write_text("ignored", encoding="utf-8")
    lessons, left_out = library.folder_lessons()
    assert (
        list(lessons) == ["mine"]
        and lessons["mine"].steps == shipped_lessons()["why-sqrt-dk"].steps
    )
    assert len(left_out) == 1 and left_out[0].startswith("broken.toml: not TOML")
    (folder / "mine.toml").write_text(good.replace("minutes = 8", "minutes = 9"), encoding="utf-8")
    assert library.folder_lessons()[0]["mine"].minutes == 9  # a changed file is read again
    assert "mine" in library.all_lessons()
    host = presenting_app("scaling", f"t-{uuid.uuid4().hex[:10]}")
    assert any("broken\\.toml" in c.value for c in host.caption)  # the presenter reads why
    landing = open_app(None)
    queries = [link.proto.query_string for link in landing.get("page_link")]
    assert any("lesson=mine&" in query for query in queries), queries  # on the lessons' map


def test_a_lesson_file_is_found_by_a_link_of_its_room_once_loaded(folder):
    name, code = f"up-{uuid.uuid4().hex[:6]}", f"t-{uuid.uuid4().hex[:10]}"
    presenter.shared_store().open(code)
    data = lesson_toml(shipped_lessons()["why-sqrt-dk"]).encode()
    library.load_lesson(data, f"{name}.toml", code)
    assert not (folder / f"{name}.toml").exists()
    at = open_app("scaling", lesson=name, room=code, **{"lesson.step": "2"})
    assert not at.exception and not at.warning
    assert at.query_params["lesson"] == name
    assert at.text_input(key="scaling.d_ks").value == "64,256"
