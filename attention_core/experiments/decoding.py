"""What a real decoder (SmolLM2-135M) shows about causal attention, the KV cache, RoPE and sinks.

* :func:`measure_sinks` — the share of attention each layer and head puts on the first token,
  and how prepending ``<|endoftext|>`` moves that "sink" to the new first token.
* :func:`window_perplexities` — perplexity of a text under full causal attention, a causal
  sliding window (the ``local`` variant), and the same window with the first tokens kept
  visible (a mask from :mod:`attention_core.masks`): why streaming decoders keep sink tokens.
* :func:`check_rope_shift` — the same text starting at position k gives the same attention
  maps (RoPE depends only on distances); permuting the tokens does not commute with them.
* :func:`compare_cached_decoding` — greedy decoding with the KV cache against full
  recomputation at every step.

Shapes: N layers, H query heads, L tokens, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch.nn import functional as F

from attention_core import masks
from attention_core.validation import check_bool, check_int

ENDOFTEXT = "<|endoftext|>"
SINK_HEAD_SHARE = 0.5
WINDOW_COLUMNS = ("setting", "window_size", "num_sinks", "perplexity")


def _ids(decoder, text: str, prepend: str | None = None) -> tuple[list[str], torch.Tensor]:
    """Tokens and (1, L) ids of ``text``, optionally after one control token."""
    tokenized = decoder.tokenize(text)
    tokens, ids = list(tokenized.tokens), list(tokenized.input_ids)
    if prepend is not None:
        tokens, ids = [prepend, *tokens], [decoder.tokenizer.token_to_id(prepend), *ids]
    return tokens, torch.tensor([ids], dtype=torch.int64)  # (1, L)


def attention_share_on_key(attentions, key: int = 0) -> torch.Tensor:
    """Mean attention that the queries after ``key`` put on ``key``, per layer and head.

    Query rows up to ``key`` are left out: row 0 of a causal map can only look at token 0.

    Args:
        attentions: one (1, H, L, L) tensor per layer (``DecoderOutput.attentions``).
        key: the key position, 0 <= key < L − 1.

    Returns:
        (N, H) float tensor of shares in [0, 1].

    Raises:
        ValueError: when ``key`` leaves no later query.
    """
    stacked = torch.stack([a[0] for a in attentions])  # (N, H, L, L)
    length = stacked.shape[-1]
    key = check_int("key", key, low=0, high=length - 2)
    return stacked[:, :, key + 1 :, key].mean(dim=-1)  # (N, H)


@dataclass(frozen=True)
class SinkMeasurement:
    """Where the attention of a text goes, with and without ``<|endoftext|>`` in front.

    Attributes:
        tokens: the tokens of the text as run (with the prepended token when there is one).
        on_first: (N, H) share of attention on token 0.
        on_first_text: (N, H) share on the text's first token (token 1 when one was
            prepended, else the same as ``on_first``).
    """

    tokens: list[str]
    on_first: torch.Tensor
    on_first_text: torch.Tensor

    @property
    def layer_shares(self) -> torch.Tensor:
        """(N,) share on token 0 averaged over the heads of each layer."""
        return self.on_first.mean(dim=1)

    @property
    def sink_heads(self) -> int:
        """Heads that put more than half of their attention on token 0."""
        return int((self.on_first > SINK_HEAD_SHARE).sum())


def measure_sinks(decoder, text: str, *, prepend_endoftext: bool = False) -> SinkMeasurement:
    """Measure the attention sink of every layer and head on one text.

    Args:
        decoder: a :class:`~attention_core.pretrained.llama.Decoder`.
        text: a non-blank text of at least 2 tokens.
        prepend_endoftext: run ``<|endoftext|>`` + text, to watch the sink move to it.

    Returns:
        :class:`SinkMeasurement`.

    Raises:
        ValueError: for a blank or one-token text.
    """
    prepend_endoftext = check_bool("prepend_endoftext", prepend_endoftext)
    tokens, ids = _ids(decoder, text, ENDOFTEXT if prepend_endoftext else None)
    if ids.shape[1] < 2 + int(prepend_endoftext):
        raise ValueError(f"text must have at least 2 tokens, got {tokens!r}")
    attentions = decoder(ids, need_weights=True).attentions  # N × (1, H, L, L)
    on_first = attention_share_on_key(attentions, 0)
    on_text = attention_share_on_key(attentions, 1) if prepend_endoftext else on_first
    return SinkMeasurement(tokens=tokens, on_first=on_first, on_first_text=on_text)


NLL_ROWS = 16
"""Positions per block of :func:`next_token_nll`: a float64 copy of a block's logits and
its log-softmax are 2 × 16 × V × 8 bytes (12 MiB for SmolLM2's 49,152 tokens), where all
75 positions of the sink paragraph at once took 56 MiB."""


def next_token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of each next token, in float64, :data:`NLL_ROWS` positions
    at a time (each row's log-softmax is its own: the blocks change no number).

    Args:
        logits: (1, L, V). ids: (1, L).

    Returns:
        (L − 1,) NLL of token t + 1 given tokens up to t.
    """
    rows = logits.shape[1] - 1
    nll = torch.empty(rows, dtype=torch.float64, device=logits.device)  # (L − 1,)
    for start in range(0, rows, NLL_ROWS):
        stop = min(start + NLL_ROWS, rows)
        log_probs = F.log_softmax(logits[0, start:stop].double(), dim=-1)  # (n, V)
        nll[start:stop] = -log_probs.gather(1, ids[0, start + 1 : stop + 1, None]).squeeze(1)
    return nll


def perplexity(decoder, ids: torch.Tensor, *, mask: torch.Tensor | None = None) -> float:
    """exp(mean NLL) of ``ids`` under ``decoder`` (its variant), with an optional extra mask.

    Args:
        decoder: a Decoder. ids: (1, L) token ids, L >= 2.
        mask: extra (L, L) bool mask, ANDed with the causal one.

    Returns:
        The perplexity (>= 1).

    Raises:
        ValueError: as :meth:`Decoder.forward`, or when L < 2.
    """
    if ids.shape[-1] < 2:
        raise ValueError(f"perplexity needs at least 2 tokens, got shape {tuple(ids.shape)}")
    logits = decoder(ids, mask=mask).logits  # (1, L, V)
    return math.exp(float(next_token_nll(logits, ids).mean()))


def window_perplexities(
    decoder, text: str, *, window_size: int = 16, num_sinks: int = 4
) -> pd.DataFrame:
    """Perplexity of ``text`` under full causal attention and two sliding windows.

    The window is the ``local`` variant (|i − j| <= window_size // 2) cut by the causal mask,
    so each query sees itself and the window_size // 2 tokens before it. "window + sinks"
    also keeps the first ``num_sinks`` tokens visible, through the exact ``scaled`` variant
    and the mask ``local OR sinks`` built with :mod:`attention_core.masks`.

    Args:
        decoder: a Decoder. text: a text well longer than the window.
        window_size: the ``local`` variant's window, >= 2.
        num_sinks: first tokens kept visible, >= 1.

    Returns:
        DataFrame with columns :data:`WINDOW_COLUMNS`, one row per setting
        (``"full"``, ``"window"``, ``"window + sinks"``).

    Raises:
        ValueError: for a bad window or sink count, or a text of fewer than 2 tokens.
    """
    window_size = check_int("window_size", window_size, low=2)
    num_sinks = check_int("num_sinks", num_sinks, low=1)
    _, ids = _ids(decoder, text)
    length = ids.shape[1]
    windowed = decoder.with_variant("local", window_size=window_size)
    with_sinks = masks.combine(
        masks.local(length, window_size), masks.sinks(length, num_sinks), how="or"
    )  # (L, L)
    exact = decoder.with_variant("scaled")
    rows = [
        ("full", None, 0, perplexity(exact, ids)),
        ("window", window_size, 0, perplexity(windowed, ids)),
        ("window + sinks", window_size, num_sinks, perplexity(exact, ids, mask=with_sinks)),
    ]
    table = pd.DataFrame(rows, columns=list(WINDOW_COLUMNS))
    return table.astype({"window_size": "Int64"})  # "full" has no window: <NA>


@dataclass(frozen=True)
class RopeShiftResult:
    """How attention maps react to shifting and to permuting the tokens.

    Attributes:
        shift: positions every token was moved by.
        shifted_difference: max |A(text at k) − A(text at 0)| over all maps.
        permuted_difference: max |A(P·text) − P A(text) Pᵀ| over all maps: large, because a
            causal decoder with RoPE is not permutation-equivariant.
    """

    shift: int
    shifted_difference: float
    permuted_difference: float


def check_rope_shift(decoder, text: str, shift: int, *, seed: int = 0) -> RopeShiftResult:
    """Shift a text by ``shift`` positions and permute its tokens; compare the maps.

    Args:
        decoder: a Decoder. text: a text of at least 2 tokens.
        shift: positions to move every token by, >= 0 (the first token sits at ``shift``).
        seed: seed of the token permutation.

    Returns:
        :class:`RopeShiftResult`.

    Raises:
        ValueError: for a negative shift, a shift past the context length, or a text of
            fewer than 2 tokens.
    """
    shift = check_int("shift", shift, low=0)
    _, ids = _ids(decoder, text)
    if ids.shape[1] < 2:
        raise ValueError(f"text must have at least 2 tokens, got {ids.shape[1]}")
    base = torch.stack(decoder(ids, need_weights=True).attentions)  # (N, 1, H, L, L)
    moved = torch.stack(
        decoder(ids, need_weights=True, position_offset=shift).attentions
    )  # (N, 1, H, L, L)
    order = torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(seed))
    permuted = torch.stack(decoder(ids[:, order], need_weights=True).attentions)
    expected = base[..., order, :][..., order]  # P A Pᵀ: rows and columns reordered
    return RopeShiftResult(
        shift=shift,
        shifted_difference=float((moved - base).abs().max()),
        permuted_difference=float((permuted - expected).abs().max()),
    )


