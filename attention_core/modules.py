"""MultiHeadSelfAttention: projections, head split/merge, and any registered variant.

Layer names follow the tutorial (``q_linear``, ``k_linear``, ``v_linear``, ``out_linear``) so
a reader can map the code to the text. Head splitting lives only here.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attention_core.registry import attend, get_variant
from attention_core.types import AttentionResult
from attention_core.validation import check_float, check_int


def _allocate_on_cpu(module: nn.Module) -> None:
    """Give every parameter of ``module`` (built on the meta device) uninitialised CPU
    storage of its shape and dtype, in place.

    ``Module.to_empty`` does the same through ``torch.empty_like`` on meta tensors, which
    runs torch's Python reference code: its first call imports torch's decompositions and
    symbolic shapes (sympy included), about 0.4 s of a fresh dashboard's first chart.
    """
    for sub in module.modules():
        for name, param in list(sub.named_parameters(recurse=False)):
            storage = torch.empty(param.shape, dtype=param.dtype)  # same shape, on the CPU
            setattr(sub, name, nn.Parameter(storage, requires_grad=param.requires_grad))


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention over x (B, L, D) with a registered variant.

    Args:
        embed_dim: model width D; must be divisible by num_heads.
        num_heads: H; head_dim E = D // H.
        variant: a name in ``VARIANTS`` (default ``"scaled"``).
        dropout: dropout on the attention weights, used in training mode only.
        bias: whether the four linear layers have a bias.
        scale: score scale; ``None`` uses the variant's default (1/sqrt(E) for most).
        init_seed: when given, the weights are drawn from a generator seeded with it (see
            :meth:`reset_parameters`): the same values as building the layer right after
            ``torch.manual_seed(init_seed)``, but safe when other threads use torch's global
            generator at the same time.
        **params: the variant's own parameters, validated now.

    Raises:
        ValueError: when embed_dim or num_heads is not a positive whole number, embed_dim is
            not divisible by num_heads, dropout is outside [0, 1), or the variant or one of
            its parameters is unknown or out of range.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        variant: str = "scaled",
        *,
        dropout: float = 0.0,
        bias: bool = True,
        scale: float | None = None,
        init_seed: int | None = None,
        **params,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        num_heads = check_int("num_heads", num_heads, low=1)
        if embed_dim % num_heads != 0:
            divisors = [h for h in range(1, embed_dim + 1) if embed_dim % h == 0]
            raise ValueError(
                f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}; "
                f"choose num_heads among {divisors}"
            )
        dropout = check_float("dropout", dropout, low=0.0, high=1.0, high_open=True)
        spec = get_variant(variant)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.variant = variant
        self.params = spec.resolve_params(params)
        self.dropout = float(dropout)
        self.scale = scale
        if init_seed is not None:
            init_seed = check_int("init_seed", init_seed, low=0)
        # seeded: allocate without drawing from the global generator, then draw from our own
        where = {"device": "meta"} if init_seed is not None else {}
        self.q_linear = nn.Linear(embed_dim, embed_dim, bias=bias, **where)
        self.k_linear = nn.Linear(embed_dim, embed_dim, bias=bias, **where)
        self.v_linear = nn.Linear(embed_dim, embed_dim, bias=bias, **where)
        self.out_linear = nn.Linear(embed_dim, embed_dim, bias=bias, **where)
        if init_seed is not None:
            _allocate_on_cpu(self)
            self.reset_parameters(torch.Generator().manual_seed(init_seed))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw the four linear layers' parameters as ``nn.Linear`` does, from ``generator``.

        Weights are Kaiming-uniform (a = sqrt(5)), biases uniform in ±1/sqrt(D), drawn in the
        order q, k, v, out, weight before bias: with ``torch.Generator().manual_seed(s)`` the
        values equal those of a layer built right after ``torch.manual_seed(s)``. Only the
        given generator is read, so threads building seeded layers at the same time (one per
        dashboard session) cannot disturb one another; ``None`` uses torch's global one.
        """
        for layer in (self.q_linear, self.k_linear, self.v_linear, self.out_linear):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            if layer.bias is not None:
                bound = 1.0 / math.sqrt(layer.in_features)
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)

    def set_variant(self, variant: str, **params) -> None:
        """Switch to another registered variant (weights unchanged).

        Raises:
            ValueError: for an unknown variant or parameter.
        """
        self.params = get_variant(variant).resolve_params(params)
        self.variant = variant

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, L, D) -> (B, H, L, E)."""
        B, L, _ = t.shape
        return t.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, E)

    def merge_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, H, L, E) -> (B, L, D)."""
        B, _, L, _ = t.shape
        return t.transpose(1, 2).reshape(B, L, self.embed_dim)  # (B, L, H, E) -> (B, L, D)

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.embed_dim or x.shape[1] < 1:
            raise ValueError(
                f"x must have shape (batch, length, {self.embed_dim}), got {tuple(x.shape)}"
            )

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project x (B, L, D) to q, k, v, each (B, H, L, E).

        Raises:
            ValueError: when x is not (B, L, embed_dim).
        """
        self._check_input(x)
        q = self.split_heads(self.q_linear(x))  # (B, L, D) -> (B, H, L, E)
        k = self.split_heads(self.k_linear(x))
        v = self.split_heads(self.v_linear(x))
        return q, k, v

    @staticmethod
    def _head_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
        """(L, S) stays; (B, L, S) and (B, 1, S) gain a head axis; (B, H, L, S) stays."""
        if mask is None or not isinstance(mask, torch.Tensor):
            return mask
        if mask.dim() == 3:
            return mask.unsqueeze(1)  # (B, 1, L|1, S)
        return mask

    def attend_heads(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        generator: torch.Generator | None = None,
    ) -> AttentionResult:
        """Every head attends with this module's variant, scale and parameters (dropout in
        training mode only); no output projection.

        Args:
            q, k, v: (B, H, L, E) each, from :meth:`project_qkv`.
            mask, need_weights, generator: as in :meth:`forward`.

        Returns:
            AttentionResult(output (B, H, L, E) per head, weights and scores (B, H, L, L) or
            None).

        Raises:
            ValueError: for a badly shaped mask, NaN/inf input, or a budget overflow.
        """
        return attend(
            q,
            k,
            v,
            self.variant,
            mask=self._head_mask(mask),
            scale=self.scale,
            need_weights=need_weights,
            dropout_p=self.dropout if self.training else 0.0,
            generator=generator,
            **self.params,
        )

    def forward_intermediates(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        generator: torch.Generator | None = None,
    ) -> AttentionResult:
        """Attend over x and return what the layer computed, per head.

        The scores are the variant's own (see :class:`AttentionResult`): q·kᵀ·scale with this
        module's ``scale`` (or the variant's default), plus the mask, blocked cells at the
        dtype's minimum; ``None`` for ``linear``, which has no softmax.

        Args:
            x, mask, generator: as in :meth:`forward`.
            need_weights: also return the per-head weights and scores (B·H·L² values each).

        Returns:
            AttentionResult(output (B, L, D) after the output projection, weights
            (B, H, L, L) or None, scores (B, H, L, L) or None).

        Raises:
            ValueError: for a badly shaped x or mask, NaN/inf input, or a budget overflow.
        """
        q, k, v = self.project_qkv(x)  # (B, H, L, E) each
        result = self.attend_heads(q, k, v, mask, need_weights, generator)
        out = self.out_linear(self.merge_heads(result.output))  # (B, L, D)
        return AttentionResult(out, result.weights, result.scores)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        generator: torch.Generator | None = None,
    ):
        """Attend over x.

        Args:
            x: (B, L, D).
            mask: None, (L, L), (B, L, L), (B, 1, L) key padding, or (B, H, L, L); bool
                (True = may attend) or float (added to the scores).
            need_weights: return the per-head weights (forms B·H·L² values).
            generator: torch.Generator for reproducible dropout in training mode.

        Returns:
            (output (B, L, D), weights (B, H, L, L) or None). For the scores as well, call
            :meth:`forward_intermediates`.

        Raises:
            ValueError: for a badly shaped x or mask, NaN/inf input, or a budget overflow.
        """
        result = self.forward_intermediates(x, mask, need_weights, generator)
        return result.output, result.weights
