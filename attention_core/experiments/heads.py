"""Heads at work: what each head of a real model does, and what the model loses without it.

* :func:`census`: per head, scores of the patterns the tutorial names, from one forward pass
  with weights, and a label per head from the rule in :func:`head_labels`.
* :func:`repeated_tokens` and :func:`copy_test`: BOS + random tokens repeated once; the loss
  on each copy, with any heads turned off.
* :func:`attribution`: the first-order estimate of each head's zero-ablation effect on the
  loss, from one forward and one backward pass; :func:`ablation_effects` measures the true
  effects, one ablation per head.

Layer and head indices are 0-based everywhere (layer 18 head 6 is the 19th layer's 7th
head). Ablation is zero-ablation unless ``ablation="mean"`` is passed
(:mod:`attention_core.pretrained.ablation`). Scores are averaged over the query rows
i >= 1 (row 0 of a causal map can only look at itself), except entropy and mean distance,
which are :mod:`~attention_core.experiments.head_stats`'s (all rows).

Shapes: N layers, H heads, L tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch
from torch.nn import functional as F

from attention_core.experiments.head_stats import head_entropy, mean_distance
from attention_core.pretrained.ablation import head_multipliers
from attention_core.pretrained.llama import Decoder
from attention_core.pretrained.probe import link_weights
from attention_core.validation import check_int

LOCAL_RADIUS = 3
"""``local`` counts the weight on keys within this many positions of the query."""
BOS_TOKEN = "<|im_start|>"
"""SmolLM2's beginning-of-sequence token (the GGUF file's ``tokenizer.ggml.bos_token_id``)."""
MAX_REPEAT_LENGTH = 1024
ATTRIBUTION_BATCH = 4
"""Ablations run side by side in :func:`ablation_effects` (their logits are B × L × V)."""
# The labelling rule (head_labels): the first test that passes names the head.
INDUCTION_THRESHOLD = 0.4
PREVIOUS_THRESHOLD = 0.5
SELF_THRESHOLD = 0.5
SINK_THRESHOLD = 0.5
LOCAL_THRESHOLD = 0.7
BROAD_THRESHOLD = 0.7
"""A head is ``broad`` when its entropy is at least this share of a uniform row's."""
LABELS = ("induction", "previous-token", "self", "first-token", "local", "broad", "mixed")
SCORE_NAMES = (
    "previous_token",
    "sink",
    "induction",
    "self",
    "local",
    "entropy",
    "mean_distance",
)


