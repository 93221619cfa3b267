"""One map of a head's queries and keys (AttentionViz, Yeh et al. 2023): every token of a few
sentences gives a query point and a key point, normalised so that both clouds share one
picture, then projected to 2-D together.

* :func:`decoder_head_qk` and :func:`encoder_head_qk` collect one head's queries and keys
  (after RoPE for a decoder) with a forward hook on the model's own layer, and the model's
  own attention weights of that head. No second copy of the model is made.
* :func:`normalize_qk` applies AttentionViz's two normalisations: the keys are translated so
  that their mean equals the queries' mean (k' = k − mean(k) + mean(q): every score of a row
  gains the same q·c, so no softmax row changes), then the queries are scaled by s and the
  keys by 1/s so that their mean norms are equal (q·k unchanged). It returns the largest
  change of any attention row (float64), which must stay within :data:`ROW_TOLERANCE`.
* :func:`joint_points` stacks the normalised queries and keys of every sentence into one
  point set; :mod:`~attention_core.experiments.qk_projection` projects it (PCA, t-SNE) and
  says how far each picture can be trusted.

Shapes: L_i tokens of sentence i, T = Σ L_i tokens, P = 2·T points (every query, then every
key), E head size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_core.registry import get_variant

MAX_MAP_TOKENS = 512
"""Most tokens of all sentences together (2 · 512 points: t-SNE's cost grows with them)."""
ROW_TOLERANCE = 1e-6
"""The largest change of an attention row the normalisation may make (float64)."""
TRANSLATION_SENTENCES = ("the cat sat on the mat", "那只猫坐在垫子上")
"""The English sentence and its Chinese translation whose word pairs e5's map is checked on."""
TRANSLATION_PAIRS = (("cat", "猫"), ("mat", "垫子"))
"""(English word, Chinese word) pairs of :data:`TRANSLATION_SENTENCES`."""
E5_SENTENCES = (
    *TRANSLATION_SENTENCES,
    "The dog chased the ball across the garden.",
    "小狗在花园里追着球跑。",
    "She opened the window because the room was hot.",
    "房间很热，所以她打开了窗户。",
)
"""e5's preset sentences: English and Chinese, each with its translation."""
DECODER_SENTENCES = (
    "the cat sat on the mat",
    "The dog chased the ball across the garden.",
    "She opened the window because the room was hot.",
    "Alice gave Bob a book, and Bob thanked Alice.",
)
"""SmolLM2's preset sentences (English)."""
METHODS = ("pca", "tsne")
"""The projections: PCA (live) and t-SNE (on request)."""


@dataclass(frozen=True)
class HeadQK:
    """One head's queries and keys for a list of sentences, as the model computed them.

    Attributes:
        layer, head: the head, 0-based.
        sentences: the texts, in order.
        languages: ``"zh"`` for a sentence with a CJK character, else ``"en"``.
        tokens: each sentence's token strings, length L_i.
        offsets: each sentence's (start, end) character span per token, or None.
        queries: per sentence (L_i, E) float64, the queries the head scores with.
        keys: per sentence (L_i, E) float64, the keys it scores (after RoPE for a decoder;
            for grouped-query attention the key head this query head reads).
        weights: per sentence (L_i, L_i) float64, the model's own attention weights of the
            head (float32 values widened).
        scale: the score scale, 1/√E.
        causal: True for a decoder (query i sees keys 0..i), False for an encoder.
    """

    layer: int
    head: int
    sentences: tuple[str, ...]
    languages: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    offsets: tuple[tuple[tuple[int, int], ...] | None, ...]
    queries: tuple[np.ndarray, ...]
    keys: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    scale: float
    causal: bool

    @property
    def token_count(self) -> int:
        """T, the tokens of all sentences."""
        return sum(len(t) for t in self.tokens)


@dataclass(frozen=True)
class NormalizedQK:
    """AttentionViz's normalisation of a :class:`HeadQK`.

    Attributes:
        queries: per sentence (L_i, E) float64, s · q.
        keys: per sentence (L_i, E) float64, (k − mean(k) + mean(q)) / s.
        shift: (E,) mean(q) − mean(k), added to every key (means over every sentence).
        factor: s = sqrt(mean ‖k + shift‖ / mean ‖q‖): afterwards both mean norms are equal.
        row_change: the largest |softmax row after − before| over every row of every
            sentence (float64); at most :data:`ROW_TOLERANCE` by construction.
    """

    queries: tuple[np.ndarray, ...]
    keys: tuple[np.ndarray, ...]
    shift: np.ndarray
    factor: float
    row_change: float


@dataclass(frozen=True)
class QKPoints:
    """Every query and key of a map as one point set.

    Attributes:
        points: (P, E) float64: the T queries (sentence by sentence), then the T keys.
        is_key: (P,) bool. sentence: (P,) int, the sentence index. position: (P,) int, the
            token's position in its sentence.
        tokens: (P,) the token strings. languages: (P,) ``"en"`` or ``"zh"``.
    """

    points: np.ndarray
    is_key: np.ndarray
    sentence: np.ndarray
    position: np.ndarray
    tokens: tuple[str, ...]
    languages: tuple[str, ...]


def sentence_language(text: str) -> str:
    """``"zh"`` when ``text`` holds a CJK ideograph, else ``"en"``."""
    return (
        "zh" if any("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" for c in text) else "en"
    )


def _check_sentences(sentences) -> tuple[str, ...]:
    if isinstance(sentences, str) or not isinstance(sentences, Sequence) or not sentences:
        raise ValueError(f"sentences must be a non-empty list of strings, got {sentences!r}")
    for text in sentences:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"every sentence must be a non-blank string, got {text!r}")
    return tuple(sentences)


