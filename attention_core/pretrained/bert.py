"""A BERT encoder built on :class:`~attention_core.modules.MultiHeadSelfAttention`: the model
(config, embeddings, layers, :class:`Encoder`); :mod:`~attention_core.pretrained.minilm` loads
a checkpoint into it (all-MiniLM-L6-v2, or any BERT-style folder) and
:mod:`~attention_core.pretrained.e5` loads multilingual-e5-small. Nothing here touches the
network or imports ``transformers``.

Because every layer's self-attention is an attention_core module, any registered variant
(local window, linear, chunked, …) can replace the attention in all layers at once
(:meth:`Encoder.set_variant`) and the effect on the real model can be measured.

Shapes: B batch, L tokens, D model width (384), H heads (12), N layers (6).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from attention_core.modules import MultiHeadSelfAttention
from attention_core.pretrained.ablation import head_multipliers, layer_scaling, scale_heads
from attention_core.pretrained.tokenizer import Tokenized, tokenize
from attention_core.registry import get_variant
from attention_core.validation import check_float, check_int


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT ``config.json`` this encoder uses.

    Attributes:
        vocab_size, hidden_size (D), num_hidden_layers (N), num_attention_heads (H),
        intermediate_size, max_position_embeddings, type_vocab_size, layer_norm_eps,
        hidden_act: as in the checkpoint's config.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str = "gelu"

    @classmethod
    def from_file(cls, path: str | Path) -> BertConfig:
        """Read and validate a BERT ``config.json``.

        Args:
            path: the JSON file.

        Returns:
            The parsed :class:`BertConfig`.

        Raises:
            FileNotFoundError: when the file does not exist.
            ValueError: for invalid JSON, a missing field, a non-positive size, an
                activation other than exact ``"gelu"``, or non-absolute positions.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"config file {path} is not valid JSON: {err}") from err
        sizes = (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        values: dict[str, object] = {}
        for name in sizes:
            value = raw.get(name)
            values[name] = check_int(f"{path}: {name}", value, low=1)
        eps = raw.get("layer_norm_eps", 1e-12)
        eps = check_float(
            f"{path}: layer_norm_eps", eps, low=0, high=1, low_open=True, high_open=True
        )
        act = raw.get("hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"{path}: hidden_act must be 'gelu' (exact erf GELU), got {act!r}")
        positions = raw.get("position_embedding_type", "absolute")
        if positions != "absolute":
            raise ValueError(
                f"{path}: position_embedding_type must be 'absolute', got {positions!r}"
            )
        return cls(layer_norm_eps=eps, hidden_act=act, **values)


@dataclass(frozen=True)
class EncoderOutput:
    """What :meth:`Encoder.forward` returns (intermediates are returned, never stashed).

    Attributes:
        hidden_states: final layer output, shape (B, L, D).
        attentions: one (B, H, L, L) weight tensor per layer, or ``None`` when weights
            were not requested.
    """

    hidden_states: torch.Tensor
    attentions: tuple[torch.Tensor, ...] | None


@dataclass(frozen=True)
class EncodeResult:
    """One encoded text.

    Attributes:
        tokens: WordPiece tokens, length L (``[CLS]`` … ``[SEP]``).
        input_ids: token ids, shape (L,), int64.
        hidden_states: final hidden states, shape (L, D).
        attentions: attention weights of every layer and head, shape (N, H, L, L).
        sentence_embedding: mean of ``hidden_states`` over all L tokens, shape (D,): the
            sentence-transformers Pooling module's output, *before* its Normalize module.
        truncated: True when the text was cut at the model's maximum length.
        offsets: per token, its (start, end) character span in the text, (0, 0) for
            special tokens; ``None`` when the tokenizer does not say.
    """

    tokens: list[str]
    input_ids: torch.Tensor
    hidden_states: torch.Tensor
    attentions: torch.Tensor
    sentence_embedding: torch.Tensor
    truncated: bool = False
    offsets: list[tuple[int, int]] | None = None

    @property
    def normalized_embedding(self) -> torch.Tensor:
        """The L2-normalised sentence embedding, shape (D,).

        all-MiniLM-L6-v2's sentence-transformers pipeline ends in a Normalize module, so
        this is what ``SentenceTransformer.encode`` would return. Cosine similarity is the
        same for the raw and the normalised embedding.
        """
        return F.normalize(self.sentence_embedding, dim=-1)


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm (dropout is 0 at inference).

    ``word_embeddings`` may be any module mapping (B, L) ids to (B, L, D) vectors, e.g. a
    quantised table decoded row by row; by default a plain ``nn.Embedding``.
    """

    def __init__(self, config: BertConfig, word_embeddings: nn.Module | None = None) -> None:
        super().__init__()
        if word_embeddings is None:
            word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.word_embeddings = word_embeddings
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Embed token ids.

        Args:
            input_ids: (B, L) int64.
            token_type_ids: (B, L) int64 segment ids, default all zero.

        Returns:
            (B, L, D) embeddings.
        """
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device)  # (L,)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # (B, L)
        x = (
            self.word_embeddings(input_ids)  # (B, L, D)
            + self.position_embeddings(positions)  # (L, D), broadcast over B
            + self.token_type_embeddings(token_type_ids)  # (B, L, D)
        )
        return self.norm(x)


class BertLayer(nn.Module):
    """One post-LayerNorm BERT block whose self-attention is an attention_core module.

    attention -> dense -> + residual -> LayerNorm -> dense -> GELU -> dense -> + residual
    -> LayerNorm. Dropout is omitted: this encoder is for inference.
    """

    def __init__(self, config: BertConfig, variant: str, **variant_params) -> None:
        super().__init__()
        width = config.hidden_size
        self.attention = MultiHeadSelfAttention(
            width, config.num_attention_heads, variant=variant, **variant_params
        )
        self.attention_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(width, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, width)
        self.output_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        *,
        scaling: tuple[torch.Tensor, bool] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the block.

        Args:
            x: (B, L, D) input.
            mask: (B, 1, L) bool key-padding mask (True = real token), or None.
            need_weights: also return the attention weights.
            scaling: (multipliers (B or 1, H), mean) applied to each head's output before
                the output projection (:func:`~attention_core.pretrained.ablation.scale_heads`).

        Returns:
            (out (B, L, D), weights (B, H, L, L) or None).
        """
        # BERT's attention.output.dense is the module's out_linear.
        if scaling is None:
            attended, weights = self.attention(x, mask=mask, need_weights=need_weights)
        else:
            attended, weights = self._scaled_attention(x, mask, need_weights, scaling)
        x = self.attention_norm(x + attended)  # (B, L, D)
        hidden = F.gelu(self.intermediate(x))  # (B, L, 4D), exact erf GELU
        x = self.output_norm(x + self.output(hidden))  # (B, L, D)
        return x, weights

    def _scaled_attention(self, x, mask, need_weights, scaling):
        """The attention module's forward pass with each head's output scaled before the
        output projection: (out (B, L, D), weights (B, H, L, L) or None)."""
        module = self.attention
        q, k, v = module.project_qkv(x)  # (B, H, L, E) each
        result = module.attend_heads(q, k, v, mask, need_weights)  # mask (B, 1, L)
        out = scale_heads(result.output, *scaling)  # (B, H, L, E)
        return module.out_linear(module.merge_heads(out)), result.weights  # (B, L, D)


class Encoder(nn.Module):
    """A BERT encoder plus its tokenizer, with swappable attention in every layer.

    Build it with :func:`~attention_core.pretrained.minilm.load_minilm`,
    :func:`~attention_core.pretrained.minilm.load_bert` or
    :func:`~attention_core.pretrained.e5.load_e5_small`; use :meth:`encode` for a text and
    :meth:`forward` for id batches. Subclasses with another tokenizer override
    :meth:`tokenize`.

    Attributes:
        config: the checkpoint's :class:`BertConfig`.
        tokenizer: a ``tokenizers.Tokenizer`` with padding off (or a subclass's own).
        folder: where the checkpoint came from (a folder or a file).
        variant, variant_params: the attention variant used in every layer.
    """

    def __init__(
        self,
        config: BertConfig,
        tokenizer,
        folder: Path,
        variant: str = "scaled",
        *,
        word_embeddings: nn.Module | None = None,
        **variant_params,
    ) -> None:
        super().__init__()
        resolved = get_variant(variant).resolve_params(variant_params)
        self.config = config
        self.tokenizer = tokenizer
        self.folder = folder
        self.variant = variant
        self.variant_params = resolved
        self.embeddings = BertEmbeddings(config, word_embeddings)
        self.layers = nn.ModuleList(
            BertLayer(config, variant, **resolved) for _ in range(config.num_hidden_layers)
        )
        self.eval()

    def set_variant(self, name: str, **params) -> None:
        """Replace the attention variant in every layer, keeping the trained projections.

        Args:
            name: a registered variant name (see ``attention_core.VARIANTS``).
            **params: that variant's parameters; missing ones take their defaults.

        Raises:
            ValueError: for an unknown variant, an unknown parameter or a value out of range.
        """
        resolved = get_variant(name).resolve_params(params)
        for layer in self.layers:
            layer.attention.set_variant(name, **resolved)
        self.variant = name
        self.variant_params = resolved

    def with_variant(self, name: str, **params) -> Encoder:
        """Return a twin encoder that shares this one's weights but uses another variant.

        Nothing is copied except the small module objects, and this encoder is left
        unchanged, so one loaded model can serve many variants at once (e.g. concurrent
        dashboard sessions) without a lock.

        Args:
            name: a registered variant name.
            **params: that variant's parameters; missing ones take their defaults.

        Returns:
            A new :class:`Encoder` whose parameters are the same tensor objects as this one's.

        Raises:
            ValueError: for an unknown variant, an unknown parameter or a value out of range.
        """
        resolved = get_variant(name).resolve_params(params)
        shared = {id(t): t for t in (*self.parameters(), *self.buffers())}
        shared[id(self.tokenizer)] = self.tokenizer
        twin = copy.deepcopy(self, memo=shared)
        twin.set_variant(name, **resolved)
        return twin

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        need_weights: bool = True,
        *,
        ablate=(),
        ablation: str = "zero",
        head_scale: torch.Tensor | None = None,
    ) -> EncoderOutput:
        """Encode a batch of token ids.

        Args:
            input_ids: (B, L) int64 ids, L <= max_position_embeddings.
            attention_mask: (B, L) with 1/True for real tokens and 0/False for padding;
                None means no padding.
            token_type_ids: (B, L) segment ids, default zeros.
            need_weights: return every layer's (B, H, L, L) weights.
            ablate: (layer, head) pairs, 0-based, whose attention output (before the output
                projection) is turned off (:mod:`~attention_core.pretrained.ablation`).
            ablation: ``"zero"`` (default) or ``"mean"`` (the head's mean output over the
                L positions, padding included).
            head_scale: optional float (N, H) or (B, N, H) multipliers of every head's
                output (1 = unchanged); it may require grad.

        Returns:
            :class:`EncoderOutput` with hidden states (B, L, D).

        Raises:
            ValueError: for a non-2-D or non-integer ``input_ids``, ids outside the
                vocabulary, L above the position limit, a mask of another shape, or a bad
                ablation pair or ``head_scale``.
        """
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else input_ids
            raise ValueError(f"input_ids must be a (B, L) tensor, got {shape!r}")
        if input_ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"input_ids must be int64 or int32, got {input_ids.dtype}")
        length = input_ids.shape[1]
        if not 1 <= length <= self.config.max_position_embeddings:
            raise ValueError(
                f"sequence length {length} outside [1, {self.config.max_position_embeddings}]"
            )
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.config.vocab_size:
            raise ValueError(
                f"input_ids must lie in [0, {self.config.vocab_size}), got range [{low}, {high}]"
            )
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask shape {tuple(attention_mask.shape)} must equal "
                    f"input_ids shape {tuple(input_ids.shape)}"
                )
            mask = attention_mask.bool()[:, None, :]  # (B, 1, L): True = real key
        shape = (self.config.num_hidden_layers, self.config.num_attention_heads)
        scale, mean = head_multipliers(shape, ablate, ablation, head_scale)
        x = self.embeddings(input_ids.long(), token_type_ids)  # (B, L, D)
        attentions: list[torch.Tensor] = []
        for index, layer in enumerate(self.layers):
            scaling = layer_scaling(scale, mean, index)
            x, weights = layer(x, mask=mask, need_weights=need_weights, scaling=scaling)
            if need_weights:
                attentions.append(weights)  # (B, H, L, L)
        return EncoderOutput(
            hidden_states=x, attentions=tuple(attentions) if need_weights else None
        )

    def tokenize(self, text: str) -> Tokenized:
        """Tokenise ``text`` with this checkpoint's vocabulary (see :func:`tokenize`)."""
        return tokenize(self.tokenizer, text)

    @torch.no_grad()
    def encode(self, text: str) -> EncodeResult:
        """Tokenise and encode one text, returning tokens, hidden states and all weights.

        Args:
            text: a non-empty string, encoded exactly as given; cut at 512 tokens with a
                warning.

        Returns:
            :class:`EncodeResult`: hidden states (L, D), attentions (N, H, L, L) and the
            mean-pooled sentence embedding (D,).

        Raises:
            ValueError: when ``text`` is not a string or is blank.
        """
        tokenized = self.tokenize(text)
        input_ids = torch.tensor([tokenized.input_ids], dtype=torch.int64)  # (1, L)
        out = self.forward(input_ids, need_weights=True)
        hidden = out.hidden_states[0]  # (L, D)
        attentions = torch.stack(out.attentions, dim=1)[0]  # (N, H, L, L)
        return EncodeResult(
            tokens=tokenized.tokens,
            input_ids=input_ids[0],
            hidden_states=hidden,
            attentions=attentions,
            sentence_embedding=hidden.mean(dim=0),  # (D,), every token is real: no padding
            truncated=tokenized.truncated,
            offsets=tokenized.offsets,
        )
