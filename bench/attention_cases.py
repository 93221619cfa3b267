"""What each row of ``python -m bench`` runs: the sizes, the kinds of call, and the
zero-argument callables a worker process times (see :mod:`bench.attention_bench` for how).

Inputs are float32, B=1, H=8, E=64, drawn from a seeded generator.
"""

from __future__ import annotations

import math
import time

BATCH, HEADS, HEAD_DIM = 1, 8, 64
WINDOW = 128
BLOCK = 64
STRIDE = 8
DASH_LEN = 256  # the dashboard's scale: weights are drawn up to a few hundred tokens
DENSE_LENS = (DASH_LEN, 1024)  # the dense path's stated cost (scaled + weights vs SDPA)
FULL_SIZES = (4096, 8192)
QUICK_SIZES = (512, 1024)
DASH_KINDS = ("sdpa", "scaled+w")
SMALL_KINDS = ("sdpa", "scaled", "chunked", "naive", "local", "linear")
LARGE_KINDS = (
    "sdpa",
    "sdpa+band",
    "flex",
    "local",
    "local-sdpa",
    "linear",
    "linear/2",
    "linear-mm",
    "chunked",
    "sdpa+block",
    "block",
    "sdpa+strided",
    "strided",
)


def inputs(L: int, device: str):
    """Seeded q, k, v of shape (B, H, L, E)."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    shape = (BATCH, HEADS, L, HEAD_DIM)
    return tuple(torch.randn(shape, generator=g, device=device) for _ in range(3))


def _flex_call(q, k, v):
    """FlexAttention compiled on the CPU with the sliding window |i − j| <= WINDOW // 2 as
    a block mask (``local``'s pattern). Returns (callable, note with the compile time)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def sliding(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= WINDOW // 2

    L = q.shape[-2]
    started = time.perf_counter()
    block_mask = create_block_mask(sliding, B=None, H=None, Q_LEN=L, KV_LEN=L, device=q.device)
    compiled = torch.compile(flex_attention)
    first = compiled(q, k, v, block_mask=block_mask)  # compiles
    compile_s = time.perf_counter() - started
    from attention_core import attend

    ours = attend(q, k, v, "local", window_size=WINDOW).output
    diff = float((first - ours).abs().max())
    note = f"compile {compile_s:.0f} s (excluded); max |flex - local| = {diff:.1e}"
    return (lambda: compiled(q, k, v, block_mask=block_mask)), note


def build_call(kind: str, q, k, v):
    """Return (zero-argument callable running ``kind`` on q, k, v (B, H, L, E), note)."""
    import torch
    import torch.nn.functional as F

    from attention_core import attend, masks

    L = q.shape[-2]
    if kind == "sdpa":
        return (lambda: F.scaled_dot_product_attention(q, k, v)), ""
    patterns = {
        "sdpa+band": lambda: masks.local(L, WINDOW, device=q.device),
        "sdpa+block": lambda: masks.block(L, BLOCK, device=q.device),
        "sdpa+strided": lambda: masks.strided(L, STRIDE, device=q.device),
    }
    if kind in patterns:
        pattern = patterns[kind]()  # (L, L) bool, an input built before measuring
        return (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=pattern)), ""
    if kind == "flex":
        return _flex_call(q, k, v)
    if kind == "naive":
        scale = 1.0 / math.sqrt(q.shape[-1])

        def naive():
            scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, L, E) @ (B, H, E, L) -> (…, L, L)
            return torch.softmax(scores, dim=-1) @ v  # (…, L, L) @ (…, L, E) -> (…, L, E)

        return naive, ""
    if kind == "linear-mm":
        fq, fk = F.elu(q) + 1.0, F.elu(k) + 1.0  # features built before measuring
        # (B, H, L, E) @ ((B, H, E, L) @ (B, H, L, E)) -> (B, H, L, E): the two matmuls alone
        return (lambda: fq @ (fk.transpose(-2, -1) @ v)), ""
    if kind in ("local", "local-sdpa"):
        from attention_core.variants import band_kernel

        def local():
            return attend(q, k, v, "local", window_size=WINDOW).output

        if kind == "local-sdpa":

            def local_sdpa():
                with band_kernel.disabled():
                    return local()

            return local_sdpa, "band kernel off: fused SDPA calls over query blocks"
        if band_kernel.can_run(q, k, v):
            return local, f"band kernel, {band_kernel.status().isas[0]}"
        return local, f"fused SDPA calls (band kernel not used: {band_kernel.status().reason})"
    if kind == "linear/2":
        half = [t[..., : L // 2, :].contiguous() for t in (q, k, v)]  # inputs at L/2
        return (lambda: attend(*half, "linear").output), ""
    if kind == "scaled+w":
        return (lambda: attend(q, k, v, "scaled", need_weights=True).weights), ""
    params = {
        "local": {"window_size": WINDOW},
        "block": {"block_size": BLOCK},
        "strided": {"stride": STRIDE},
    }.get(kind, {})
    return (lambda: attend(q, k, v, kind, need_weights=False, **params).output), ""
