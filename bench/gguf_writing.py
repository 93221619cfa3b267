"""The keys of a synthetic llama-family GGUF decoder file, written with ``gguf.GGUFWriter``
(llama.cpp's own writer): shared by the 1B bench file (``bench.gguf_model``) and the tests'
tiny files (``tests/tiny_gguf.py``), which differ only in their sizes and vocabularies.
"""

from __future__ import annotations

from typing import Protocol

import gguf

from attention_core.pretrained.bpe import byte_alphabet

BYTES = 256


class DecoderSizes(Protocol):
    """The sizes a decoder file's keys carry (``bench.gguf_model.ModelShape``,
    ``tests.tiny_gguf.TinySpec``)."""

    layers: int
    width: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int


def add_decoder_keys(
    writer: gguf.GGUFWriter,
    sizes: DecoderSizes,
    *,
    context: int,
    rope_base: float,
    rms_eps: float,
) -> None:
    """Write a decoder's architecture keys, ``{arch}.context_length`` to
    ``{arch}.attention.layer_norm_rms_epsilon``.

    Args:
        writer: the file being written (its architecture names the keys).
        sizes: layers, width, heads, kv_heads, head_dim (written as the key, value and RoPE
            sizes) and ffn.
        context: the context length. rope_base: RoPE's θ. rms_eps: RMSNorm's ε.
    """
    writer.add_context_length(context)
    writer.add_embedding_length(sizes.width)
    writer.add_block_count(sizes.layers)
    writer.add_feed_forward_length(sizes.ffn)
    writer.add_head_count(sizes.heads)
    writer.add_head_count_kv(sizes.kv_heads)
    writer.add_key_length(sizes.head_dim)
    writer.add_value_length(sizes.head_dim)
    writer.add_rope_dimension_count(sizes.head_dim)
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(rms_eps)


def byte_tokens() -> list[str]:
    """The 256 single-byte tokens of a byte-level vocabulary, in byte order (GPT-2's
    alphabet: byte 0x20 is ``Ġ``)."""
    alphabet = byte_alphabet()
    return [alphabet[b] for b in range(BYTES)]


def add_byte_level_tokenizer(
    writer: gguf.GGUFWriter,
    *,
    pre: str,
    tokens: list[str],
    types: list[int],
    merges: list[str],
    bos: int,
    eos: int,
) -> None:
    """Write a byte-level BPE tokenizer (``tokenizer.ggml.model = "gpt2"``).

    Args:
        writer: the file being written.
        pre: ``tokenizer.ggml.pre`` (the pre-tokeniser family).
        tokens, types: the vocabulary in id order and each token's type (1 normal, 3 control).
        merges: ``"left right"`` pairs, highest priority first.
        bos, eos: the begin and end token ids.
    """
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