def _check_head(layer, head, layers: int, heads: int) -> tuple[int, int]:
    for name, value, count in (("layer", layer, layers), ("head", head, heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise ValueError(f"{name} must be a whole number in [0, {count}), got {value!r}")
    return layer, head


def _check_dense(variant: str) -> None:
    spec = get_variant(variant)
    if not spec.exact or spec.pattern is not None:
        raise ValueError(
            f"the query–key map needs dense exact attention (softmax(q·k/√E)); the model's "
            f"variant is {variant!r} (use 'scaled')"
        )


def _check_budget(token_counts: list[int]) -> None:
    total = sum(token_counts)
    if total > MAX_MAP_TOKENS:
        raise ValueError(
            f"the sentences hold {total} tokens together; a map takes at most "
            f"MAX_MAP_TOKENS = {MAX_MAP_TOKENS}"
        )


def _checked_request(model, sentences, layer, head, layers: int, heads: int):
    """Check a map request to a decoder or an encoder and tokenise its sentences.

    Args:
        model: the decoder or encoder (its ``variant`` and ``tokenize``).
        sentences, layer, head: as the caller got them. layers, heads: the model's counts.

    Returns:
        (sentences as a tuple, layer, head, one tokenisation per sentence).

    Raises:
        ValueError: as :func:`decoder_head_qk`, in that order.
    """
    sentences = _check_sentences(sentences)
    layer, head = _check_head(layer, head, layers, heads)
    _check_dense(model.variant)
    tokenized = [model.tokenize(text) for text in sentences]
    _check_budget([len(t.input_ids) for t in tokenized])
    return sentences, layer, head, tokenized


def _head_qk(
    layer: int,
    head: int,
    sentences: tuple[str, ...],
    tokenized: list,
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    scale: float,
    causal: bool,
) -> HeadQK:
    return HeadQK(
        layer=layer,
        head=head,
        sentences=sentences,
        languages=tuple(sentence_language(s) for s in sentences),
        tokens=tuple(tuple(t.tokens) for t in tokenized),
        offsets=tuple(
            None if t.offsets is None else tuple(tuple(span) for span in t.offsets)
            for t in tokenized
        ),
        queries=tuple(r[0] for r in rows),
        keys=tuple(r[1] for r in rows),
        weights=tuple(r[2] for r in rows),
        scale=scale,
        causal=causal,
    )


def _as_float64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).cpu().numpy()


def decoder_head_qk(decoder, sentences: Sequence[str], layer: int, head: int) -> HeadQK:
    """One decoder head's queries and keys (after RoPE) for each sentence, one forward each.

    A forward pre-hook on the decoder's layer ``layer`` reads the stream entering it and the
    layer's rotation, and hands them to the layer's own steps (``project_qkv``, then
    ``norm_and_rotate``: the bias, the per-head norms and RoPE as the block applies them).
    Query head h reads key head h // G.

    Args:
        decoder: a :class:`~attention_core.pretrained.llama.Decoder` with exact dense
            attention.
        sentences: non-blank texts (no BOS is added).
        layer, head: 0-based.

    Returns:
        :class:`HeadQK` with queries and keys (L_i, E) and the weights (L_i, L_i).

    Raises:
        ValueError: for no sentences or a blank one, a layer or head out of range, a variant
            other than dense exact attention, or more than :data:`MAX_MAP_TOKENS` tokens.
    """
    cfg = decoder.config
    sentences, layer, head, tokenized = _checked_request(
        decoder, sentences, layer, head, cfg.num_layers, cfg.num_heads
    )
    block = decoder.layers[layer]
    kv_head = head // cfg.group_size
    seen: dict[str, torch.Tensor] = {}

    def read_input(module, args):
        x, run = args[0], args[1]  # (1, L, D), the LayerRun
        q, k, _ = module.project_qkv(x)  # (1, H, L, E), (1, K, L, E)
        q, k = module.norm_and_rotate(q, k, run.rope)  # (1, H, L, E), (1, K, L, E)
        seen["q"], seen["k"] = q[0, head], k[0, kv_head]  # (L, E) each

    rows = []
    handle = block.register_forward_pre_hook(read_input)
    try:
        for tokens in tokenized:
            ids = torch.tensor([tokens.input_ids], dtype=torch.int64)  # (1, L)
            w = decoder(ids, need_weights=True).attentions[layer][0, head]  # (L, L)
            rows.append((_as_float64(seen["q"]), _as_float64(seen["k"]), _as_float64(w)))
    finally:
        handle.remove()
    scale = 1 / math.sqrt(cfg.head_dim)
    return _head_qk(layer, head, sentences, tokenized, rows, scale=scale, causal=True)


def encoder_head_qk(encoder, sentences: Sequence[str], layer: int, head: int) -> HeadQK:
    """One encoder head's queries and keys (e5, MiniLM) for each sentence, one forward each.

    A forward pre-hook on layer ``layer``'s attention module reads its input x; its own
    ``project_qkv(x)`` gives the queries and keys the head scores with.

    Args:
        encoder: a :class:`~attention_core.pretrained.bert.Encoder` with exact dense
            attention.
        sentences: non-blank texts (tokenised with the model's specials).
        layer, head: 0-based.

    Returns:
        :class:`HeadQK` with queries and keys (L_i, E) and the weights (L_i, L_i).

    Raises:
        ValueError: as :func:`decoder_head_qk`.
    """
    cfg = encoder.config
    sentences, layer, head, tokenized = _checked_request(
        encoder, sentences, layer, head, cfg.num_hidden_layers, cfg.num_attention_heads
    )
    attention = encoder.layers[layer].attention
    seen: dict[str, torch.Tensor] = {}

    def read_input(module, args):
        q, k, _ = module.project_qkv(args[0])  # (1, H, L, E) each
        seen["q"], seen["k"] = q[0, head], k[0, head]  # (L, E) each

    rows = []
    handle = attention.register_forward_pre_hook(read_input)
    try:
        with torch.no_grad():
            for tokens in tokenized:
                ids = torch.tensor([tokens.input_ids], dtype=torch.int64)  # (1, L)
                out = encoder(ids, need_weights=True)
                w = out.attentions[layer][0, head]  # (L, L)
                rows.append((_as_float64(seen["q"]), _as_float64(seen["k"]), _as_float64(w)))
    finally:
        handle.remove()
    scale = attention.scale if attention.scale is not None else 1 / math.sqrt(attention.head_dim)
    return _head_qk(layer, head, sentences, tokenized, rows, scale=scale, causal=False)


def attention_rows(q: np.ndarray, k: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    """softmax(scale · q·kᵀ (+ causal)) in float64, the readable formula.

    Args:
        q, k: (L, E). scale: the score scale. causal: hide keys after the query.

    Returns:
        (L, L) float64 weights; each row sums to 1.
    """
    scores = scale * (q @ k.T)  # (L, E) @ (E, L) -> (L, L)
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape, dtype=bool)), scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=1, keepdims=True)


