"""Mathematical properties of self-attention, checked numerically.

* Permutation equivariance: with no mask and no positions, self-attention treats its input
  as a set: shuffling the tokens shuffles the output the same way, f(Px) = P f(x). A causal
  mask (query i sees only keys j <= i), positional encodings added to x, and position-based
  sparse patterns (local, strided, block) tie the result to positions and break it.
* Causality: under a causal mask, changing future tokens never changes earlier outputs.
* Rows of the weights sum to 1 (they are a softmax).
* Exactness: chunked attention equals full attention.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attention_core import masks
from attention_core.experiments.inputs import MAX_EMBED_DIM, MAX_INPUT_LEN, sinusoidal_positions
from attention_core.modules import MultiHeadSelfAttention
from attention_core.registry import get_variant, variant_names
from attention_core.validation import check_int

TOLERANCE = 1e-5
TABLE_COLUMNS = ("variant", "causal", "positional", "max_abs_diff", "holds")
PERTURB_SCALE = 1.0


@dataclass(frozen=True)
class EquivarianceResult:
    """Outcome of one permutation-equivariance check.

    Attributes:
        max_abs_diff: max |f(Px) - P f(x)| over every token and feature.
        perm: the permutation used, P x = x[perm].
        holds: ``max_abs_diff < tolerance``.
        tolerance: the threshold (1e-5, float32 round-off is about 1e-7).
        variant: the attention variant.
        causal: whether a causal mask was applied.
        positional: whether sinusoidal positional encodings were added to x.
        per_position_diff: max |f(Px) - P f(x)| of each position (L,), as a tuple.
    """

    max_abs_diff: float
    perm: tuple[int, ...]
    holds: bool
    tolerance: float
    variant: str
    causal: bool
    positional: bool
    per_position_diff: tuple[float, ...]


def check_perm(perm: Sequence[int], seq_len: int) -> tuple[int, ...]:
    """Return ``perm`` as a tuple after checking it is a permutation of range(seq_len).

    Raises:
        ValueError: naming the bad permutation (wrong length, repeats, out of range or
            not whole numbers).
    """
    if isinstance(perm, str | bytes) or not isinstance(perm, Iterable):
        raise ValueError(f"perm must be a sequence of whole numbers, got {perm!r}")
    values = tuple(check_int(f"perm[{i}]", p) for i, p in enumerate(perm))
    if sorted(values) != list(range(seq_len)):
        raise ValueError(
            f"perm must be a permutation of 0..{seq_len - 1} (each once), got {list(values)!r}"
        )
    return values


def random_perm(seq_len: int, seed: int = 0) -> tuple[int, ...]:
    """A seeded random permutation of range(seq_len) that is not the identity (for L > 1).

    Returns:
        tuple of L ints.
    """
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(seq_len, generator=generator).tolist()
    if seq_len > 1 and perm == list(range(seq_len)):
        perm = perm[1:] + perm[:1]  # a cyclic shift is never the identity
    return tuple(perm)


def check_permutation_equivariance(
    variant: str = "scaled",
    embed_dim: int = 8,
    num_heads: int = 2,
    seq_len: int = 5,
    *,
    perm: Sequence[int] | None = None,
    causal: bool = False,
    positional: bool = False,
    seed: int = 0,
    **params,
) -> EquivarianceResult:
    """Measure max |f(Px) - P f(x)| for a multi-head self-attention layer f.

    f is a seeded :class:`MultiHeadSelfAttention` in eval mode (no dropout) applied to
    x (1, L, D) ~ N(0, 1). With ``positional``, f adds sinusoidal encodings of the
    positions 0..L-1 to its input first, so a token's encoding follows its new place, not
    the token. With ``causal``, f uses a causal mask.

    Args:
        variant: a registered attention variant.
        embed_dim: D, in [1, 1024], divisible by num_heads.
        num_heads: H.
        seq_len: L, in [1, 1024].
        perm: a permutation of range(L), e.g. the tutorial's (2, 0, 4, 1, 3); ``None`` for
            a seeded random one (never the identity when L > 1).
        causal: apply a causal mask.
        positional: add sinusoidal positional encodings to the input.
        seed: non-negative seed of the layer's weights, the input and a random perm.
        **params: the variant's own parameters.

    Returns:
        EquivarianceResult; ``holds`` is True when the difference is below 1e-5.

    Raises:
        ValueError: for an unknown variant or parameter, a bad size or seed, or a perm that
            is not a permutation of range(L).
    """
    spec = get_variant(variant)
    L = check_int("seq_len", seq_len, low=1, high=MAX_INPUT_LEN)
    D = check_int("embed_dim", embed_dim, low=1, high=MAX_EMBED_DIM)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    order = random_perm(L, seed) if perm is None else check_perm(perm, L)
    layer = MultiHeadSelfAttention(D, num_heads, variant=spec.name, init_seed=seed, **params)
    layer = layer.eval()
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, L, D, generator=generator)  # (1, L, D)
    mask = masks.causal(L) if causal else None  # (L, L) or None
    offset = (
        sinusoidal_positions(L, D, dtype=torch.float64).float() if positional else torch.zeros(L, D)
    )  # (L, D)
    index = torch.tensor(order)  # (L,)

    def f(tokens: torch.Tensor) -> torch.Tensor:
        out, _ = layer(tokens + offset, mask=mask, need_weights=False)  # (1, L, D)
        return out

    with torch.no_grad():
        permuted_then_f = f(x[:, index, :])  # f(Px), (1, L, D)
        f_then_permuted = f(x)[:, index, :]  # P f(x), (1, L, D)
    diff = (permuted_then_f - f_then_permuted).abs()  # (1, L, D)
    per_position = diff.amax(dim=(0, 2))  # (L,)
    max_diff = diff.max().item()
    return EquivarianceResult(
        max_abs_diff=max_diff,
        perm=order,
        holds=max_diff < TOLERANCE,
        tolerance=TOLERANCE,
        variant=spec.name,
        causal=bool(causal),
        positional=bool(positional),
        per_position_diff=tuple(per_position.tolist()),
    )


def equivariance_table(
    variants: Iterable[str],
    embed_dim: int = 8,
    num_heads: int = 2,
    seq_len: int = 5,
    *,
    perm: Sequence[int] | None = None,
    positional: bool = False,
    seed: int = 0,
    params: dict[str, dict] | None = None,
) -> pd.DataFrame:
    """Run :func:`check_permutation_equivariance` per variant, without and with a causal mask.

    Args:
        variants: registered variant names.
        embed_dim, num_heads, seq_len, perm, positional, seed: as
            :func:`check_permutation_equivariance`.
        params: optional ``{variant: {param: value}}`` overrides of the defaults.

    Returns:
        DataFrame with the columns :data:`TABLE_COLUMNS`, two rows per variant (causal
        False, then True).

    Raises:
        ValueError: for an empty or unknown variant list, or any bad argument.
    """
    names = variant_names(variants)
    params = params or {}
    rows = []
    for name in names:
        for causal in (False, True):
            result = check_permutation_equivariance(
                name,
                embed_dim,
                num_heads,
                seq_len,
                perm=perm,
                causal=causal,
                positional=positional,
                seed=seed,
                **params.get(name, {}),
            )
            rows.append(
                {
                    "variant": name,
                    "causal": causal,
                    "positional": positional,
                    "max_abs_diff": result.max_abs_diff,
                    "holds": result.holds,
                }
            )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


@dataclass(frozen=True)
class CausalLeakResult:
    """Outcome of perturbing the tokens after position ``cutoff``.

    Attributes:
        cutoff: tokens 0..cutoff are kept, tokens cutoff+1..L-1 are replaced.
        causal: whether the causal mask was applied.
        past_max_abs_diff: max |output change| at positions 0..cutoff (0 when nothing leaks).
        future_max_abs_diff: max |output change| at positions cutoff+1..L-1 (the perturbed
            tokens themselves; large, which shows the perturbation took effect).
        leaks: ``past_max_abs_diff >= tolerance``.
        tolerance: 1e-5.
        per_position_diff: max |output change| of each position (L,), as a tuple.
    """

    cutoff: int
    causal: bool
    past_max_abs_diff: float
    future_max_abs_diff: float
    leaks: bool
    tolerance: float
    per_position_diff: tuple[float, ...]


def _seeded_layer(variant: str, embed_dim: int, num_heads: int, seed: int, params: dict):
    """A :class:`MultiHeadSelfAttention` in eval mode, weights seeded without touching the
    global RNG state."""
    layer = MultiHeadSelfAttention(embed_dim, num_heads, variant=variant, init_seed=seed, **params)
    return layer.eval()


def check_causal_leak(
    variant: str = "scaled",
    embed_dim: int = 8,
    num_heads: int = 2,
    seq_len: int = 6,
    *,
    cutoff: int | None = None,
    causal: bool = True,
    seed: int = 0,
    **params,
) -> CausalLeakResult:
    """Replace every token after ``cutoff`` with new random vectors; see which outputs move.

    Under a causal mask output i depends on tokens 0..i only, so outputs 0..cutoff must not
    change (difference 0 up to float round-off). Without the mask they do: the past leaks
    the future.

    Args:
        variant: a registered attention variant.
        embed_dim: D, divisible by num_heads. num_heads: H.
        seq_len: L, in [2, 1024].
        cutoff: last kept position, in [0, L - 2]; default L // 2 - 1.
        causal: apply a causal mask (``False`` shows the leak).
        seed: non-negative seed of the layer, the input and the perturbation.
        **params: the variant's own parameters.

    Returns:
        CausalLeakResult.

    Raises:
        ValueError: for an unknown variant or parameter, or a bad size, cutoff or seed.
    """
    spec = get_variant(variant)
    L = check_int("seq_len", seq_len, low=2, high=MAX_INPUT_LEN)
    D = check_int("embed_dim", embed_dim, low=1, high=MAX_EMBED_DIM)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    cut = L // 2 - 1 if cutoff is None else check_int("cutoff", cutoff, low=0, high=L - 2)
    layer = _seeded_layer(spec.name, D, num_heads, seed, params)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, L, D, generator=generator)  # (1, L, D)
    perturbed = x.clone()
    future = L - cut - 1
    noise = torch.randn(1, future, D, generator=generator) * PERTURB_SCALE  # (1, L-cut-1, D)
    perturbed[:, cut + 1 :, :] = noise
    mask = masks.causal(L) if causal else None
    with torch.no_grad():
        before, _ = layer(x, mask=mask, need_weights=False)  # (1, L, D)
        after, _ = layer(perturbed, mask=mask, need_weights=False)  # (1, L, D)
    per_position = (after - before).abs().amax(dim=(0, 2))  # (L,)
    past = per_position[: cut + 1].max().item()
    return CausalLeakResult(
        cutoff=cut,
        causal=bool(causal),
        past_max_abs_diff=past,
        future_max_abs_diff=per_position[cut + 1 :].max().item(),
        leaks=past >= TOLERANCE,
        tolerance=TOLERANCE,
        per_position_diff=tuple(per_position.tolist()),
    )


def row_sums(
    variant: str = "scaled",
    seq_len: int = 8,
    embed_dim: int = 8,
    num_heads: int = 2,
    causal: bool = False,
    seed: int = 0,
    **params,
) -> pd.DataFrame:
    """Row sums of the weights of every head of a seeded layer.

    Args:
        variant: a registered variant. seq_len: L in [1, 1024]. embed_dim: D, divisible by
            num_heads. causal: apply a causal mask. seed: non-negative seed.
        **params: the variant's own parameters.

    Returns:
        DataFrame with columns head, query, row_sum (H·L rows); every row_sum is 1 up to
        float round-off (a softmax row), 0 only for a query with no key.

    Raises:
        ValueError: for an unknown variant or parameter, or a bad size or seed.
    """
    spec = get_variant(variant)
    L = check_int("seq_len", seq_len, low=1, high=MAX_INPUT_LEN)
    D = check_int("embed_dim", embed_dim, low=1, high=MAX_EMBED_DIM)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    layer = _seeded_layer(spec.name, D, num_heads, seed, params)
    x = torch.randn(1, L, D, generator=torch.Generator().manual_seed(seed))  # (1, L, D)
    mask = masks.causal(L) if causal else None
    with torch.no_grad():
        _, weights = layer(x, mask=mask, need_weights=True)  # (1, H, L, L)
    sums = weights[0].double().sum(dim=-1)  # (H, L)
    H = sums.shape[0]
    return pd.DataFrame(
        {
            "head": np.repeat(np.arange(H), L),
            "query": np.tile(np.arange(L), H),
            "row_sum": sums.reshape(-1).numpy(),
        }
    )


def check_chunked_exact(
    seq_len: int = 64,
    head_dim: int = 16,
    num_heads: int = 2,
    *,
    chunk_size: int = 16,
    key_chunk_size: int = 16,
    causal: bool = False,
    seed: int = 0,
) -> float:
    """Max |chunked attention - full attention| on the same seeded q, k, v.

    Args:
        seq_len: L, in [1, 1024]. head_dim: E, in [1, 1024]. num_heads: H, in [1, 64].
        chunk_size, key_chunk_size: the chunked variant's query chunk and key tile.
        causal: apply a causal mask to both.
        seed: non-negative seed.

    Returns:
        the largest absolute difference of the (1, H, L, E) outputs, float32 (about 1e-7).

    Raises:
        ValueError: for a bad size, chunk size or seed.
    """
    from attention_core.registry import attend

    L = check_int("seq_len", seq_len, low=1, high=MAX_INPUT_LEN)
    E = check_int("head_dim", head_dim, low=1, high=MAX_EMBED_DIM)
    H = check_int("num_heads", num_heads, low=1, high=64)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, H, L, E, generator=generator) for _ in "qkv")  # (1, H, L, E)
    mask = masks.causal(L) if causal else None
    full = attend(q, k, v, "stable", mask=mask).output  # (1, H, L, E)
    chunked = attend(
        q, k, v, "chunked", mask=mask, chunk_size=chunk_size, key_chunk_size=key_chunk_size
    ).output  # (1, H, L, E)
    return (chunked - full).abs().max().item()
