"""Boolean mask builders. ``True`` means "may attend", PyTorch's SDPA convention.

Every builder returns a ``torch.bool`` tensor of shape (L, S) (``S`` defaults to ``L``)
except :func:`padding`, which returns a key-padding mask of shape (B, 1, S) that
broadcasts against (B, L, S) scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention_core.validation import check_choice, check_float, check_int

_COMBINE_MODES = ("or", "and")


def _positions(L: int, S: int | None, device: torch.device | str | None):
    L = check_int("L", L, low=1)
    S = L if S is None else check_int("S", S, low=1)
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1) query positions
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S) key positions
    return i, j


def causal(L: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Causal mask: query i may attend to keys j <= i.

    Args:
        L: query length. S: key length (default L). device: torch device.

    Returns:
        (L, S) bool tensor, lower-triangular.

    Raises:
        ValueError: when L or S is not a whole number >= 1.
    """
    i, j = _positions(L, S, device)
    return j <= i


def causal_lower_right(L: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Causal mask for L new queries that come after S − L cached keys (a KV cache).

    Query i sits at position i + (S − L), so it may attend to keys j <= i + S − L: the
    diagonal ends in the bottom-right corner, as in PyTorch's
    ``torch.nn.attention.bias.causal_lower_right``. With S == L it equals :func:`causal`.

    Args:
        L: new queries. S: all keys, cached and new (default L; S >= L).

    Returns:
        (L, S) bool tensor.

    Raises:
        ValueError: when L or S is not a whole number >= 1, or S < L.
    """
    i, j = _positions(L, S, device)
    past = j.shape[1] - i.shape[0]
    if past < 0:
        raise ValueError(f"S must be >= L for a lower-right causal mask, got L={L}, S={S}")
    return j <= i + past


def sinks(L: int, num_sinks: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Sink keys: every query may attend to the first ``num_sinks`` keys.

    Combined with a sliding window (``combine(local(...), sinks(...), how="or")``) it keeps
    the first tokens visible to every query, as streaming decoders do (StreamingLLM).

    Args:
        L: query length. num_sinks: keys kept visible, >= 0 (0 gives an all-False mask).
        S: key length (default L).

    Returns:
        (L, S) bool tensor, True in the first ``num_sinks`` columns.

    Raises:
        ValueError: when num_sinks is negative or not a whole number, or L or S is invalid.
    """
    num_sinks = check_int("num_sinks", num_sinks, low=0)
    i, j = _positions(L, S, device)
    return (j < num_sinks) & (i >= 0)  # (L, S): every row alike


def padding(lengths: Sequence[int] | torch.Tensor, L: int, *, device=None) -> torch.Tensor:
    """Key-padding mask: in batch item b, keys j < lengths[b] are real tokens.

    Args:
        lengths: B valid lengths, each in [0, L].
        L: padded sequence length.

    Returns:
        (B, 1, L) bool tensor; broadcasts over (B, L, L) scores. A length of 0 gives a
        row with no key, which every variant turns into a zero output row.

    Raises:
        ValueError: when a length is negative, above L, or not a whole number.
    """
    L = check_int("L", L, low=1)
    lengths_t = torch.as_tensor(lengths, device=device)
    if lengths_t.dim() != 1 or lengths_t.numel() == 0:
        raise ValueError(f"lengths must be a non-empty 1-D sequence, got {lengths!r}")
    if lengths_t.is_floating_point() or lengths_t.dtype == torch.bool:
        raise ValueError(f"lengths must be whole numbers, got {lengths!r}")
    bad = (lengths_t < 0) | (lengths_t > L)
    if bad.any():
        raise ValueError(f"lengths must lie in [0, {L}], got {lengths_t[bad].tolist()}")
    j = torch.arange(L, device=device)  # (L,)
    return (j.unsqueeze(0) < lengths_t.unsqueeze(1)).unsqueeze(1)  # (B, 1, L)


def local(L: int, window_size: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Local window: query i may attend to keys with |i - j| <= window_size // 2.

    As in the tutorial's ``LocalSelfAttention``, ``window_size // 2`` keys on each side.

    Returns:
        (L, S) bool band matrix.

    Raises:
        ValueError: when window_size, L or S is not a whole number >= 1.
    """
    check_int("window_size", window_size, low=1)
    i, j = _positions(L, S, device)
    return (i - j).abs() <= window_size // 2


def strided(L: int, stride: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Strided pattern: query i may attend to keys j with (i - j) divisible by stride.

    Returns:
        (L, S) bool tensor; the diagonal is always True.

    Raises:
        ValueError: when stride, L or S is not a whole number >= 1.
    """
    check_int("stride", stride, low=1)
    i, j = _positions(L, S, device)
    return (i - j).remainder(stride) == 0


def block(L: int, block_size: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Block-diagonal pattern: positions in the same block of ``block_size`` see each other.

    Returns:
        (L, S) bool tensor, True where i // block_size == j // block_size.

    Raises:
        ValueError: when block_size, L or S is not a whole number >= 1.
    """
    check_int("block_size", block_size, low=1)
    i, j = _positions(L, S, device)
    return (i // block_size) == (j // block_size)


def random(
    L: int, density: float, seed: int = 0, S: int | None = None, *, device=None
) -> torch.Tensor:
    """Random pattern: each (i, j) is kept with probability ``density``.

    The diagonal (i == j) is always kept so that no query is left without a key.
    Reproducible: the same (L, S, density, seed) gives the same mask on every device.

    Returns:
        (L, S) bool tensor.

    Raises:
        ValueError: when density is outside (0, 1] or seed is not a whole number.
    """
    density = check_float("density", density, low=0.0, high=1.0, low_open=True)
    seed = check_int("seed", seed)
    i, j = _positions(L, S, None)
    generator = torch.Generator().manual_seed(seed)
    keep = torch.rand(i.shape[0], j.shape[1], generator=generator) < density
    return (keep | (i == j)).to(device)


def combine(*masks: torch.Tensor, how: str = "or") -> torch.Tensor:
    """Combine boolean masks by broadcasting.

    Args:
        *masks: bool tensors that broadcast together.
        how: ``"or"`` (default) unites sparse patterns, e.g. local + strided;
            ``"and"`` intersects constraints, e.g. causal and padding.

    Returns:
        bool tensor of the broadcast shape.

    Raises:
        ValueError: with no mask, a non-bool mask, shapes that do not broadcast, or an
            unknown ``how``.
    """
    check_choice("how", how, _COMBINE_MODES)
    if not masks:
        raise ValueError("combine needs at least one mask")
    for m in masks:
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            raise ValueError(f"combine takes bool tensors, got {type(m).__name__}")
    try:
        shape = torch.broadcast_shapes(*(m.shape for m in masks))
    except RuntimeError as err:
        shapes = [tuple(m.shape) for m in masks]
        raise ValueError(f"masks of shapes {shapes} do not broadcast") from err
    out = masks[0].expand(shape).clone()
    for m in masks[1:]:
        out = out | m if how == "or" else out & m
    return out