def normalize_qk(qk: HeadQK) -> NormalizedQK:
    """AttentionViz's normalisation: keys translated to the queries' mean, then queries ×s and
    keys ÷s so that their mean norms are equal; every attention row checked unchanged.

    Means and norms are over every sentence together (one picture). The translation adds
    q·c to every score of a row (one query, all its keys): softmax is unchanged by a constant
    per row. The scaling leaves each q·k as it was.

    Args:
        qk: a :class:`HeadQK`.

    Returns:
        :class:`NormalizedQK`, with ``row_change`` the largest change of any row (float64).

    Raises:
        ValueError: for something that is not a :class:`HeadQK`, or all-zero queries or keys
            (no scale makes their norms equal).
    """
    if not isinstance(qk, HeadQK):
        raise ValueError(f"qk must be a HeadQK, got {type(qk).__name__}")
    all_q, all_k = np.concatenate(qk.queries), np.concatenate(qk.keys)  # (T, E) each
    shift = all_q.mean(axis=0) - all_k.mean(axis=0)  # (E,)
    q_norm = np.linalg.norm(all_q, axis=1).mean()
    k_norm = np.linalg.norm(all_k + shift, axis=1).mean()
    if q_norm == 0 or k_norm == 0:
        raise ValueError(f"mean norms must be positive, got queries {q_norm}, keys {k_norm}")
    factor = math.sqrt(k_norm / q_norm)
    queries = tuple(q * factor for q in qk.queries)
    keys = tuple((k + shift) / factor for k in qk.keys)
    change = 0.0
    for q, k, q2, k2 in zip(qk.queries, qk.keys, queries, keys, strict=True):
        before = attention_rows(q, k, qk.scale, qk.causal)
        after = attention_rows(q2, k2, qk.scale, qk.causal)
        change = max(change, float(np.abs(after - before).max()))
    return NormalizedQK(queries, keys, shift, factor, change)


def joint_points(qk: HeadQK, normalized: NormalizedQK) -> QKPoints:
    """Every normalised query, then every normalised key, as one point set.

    Args:
        qk: the head's :class:`HeadQK` (tokens, languages). normalized: its normalisation.

    Returns:
        :class:`QKPoints` with points (P, E), P = 2·T.
    """
    lengths = [len(t) for t in qk.tokens]
    sentence = np.repeat(np.arange(len(lengths)), lengths)  # (T,)
    position = np.concatenate([np.arange(n) for n in lengths])  # (T,)
    tokens = tuple(tok for sent in qk.tokens for tok in sent)
    languages = tuple(lang for lang, n in zip(qk.languages, lengths, strict=True) for _ in range(n))
    points = np.concatenate([*normalized.queries, *normalized.keys])  # (P, E)
    return QKPoints(
        points=points,
        is_key=np.repeat([False, True], len(tokens)),
        sentence=np.tile(sentence, 2),
        position=np.tile(position, 2),
        tokens=tokens * 2,
        languages=languages * 2,
    )
