"""What a real model loses without a head: the copy test on a repeated random sequence,
true ablation effects, and their first-order estimate.

* :func:`repeated_tokens` and :func:`copy_test`: BOS + random tokens repeated once; the loss
  on each copy, with any heads turned off (:func:`copy_tests`: several sets side by side).
* :func:`ranked_heads` and :func:`control_heads`: which heads to turn off, and their matched
  control.
* :func:`attribution`: the first-order estimate of each head's zero-ablation effect on the
  loss, from one forward and one backward pass; :func:`ablation_effects` measures the true
  effects, one ablation per head.

What each head does (its pattern scores and label) is :mod:`~attention_core.experiments.heads`'s.
Layer and head indices are 0-based everywhere. Ablation is zero-ablation unless
``ablation="mean"`` is passed (:mod:`attention_core.pretrained.ablation`).

Shapes: N layers, H heads, L tokens, V vocabulary, B ablations side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from attention_core.experiments.heads import as_ids, readonly
from attention_core.pretrained.ablation import head_multipliers
from attention_core.pretrained.llama import Decoder
from attention_core.validation import check_int

BOS_TOKEN = "<|im_start|>"
"""SmolLM2's beginning-of-sequence token (the GGUF file's ``tokenizer.ggml.bos_token_id``)."""
MAX_REPEAT_LENGTH = 1024
ATTRIBUTION_BATCH = 4
"""Ablations run side by side in :func:`ablation_effects` (their logits are B × L × V)."""


@dataclass(frozen=True)
class CopyTest:
    """The loss on the two copies of a repeated random sequence.

    Attributes:
        first: mean next-token loss (nats) over the first copy's ``length`` tokens.
        second: the same over the second copy's tokens.
        losses: read-only (2 · length,) float64 loss of every token after BOS.
    """

    first: float
    second: float
    losses: np.ndarray


def _check_decoder(model, what: str) -> Decoder:
    if not isinstance(model, Decoder):
        raise ValueError(f"{what} needs a Decoder (next-token loss), got {type(model).__name__}")
    return model


def repeated_tokens(model, length: int, seed: int) -> np.ndarray:
    """A start token (:func:`start_token`), then ``length`` random distinct tokens, then the
    same tokens again.

    The tokens are drawn without replacement from the vocabulary minus the control tokens
    (``<|endoftext|>``, ``<|im_start|>`` and the other added tokens), with NumPy's seeded
    generator: the same seed gives the same sequence everywhere.

    Args:
        model: a Decoder. length: tokens per copy, in [1, 1024]. seed: >= 0.

    Returns:
        Read-only int64 array of 1 + 2 · length token ids.

    Raises:
        ValueError: for a non-decoder, or a length or seed out of range.
    """
    model = _check_decoder(model, "repeated_tokens")
    length = check_int("length", length, low=1, high=MAX_REPEAT_LENGTH)
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    special = set(model.tokenizer.get_added_tokens_decoder())
    allowed = np.setdiff1d(np.arange(model.config.vocab_size), sorted(special))  # (V',)
    draw = rng.choice(allowed, size=length, replace=False)  # (length,)
    return readonly(np.concatenate([[start_token(model)], draw, draw]).astype(np.int64))


def start_token(model: Decoder) -> int:
    """The id a repeated sequence starts with: :data:`BOS_TOKEN` where the vocabulary has
    it (SmolLM2, Qwen), else the BOS the tokenizer itself puts before a text (Llama's), else
    the first control token, else id 0."""
    tokenizer = model.tokenizer
    named = tokenizer.token_to_id(BOS_TOKEN)
    if named is not None:
        return named
    own = tokenizer.encode("").ids
    if own:
        return own[0]
    return min(tokenizer.get_added_tokens_decoder(), default=0)


def token_losses(model, input_ids, *, ablate=(), ablation: str = "zero") -> np.ndarray:
    """The next-token loss (nats, float64) at every position, with heads turned off.

    Args:
        model: a Decoder. input_ids: L >= 2 token ids.
        ablate, ablation: as :meth:`Decoder.forward` (0-based (layer, head) pairs).

    Returns:
        Read-only (L − 1,) array: entry p is −log P(token p+1 | tokens 0..p).

    Raises:
        ValueError: for fewer than 2 tokens or a bad ablation.
    """
    model = _check_decoder(model, "token_losses")
    ids = as_ids(input_ids)  # (1, L)
    if ids.shape[1] < 2:
        raise ValueError(f"token_losses needs at least 2 tokens, got {ids.shape[1]}")
    logits = model(ids, ablate=ablate, ablation=ablation).logits[0, :-1]  # (L-1, V)
    log_probs = F.log_softmax(logits.double(), dim=-1)  # (L-1, V)
    nll = -log_probs.gather(1, ids[0, 1:, None])[:, 0]  # (L-1,)
    return readonly(nll.numpy().copy())


def copy_test(model, length: int, seed: int, *, ablate=(), ablation: str = "zero") -> CopyTest:
    """The loss on each copy of :func:`repeated_tokens`, with heads turned off.

    Args:
        model: a Decoder. length, seed: as :func:`repeated_tokens`.
        ablate, ablation: as :meth:`Decoder.forward`.

    Returns:
        :class:`CopyTest`: the first copy's tokens cannot be predicted (about ln V nats at
        random); a model that copies predicts the second copy's.

    Raises:
        ValueError: as :func:`repeated_tokens` and :meth:`Decoder.forward`.
    """
    ids = repeated_tokens(model, length, seed)
    losses = token_losses(model, ids, ablate=ablate, ablation=ablation)  # (2·length,)
    first, second = losses[:length].mean(), losses[length:].mean()
    return CopyTest(float(first), float(second), losses)


def copy_tests(
    model, length: int, seed: int, ablates: Sequence, *, ablation: str = "zero"
) -> tuple[CopyTest, ...]:
    """:func:`copy_test` for several sets of heads turned off, in one batched forward pass.

    Item b of the batch scales the heads of ``ablates[b]`` by 0 (:meth:`Decoder.forward`'s
    ``head_scale``, (B, N, H)); every item sees the same tokens, so each result equals
    :func:`copy_test` with ``ablate=ablates[b]`` up to float rounding of the batched matrix
    products.

    Args:
        model: a Decoder. length, seed: as :func:`repeated_tokens`.
        ablates: one or more sequences of 0-based (layer, head) pairs (may be empty).
        ablation: as :meth:`Decoder.forward`.

    Returns:
        One :class:`CopyTest` per entry of ``ablates``, in order.

    Raises:
        ValueError: for no entries, a bad pair (named), or as :func:`repeated_tokens`.
    """
    ids = as_ids(repeated_tokens(model, length, seed))  # (1, L)
    if isinstance(ablates, str | bytes) or len(ablates) == 0:
        raise ValueError(f"ablates must hold at least one set of heads, got {ablates!r}")
    shape = (model.config.num_layers, model.config.num_heads)
    rows = [head_multipliers(shape, pairs, ablation, None)[0] for pairs in ablates]
    scale = torch.cat([torch.ones(1, *shape) if r is None else r for r in rows])  # (B, N, H)
    with torch.inference_mode():
        logits = model(ids.expand(len(rows), -1), head_scale=scale, ablation=ablation).logits
    log_probs = F.log_softmax(logits[:, :-1].double(), dim=-1)  # (B, L-1, V)
    targets = ids[0, 1:].expand(len(rows), -1)[..., None]  # (B, L-1, 1)
    nll = -log_probs.gather(2, targets)[..., 0].numpy()  # (B, L-1)
    return tuple(
        CopyTest(float(row[:length].mean()), float(row[length:].mean()), readonly(row.copy()))
        for row in nll
    )


def ranked_heads(
    scores: np.ndarray, count: int, *, largest: bool = True, layers: Sequence[int] | None = None
) -> tuple[tuple[int, int], ...]:
    """The ``count`` heads with the largest (or smallest) score, optionally among some layers.

    Args:
        scores: (N, H) array (NaN ranks last either way). count: >= 1.
        largest: highest first; ``False`` lowest first.
        layers: 0-based layers to choose from; default all.

    Returns:
        (layer, head) pairs, 0-based, best first (ties by index).

    Raises:
        ValueError: for a non-2-D array, a bad count, or a layer out of range.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be (N, H), got shape {scores.shape}")
    count = check_int("count", count, low=1)
    chosen = range(scores.shape[0]) if layers is None else layers
    if any(not 0 <= int(layer) < scores.shape[0] for layer in chosen):
        raise ValueError(f"layers must lie in [0, {scores.shape[0]}), got {list(chosen)}")
    candidates = [(int(layer), head) for layer in chosen for head in range(scores.shape[1])]
    sign = -1.0 if largest else 1.0
    values = [scores[pair] for pair in candidates]
    order = sorted(range(len(candidates)), key=lambda k: (np.isnan(values[k]), sign * values[k], k))
    return tuple(candidates[k] for k in order[:count])