@dataclass(frozen=True)
class HeadCensus:
    """Every head's scores and label.

    Attributes:
        scores: name (see :data:`SCORE_NAMES`, plus ``"link"`` when asked) -> read-only
            float64 (N, H) array; ``induction`` is NaN everywhere when no token repeats.
        labels: read-only (N, H) array of strings from :data:`LABELS`.
        input_ids: the L token ids the census ran on.
    """

    scores: Mapping[str, np.ndarray]
    labels: np.ndarray
    input_ids: tuple[int, ...]


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


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` itself, made read-only (results handed to cached callers must not change).

    Args:
        array: any NumPy array.

    Returns:
        The same array, no longer writeable.
    """
    array.setflags(write=False)
    return array


def label_by_rules(rules: Sequence[tuple[str, np.ndarray]], default: str) -> np.ndarray:
    """A label per head: the first rule whose (N, H) mask holds, else ``default``.

    Args:
        rules: ``(label, mask)`` pairs in order of precedence, every mask (N, H) of bools.
        default: the label where no rule holds.

    Returns:
        (N, H) array of strings.
    """
    labels = np.full(rules[0][1].shape, default, dtype=object)  # (N, H)
    for name, holds in reversed(rules):  # earlier rules overwrite later ones
        labels[holds] = name
    return labels


def as_ids(input_ids) -> torch.Tensor:
    """Token ids as the (1, L) int64 tensor the models take.

    Args:
        input_ids: a sequence of ints, a 1-D array or tensor, or a (1, L) tensor.

    Returns:
        (1, L) int64 tensor.

    Raises:
        ValueError: for an empty input, a batch of more than one, or non-integers.
    """
    ids = torch.as_tensor(np.array(input_ids))  # a copy: the input may be read-only
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1 or ids.numel() == 0 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(
            f"input_ids must be a non-empty sequence of token ids, got shape "
            f"{tuple(ids.shape)} of {ids.dtype}"
        )
    return ids.long()[None]  # (1, L)


def _maps(model, ids: torch.Tensor) -> torch.Tensor:
    """(N, H, L, L) float32 weights of one forward pass (decoder or encoder)."""
    with torch.inference_mode():
        attentions = model(ids, need_weights=True).attentions  # N × (1, H, L, L)
    return torch.cat(attentions, dim=0).float()  # (N, H, L, L)


def _induction(weights: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """(N, H) mean weight of each repeated token's query on the key after its most recent
    earlier occurrence; NaN when no token repeats."""
    last: dict[int, int] = {}
    queries, keys = [], []
    for i, token in enumerate(ids):
        if token in last:
            queries.append(i)
            keys.append(last[token] + 1)
        last[token] = i
    if not queries:
        return torch.full(weights.shape[:2], float("nan"))  # (N, H)
    return weights[:, :, queries, keys].mean(dim=-1)  # (N, H, q) -> (N, H)


def pattern_scores(weights: torch.Tensor, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The census scores of (N, H, L, L) maps (see :func:`census` for the definitions).

    Args:
        weights: (N, H, L, L) attention weights of one sequence. ids: its L token ids.

    Returns:
        dict from each name in :data:`SCORE_NAMES` to a float64 (N, H) array.

    Raises:
        ValueError: when the maps are not (N, H, L, L) with L = len(ids).
    """
    if weights.dim() != 4 or weights.shape[-2:] != (len(ids), len(ids)):
        raise ValueError(f"weights {tuple(weights.shape)} do not match {len(ids)} token ids")
    length = weights.shape[-1]
    nan = torch.full(weights.shape[:2], float("nan"))  # (N, H), for L = 1
    rows = weights[:, :, 1:]  # (N, H, L-1, L): the queries i >= 1
    offsets = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # (L, L): i - j
    near = (offsets.abs() <= LOCAL_RADIUS)[1:].float()  # (L-1, L)
    has_rows = length > 1
    scores = {
        "previous_token": weights.diagonal(-1, -2, -1).mean(-1) if has_rows else nan,
        "sink": rows[..., 0].mean(-1) if has_rows else nan,
        "induction": _induction(weights, ids),
        "self": weights.diagonal(0, -2, -1)[..., 1:].mean(-1) if has_rows else nan,
        "local": (rows * near).sum(-1).mean(-1) if has_rows else nan,
    }
    result = {name: value.double().numpy() for name, value in scores.items()}
    result["entropy"] = head_entropy(weights.numpy())  # (N, H)
    result["mean_distance"] = mean_distance(weights.numpy())  # (N, H)
    return result


def uniform_entropy(length: int, causal: bool) -> float:
    """Mean row entropy (nats) of uniform attention: ln(i + 1) averaged over the queries of
    a causal map, ln L for a full one."""
    check_int("length", length, low=1)
    if not causal:
        return float(np.log(length))
    return float(np.log(np.arange(1, length + 1)).mean())


def pattern_rules(
    scores: Mapping[str, np.ndarray], length: int, causal: bool
) -> tuple[tuple[str, np.ndarray], ...]:
    """The ``(label, (N, H) mask)`` rules a decoder's and an encoder's heads share, in order
    of precedence: ``self``, ``first-token``, ``local``, ``broad`` (rules 3 to 6 of
    :func:`head_labels`); ``scores``, ``length`` and ``causal`` as there."""
    return (
        ("self", scores["self"] >= SELF_THRESHOLD),
        ("first-token", scores["sink"] >= SINK_THRESHOLD),
        ("local", scores["local"] >= LOCAL_THRESHOLD),
        ("broad", scores["entropy"] >= BROAD_THRESHOLD * uniform_entropy(length, causal)),
    )


def head_labels(scores: Mapping[str, np.ndarray], length: int, causal: bool) -> np.ndarray:
    """One label per head from its census scores; the first rule that holds names it.

    1. ``induction``: induction >= :data:`INDUCTION_THRESHOLD` (when some token repeats);
    2. ``previous-token``: previous_token >= :data:`PREVIOUS_THRESHOLD`;
    3. ``self``: self >= :data:`SELF_THRESHOLD`;
    4. ``first-token`` (the gallery's global pattern as an attention sink): sink >=
       :data:`SINK_THRESHOLD`;
    5. ``local``: local >= :data:`LOCAL_THRESHOLD`;
    6. ``broad``: entropy >= :data:`BROAD_THRESHOLD` × :func:`uniform_entropy`;
    7. ``mixed``: none of these.

    Args:
        scores: the census scores (at least :data:`SCORE_NAMES`), (N, H) each.
        length: L, the tokens the maps had. causal: whether the maps were causal.

    Returns:
        (N, H) array of strings from :data:`LABELS`.
    """
    rules = (
        ("induction", np.nan_to_num(scores["induction"], nan=0.0) >= INDUCTION_THRESHOLD),
        ("previous-token", scores["previous_token"] >= PREVIOUS_THRESHOLD),
        *pattern_rules(scores, length, causal),
    )
    return label_by_rules(rules, LABELS[-1])


def census(
    model, input_ids, *, link: tuple[Sequence[int], Sequence[int]] | None = None
) -> HeadCensus:
    """Score and label every head from one forward pass with weights.

    Scores, over query rows i >= 1 of each (L, L) map w:
    ``previous_token`` mean w[i, i−1]; ``sink`` mean w[i, 0]; ``self`` mean w[i, i];
    ``local`` mean Σ_{|i−j| <= 3} w[i, j]; ``induction``: for each query i whose token
    occurred earlier, w[i, j+1] with j its most recent earlier occurrence, averaged over those
    queries (NaN when no token repeats); ``entropy`` and ``mean_distance`` as
    :mod:`~attention_core.experiments.head_stats` (all rows); with ``link``, ``link``: the
    weight the query tokens put on the key tokens (the Real model page's pronoun →
    antecedent score, :func:`~attention_core.pretrained.probe.link_weights`).

    Args:
        model: a :class:`~attention_core.pretrained.llama.Decoder` or an encoder.
        input_ids: the L token ids (see :func:`as_ids`), within the model's context.
        link: optional (query token indices, key token indices).

    Returns:
        :class:`HeadCensus` with labels from :func:`head_labels`.

    Raises:
        ValueError: for bad ids or ``link`` indices, or a sequence the model cannot take.
    """
    ids = as_ids(input_ids)  # (1, L)
    weights = _maps(model, ids)  # (N, H, L, L)
    id_list = ids[0].tolist()
    scores = pattern_scores(weights, id_list)
    if link is not None:
        scores["link"] = link_weights(weights, *link).double().numpy()  # (N, H)
    labels = head_labels(scores, len(id_list), isinstance(model, Decoder))
    frozen = {name: readonly(value) for name, value in scores.items()}
    return HeadCensus(MappingProxyType(frozen), readonly(labels), tuple(id_list))


def _check_decoder(model, what: str) -> Decoder:
    if not isinstance(model, Decoder):
        raise ValueError(f"{what} needs a Decoder (next-token loss), got {type(model).__name__}")
    return model


def repeated_tokens(model, length: int, seed: int) -> np.ndarray:
    """BOS, then ``length`` random distinct tokens, then the same tokens again.

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
    bos = model.tokenizer.token_to_id(BOS_TOKEN)
    return readonly(np.concatenate([[bos], draw, draw]).astype(np.int64))


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
