"""Why a head attends: a real attention score split into the parts that made it, and what each
head writes towards the next token.

The residual stream entering layer l of a llama decoder is a sum of parts: the token
embedding (``"emb"``), every earlier head's write (``"L{j}H{h}"``) and every earlier MLP's
(``"MLP{j}"``), all 0-based (:mod:`~attention_core.experiments.score_run` records them in one
forward pass). With each RMSNorm's scale frozen at its value in that run (one number per
position, and per head for Qwen3's q/k norms), a head's query at position i is linear in the
parts at i: q = Σ_p RoPE_i(norm_q(W_q (x_p · s_i · g))), and its key at position j linear in
the parts at j. Qwen2's q/k bias is one more part, ``"bias"``. The pre-softmax score
q·k/√E is then a sum of (query part × key part) terms: :func:`score_parts` returns that
matrix, which sums to the model's score. :func:`key_contrast` ranks the key-side parts of
score(key) − the mean score of the query's other keys; :func:`logit_parts` splits a logit
difference by the same parts (each through the final norm's frozen scale).
:mod:`~attention_core.experiments.score_without` removes one part: the row the direct path
predicts against the row of a forward pass without it.

Every function takes the decoder and the ids and reads the cached run of :func:`score_run`
(an LRU keyed by the decoder's identity and the ids), so the cells of one input cost one
forward pass. The parts are float32 as the model computes them, their products float64. With
bfloat16 weights the parts sum to the score only to bfloat16's rounding (the decoder rounds
each projection's input and output; the parts are projected unrounded).

Shapes: L tokens, D width, E head size, n the parts of one cell (1 + layer · (H + 1), plus the
bias for Qwen2), S = query + 1 the keys a query may see, P every part of the stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from attention_core.experiments.heads import readonly
from attention_core.experiments.score_run import (
    ScoreRun,
    check_decoder,
    parts_before,
    score_run,
)
from attention_core.pretrained.llama import Decoder
from attention_core.validation import check_choice, check_int

BIAS = "bias"
"""The name of Qwen2's q/k bias, a part of every query and key (not of the stream)."""
SIDES = ("query", "key")


@dataclass(frozen=True)
class ScoreParts:
    """One cell's score split into (query part × key part) terms.

    Attributes:
        names: the n part names (``"emb"``, ``"L{j}H{h}"`` and ``"MLP{j}"`` for j < layer,
            then ``"bias"`` for Qwen2).
        matrix: read-only (n, n) float64: query part i × key part j, /√E.
        score: the model's pre-softmax score q·k/√E.
        total: ``matrix.sum()`` (equals ``score`` to float tolerance).
        key_sums: (n,) the key side: each key part against the whole query (column sums).
        query_sums: (n,) the query side: each query part against the whole key (row sums).
        layer, head, query, key: the cell.
    """

    names: tuple[str, ...]
    matrix: np.ndarray
    score: float
    total: float
    key_sums: np.ndarray
    query_sums: np.ndarray
    layer: int
    head: int
    query: int
    key: int


@dataclass(frozen=True)
class KeyContrast:
    """What makes one key win over the query's other keys: the key-side parts of score(key)
    minus the mean score of the other keys the query may see, largest first.

    Attributes:
        names: the n part names, ranked by ``contributions``.
        contributions: read-only (n,) float64, largest first.
        difference: the model's score(key) − mean of its scores of the other keys.
        total: ``contributions.sum()`` (equals ``difference`` to float tolerance).
        layer, head, query, key: the cell.
    """

    names: tuple[str, ...]
    contributions: np.ndarray
    difference: float
    total: float
    layer: int
    head: int
    query: int
    key: int


@dataclass(frozen=True)
class LogitParts:
    """Every part's direct contribution to logit[target] − logit[alternative].

    Attributes:
        names: the P part names of the whole stream (embedding, every head, every MLP).
        contributions: read-only (P,) float64: part · final-norm scale · g · (u_t − u_a).
        difference: the model's logit[target] − logit[alternative].
        total: ``contributions.sum()`` (equals ``difference`` to float tolerance).
        position, target, alternative: where and which two tokens.
    """

    names: tuple[str, ...]
    contributions: np.ndarray
    difference: float
    total: float
    position: int
    target: int
    alternative: int