def control_heads(scores: np.ndarray, chosen) -> tuple[tuple[int, int], ...]:
    """The matched control of a set of heads turned off: as many other heads, the lowest by
    ``scores`` in the chosen heads' own layers, and where those layers have too few left,
    the lowest in the nearest layers (one layer away, then two, …; ties of distance taken
    together).

    Args:
        scores: (N, H) array (NaN ranks last). chosen: 0-based (layer, head) pairs.

    Returns:
        ``len(chosen)`` pairs, none of them chosen, lowest first within each distance
        (fewer only when the model has fewer other heads).

    Raises:
        ValueError: for a non-2-D array or a pair out of range.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be (N, H), got shape {scores.shape}")
    chosen = list(chosen)
    head_multipliers(scores.shape, chosen, "zero", None)  # names a bad pair
    chosen = [(int(layer), int(head)) for layer, head in chosen]
    if not chosen:
        return ()
    own = {layer for layer, _ in chosen}
    control: list[tuple[int, int]] = []
    for distance in range(scores.shape[0]):
        ring = [n for n in range(scores.shape[0]) if min(abs(n - c) for c in own) == distance]
        if not ring:
            continue
        ranked = ranked_heads(scores, scores.size, largest=False, layers=ring)
        control += [pair for pair in ranked if pair not in chosen][: len(chosen) - len(control)]
        if len(control) == len(chosen):
            break
    return tuple(control)


def _positions(positions, length: int) -> list[int]:
    """Checked prediction positions p (predicting token p + 1), default 0..L−2."""
    if positions is None:
        return list(range(length - 1))
    chosen = [int(p) for p in positions]
    if not chosen or any(not 0 <= p < length - 1 for p in chosen):
        raise ValueError(f"positions must be non-empty, in [0, {length - 1}), got {positions}")
    return chosen


def mean_loss(logits: torch.Tensor, ids: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
    """Mean next-token cross-entropy over ``positions``, per batch item.

    Args:
        logits: (B, L, V). ids: (1, L). positions: prediction positions p (token p + 1).

    Returns:
        (B,) float32 tensor.
    """
    index = torch.tensor(positions)  # (P,)
    chosen = logits[:, index].float()  # (B, P, V)
    targets = ids[0, index + 1].expand(chosen.shape[0], -1)  # (B, P)
    return F.cross_entropy(chosen.transpose(1, 2), targets, reduction="none").mean(-1)  # (B,)


def attribution(model, input_ids, *, positions=None) -> np.ndarray:
    """First-order estimate of each head's zero-ablation effect on the mean next-token loss.

    With a multiplier s on every head's output (:meth:`Decoder.forward`'s ``head_scale``),
    loss(s = 0) − loss(s = 1) ≈ −∂loss/∂s at s = 1: one forward and one backward pass give
    all N · H estimates (positive: the loss rises when the head is turned off).

    Args:
        model: a Decoder with float32 or bfloat16 weights (torch's int4 kernel has no
            derivative: load a float twin for this).
        input_ids: L >= 2 token ids.
        positions: the positions p whose prediction of token p + 1 enters the loss;
            default every position but the last.

    Returns:
        Read-only float64 (N, H) array (nats).

    Raises:
        ValueError: for an encoder, int4 weights, fewer than 2 tokens or bad positions.
    """
    model = _check_decoder(model, "attribution")
    if model.weights_dtype == "int4":
        raise ValueError(
            "attribution needs float weights (torch's int4 kernel has no derivative): load "
            "the decoder with weights_dtype='bfloat16' or 'float32'"
        )
    ids = as_ids(input_ids)  # (1, L)
    chosen = _positions(positions, ids.shape[1])
    scale = torch.ones(model.config.num_layers, model.config.num_heads, requires_grad=True)
    logits = model(ids, head_scale=scale, grad=True).logits  # (1, L, V)
    mean_loss(logits, ids, chosen).sum().backward()
    return readonly(-scale.grad.double().numpy())


def ablation_effects(model, input_ids, heads, *, positions=None, on_pass=None) -> np.ndarray:
    """The true change in the mean next-token loss when each listed head alone is
    zero-ablated: loss(head off) − loss(all on), one forward pass per head (batched).

    Args:
        model: a Decoder (any weights). input_ids: L >= 2 token ids.
        heads: 0-based (layer, head) pairs. positions: as :func:`attribution`.
        on_pass: called as ``on_pass(done, total)`` after each forward pass, counting the
            heads measured (the intact pass counts as one); a progress bar's hook.

    Returns:
        Read-only float64 (len(heads),) array (nats).

    Raises:
        ValueError: for an encoder, a bad pair, fewer than 2 tokens or bad positions.
    """
    model = _check_decoder(model, "ablation_effects")
    ids = as_ids(input_ids)  # (1, L)
    chosen = _positions(positions, ids.shape[1])
    shape = (model.config.num_layers, model.config.num_heads)
    heads = [tuple(pair) for pair in heads]
    head_multipliers(shape, heads, "zero", None)  # checks every pair, naming a bad one
    with torch.inference_mode():
        base = float(mean_loss(model(ids).logits, ids, chosen)[0])
        effects = []
        _report(on_pass, 1, len(heads) + 1)
        for start in range(0, len(heads), ATTRIBUTION_BATCH):
            batch = heads[start : start + ATTRIBUTION_BATCH]
            scale = torch.ones(len(batch), *shape)  # (B, N, H)
            for item, (layer, head) in enumerate(batch):
                scale[item, layer, head] = 0.0
            logits = model(ids.expand(len(batch), -1), head_scale=scale).logits  # (B, L, V)
            effects += (mean_loss(logits, ids, chosen) - base).tolist()
            _report(on_pass, 1 + len(effects), len(heads) + 1)
    return readonly(np.asarray(effects, dtype=np.float64))


def ablation_forward_calls(heads: int) -> int:
    """The forward calls :func:`ablation_effects` makes for ``heads`` heads: the intact pass
    (batch 1), then one call per :data:`ATTRIBUTION_BATCH` heads (batch up to that).

    Raises:
        ValueError: for a negative or non-integer count.
    """
    check_int("heads", heads, low=0)
    return 1 + -(-heads // ATTRIBUTION_BATCH)  # ceil(heads / B)


def _report(on_pass, done: int, total: int) -> None:
    """Call a progress hook, if any, with the passes done and in all."""
    if on_pass is not None:
        on_pass(done, total)
