"""Frozen configs of plain values: what the controls return and the cached data calls take.

One :class:`LayerConfig` describes one run of a multi-head self-attention layer. The sidebar's
controls build it (:func:`dashboard.controls.layer_controls`), a page passes it whole to the
data layer (:func:`dashboard.data.attention_run`, :func:`dashboard.data.attention_peak`), and
Streamlit's caches hash it field by field, so the same config is computed once per server.
A page that needs a variation (another variant on the same input) uses
``dataclasses.replace(cfg, variant=...)`` instead of a new list of arguments.

A page script runs again on every rerun, and a dataclass it defines is built again each time
(about 1 ms: its methods are compiled anew). The Scaling page, the one a room follows in
``bench.load --mode room``, keeps its config here for that reason (4 % of a room's server
time in py-spy); the other pages still define theirs in their scripts.

This module imports neither streamlit nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass

ParamPairs = tuple[tuple[str, int | float | bool], ...]
"""A variant's own parameters as ``(name, value)`` pairs, in registry order (hashable)."""


@dataclass(frozen=True)
class LayerConfig:
    """Everything that defines one seeded multi-head self-attention computation.

    Attributes:
        variant: registry name, e.g. ``"local"``.
        params: the variant's ``(name, value)`` pairs, in registry order.
        seq_len: L for random input (sentences use their own token count).
        d_model, heads: model width D and number of heads H (H divides D).
        mask_kind: ``"none"``, ``"causal"`` or ``"padding"``.
        pad_len: real tokens for ``"padding"`` (the rest are padding keys).
        dropout: dropout probability on the weights (0 when unsupported).
        seed: seeds the input, the projections and the dropout.
        input_kind: ``"random"``, ``"preset_en"``, ``"preset_zh"`` or ``"typed"``.
        sentence: the typed text (empty unless ``input_kind == "typed"``).
        device: ``"auto"`` or a device name such as ``"cpu"`` or ``"cuda"``.
        projections: ``"random"`` (seeded W_Q and W_K, as an untrained layer has) or
            ``"identity"`` (W_Q = W_K = I: each head compares its own slice of the input
            vectors, so a token attends most to itself and to tokens like it; W_V and the
            output projection stay seeded).
    """

    variant: str = "scaled"
    params: ParamPairs = ()
    seq_len: int = 16
    d_model: int = 64
    heads: int = 4
    mask_kind: str = "none"
    pad_len: int = 16
    dropout: float = 0.0
    seed: int = 0
    input_kind: str = "random"
    sentence: str = ""
    device: str = "auto"
    projections: str = "random"

    @property
    def d_k(self) -> int:
        """Per-head width d_model / heads."""
        return self.d_model // self.heads

    @property
    def param_dict(self) -> dict[str, int | float | bool]:
        """The variant's parameters as keyword arguments."""
        return dict(self.params)


@dataclass(frozen=True)
class StepConfig:
    """The Step-by-step walkthrough: single-head attention on a few tokens of a preset.

    Attributes:
        sentence: ``"preset_en"`` or ``"preset_zh"``.
        n_tokens: how many leading tokens to use.
        d_k: width of queries, keys and values.
        causal: apply a causal mask.
        seed: seeds the embeddings and the projection matrices.
    """

    sentence: str = "preset_zh"
    n_tokens: int = 6
    d_k: int = 4
    causal: bool = False
    seed: int = 0


@dataclass(frozen=True)
class ScalingConfig:
    """The Scaling page's experiment.

    Attributes:
        d_ks: the key widths d_k compared, sorted.
        seq_len: tokens per sequence L.
        trials: random draws per d_k.
        seed: seeds the draws.
    """

    d_ks: tuple[int, ...]
    seq_len: int
    trials: int
    seed: int