def check_cell(decoder: Decoder, run: ScoreRun, layer, head, query, key=None) -> tuple:
    """One cell's indices, checked against the decoder and the run.

    Args:
        decoder: the decoder of ``run``. run: from :func:`score_run`.
        layer, head, query: 0-based. key: a position, or None (a whole row).

    Returns:
        (layer, head, query, key) as ints (key None when not given).

    Raises:
        ValueError: naming the bad value; a key after the query breaks causality.
    """
    cfg = decoder.config
    layer = check_int("layer", layer, low=0, high=cfg.num_layers - 1)
    head = check_int("head", head, low=0, high=cfg.num_heads - 1)
    query = check_int("query", query, low=0, high=run.length - 1)
    if key is not None:
        key = check_int("key", key, low=0, high=run.length - 1)
        if key > query:
            raise ValueError(
                f"key {key} comes after query {query}: a causal query sees keys 0..{query}"
            )
    return layer, head, query, key


def cell_names(decoder: Decoder, run: ScoreRun, layer: int) -> tuple[str, ...]:
    """The n part names of a cell at ``layer``: the stream's parts before it, then
    ``"bias"`` for Qwen2.

    Args:
        decoder: the decoder of ``run``. run: from :func:`score_run`. layer: 0-based.

    Returns:
        Tuple of n names.
    """
    names = run.names[: parts_before(decoder.config, layer)]
    return (*names, BIAS) if decoder.config.qkv_bias else names


def side_parts(
    decoder: Decoder, run: ScoreRun, *, layer: int, head: int, positions: list[int], side: str
) -> torch.Tensor:
    """Every part's query (or key) of one head at some positions, float64, after the frozen
    norms, the projection, the per-head norm and RoPE: summed over the parts, the model's.

    Args:
        decoder: the decoder of ``run``. run: from :func:`score_run`.
        layer, head: the query head (its key head is head // G for the key side).
        positions: the P' positions. side: ``"query"`` or ``"key"``.

    Returns:
        (n, P', E) float64.

    Raises:
        ValueError: for a side other than ``"query"`` or ``"key"``.
    """
    side = check_choice("side", side, SIDES)
    cfg = decoder.config
    block = decoder.layers[layer]
    size = cfg.head_dim
    if side == "query":
        first, scales, norm = head * size, run.q_scales, getattr(block, "q_norm", None)
        index = head
    else:
        index = head // cfg.group_size
        first, scales = (cfg.num_heads + index) * size, run.k_scales
        norm = getattr(block, "k_norm", None)
    at = torch.tensor(positions)  # (P',)
    stream = run.writes[: parts_before(cfg, layer), at].double()  # (n, P', D)
    normed = stream * run.attn_scales[layer, at].double()[None, :, None]  # (n, P', D)
    normed = normed * block.attn_norm.double()  # (n, P', D)
    rows = block.qkv[first : first + size].double()  # (E, D)
    parts = normed @ rows.T  # (n, P', D) @ (D, E) -> (n, P', E)
    if cfg.qkv_bias:
        bias = block.qkv_bias[first : first + size].double()  # (E,)
        parts = torch.cat((parts, bias.expand(1, len(positions), size)))  # (n + 1, P', E)
    if cfg.qk_norm:
        parts = parts * scales[layer, index, at].double()[None, :, None]  # (n, P', E)
        parts = parts * norm.double()  # (n, P', E)
    rope = replace(run.rope, cos=run.rope.cos[at].double(), sin=run.rope.sin[at].double())
    return rope.rotate(parts[None])[0]  # (1, n, P', E) -> (n, P', E), the block's RoPE