@dataclass(frozen=True)
class CachedDecoding:
    """Greedy decoding with the KV cache, checked against full recomputation.

    Attributes:
        token_ids: the generated ids.
        max_logit_difference: per step, max |cached logits − full recomputation logits|.
        cache_bytes: per step, the bytes the cache holds after that step.
    """

    token_ids: list[int]
    max_logit_difference: list[float]
    cache_bytes: list[int]


def compare_cached_decoding(decoder, prompt: str, steps: int) -> CachedDecoding:
    """Decode ``steps`` greedy tokens with the cache, recomputing the whole text each step.

    Args:
        decoder: a Decoder (exact attention for equal results). prompt: a non-blank text.
        steps: tokens to generate, >= 1.

    Returns:
        :class:`CachedDecoding`.

    Raises:
        ValueError: for a blank prompt or a bad ``steps``.
    """
    steps = check_int("steps", steps, low=1)
    _, ids = _ids(decoder, prompt)
    out = decoder(ids)
    generated: list[int] = []
    differences: list[float] = []
    sizes: list[int] = []
    for _ in range(steps):
        token = int(out.logits[0, -1].argmax())
        generated.append(token)
        out = decoder(torch.tensor([[token]]), cache=out.cache)  # (1, 1, V) logits
        full = decoder(torch.cat((ids, torch.tensor([generated])), dim=1))  # (1, L + t, V)
        differences.append(float((full.logits[0, -1] - out.logits[0, -1]).abs().max()))
        sizes.append(out.cache.nbytes)
    return CachedDecoding(generated, differences, sizes)
