"""Hostile values a crafted link may carry, shared by the AppTest and browser tests: each must
be shown back as literal text only, never as a live link, markup or a fetch; and a hostile
GGUF file (:func:`gguf_claiming`), whose header claims more bytes than the file has; and a
file the system refuses to open (:func:`refuse_opening`)."""

import struct
from pathlib import Path

HOSTILE = {
    "http-url": "http://evil.example/x",
    "https-url": "https://evil.example/x",
    "markdown-link": "[click](http://evil.example/x)",
    "markdown-image": "![logo](https://evil.example/x.png)",
    "img-tag": '<img src="http://evil.example/x.png">',
    "www-name": "www.evil.example",
    "javascript-url": "[x](javascript:alert(1))",
    "email": "mail@evil.example",
    "angle-autolink": "<https://evil.example/x>",
}
HOSTILE_HOST = "evil.example"
HOSTILE_LESSON_TEXT = (
    "# Head ![x](http://evil.example/a.png) <img src=http://evil.example/b.png onerror=alert(1)> "
    "<script>alert(1)</script> [go](javascript:alert(1)) $x$ :red[red] :smile: "
    "www.evil.example https://evil.example/c mail@evil.example"
)
"""A lesson file's text that tries every markup a renderer knows: a heading, a remote image,
HTML with a script, a ``javascript:`` link, LaTeX, a colour directive, a shortcode, raw
links and an address."""


def hostile_lesson(name: str = "hostile"):
    """A one-step lesson (on the Scaling page) whose every text holds
    :data:`HOSTILE_LESSON_TEXT`, after a word that names the field (``t``: the step's title,
    ``n``: what to notice, ``x``: the notes; ``lesson``: the lesson's title)."""
    from dashboard.lessons.model import Lesson, Step, Text

    def text(word: str) -> Text:
        return Text(f"{word}: {HOSTILE_LESSON_TEXT}", f"{word}（中文）: {HOSTILE_LESSON_TEXT}")

    step = Step("scaling", (), text("t"), text("n"), "", text("x"))
    return Lesson(name, text("lesson"), 5, "beginner", (step,))


def gguf_claiming(claimed: int, size: int, architecture: str = "llama") -> bytes:
    """A GGUF file of ``size`` bytes whose one tensor, ``token_embd.weight`` (float32), claims
    ``claimed`` bytes of data: a header a crafted or cut-short file may carry. Its metadata
    names ``architecture`` first, as real writers do, so a folder scan lists it."""

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)  # version, one tensor, one metadata entry
    head += string("general.architecture") + struct.pack("<I", 8) + string(architecture)
    f32, float_bytes = 0, 4
    head += string("token_embd.weight") + struct.pack("<IQIQ", 1, claimed // float_bytes, f32, 0)
    if len(head) > size:
        raise ValueError(f"a header of {len(head)} bytes does not fit in {size}")
    return head + bytes(size - len(head))


def refuse_opening(monkeypatch, name: str) -> None:
    """Make ``Path.open`` of a file called ``name`` raise the system's ``PermissionError``
    for the rest of the test (as a file another user owns would), and open any other file."""
    real_open = Path.open

    def refusing(self, *args, **kwargs):
        if self.name == name:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refusing)
