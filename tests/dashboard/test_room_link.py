"""A room link's keys: the server id's check and the values a presenter shares."""

from __future__ import annotations

import pytest

from dashboard.i18n import LANG_KEY
from dashboard.rooms.link import FOLLOW_KEY, ROOM_KEY, SERVER_KEY, parse_marker, shared_params


@pytest.mark.parametrize("raw", ["0", "0badc0de", "f" * 16])
def test_a_hex_server_id_of_at_most_16_characters_is_kept(raw):
    assert parse_marker(raw) == raw


@pytest.mark.parametrize("raw", ["", "f" * 17, "0BADC0DE", "xyz", "12 34", "../etc"])
def test_any_other_server_id_is_refused_by_name(raw):
    with pytest.raises(ValueError, match=repr(raw).replace("[", r"\[").replace(".", r"\.")):
        parse_marker(raw)


def test_a_presenter_shares_every_value_but_the_language_and_the_rooms_keys():
    query = {
        LANG_KEY: "zh",
        ROOM_KEY: "lab7",
        FOLLOW_KEY: "true",
        SERVER_KEY: "0badc0de",
        "room.later": "x",
        "playground.seq_len": "12",
        "roomy.value": "kept",  # a key that only starts with the word is a page's own
    }
    query["present"] = "true"  # each learner's own choice, as the language
    assert shared_params(query, own_keys=(LANG_KEY, "present")) == {
        "playground.seq_len": "12",
        "roomy.value": "kept",
    }
