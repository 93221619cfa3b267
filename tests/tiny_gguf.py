"""Tiny GGUF decoder files for tests, written with ``gguf.GGUFWriter`` (llama.cpp's own writer),
and an independent float64 forward pass of what they hold.

:func:`write_tiny_gguf` writes a small ``llama``, ``qwen2`` or ``qwen3`` decoder with random
weights in any storage type (the float and ``_0``/``_1`` types quantised by
``gguf.quants.quantize``; the K types as random blocks with small f16 scales), tied or
separate output, grouped-query attention, an explicit head size, linear RoPE scaling or
Llama 3's per-frequency factors (``rope_freqs.weight``), and a byte-level BPE vocabulary.
The returned :class:`TinyModel` carries every tensor as ``gguf.quants.dequantize`` decodes
it, and :func:`reference_forward` runs the model from those values alone, written out from
llama.cpp's semantics in float64 (not from ``attention_core``): RMSNorm, q/k/v (plus biases),
per-head q/k norms, RoPE on adjacent pairs for ``llama`` (the converter stores q/k rows
permuted) and on halves for the Qwen families, causal softmax, SwiGLU, final norm, logits.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np
import torch
from gguf import quants
from gguf.constants import GGMLQuantizationType as QType

from attention_core.pretrained.ggml_quants import HALF_SCALE_OFFSETS
from bench.gguf_writing import add_byte_level_tokenizer, add_decoder_keys, byte_tokens

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
VOCAB_MULTIPLE = 16  # reserved control tokens pad the vocabulary, as real ones are padded
CONTROL, NORMAL = 3, 1
MERGES = ("Ġ t", "h e", "Ġt he", "Ġ a", "i n", "Ġ c", "a t", "Ġc at")
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K")
QUANTIZED = ("BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")
K_SCALE_SPREAD = 0.0003  # random K blocks' first draw of their scales
WEIGHT_STD = 0.08
RMS_EPS = 1e-5
MATRIX_KINDS = (
    "token_embd",
    "output",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
)
ARCHITECTURES = ("llama", "qwen2", "qwen3")
SPM_VOCAB = 320
SPM_TYPES = {"unknown": 2, "control": 3, "byte": 6}
SPM_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "the cat sat on the mat, and the dog sat on the log.",
    "那只猫坐在垫子上，它看起来很舒服。",
    "Attention is all you need: queries, keys and values.",
    "Numbers like 12345 appear in text 🍕 too.",
] * 20


@dataclass(frozen=True)
class TinySpec:
    """What a tiny file holds.

    Attributes:
        architecture: ``"llama"``, ``"qwen2"`` (q/k/v biases) or ``"qwen3"`` (q/k norms).
        layers, width, heads, kv_heads, head_dim, ffn: the sizes (head_dim is written as
            ``attention.key_length``; ``heads · head_dim`` may differ from ``width``).
        types: storage type per matrix kind (:data:`MATRIX_KINDS`); unnamed kinds are F32.
        tied: no ``output.weight`` (the embedding is the output matrix).
        rope_base, rope_linear: RoPE's θ and a linear scaling factor (1: none).
        rope_factors: write Llama 3's ``rope_freqs.weight`` (head_dim / 2 factors).
        context: the context length.
        pre: ``tokenizer.ggml.pre`` (byte-level vocabularies).
        tokenizer: ``"gpt2"`` (a byte-level BPE vocabulary) or ``"llama"`` (a SentencePiece
            BPE with byte fallback, trained here with the ``sentencepiece`` package, as
            Llama 2 and TinyLlama files carry).
        seed: the random weights' seed.
        drop: tensor names left out of the file (a broken file).
        extra: more metadata as (key, value) pairs (ints, floats, strings, lists).
    """

    architecture: str = "llama"
    layers: int = 2
    width: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    ffn: int = 128
    types: tuple[tuple[str, str], ...] = ()
    tied: bool = True
    rope_base: float = 10000.0
    rope_linear: float = 1.0
    rope_factors: bool = False
    context: int = 256
    pre: str = "smollm"
    tokenizer: str = "gpt2"
    seed: int = 0
    drop: tuple[str, ...] = ()
    extra: tuple[tuple[str, object], ...] = ()

    def type_of(self, kind: str) -> str:
        """The storage type of a matrix kind."""
        return dict(self.types).get(kind, "F32")


@dataclass
class TinyModel:
    """A written tiny file and what it holds.

    Attributes:
        path: the ``.gguf`` file.
        spec: its :class:`TinySpec`.
        tensors: every tensor by GGUF name as ``gguf.quants.dequantize`` decodes it
            (float32, row-major).
        vocab: the tokens in id order.
        sentencepiece: for a ``"llama"`` tokenizer, the ``SentencePieceProcessor`` it was
            trained as (the reference for its ids), else None.
    """

    path: Path
    spec: TinySpec
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    vocab: list[str] = field(default_factory=list)
    sentencepiece: object = None


def train_sentencepiece(corpus=SPM_CORPUS, vocab_size: int = SPM_VOCAB, **options):
    """A tiny SentencePiece BPE with byte fallback, set up as Llama 2's; its processor.

    Args:
        corpus: the training sentences. vocab_size: the pieces wanted.
        **options: more ``SentencePieceTrainer.train`` options (e.g. ``add_dummy_prefix``).
    """
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        byte_fallback=True,
        character_coverage=0.995,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        split_digits=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
        **options,
    )
    return sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())


def _spm_vocab(sp) -> tuple[list[str], list[float], list[int]]:
    """Pieces, scores and token types as llama.cpp's converter writes them."""
    tokens, scores, types = [], [], []
    for index in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(index))
        scores.append(sp.get_score(index))
        kind = NORMAL
        for name, code in SPM_TYPES.items():
            if getattr(sp, f"is_{name}")(index):
                kind = code
        types.append(kind)
    return tokens, scores, types


