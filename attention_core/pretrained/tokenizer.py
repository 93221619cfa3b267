"""WordPiece tokenisation for BERT-style checkpoints, through the ``tokenizers`` library.

The checkpoint's ``tokenizer.json`` ships with fixed padding to 128 tokens and truncation at
128; :func:`load_tokenizer` turns padding off (one sentence needs no padding) and truncates at
the model's own maximum instead.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import tokenizers

from attention_core.validation import check_int

UNK_TOKEN = "[UNK]"
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]")
MIN_MAX_LENGTH = 2  # room for [CLS] and [SEP]


@dataclass(frozen=True)
class Tokenized:
    """One tokenised text.

    Attributes:
        tokens: token strings, length L, specials included (``[CLS]`` … ``[SEP]`` for BERT,
            ``<s>`` … ``</s>`` for XLM-R / e5).
        input_ids: vocabulary ids, length L.
        truncated: True when the text was longer than the model's maximum and was cut.
        offsets: per token, the (start, end) character span of the original text it came
            from; (0, 0) for special tokens; ``None`` when not known.
        unk_token: the tokenizer's unknown-piece token.
        special_tokens: the tokens not counted as content by :attr:`unk_share`.
    """

    tokens: list[str]
    input_ids: list[int]
    truncated: bool
    offsets: list[tuple[int, int]] | None = None
    unk_token: str = UNK_TOKEN
    special_tokens: tuple[str, ...] = SPECIAL_TOKENS

    @property
    def unk_share(self) -> float:
        """Fraction of the non-special tokens that are unknown (0.0 when there are none)."""
        content = [t for t in self.tokens if t not in self.special_tokens]
        if not content:
            return 0.0
        return sum(t == self.unk_token for t in content) / len(content)


def load_tokenizer(path: str | Path, max_length: int) -> tokenizers.Tokenizer:
    """Load ``tokenizer.json`` with padding off and truncation at ``max_length``.

    Args:
        path: the ``tokenizer.json`` file.
        max_length: most tokens per text, special tokens included (e.g. 512).

    Returns:
        A ``tokenizers.Tokenizer`` ready for :func:`tokenize`.

    Raises:
        ValueError: when ``max_length`` is below 2 or the file cannot be parsed.
        FileNotFoundError: when the file does not exist.
    """
    path = Path(path)
    max_length = check_int("max_length", max_length, low=MIN_MAX_LENGTH)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust side raises a plain Exception
        raise ValueError(f"cannot parse tokenizer file {path}: {err}") from err
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def tokenize(tokenizer: tokenizers.Tokenizer, text: str) -> Tokenized:
    """Tokenise one text, adding ``[CLS]`` and ``[SEP]``; warn when it had to be truncated.

    Args:
        tokenizer: from :func:`load_tokenizer`.
        text: a non-empty string.

    Returns:
        :class:`Tokenized` with L tokens (L >= 2).

    Raises:
        ValueError: when ``text`` is not a string or is blank.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"text must not be blank, got {text!r}")
    encoding = tokenizer.encode(text)
    truncated = bool(encoding.overflowing)
    if truncated:
        warnings.warn(
            f"text truncated to {len(encoding.ids)} tokens (the model's maximum)",
            stacklevel=2,
        )
    return Tokenized(
        tokens=list(encoding.tokens),
        input_ids=list(encoding.ids),
        truncated=truncated,
        offsets=[tuple(span) for span in encoding.offsets],
    )
