"""SentencePiece BPE with byte fallback rebuilt from a GGUF file's pieces and scores.

A GGUF file of a Llama 2-style model (``tokenizer.ggml.model == "llama"``: Llama 2,
TinyLlama, Mistral 7B) carries SentencePiece pieces (``▁the``, with ``▁`` for a space), one
score per piece, and a type per piece (1 normal, 2 unknown ``<unk>``, 3 control ``<s>`` and
``</s>``, 6 a byte ``<0xE4>``). SentencePiece's BPE, and llama.cpp's SPM tokenizer after it,
start from the characters of the text and keep merging the neighbouring pair whose joined
piece is in the vocabulary with the highest score; a character left outside the vocabulary
falls back to its UTF-8 bytes as byte pieces.

:func:`build_spm_tokenizer` expresses that as HuggingFace's converter does for
``LlamaTokenizerFast``: a ``tokenizers`` BPE model whose merges are derived from the
vocabulary (every piece that splits into two pieces of the vocabulary, ranked by the joined
piece's score), ``byte_fallback=True`` and ``fuse_unk=True``; a normaliser that prepends
``▁`` (llama.cpp's ``add_space_prefix``, on by default, read from
``tokenizer.ggml.add_space_prefix``) and writes spaces as ``▁``; a decoder that turns ``▁``
back into spaces, joins byte pieces into characters, and strips the one leading space the
normaliser added. As in llama.cpp, the prefix is also added after a token matched whole (a
control or user-defined token), since the text is normalised piece by piece between them.
"""

from __future__ import annotations

import numpy as np
import tokenizers
from tokenizers import decoders, models, normalizers

from attention_core.pretrained.bpe import NORMAL_TOKEN_TYPE, SPACE_PIECE, add_whole_tokens

SPM_MODEL = "llama"
MERGEABLE_TOKEN_TYPES = (NORMAL_TOKEN_TYPE,)
"""Piece types that take part in merges (SentencePiece merges only normal pieces)."""
PREFIX_STRIP = 1  # the decoder strips the one space the normaliser prepended


def spm_merges(tokens: list[str], scores, token_types) -> list[tuple[str, str]]:
    """Merges of a SentencePiece BPE vocabulary, ranked as its scores rank the joined pieces.

    Every normal piece that splits into two normal pieces gives one merge per split; merges
    are ordered by the joined piece's score, highest first, then (as HuggingFace's
    ``generate_merges`` does) by the longer left part, the longer right part, the joined
    piece's id, and the parts' ids.

    Args:
        tokens: the pieces in id order (V strings).
        scores: one score per piece (V numbers; higher merges first).
        token_types: one llama.cpp token type per piece (V ints).

    Returns:
        ``(left, right)`` pairs, highest priority first.
    """
    ids = {
        token: index
        for index, (token, kind) in enumerate(zip(tokens, token_types, strict=True))
        if int(kind) in MERGEABLE_TOKEN_TYPES
    }
    ranked = []
    for piece, index in ids.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                order = (-float(scores[index]), -len(left), -len(right), index, ids[left])
                ranked.append((order, (left, right)))
    ranked.sort(key=lambda item: item[0])
    return [pair for _, pair in ranked]


def _normalizer(add_space_prefix: bool) -> normalizers.Normalizer:
    """Prepend ``▁`` (when asked), then write every space as ``▁``."""
    steps = [normalizers.Prepend(SPACE_PIECE)] if add_space_prefix else []
    steps.append(normalizers.Replace(" ", SPACE_PIECE))
    return normalizers.Sequence(steps)


def _decoder(add_space_prefix: bool) -> decoders.Decoder:
    """``▁`` back to spaces, byte pieces joined into characters, the prepended space dropped."""
    steps = [decoders.Replace(SPACE_PIECE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space_prefix:
        steps.append(decoders.Strip(content=" ", left=PREFIX_STRIP, right=0))
    return decoders.Sequence(steps)


def check_spm_fields(
    tokens: list[str], scores, token_types, *, unk_id: int
) -> tuple[dict[str, int], np.ndarray]:
    """Check a GGUF file's SentencePiece fields without building anything from them.

    Args:
        tokens, scores, token_types, unk_id: as for :func:`build_spm_tokenizer`.

    Returns:
        (vocab, scores): piece -> id, and the scores as a (V,) float64 array.

    Raises:
        ValueError: as :func:`build_spm_tokenizer` does.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (len(tokens),):
        raise ValueError(f"{scores.shape} scores for a vocabulary of {len(tokens)} pieces")
    if len(token_types) != len(tokens):
        raise ValueError(f"{len(token_types)} token types for a vocabulary of {len(tokens)} pieces")
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError(f"the vocabulary repeats {len(tokens) - len(vocab)} pieces")
    if not 0 <= unk_id < len(tokens):
        raise ValueError(f"unk_id must be in [0, {len(tokens)}), got {unk_id}")
    return vocab, scores


def build_spm_tokenizer(
    tokens: list[str],
    scores,
    token_types,
    *,
    unk_id: int,
    add_space_prefix: bool = True,
) -> tokenizers.Tokenizer:
    """Build a SentencePiece BPE ``tokenizers.Tokenizer`` from a GGUF file's tokenizer fields.

    Args:
        tokens: ``tokenizer.ggml.tokens``, the pieces in id order (V strings).
        scores: ``tokenizer.ggml.scores``, one float per piece (V).
        token_types: ``tokenizer.ggml.token_type``, one int per piece (V); unknown (2) and
            control (3) pieces become special tokens and user-defined ones (4) added tokens,
            matched whole in the text; byte pieces (6) serve the byte fallback.
        unk_id: id of the unknown piece (``<unk>``), in [0, V).
        add_space_prefix: prepend a space to the text (``tokenizer.ggml.add_space_prefix``).

    Returns:
        The tokenizer (no padding, no truncation, no BOS/EOS added).

    Raises:
        ValueError: when scores or token types are not one per piece, a piece repeats, or
            ``unk_id`` lies outside the vocabulary.
    """
    vocab, scores = check_spm_fields(tokens, scores, token_types, unk_id=unk_id)
    bpe = models.BPE(
        vocab=vocab,
        merges=spm_merges(tokens, scores, token_types),
        unk_token=tokens[unk_id],
        fuse_unk=True,
        byte_fallback=True,
    )
    tokenizer = tokenizers.Tokenizer(bpe)
    tokenizer.normalizer = _normalizer(add_space_prefix)
    tokenizer.decoder = _decoder(add_space_prefix)
    add_whole_tokens(tokenizer, tokens, token_types)
    return tokenizer
