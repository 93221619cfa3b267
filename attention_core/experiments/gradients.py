"""Gradient flow through one self-attention layer: the tutorial's experiment done right.

The tutorial builds W_Q, W_K, W_V as parameters, runs attention on a (4, 16) input, takes an
MSE loss against a random target and prints the gradient norms. Here every tensor whose
gradient is read is a leaf (the weights and the input ``x``), the attention itself is any
registered variant, and the scale can be switched off to show how unscaled scores
saturate the softmax and starve W_Q and W_K of gradient as d_k grows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch

from attention_core.experiments.scaling import check_d_ks, derived_seed
from attention_core.registry import attend, get_variant, variant_names
from attention_core.validation import check_choice, check_float, check_int

MAX_EMBED_DIM = 1024
MAX_GRADIENT_LEN = 256
MAX_TRIALS = 100
INITS = ("scaled", "randn")
NO_SCALING = "none"
GRAD_TENSORS = ("W_Q", "W_K", "W_V", "input")
TABLE_COLUMNS = ("variant", "scaling", "tensor", "grad_norm", "loss", "scale")
VS_DK_COLUMNS = (
    "d_k",
    "scaling",
    "tensor",
    "grad_norm",
    "grad_norm_std",
    "grad_norm_min",
    "grad_norm_max",
    "scale",
)
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class GradientProblem:
    """The leaves and target of one gradient experiment.

    Attributes:
        x: input (L, D), a leaf with ``requires_grad``.
        w_q, w_k, w_v: projection weights (D, D), leaf ``nn.Parameter``s.
        target: MSE target (L, D), no gradient.
    """

    x: torch.Tensor
    w_q: torch.nn.Parameter
    w_k: torch.nn.Parameter
    w_v: torch.nn.Parameter
    target: torch.Tensor


@dataclass(frozen=True)
class GradientNorms:
    """Gradient norms of one backward pass.

    Attributes:
        W_Q, W_K, W_V: Frobenius norms of dLoss/dW for each projection.
        input: Frobenius norm of dLoss/dx.
        loss: the MSE loss value.
        scale: the score scale that was used.
    """

    W_Q: float
    W_K: float
    W_V: float
    input: float
    loss: float
    scale: float

    def as_dict(self) -> dict[str, float]:
        """Return the fields as a plain dict."""
        return asdict(self)


def make_gradient_problem(
    embed_dim: int = 16,
    seq_len: int = 4,
    init: str = "scaled",
    seed: int = 0,
    dtype: str = "float32",
) -> GradientProblem:
    """Draw the input, weights and target of a gradient experiment, reproducibly.

    Args:
        embed_dim: D, in [1, 1024]; a single head, so d_k = D.
        seq_len: L, in [1, 256].
        init: ``"scaled"`` draws weights N(0, 1/D), so q, k, v have unit-variance entries
            and the only thing that grows with D is the score QKᵀ (std sqrt(D)) — the
            effect the scale is there to undo; ``"randn"`` draws N(0, 1) like the
            tutorial, which makes q and k entries of std sqrt(D) and the scores of std D,
            saturating the softmax even with the 1/sqrt(D) scale.
        seed: non-negative seed of the draws (order: x, W_Q, W_K, W_V, target).
        dtype: ``"float32"`` or ``"float64"``.

    Returns:
        GradientProblem with x (L, D) and weights (D, D) as leaves that require grad.

    Raises:
        ValueError: for a bad size, init, seed or dtype.
    """
    D = check_int("embed_dim", embed_dim, low=1, high=MAX_EMBED_DIM)
    L = check_int("seq_len", seq_len, low=1, high=MAX_GRADIENT_LEN)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    check_choice("init", init, INITS)
    check_choice("dtype", dtype, _DTYPES)
    torch_dtype = _DTYPES[dtype]
    generator = torch.Generator().manual_seed(seed)
    weight_std = 1.0 / math.sqrt(D) if init == "scaled" else 1.0

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64).to(torch_dtype)

    x = draw(L, D).requires_grad_(True)  # (L, D)
    w_q, w_k, w_v = (torch.nn.Parameter(draw(D, D) * weight_std) for _ in range(3))  # (D, D)
    target = draw(L, D)  # (L, D)
    return GradientProblem(x=x, w_q=w_q, w_k=w_k, w_v=w_v, target=target)


def _resolve_scale(scale: float | str | None) -> float | None:
    """``None`` keeps the variant's default, ``"none"`` means 1 (no scaling), a number is kept."""
    if scale is None:
        return None
    if scale == NO_SCALING:
        return 1.0
    return check_float(f"scale (None, {NO_SCALING!r} or a number)", scale, low=0, low_open=True)


