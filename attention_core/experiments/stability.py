"""Numerical stability and precision: naive vs stable softmax, half precision, memory.

A naive softmax exp(x) / Σ exp(x) overflows as soon as exp(x) exceeds the dtype's largest
value: about x > 11 in float16 (max 65504), x > 88 in float32. Subtracting the row
maximum first keeps every exp in [0, 1] and gives the same result in exact arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
import torch

from attention_core.device import DTYPES, parse_dtype
from attention_core.estimates import estimate_memory
from attention_core.modules import MultiHeadSelfAttention
from attention_core.registry import attend
from attention_core.validation import check_float, check_int

MAX_ROWS = 1024
MAX_STABILITY_LEN = 4096
MAX_MODEL_WIDTH = 1024
STABILITY_COLUMNS = (
    "method",
    "dtype",
    "logit_scale",
    "n_nan",
    "n_inf",
    "all_finite",
    "max_abs_err",
    "max_row_sum_err",
)
PRECISION_COLUMNS = (
    "dtype",
    "bits",
    "max_abs_diff_vs_fp32",
    "mean_abs_diff_vs_fp32",
    "max_rel_diff_vs_fp32",
    "bytes_per_element",
)
MEMORY_COLUMNS = ("L", "strategy", "variant", "estimated_bytes")
_MANTISSA_BITS = {"float64": 53, "float32": 24, "bfloat16": 8, "float16": 11}


def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax as exp(x) / Σ exp(x), computed in x's own dtype with no max subtraction.

    This is the textbook formula the stable version improves on: exp overflows to inf for
    x above ln(max of the dtype) (about 11.1 in float16, 88.7 in float32), and inf / inf
    gives NaN.

    Args:
        x: floating tensor of any shape (..., S).
        dim: the dimension that sums to 1.

    Returns:
        tensor of x's shape and dtype; may hold inf or NaN for large x.

    Raises:
        ValueError: when x is not a floating tensor.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a floating torch.Tensor, got {type(x).__name__}")
    exp = torch.exp(x)  # (..., S), overflows for large x
    return exp / exp.sum(dim=dim, keepdim=True)


def _check_logit_scale(logit_scale: object, dtype: torch.dtype) -> float:
    """Return ``logit_scale`` as float after checking it lies in (0, the dtype's maximum]."""
    largest = torch.finfo(dtype).max
    return check_float(f"logit_scale for {dtype}", logit_scale, low=0, high=largest, low_open=True)


def _softmax_logits(rows: int, seq_len: int, logit_scale: float, seed: int) -> torch.Tensor:
    """Logits (rows, S) uniform in [-logit_scale, logit_scale], float64, seeded."""
    generator = torch.Generator().manual_seed(seed)
    unit = torch.rand(rows, seq_len, generator=generator, dtype=torch.float64)  # (R, S)
    return (2.0 * unit - 1.0) * logit_scale


def compare_softmax_stability(
    logit_scale: float = 1e4,
    dtype: str = "float16",
    rows: int = 8,
    seq_len: int = 8,
    seed: int = 0,
) -> pd.DataFrame:
    """Compare the naive softmax with the registered ``stable`` attention on large logits.

    Logits (R, S) are drawn uniform in [-logit_scale, logit_scale] and rounded to
    ``dtype``. The ``naive`` row applies :func:`naive_softmax` in ``dtype``. The ``stable``
    row runs ``attend(q, k, v, "stable", scale=1)`` with q = logits, k = v = the identity
    (S, S), so its scores are exactly the logits and its output is exactly the weights.
    Both are compared with a float64 softmax of the same rounded logits.

    Args:
        logit_scale: the largest |logit|, positive and at most the dtype's maximum.
        dtype: ``"float16"``, ``"bfloat16"``, ``"float32"`` or ``"float64"``.
        rows: R, independent rows, in [1, 1024].
        seq_len: S, logits per row, in [2, 4096].
        seed: non-negative seed.

    Returns:
        DataFrame with two rows (method ``naive`` and ``stable``) and the columns
        :data:`STABILITY_COLUMNS`: NaN and inf counts, whether every weight is finite, the
        largest |weight - float64 reference| (inf when any weight is not finite) and the
        largest |row sum - 1|.

    Raises:
        ValueError: for an unknown dtype or a bad scale, size or seed.
    """
    torch_dtype = parse_dtype(dtype)
    scale = _check_logit_scale(logit_scale, torch_dtype)
    R = check_int("rows", rows, low=1, high=MAX_ROWS)
    S = check_int("seq_len", seq_len, low=2, high=MAX_STABILITY_LEN)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    logits = _softmax_logits(R, S, scale, seed).to(torch_dtype)  # (R, S)
    reference = torch.softmax(logits.double(), dim=-1)  # (R, S) float64
    eye = torch.eye(S, dtype=torch_dtype)  # (S, S)
    naive = naive_softmax(logits)  # (R, S) in dtype
    stable = attend(logits, eye, eye, "stable", scale=1.0).output  # (R, S) @ I -> (R, S)
    rows_out = []
    for method, weights in (("naive", naive), ("stable", stable)):
        w = weights.double()  # (R, S)
        finite = bool(torch.isfinite(w).all())
        rows_out.append(
            {
                "method": method,
                "dtype": str(dtype if isinstance(dtype, str) else torch_dtype),
                "logit_scale": scale,
                "n_nan": int(torch.isnan(w).sum()),
                "n_inf": int(torch.isinf(w).sum()),
                "all_finite": finite,
                "max_abs_err": (w - reference).abs().max().item() if finite else math.inf,
                "max_row_sum_err": (w.sum(dim=-1) - 1.0).abs().max().item() if finite else math.inf,
            }
        )
    return pd.DataFrame(rows_out, columns=list(STABILITY_COLUMNS))


def softmax_overflow_sweep(
    logit_scales: Iterable[float] = (1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1e3, 1e4),
    dtypes: Iterable[str] = ("float16", "float32"),
    rows: int = 8,
    seq_len: int = 8,
    seed: int = 0,
) -> pd.DataFrame:
    """Run :func:`compare_softmax_stability` over logit scales and dtypes.

    Scales above a dtype's maximum are skipped for that dtype.

    Args:
        logit_scales: positive numbers.
        dtypes: dtype names.
        rows, seq_len, seed: as :func:`compare_softmax_stability`.

    Returns:
        Long DataFrame with the columns :data:`STABILITY_COLUMNS` plus ``nonfinite_fraction``
        (share of weights that are inf or NaN), two rows (naive, stable) per dtype and scale.

    Raises:
        ValueError: for an empty list, an unknown dtype or a bad scale, size or seed.
    """
    scales = [check_float("logit_scale", s, low=0, low_open=True) for s in logit_scales]
    names = list(dtypes)
    if not scales or not names:
        raise ValueError(f"need at least one scale and dtype, got {scales!r} and {names!r}")
    tables = []
    for name in names:
        largest = torch.finfo(parse_dtype(name)).max
        for scale in scales:
            if scale > largest:
                continue
            tables.append(compare_softmax_stability(scale, name, rows, seq_len, seed))
    table = pd.concat(tables, ignore_index=True)
    table["nonfinite_fraction"] = (table["n_nan"] + table["n_inf"]) / (rows * seq_len)
    return table


def precision_comparison(
    seq_len: int = 64,
    d_model: int = 64,
    heads: int = 4,
    seed: int = 0,
    variant: str = "scaled",
    dtypes: Iterable[str] = ("bfloat16", "float16", "float64"),
) -> pd.DataFrame:
    """How far a multi-head attention layer's output moves when run in another dtype.

    A float32 :class:`MultiHeadSelfAttention` (seeded init, eval mode) and input x
    (1, L, D) ~ N(0, 1) are copied to each dtype and run; the output is compared with the
    float32 output.

    Args:
        seq_len: L, in [1, 4096].
        d_model: D, in [1, 1024], divisible by ``heads``.
        heads: H, in [1, D].
        seed: non-negative seed of the weights and the input.
        variant: a registered attention variant.
        dtypes: dtype names to compare with float32.

    Returns:
        DataFrame, one row per dtype, with the columns :data:`PRECISION_COLUMNS`:
        ``bits`` of mantissa precision, max and mean |out_dtype - out_fp32|, the max of that
        over max |out_fp32| (``max_rel_diff_vs_fp32``), and the bytes per element.

    Raises:
        ValueError: for a bad size, seed, dtype or variant, or D not divisible by H.
    """
    L = check_int("seq_len", seq_len, low=1, high=MAX_STABILITY_LEN)
    D = check_int("d_model", d_model, low=1, high=MAX_MODEL_WIDTH)
    H = check_int("heads", heads, low=1, high=D)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    if D % H:
        raise ValueError(f"d_model={D} must be divisible by heads={H}")
    names = list(dtypes)
    if not names:
        raise ValueError("dtypes must name at least one dtype, got an empty list")
    torch_dtypes = [parse_dtype(name) for name in names]
    module = MultiHeadSelfAttention(D, H, variant=variant, init_seed=seed).eval()
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, L, D, generator=generator)  # (1, L, D) float32
    with torch.no_grad():
        reference, _ = module(x, need_weights=False)  # (1, L, D) float32
        reference = reference.double()
        peak = reference.abs().max().item()
        rows = []
        for torch_dtype in torch_dtypes:
            copy = MultiHeadSelfAttention(D, H, variant=variant)
            copy.load_state_dict(module.state_dict())
            copy = copy.to(torch_dtype).eval()
            out, _ = copy(x.to(torch_dtype), need_weights=False)  # (1, L, D) in dtype
            diff = (out.double() - reference).abs()  # (1, L, D)
            rows.append(
                {
                    "dtype": _dtype_name(torch_dtype),
                    "bits": _MANTISSA_BITS[_dtype_name(torch_dtype)],
                    "max_abs_diff_vs_fp32": diff.max().item(),
                    "mean_abs_diff_vs_fp32": diff.mean().item(),
                    "max_rel_diff_vs_fp32": diff.max().item() / peak if peak > 0 else math.nan,
                    "bytes_per_element": torch.empty((), dtype=torch_dtype).element_size(),
                }
            )
    return pd.DataFrame(rows, columns=list(PRECISION_COLUMNS))