def byte_level_vocab() -> tuple[list[str], list[str], list[int]]:
    """GPT-2's 256 byte characters, the merged tokens of :data:`MERGES`, then the specials;
    returns (tokens, merges, token types)."""
    tokens = byte_tokens()
    tokens += ["".join(merge.split(" ")) for merge in MERGES]
    normal = len(tokens)
    tokens += list(SPECIALS)
    reserved = 0
    while len(tokens) % VOCAB_MULTIPLE:
        tokens.append(f"<|reserved_{reserved}|>")
        reserved += 1
    types = [NORMAL] * normal + [CONTROL] * (len(tokens) - normal)
    return tokens, list(MERGES), types


def _random_k_blocks(rng: np.random.Generator, name: str, rows: int, cols: int) -> np.ndarray:
    """(rows, bytes per row) uint8 of random K-type blocks whose values spread like the
    other weights (their block scales drawn, then all scaled to :data:`WEIGHT_STD`)."""
    values, size = quants.GGML_QUANT_SIZES[QType[name]]
    blocks = rows * cols // values
    raw = rng.integers(0, 256, (blocks, size), dtype=np.uint8)
    unit = rng.uniform(-1.0, 1.0, blocks)
    offsets = (
        ((0, "<f4"),) if name == "Q8_K" else tuple((o, "<f2") for o in HALF_SCALE_OFFSETS[name])
    )
    spread = K_SCALE_SPREAD
    for _ in range(2):  # values are linear in the scales: one rescale reaches the spread
        for offset, kind in offsets:
            width = np.dtype(kind).itemsize
            scale = (unit * spread).astype(kind)
            raw[:, offset : offset + width] = scale.view(np.uint8).reshape(blocks, width)
        std = float(_k_values(raw, name, rows, cols).std())
        spread *= WEIGHT_STD / std
    return raw.reshape(rows, -1)


def _k_values(raw: np.ndarray, name: str, rows: int, cols: int) -> np.ndarray:
    """What gguf decodes K blocks to (Q8_K, which gguf.quants lacks, in numpy)."""
    if name == "Q8_K":
        return _q8_k_values(raw, rows, cols)
    return quants.dequantize(raw.reshape(rows, -1), QType[name]).reshape(rows, cols)