def measure_gradient_norms(
    variant: str = "scaled",
    embed_dim: int = 16,
    seq_len: int = 4,
    *,
    scale: float | str | None = None,
    init: str = "scaled",
    seed: int = 0,
    dtype: str = "float32",
    **params,
) -> GradientNorms:
    """One forward and backward pass of single-head self-attention; report gradient norms.

    Computes Q = x W_Q, K = x W_K, V = x W_V (each (L, D)), out = attend(Q, K, V, variant,
    scale), loss = mean((out - target)²), then ``loss.backward()`` on leaves only.

    Args:
        variant: a registered attention variant, e.g. ``"scaled"``.
        embed_dim: D = d_k, in [1, 1024].
        seq_len: L, in [1, 256].
        scale: ``None`` for the variant's default (1/sqrt(D) for ``scaled``), ``"none"``
            for 1 (the unscaled scores), or a positive number.
        init: weight initialisation, ``"scaled"`` or ``"randn"`` (see
            :func:`make_gradient_problem`).
        seed: non-negative seed.
        dtype: ``"float32"`` or ``"float64"``.
        **params: the variant's own parameters.

    Returns:
        GradientNorms of W_Q, W_K, W_V (each (D, D)) and the input x (L, D), with the loss.

    Raises:
        ValueError: for an unknown variant or parameter, or a bad size, scale, init, seed
            or dtype.
    """
    spec = get_variant(variant)
    problem = make_gradient_problem(embed_dim, seq_len, init, seed, dtype)
    used_scale = _resolve_scale(scale)
    x = problem.x
    q = x @ problem.w_q  # (L, D) @ (D, D) -> (L, D)
    k = x @ problem.w_k  # (L, D) @ (D, D) -> (L, D)
    v = x @ problem.w_v  # (L, D) @ (D, D) -> (L, D)
    out = attend(q, k, v, variant, scale=used_scale, **params).output  # (L, D)
    loss = torch.nn.functional.mse_loss(out, problem.target)
    loss.backward()
    if used_scale is None:
        used_scale = 1.0 / math.sqrt(embed_dim) if spec.default_scale == "inv_sqrt" else 1.0
    return GradientNorms(
        W_Q=_norm(problem.w_q.grad),
        W_K=_norm(problem.w_k.grad),
        W_V=_norm(problem.w_v.grad),
        input=_norm(x.grad),
        loss=loss.item(),
        scale=used_scale,
    )


def _norm(grad: torch.Tensor | None) -> float:
    """Frobenius norm of a gradient; 0 when autograd left it empty (no path to the loss)."""
    return 0.0 if grad is None else grad.norm().item()


def _scalings(d_k: int) -> tuple[tuple[str, float | str], ...]:
    """The two settings compared: 1/sqrt(d_k) ("scaled") and 1 ("unscaled")."""
    return (("scaled", 1.0 / math.sqrt(d_k)), ("unscaled", NO_SCALING))