def _dtype_name(dtype: torch.dtype) -> str:
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    raise ValueError(f"unsupported dtype {dtype}")


def chunked_vs_full_memory(
    lengths: Iterable[int] = (512, 1024, 2048, 4096, 8192),
    batch: int = 1,
    heads: int = 8,
    E: int = 64,
    chunk_size: int = 128,
    dtype: str = "float32",
) -> pd.DataFrame:
    """Estimated peak memory of full attention vs query-chunked attention, against L.

    Uses :func:`attention_core.estimate_memory` (an analytic model, not a measurement) for
    three strategies: ``full weights`` (explicit scores and weights, L×S, as the tutorial
    writes attention), ``fused`` (``scaled`` without weights, PyTorch's fused kernel) and
    ``chunked`` (queries in blocks of ``chunk_size``, online softmax; exact).

    Args:
        lengths: sequence lengths L (= S), whole numbers in [1, 1_048_576].
        batch: B, in [1, 1024]. heads: H, in [1, 256]. E: head size, in [1, 1024].
        chunk_size: query (and key) block of the chunked variant.
        dtype: dtype name.

    Returns:
        Long DataFrame with the columns :data:`MEMORY_COLUMNS`, three rows per L.

    Raises:
        ValueError: for a bad length, size, chunk size or dtype.
    """
    if isinstance(lengths, str | bytes) or not isinstance(lengths, Iterable):
        raise ValueError(f"lengths must be a list of whole numbers, got {lengths!r}")
    Ls = sorted({check_int("L", n, low=1, high=2**20) for n in lengths})
    if not Ls:
        raise ValueError("lengths must hold at least one length, got an empty list")
    B = check_int("batch", batch, low=1, high=1024)
    H = check_int("heads", heads, low=1, high=256)
    E = check_int("E", E, low=1, high=1024)
    torch_dtype = parse_dtype(dtype)
    strategies = (
        ("full weights", "stable", {"need_weights": True}),
        ("fused", "scaled", {"need_weights": False}),
        ("chunked", "chunked", {"chunk_size": chunk_size, "key_chunk_size": chunk_size}),
    )
    rows = []
    for L in Ls:
        for strategy, variant, extra in strategies:
            nbytes = estimate_memory(
                variant, batch=B, heads=H, L=L, E=E, dtype=torch_dtype, **extra
            )
            rows.append(
                {"L": L, "strategy": strategy, "variant": variant, "estimated_bytes": nbytes}
            )
    return pd.DataFrame(rows, columns=list(MEMORY_COLUMNS))