def _q8_k_values(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q8_K decoded in numpy (gguf.quants has no Q8_K): y = d · q per block of 256."""
    blocks = raw.reshape(-1, 292)
    scale = np.ascontiguousarray(blocks[:, 0:4]).view("<f4")  # (blocks, 1)
    return (blocks[:, 4:260].view(np.int8).astype(np.float32) * scale).reshape(rows, cols)


def _add_matrix(writer, rng, name: str, values: np.ndarray, type_name: str) -> np.ndarray:
    """Write one matrix in ``type_name``; return what gguf decodes it to."""
    rows, cols = values.shape
    if type_name == "F32":
        writer.add_tensor(name, values.astype(np.float32))
        return values.astype(np.float32)
    if type_name == "F16":
        half = values.astype(np.float16)
        writer.add_tensor(name, half)
        return half.astype(np.float32)
    if type_name in QUANTIZED:
        stored = quants.quantize(values.astype(np.float32), QType[type_name])
        writer.add_tensor(name, stored, raw_dtype=QType[type_name])
        return quants.dequantize(stored, QType[type_name]).reshape(rows, cols)
    if type_name in K_TYPES:
        raw = _random_k_blocks(rng, type_name, rows, cols)
        writer.add_tensor(name, raw, raw_dtype=QType[type_name])
        return _k_values(raw, type_name, rows, cols)
    raise ValueError(f"unknown storage type {type_name!r}")


def _add_vector(writer, name: str, values: np.ndarray) -> np.ndarray:
    writer.add_tensor(name, values.astype(np.float32))
    return values.astype(np.float32)


def _metadata(writer, spec: TinySpec, tokens, merges, types) -> None:
    add_decoder_keys(writer, spec, context=spec.context, rope_base=spec.rope_base, rms_eps=RMS_EPS)
    if spec.rope_linear != 1.0:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(spec.rope_linear)
    if spec.tokenizer == "llama":  # tokens are the pieces, ``merges`` their scores
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(merges)
        writer.add_token_types(types)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
        writer.add_add_bos_token(True)
    else:
        end = tokens.index(SPECIALS[0])  # <|endoftext|> begins and ends
        add_byte_level_tokenizer(
            writer, pre=spec.pre, tokens=tokens, types=types, merges=merges, bos=end, eos=end
        )
    for key, value in spec.extra:
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))


def _matrix(rng, rows: int, cols: int) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) * WEIGHT_STD).astype(np.float32)


def write_tiny_gguf(path: str | Path, spec: TinySpec | None = None, **options) -> TinyModel:
    """Write a tiny decoder file.

    Args:
        path: where to write it.
        spec: a :class:`TinySpec`; or its fields as keyword ``options``.

    Returns:
        :class:`TinyModel`: the path and every tensor as gguf decodes it.
    """
    spec = spec or TinySpec(**options)
    rng = np.random.default_rng(spec.seed)
    processor = None
    if spec.tokenizer == "llama":
        processor = train_sentencepiece()
        tokens, merges, types = _spm_vocab(processor)
    else:
        tokens, merges, types = byte_level_vocab()
    writer = gguf.GGUFWriter(str(path), spec.architecture)
    _metadata(writer, spec, tokens, merges, types)
    model = TinyModel(Path(path), spec, vocab=tokens, sentencepiece=processor)
    held = model.tensors
    width, size = spec.width, spec.head_dim
    vocab = len(tokens)

    def matrix(name: str, kind: str, rows: int, cols: int) -> None:
        values = _matrix(rng, rows, cols)
        if name not in spec.drop:
            held[name] = _add_matrix(writer, rng, name, values, spec.type_of(kind))

    def norm(name: str, length: int) -> None:
        values = 1.0 + 0.1 * rng.standard_normal(length)
        if name not in spec.drop:
            held[name] = _add_vector(writer, name, values)

    matrix("token_embd.weight", "token_embd", vocab, width)
    norm("output_norm.weight", width)
    if not spec.tied:
        matrix("output.weight", "output", vocab, width)
    if spec.rope_factors:
        factors = rng.uniform(1.0, 8.0, size // 2)
        held["rope_freqs.weight"] = _add_vector(writer, "rope_freqs.weight", factors)
    for index in range(spec.layers):
        prefix = f"blk.{index}"
        norm(f"{prefix}.attn_norm.weight", width)
        matrix(f"{prefix}.attn_q.weight", "attn_q", spec.heads * size, width)
        matrix(f"{prefix}.attn_k.weight", "attn_k", spec.kv_heads * size, width)
        matrix(f"{prefix}.attn_v.weight", "attn_v", spec.kv_heads * size, width)
        if spec.architecture == "qwen2":
            for part, rows in (("q", spec.heads), ("k", spec.kv_heads), ("v", spec.kv_heads)):
                bias, name = 0.1 * rng.standard_normal(rows * size), f"{prefix}.attn_{part}.bias"
                if name not in spec.drop:
                    held[name] = _add_vector(writer, name, bias)
        if spec.architecture == "qwen3":
            norm(f"{prefix}.attn_q_norm.weight", size)
            norm(f"{prefix}.attn_k_norm.weight", size)
        matrix(f"{prefix}.attn_output.weight", "attn_output", width, spec.heads * size)
        norm(f"{prefix}.ffn_norm.weight", width)
        matrix(f"{prefix}.ffn_gate.weight", "ffn_gate", spec.ffn, width)
        matrix(f"{prefix}.ffn_up.weight", "ffn_up", spec.ffn, width)
        matrix(f"{prefix}.ffn_down.weight", "ffn_down", width, spec.ffn)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float = RMS_EPS) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate(x: torch.Tensor, positions: torch.Tensor, spec: TinySpec, factors) -> torch.Tensor:
    """RoPE as llama.cpp applies it: adjacent pairs (llama) or halves (Qwen), float64.

    x: (heads, L, E)."""
    size = x.shape[-1]
    theta = spec.rope_base ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)  # (E/2,)
    if factors is not None:
        theta = theta / factors
    angle = (positions.double() / spec.rope_linear)[:, None] * theta[None, :]  # (L, E/2)
    cos, sin = angle.cos(), angle.sin()
    if spec.architecture == "llama":
        a, b = x[..., 0::2], x[..., 1::2]  # (heads, L, E/2) each
        out = torch.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
        return out
    a, b = x[..., : size // 2], x[..., size // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def file_tensors(model: TinyModel) -> dict[str, torch.Tensor]:
    """Every tensor of the tiny file as ``gguf`` decodes it, float64, by GGUF name."""
    return {name: torch.from_numpy(value).double() for name, value in model.tensors.items()}


@dataclass(frozen=True)
class ReferenceRun:
    """The tiny model's float64 forward on one sequence, its parts kept apart.

    Attributes:
        logits: (L, V). attentions: one (H, L, L) tensor per layer.
        streams: (N + 1, L, D), the stream after the embedding and after each layer.
        parts: (P, L, D), P = 1 + N·(H + 1): the embedding, then per layer each head's write
            (its output times its own slice of the output projection) and the MLP's write.
    """

    logits: torch.Tensor
    attentions: list[torch.Tensor]
    streams: torch.Tensor
    parts: torch.Tensor


def reference_run(model: TinyModel, ids: list[int], start: int = 0) -> ReferenceRun:
    """The tiny model's float64 forward on one sequence, from gguf's decoded values only.

    Args:
        model: from :func:`write_tiny_gguf`.
        ids: the token ids (L,).
        start: the first token's position.
    """
    spec, w = model.spec, file_tensors(model)
    factors = w.get("rope_freqs.weight")
    length, size = len(ids), spec.head_dim
    positions = torch.arange(start, start + length)
    x = w["token_embd.weight"][torch.tensor(ids)]  # (L, D)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    group = spec.heads // spec.kv_heads
    attentions, streams, parts = [], [x], [x]
    for index in range(spec.layers):
        p = f"blk.{index}."
        h = _rms(x, w[p + "attn_norm.weight"])
        q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        if spec.architecture == "qwen2":
            q, k, v = (t + w[p + f"attn_{n}.bias"] for t, n in zip((q, k, v), "qkv", strict=True))
        q = q.view(length, spec.heads, size).transpose(0, 1)  # (H, L, E)
        k = k.view(length, spec.kv_heads, size).transpose(0, 1)  # (K, L, E)
        v = v.view(length, spec.kv_heads, size).transpose(0, 1)  # (K, L, E)
        if spec.architecture == "qwen3":
            q, k = _rms(q, w[p + "attn_q_norm.weight"]), _rms(k, w[p + "attn_k_norm.weight"])
        q, k = _rotate(q, positions, spec, factors), _rotate(k, positions, spec, factors)
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)  # (H, L, E)
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)  # (H, L, L)
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        attentions.append(weights)
        outputs = weights @ v  # (H, L, E)
        w_o = w[p + "attn_output.weight"]  # (D, H·E)
        writes = [outputs[i] @ w_o[:, i * size : (i + 1) * size].T for i in range(spec.heads)]
        x = x + sum(writes)
        h = _rms(x, w[p + "ffn_norm.weight"])
        gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        mlp = (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T
        x = x + mlp
        streams.append(x)
        parts.extend((*writes, mlp))
    output = w.get("output.weight", w["token_embd.weight"])
    logits = _rms(x, w["output_norm.weight"]) @ output.T
    return ReferenceRun(logits, attentions, torch.stack(streams), torch.stack(parts))


def reference_forward(model: TinyModel, ids: list[int], start: int = 0):
    """:func:`reference_run`'s (logits (L, V), attentions: one (H, L, L) tensor per layer)."""
    run = reference_run(model, ids, start)
    return run.logits, run.attentions
