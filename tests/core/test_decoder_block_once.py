"""The llama block is written once (attention_core.pretrained.llama_block): the decoder's
forward, the score parts' recorded run (score_run, score_parts) and the query–key map
(qk_map) all apply RoPE through the block's one rotation, ``Rope.rotate``.

The test turns that rotation the other way (every angle negated) and checks that each of the
three users changes, and that each one's layer-0 queries and keys equal an independent
float64 reference rotated the other way; deeper layers agree among the three. A user that
kept its own copy of the block's steps would keep rotating the old way and fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_core.experiments import qk_map
from attention_core.experiments import score_parts as sp
from attention_core.experiments import score_run as sr
from attention_core.pretrained import load_gguf
from attention_core.pretrained.rope import Rope, apply_rope
from tests.tiny_gguf import write_tiny_gguf

TEXT = "the cat sat on the mat"
HEAD = 3  # reads key head 1 (G = 2)
LAYERS = 3
SPECS = {
    "llama": {"rope_linear": 2.0, "rope_factors": True},  # interleaved rows, scaled RoPE
    "qwen2": {},  # half-split rows, q/k/v bias
    "qwen3": {},  # half-split rows, per-head q/k norms
}
TOLERANCE = 1e-4  # float32 block against the float64 reference


@pytest.fixture(scope="module")
def tiny_decoders(tmp_path_factory):
    """One tiny float32 decoder per architecture, used by this module only (score_run's LRU
    never holds a run of them from elsewhere)."""
    folder = tmp_path_factory.mktemp("block_once")
    return {
        arch: load_gguf(
            write_tiny_gguf(
                folder / f"{arch}.gguf", architecture=arch, layers=LAYERS, seed=11, **options
            ).path,
            weights_dtype="float32",
        )
        for arch, options in SPECS.items()
    }


def _rotate_backwards(self: Rope, x: torch.Tensor) -> torch.Tensor:
    """The block's RoPE with every angle negated."""
    return apply_rope(x, self.cos.to(x.dtype), -self.sin.to(x.dtype), self.style)


def _reference_rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def _reference_backwards_rope(x: torch.Tensor, cfg, style: str) -> torch.Tensor:
    """(heads, L, E) float64 rotated by −angle, written out pair by pair."""
    size = cfg.head_dim
    inv_freq = cfg.rope_base ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)
    if cfg.rope_factors:
        inv_freq = inv_freq / torch.tensor(cfg.rope_factors, dtype=torch.float64)
    positions = torch.arange(x.shape[1], dtype=torch.float64) / cfg.rope_linear
    angle = -positions[:, None] * inv_freq[None, :]  # (L, E/2)
    cos, sin = angle.cos(), angle.sin()
    if style == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # features 2i and 2i + 1
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    a, b = x[..., : size // 2], x[..., size // 2 :]  # features i and i + E/2
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def _reference_layer0_qk(tiny, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer 0's queries (H, L, E) and keys (K, L, E) in float64 from the file's weights,
    rotated backwards."""
    cfg, block = tiny.config, tiny.layers[0]
    heads, kv_heads, size = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    x = tiny.embedding.double()[ids[0]]  # (L, D)
    qkv = _reference_rms(x, block.attn_norm, cfg.rms_eps) @ block.qkv.double().T
    if cfg.qkv_bias:
        qkv = qkv + block.qkv_bias.double()
    q, k, _ = qkv.split([heads * size, kv_heads * size, kv_heads * size], dim=-1)
    q = q.reshape(-1, heads, size).transpose(0, 1)  # (H, L, E)
    k = k.reshape(-1, kv_heads, size).transpose(0, 1)  # (K, L, E)
    if cfg.qk_norm:
        q = _reference_rms(q, block.q_norm, cfg.rms_eps)
        k = _reference_rms(k, block.k_norm, cfg.rms_eps)
    style = tiny.rope_style
    return _reference_backwards_rope(q, cfg, style), _reference_backwards_rope(k, cfg, style)


def _close(actual, expected) -> None:
    torch.testing.assert_close(
        torch.as_tensor(actual).double(), expected, atol=TOLERANCE, rtol=TOLERANCE
    )


@pytest.mark.parametrize("arch", list(SPECS))
def test_a_change_of_the_blocks_rope_reaches_every_user(tiny_decoders, arch, monkeypatch):
    tiny = tiny_decoders[arch]
    cfg, group = tiny.config, tiny.config.group_size
    ids = torch.tensor([tiny.tokenize(TEXT).input_ids])  # (1, L)
    before_logits = tiny(ids).logits
    before_run = sr.record_run(tiny, ids)
    before_map = qk_map.decoder_head_qk(tiny, [TEXT], layer=0, head=HEAD)

    monkeypatch.setattr(Rope, "rotate", _rotate_backwards)
    out = tiny(ids)
    run = sr.record_run(tiny, ids)
    maps = [qk_map.decoder_head_qk(tiny, [TEXT], layer=n, head=HEAD) for n in range(LAYERS)]
    ref_q, ref_k = _reference_layer0_qk(tiny, ids)

    assert not torch.allclose(out.logits, before_logits, atol=1e-3)
    assert not torch.allclose(run.q, before_run.q, atol=1e-3)
    assert not np.allclose(maps[0].queries[0], before_map.queries[0], atol=1e-3)
    _close(out.cache.keys[0][0], ref_k)  # the decoder's own keys
    _close(run.q[0], ref_q)
    _close(run.k[0], ref_k)
    _close(maps[0].queries[0], ref_q[HEAD])
    _close(maps[0].keys[0], ref_k[HEAD // group])
    for layer in range(LAYERS):  # deeper layers: the three agree
        _close(run.k[layer], out.cache.keys[layer][0].double())
        _close(maps[layer].queries[0], run.q[layer, HEAD].double())
        _close(maps[layer].keys[0], run.k[layer, HEAD // group].double())
    _close(run.logits, out.logits[0].double())
    parts = sp.score_parts(tiny, ids, layer=LAYERS - 1, head=HEAD, query=5, key=2)
    score = float(run.q[-1, HEAD, 5] @ run.k[-1, HEAD // group, 2]) / math.sqrt(cfg.head_dim)
    assert parts.total == pytest.approx(score, abs=TOLERANCE)