CHECKPOINT_COLUMNS = ("strategy", "layers", "stored_bytes")


def checkpointing_estimate(
    layers: int = 12,
    batch: int = 1,
    heads: int = 8,
    L: int = 1024,
    d_model: int = 512,
    dtype: str = "float32",
) -> pd.DataFrame:
    """Estimated activation memory kept for the backward pass of a stack of attention layers.

    An analytic count, not a measurement. Without checkpointing every layer keeps what its
    backward needs: x, q, k, v and the output (5·B·L·D numbers) plus the scores' softmax
    output and the weights after dropout (2·B·H·L² numbers). With activation checkpointing
    (``torch.utils.checkpoint``) each layer keeps only its input x (B·L·D) and recomputes
    the rest during backward, one layer at a time, so one layer's full set is alive at once.

    Args:
        layers: N, in [1, 1024]. batch: B, in [1, 1024]. heads: H, in [1, 256].
        L: sequence length, in [1, 1_048_576]. d_model: D, in [1, 65536].
        dtype: dtype name.

    Returns:
        DataFrame with the columns :data:`CHECKPOINT_COLUMNS`, two rows:
        ``store all`` and ``checkpoint``.

    Raises:
        ValueError: for a bad size or dtype.
    """
    N = check_int("layers", layers, low=1, high=1024)
    B = check_int("batch", batch, low=1, high=1024)
    H = check_int("heads", heads, low=1, high=256)
    L = check_int("L", L, low=1, high=2**20)
    D = check_int("d_model", d_model, low=1, high=65536)
    itemsize = torch.empty((), dtype=parse_dtype(dtype)).element_size()
    per_layer = (5 * B * L * D + 2 * B * H * L * L) * itemsize
    layer_input = B * L * D * itemsize
    return pd.DataFrame(
        [
            {"strategy": "store all", "layers": N, "stored_bytes": N * per_layer},
            {"strategy": "checkpoint", "layers": N, "stored_bytes": N * layer_input + per_layer},
        ],
        columns=list(CHECKPOINT_COLUMNS),
    )