def model_scores(
    decoder: Decoder, run: ScoreRun, *, layer: int, head: int, query: int
) -> torch.Tensor:
    """The model's scores q·k/√E of one query against its S keys 0..query, from the run's
    float32 q and k, in float64.

    Returns:
        (S,) float64.
    """
    q = run.q[layer, head, query].double()  # (E,)
    k = run.k[layer, head // decoder.config.group_size, : query + 1].double()  # (S, E)
    return k @ q / math.sqrt(decoder.config.head_dim)  # (S, E) @ (E,) -> (S,)


def score_parts(decoder: Decoder, input_ids, *, layer, head, query, key) -> ScoreParts:
    """Split the pre-softmax score of (layer, head) from ``query`` to ``key`` into (query
    part × key part) terms.

    Args:
        decoder: a llama :class:`Decoder` with float32 or bfloat16 weights and exact dense
            attention.
        input_ids: L token ids (a sequence, or a (1, L) tensor).
        layer, head: 0-based. query, key: positions, key <= query.

    Returns:
        :class:`ScoreParts`; the run is cached (:func:`score_run`).

    Raises:
        ValueError: for int4 weights, another variant, empty or out-of-vocabulary ids, a
            layer, head or position out of range, or a key after the query.
    """
    check_decoder(decoder)
    run = score_run(decoder, input_ids)
    layer, head, query, key = check_cell(decoder, run, layer, head, query, key)
    with torch.inference_mode():
        q_parts = side_parts(decoder, run, layer=layer, head=head, positions=[query], side="query")
        k_parts = side_parts(decoder, run, layer=layer, head=head, positions=[key], side="key")
        scale = math.sqrt(decoder.config.head_dim)
        matrix = (q_parts[:, 0] @ k_parts[:, 0].T / scale).numpy()  # (n, E) @ (E, n) -> (n, n)
        score = float(model_scores(decoder, run, layer=layer, head=head, query=query)[key])
    return ScoreParts(
        names=cell_names(decoder, run, layer),
        matrix=readonly(matrix),
        score=score,
        total=float(matrix.sum()),
        key_sums=readonly(matrix.sum(axis=0)),
        query_sums=readonly(matrix.sum(axis=1)),
        layer=layer,
        head=head,
        query=query,
        key=key,
    )


def key_contrast(decoder: Decoder, input_ids, *, layer, head, query, key) -> KeyContrast:
    """What makes ``key`` win over the query's other keys: the key-side parts of
    score(key) − mean(score of every other key 0..query), ranked.

    A key part's key-side sum is the whole query against that part of the key; the contrast
    of part p is its key-side sum at ``key`` minus its mean key-side sum over the others.

    Args:
        decoder, input_ids, layer, head, query, key: as :func:`score_parts`.

    Returns:
        :class:`KeyContrast`, largest contribution first.

    Raises:
        ValueError: as :func:`score_parts`, and for query 0 (no other key to contrast with).
    """
    check_decoder(decoder)
    run = score_run(decoder, input_ids)
    layer, head, query, key = check_cell(decoder, run, layer, head, query, key)
    if query == 0:
        raise ValueError("query 0 sees only key 0: there is no other key to contrast with")
    others = [s for s in range(query + 1) if s != key]
    with torch.inference_mode():
        q = side_parts(decoder, run, layer=layer, head=head, positions=[query], side="query")
        k_parts = side_parts(
            decoder, run, layer=layer, head=head, positions=list(range(query + 1)), side="key"
        )  # (n, S, E)
        scale = math.sqrt(decoder.config.head_dim)
        key_side = k_parts @ q[:, 0].sum(dim=0) / scale  # (n, S, E) @ (E,) -> (n, S)
        contrast = (key_side[:, key] - key_side[:, others].mean(dim=1)).numpy()  # (n,)
        scores = model_scores(decoder, run, layer=layer, head=head, query=query)  # (S,)
        difference = float(scores[key] - scores[others].mean())
    order = np.argsort(-contrast, kind="stable")
    names = cell_names(decoder, run, layer)
    return KeyContrast(
        names=tuple(names[i] for i in order),
        contributions=readonly(contrast[order]),
        difference=difference,
        total=float(contrast.sum()),
        layer=layer,
        head=head,
        query=query,
        key=key,
    )


def logit_parts(decoder: Decoder, input_ids, *, position, target, alternative) -> LogitParts:
    """Every part's direct contribution to logit[target] − logit[alternative] at
    ``position``: the part's write there, times the final norm's frozen scale and weight,
    against (u_target − u_alternative), the two rows of the output matrix.

    Args:
        decoder: as :func:`score_parts`. input_ids: L token ids.
        position: 0-based, the position whose next-token logits are split.
        target, alternative: two different token ids.

    Returns:
        :class:`LogitParts` over the P parts of the whole stream.

    Raises:
        ValueError: as :func:`score_parts`, for a position out of range, a token outside the
            vocabulary, or the same token twice.
    """
    check_decoder(decoder)
    run = score_run(decoder, input_ids)
    vocab = decoder.config.vocab_size
    position = check_int("position", position, low=0, high=run.length - 1)
    target = check_int("target", target, low=0, high=vocab - 1)
    alternative = check_int("alternative", alternative, low=0, high=vocab - 1)
    if target == alternative:
        raise ValueError(f"target and alternative must differ, got {target} twice")
    with torch.inference_mode():
        output = decoder.embedding if decoder.output is None else decoder.output  # (V, D)
        direction = output[target].double() - output[alternative].double()  # (D,)
        direction = direction * decoder.final_norm.double()  # (D,)
        scale = run.final_scales[position].double()
        stream = run.writes[:, position].double()  # (P, D)
        contributions = (stream @ direction * scale).numpy()  # (P, D) @ (D,) -> (P,)
        logits = run.logits[position].double()  # (V,)
        difference = float(logits[target] - logits[alternative])
    return LogitParts(
        names=run.names,
        contributions=readonly(contributions),
        difference=difference,
        total=float(contributions.sum()),
        position=position,
        target=target,
        alternative=alternative,
    )
