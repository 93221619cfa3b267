"""A one-click health check of a loaded decoder, for a model file someone brought.

Three questions a wrongly read file answers badly, each a plain forward pass or two:

* :func:`check_cached_decoding` — does the KV cache give the model it caches? The prompt is
  run one token at a time through the cache and once as a whole; the logits and every
  layer's attention row of each position must agree up to round-off.
* :func:`compare_weights` — how far do the weights as loaded (4-bit codes, bfloat16) move
  the model from a float32 load of the same file, on the same prompt?
* :func:`check_perplexity` — does the model predict plain English? exp of the mean
  next-token cross-entropy on :data:`PERPLEXITY_TEXT`, flagged above
  :data:`PERPLEXITY_WARNING`.

:func:`check_model` runs all three and returns one frozen :class:`ModelCheck`. The decoders
are :class:`~attention_core.pretrained.llama.Decoder` objects (anything with the same
``tokenize``, ``config`` and call); nothing here loads a file or touches the process.

Shapes: N layers, H query heads, L tokens, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attention_core.experiments.decoding import next_token_nll
from attention_core.validation import check_int

CHECK_PROMPT = "The capital of France is Paris, and the capital of Italy is"
"""The fixed prompt of the cache and weights checks."""
CHECK_MAX_TOKENS = 24
"""At most this many of the prompt's tokens are run (a byte-level vocabulary of a few
hundred tokens spells the prompt in about 60)."""
PERPLEXITY_TEXT = (
    "Once upon a time, a little fox lived at the edge of a big forest. Every morning he ran "
    "down to the river to drink, and every evening he came home to his mother. One day he met "
    "a small rabbit who was lost. The fox showed the rabbit the way home, and from that day "
    "on they were best friends."
)
"""A plain English paragraph any working language model predicts well."""
PERPLEXITY_MAX_TOKENS = 128
"""The paragraph is cut to this many tokens (and to the model's context length)."""
PERPLEXITY_WARNING = 25.0
"""Perplexity on :data:`PERPLEXITY_TEXT` above which the check warns. SmolLM2-135M, the
smallest model the lab runs, gives 9.8 on it (int4, bfloat16 and float32 alike; 6–21 on other
plain paragraphs); the same weights with the RoPE layout read wrongly (the half-split
rotation on the GGUF file's interleaved rows, :meth:`Decoder.with_rope_style` with
``reorder_rows=False``) give 51 (32–108 on the others) while still writing fluent-looking
text. 25 lies between the two, about 2.5 times the working model's figure."""


@dataclass(frozen=True)
class CacheCheck:
    """Cached decoding against one full forward pass of the same prompt.

    Attributes:
        tokens: L, the prompt's tokens run.
        logit_difference: max |cached − full| over every position's logits.
        attention_difference: max |cached − full| over every layer's, head's and position's
            attention row (the cached step t gives row t of the full causal map).
    """

    tokens: int
    logit_difference: float
    attention_difference: float


@dataclass(frozen=True)
class WeightsCheck:
    """The weights as loaded against a float32 load of the same file, on the same prompt.

    Attributes:
        weights_dtype: how the checked decoder holds its weights (``"int4"``, ``"bfloat16"``, …).
        reference_dtype: how the reference holds them (``"float32"``).
        tokens: L, the prompt's tokens run.
        logit_difference: max |logits − reference logits| over every position.
        attention_difference: max |A − reference A| over every layer, head and position.
        same_next_token: whether both give the prompt's most likely next token the highest
            logit.
    """

    weights_dtype: str
    reference_dtype: str
    tokens: int
    logit_difference: float
    attention_difference: float
    same_next_token: bool


@dataclass(frozen=True)
class PerplexityCheck:
    """Perplexity of :data:`PERPLEXITY_TEXT` (or another text).

    Attributes:
        tokens: L, the text's tokens run.
        perplexity: exp of the mean next-token cross-entropy over the L − 1 predictions.
        threshold: the warning threshold used (:data:`PERPLEXITY_WARNING` by default).
        suspicious: True when the perplexity lies above the threshold (or is not finite).
    """

    tokens: int
    perplexity: float
    threshold: float
    suspicious: bool


@dataclass(frozen=True)
class ModelCheck:
    """All three checks of one decoder.

    Attributes:
        cache: :class:`CacheCheck`.
        weights: :class:`WeightsCheck`, or None when no float32 reference was given.
        perplexity: :class:`PerplexityCheck`.
    """

    cache: CacheCheck
    weights: WeightsCheck | None
    perplexity: PerplexityCheck


def _prompt_ids(decoder, text: str, max_tokens: int) -> torch.Tensor:
    """(1, L) ids of ``text``, cut to ``max_tokens`` and the context length.

    Raises:
        ValueError: for a blank text, or one of fewer than 2 tokens.
    """
    ids = decoder.tokenize(text).input_ids[: min(max_tokens, decoder.config.context_length)]
    if len(ids) < 2:
        raise ValueError(f"the check needs a text of at least 2 tokens, got {text!r}")
    return torch.tensor([ids], dtype=torch.int64)  # (1, L)


def _max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| in float64 (inf when either holds a non-finite value)."""
    difference = (a.double() - b.double()).abs()
    return float(difference.max()) if bool(difference.isfinite().all()) else math.inf


def check_cached_decoding(
    decoder, text: str = CHECK_PROMPT, *, max_tokens: int = CHECK_MAX_TOKENS
) -> CacheCheck:
    """Run ``text`` token by token with the KV cache and compare with one full forward pass.

    Step t feeds token t with the cache of tokens 0..t−1 and returns (1, 1, V) logits and,
    per layer, a (1, H, 1, t + 1) attention row; the full pass returns (1, L, V) logits and
    (1, H, L, L) maps, whose row t must equal step t's row.

    Args:
        decoder: a Decoder with exact attention (a positional variant cannot use a cache).
        text: the prompt (default :data:`CHECK_PROMPT`).
        max_tokens: run at most this many tokens, >= 2.

    Returns:
        :class:`CacheCheck`.

    Raises:
        ValueError: for a text of fewer than 2 tokens or a bad ``max_tokens``.
    """
    max_tokens = check_int("max_tokens", max_tokens, low=2)
    ids = _prompt_ids(decoder, text, max_tokens)
    length = ids.shape[1]
    full = decoder(ids, need_weights=True)  # logits (1, L, V), N × (1, H, L, L)
    logit_gap, attention_gap = 0.0, 0.0
    cache = None
    for t in range(length):
        step = decoder(ids[:, t : t + 1], need_weights=True, cache=cache)  # (1, 1, V)
        cache = step.cache
        logit_gap = max(logit_gap, _max_difference(step.logits[0, 0], full.logits[0, t]))
        for cached, whole in zip(step.attentions, full.attentions, strict=True):
            row = whole[0, :, t, : t + 1]  # (H, t + 1): the causal row, future keys left out
            attention_gap = max(attention_gap, _max_difference(cached[0, :, 0], row))
    return CacheCheck(length, logit_gap, attention_gap)


def compare_weights(
    decoder, reference, text: str = CHECK_PROMPT, *, max_tokens: int = CHECK_MAX_TOKENS
) -> WeightsCheck:
    """Compare a decoder with a float32 load of the same file on one prompt.

    Args:
        decoder: the decoder as loaded. reference: the same file loaded in float32.
        text: the prompt (default :data:`CHECK_PROMPT`).
        max_tokens: run at most this many tokens, >= 2.

    Returns:
        :class:`WeightsCheck` (max differences of the (1, L, V) logits and the N (1, H, L, L)
        attention maps).

    Raises:
        ValueError: when the two decoders' architectures differ, for a text of fewer than 2
            tokens, or a bad ``max_tokens``.
    """
    max_tokens = check_int("max_tokens", max_tokens, low=2)
    if decoder.config != reference.config:
        raise ValueError(
            f"the reference must be the same model: {reference.config} is not {decoder.config}"
        )
    ids = _prompt_ids(decoder, text, max_tokens)
    out = decoder(ids, need_weights=True)  # logits (1, L, V), N × (1, H, L, L)
    ref = reference(ids, need_weights=True)
    attention_gap = max(
        _max_difference(a, b) for a, b in zip(out.attentions, ref.attentions, strict=True)
    )
    return WeightsCheck(
        weights_dtype=decoder.weights_dtype,
        reference_dtype=reference.weights_dtype,
        tokens=ids.shape[1],
        logit_difference=_max_difference(out.logits, ref.logits),
        attention_difference=attention_gap,
        same_next_token=int(out.logits[0, -1].argmax()) == int(ref.logits[0, -1].argmax()),
    )


def check_perplexity(
    decoder,
    text: str = PERPLEXITY_TEXT,
    *,
    threshold: float = PERPLEXITY_WARNING,
    max_tokens: int = PERPLEXITY_MAX_TOKENS,
) -> PerplexityCheck:
    """Perplexity of ``text``: exp of the mean cross-entropy of each next token (float64).

    Args:
        decoder: a Decoder.
        text: the text (default :data:`PERPLEXITY_TEXT`).
        threshold: warn above this perplexity, > 1.
        max_tokens: run at most this many tokens, >= 2 (and at most the context length).

    Returns:
        :class:`PerplexityCheck`.

    Raises:
        ValueError: for a text of fewer than 2 tokens, a threshold not above 1 or a bad
            ``max_tokens``.
    """
    max_tokens = check_int("max_tokens", max_tokens, low=2)
    if not isinstance(threshold, int | float) or not threshold > 1:
        raise ValueError(f"threshold must be a number above 1, got {threshold!r}")
    ids = _prompt_ids(decoder, text, max_tokens)
    logits = decoder(ids).logits  # (1, L, V)
    value = math.exp(float(next_token_nll(logits, ids).mean()))
    suspicious = not math.isfinite(value) or value > threshold
    return PerplexityCheck(ids.shape[1], value, float(threshold), suspicious)


def check_model(decoder, reference=None) -> ModelCheck:
    """Run the three checks of the module on ``decoder``.

    Args:
        decoder: the decoder as loaded.
        reference: the same file loaded in float32 for :func:`compare_weights`, or None to
            leave that check out (e.g. when the float32 weights would not fit the budget).

    Returns:
        :class:`ModelCheck`.

    Raises:
        ValueError: as the three checks.
    """
    weights = None if reference is None else compare_weights(decoder, reference)
    return ModelCheck(check_cached_decoding(decoder), weights, check_perplexity(decoder))