def gradient_norms_vs_dk(
    d_ks: Iterable[int] = (16, 32, 64, 128, 256),
    variant: str = "scaled",
    seq_len: int = 8,
    init: str = "scaled",
    seed: int = 0,
    trials: int = 8,
    **params,
) -> pd.DataFrame:
    """Gradient norms against d_k, with the scale 1/sqrt(d_k) and with no scaling (1).

    Each (d_k, scaling) cell is the mean over ``trials`` seeds derived from ``seed`` (the
    same problems for both scalings, so the difference is the scale alone).

    Args:
        d_ks: head sizes D, whole numbers in [1, 1024].
        variant: a registered attention variant.
        seq_len: L, in [1, 256].
        init: ``"scaled"`` or ``"randn"`` (see :func:`make_gradient_problem`).
        seed: non-negative seed.
        trials: problems averaged per cell, in [1, 100].
        **params: the variant's own parameters.

    Returns:
        Long DataFrame with the columns :data:`VS_DK_COLUMNS`: d_k, scaling (``"scaled"``
        or ``"unscaled"``), tensor (``"W_Q"``, ``"W_K"``, ``"W_V"``, ``"input"``),
        grad_norm (mean over trials) with its std, min and max over trials, and scale (the
        factor used): 8 rows per d_k. Without scaling the W_Q and W_K norms swing widely
        between seeds: the scores' larger factor pushes them up while a saturated softmax
        (Jacobian -> 0) pulls single runs to almost nothing.

    Raises:
        ValueError: for a bad d_k list, variant, parameter, size, init, seed or trials.
    """
    sizes = check_d_ks(d_ks, high=MAX_EMBED_DIM)
    trials = check_int("trials", trials, low=1, high=MAX_TRIALS)
    seed = check_int("seed", seed, low=0, high=2**63 - 1)
    rows = []
    for d_k in sizes:
        for scaling, scale in _scalings(d_k):
            runs = [
                measure_gradient_norms(
                    variant,
                    d_k,
                    seq_len,
                    scale=scale,
                    init=init,
                    seed=derived_seed(seed, d_k, t),
                    **params,
                )
                for t in range(trials)
            ]
            for tensor in GRAD_TENSORS:
                norms = np.array([getattr(r, tensor) for r in runs])  # (trials,)
                rows.append(
                    {
                        "d_k": d_k,
                        "scaling": scaling,
                        "tensor": tensor,
                        "grad_norm": float(norms.mean()),
                        "grad_norm_std": float(norms.std()),
                        "grad_norm_min": float(norms.min()),
                        "grad_norm_max": float(norms.max()),
                        "scale": runs[0].scale,
                    }
                )
    return pd.DataFrame(rows, columns=list(VS_DK_COLUMNS))


def gradient_table(
    variants: Iterable[str],
    embed_dim: int = 16,
    seq_len: int = 4,
    init: str = "scaled",
    seed: int = 0,
    params: dict[str, dict] | None = None,
) -> pd.DataFrame:
    """Gradient norms per variant, with the scale 1/sqrt(D) and with no scaling (1).

    Args:
        variants: registered variant names.
        embed_dim: D = d_k, in [1, 1024].
        seq_len: L, in [1, 256].
        init: ``"scaled"`` or ``"randn"``.
        seed: non-negative seed (the same problem for every variant).
        params: optional ``{variant: {param: value}}`` overrides.

    Returns:
        Long DataFrame with columns variant, scaling, tensor, grad_norm, loss, scale.

    Raises:
        ValueError: for an unknown variant or parameter, or a bad size, init or seed.
    """
    names = variant_names(variants)
    params = params or {}
    rows = []
    for name in names:
        for scaling, scale in _scalings(embed_dim):
            norms = measure_gradient_norms(
                name, embed_dim, seq_len, scale=scale, init=init, seed=seed, **params.get(name, {})
            )
            for tensor in GRAD_TENSORS:
                rows.append(
                    {
                        "variant": name,
                        "scaling": scaling,
                        "tensor": tensor,
                        "grad_norm": getattr(norms, tensor),
                        "loss": norms.loss,
                        "scale": norms.scale,
                    }
                )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
