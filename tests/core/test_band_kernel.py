"""The banded C kernel behind ``local``'s fast path (attention_core/_native/band.c).

Every instruction set this CPU runs is held to the explicit formula in float64: scores
q·kᵀ·scale, the keys outside [i − left, i + right] set to −inf, softmax, times v; and its
dense weights and scores to the same formula's. ``local`` must use the kernel exactly where
it can (float32 on the CPU, no mask, no dropout, no gradient, L == S) and fall back to its
PyTorch paths everywhere else, with the same values; the dense variants never use it.

Where the kernel is not built, or ``ATTENTION_CORE_NO_KERNEL`` switches it off, every test
that needs it skips with the reason; an instruction set this CPU lacks skips by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_core import attend, masks, native
from attention_core.variants import band_kernel, local_fast

ISAS = ("avx512", "avx2", "portable")
# (N, L, E, Ev, halo): one row, L < halo, halo 0, edges on both sides, E and Ev that are
# not multiples of any vector width, a partial last tile and a partial last chunk (512 rows)
SHAPES = [
    (1, 1, 3, 5, 0),
    (2, 2, 1, 1, 1),
    (1, 7, 16, 16, 0),
    (3, 33, 64, 64, 5),
    (2, 100, 8, 24, 64),
    (2, 300, 64, 64, 64),
    (1, 1000, 80, 72, 7),
    (2, 513, 3, 100, 200),
    (1, 64, 64, 17, 63),
    (1, 1030, 32, 48, 300),
]


def _outside(L, left, right):
    """(L, L) bool: key j lies outside query i's band [i − left, i + right]."""
    i = torch.arange(L)
    offset = i[None, :] - i[:, None]  # (L, L): j − i
    return (offset < -left) | (offset > right)


def _reference(q, k, v, halo, scale, right=None, *, with_weights=False):
    """The band softmax written out in float64: (N, L, E), (N, L, E), (N, L, Ev) ->
    (N, L, Ev), or (output, weights, scores) with ``with_weights``."""
    q, k, v = q.double(), k.double(), v.double()
    outside = _outside(q.shape[-2], halo, halo if right is None else right)
    scores = (q @ k.transpose(-2, -1)) * scale  # (N, L, L)
    weights = torch.softmax(scores.masked_fill(outside, -torch.inf), dim=-1)
    if not with_weights:
        return weights @ v
    blocked = torch.finfo(torch.float32).min
    return weights @ v, weights, scores.masked_fill(outside, blocked)


def _inputs(N, L, E, Ev, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(N, L, d, generator=g) for d in (E, E, Ev))


_STATE = band_kernel.status()
needs_kernel = pytest.mark.skipif(
    not _STATE.available, reason=f"the band kernel is not available: {_STATE.reason}"
)


def _runnable(isa):
    """Skip unless the kernel is available and this CPU runs ``isa`` (naming it)."""
    state = band_kernel.status()
    if not state.available:
        pytest.skip(f"the band kernel is not available: {state.reason}")
    if isa not in state.isas:
        pytest.skip(f"this CPU does not run the {isa} instruction set (it runs {state.isas})")


@needs_kernel
def test_the_kernel_is_built_with_its_portable_build():
    """Where the kernel is built, the portable build is always among its instruction sets,
    so every machine that has the kernel tests at least that one against the formula."""
    assert band_kernel.status().isas[-1] == "portable"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(("N", "L", "E", "Ev", "halo"), SHAPES)
def test_every_instruction_set_equals_the_formula(isa, N, L, E, Ev, halo):
    _runnable(isa)
    q, k, v = _inputs(N, L, E, Ev)
    for scale in (E**-0.5, 1.7, -0.6, 0.0):
        out = band_kernel.band_attention(q, k, v, halo, halo, scale, threads=3, isa=isa).output
        assert out.shape == (N, L, Ev) and out.dtype == torch.float32
        expected = _reference(q, k, v, halo, scale)
        torch.testing.assert_close(out.double(), expected, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("isa", ISAS)
def test_saturated_scores_stay_finite_and_as_close_as_float32_allows(isa):
    """Scores up to ±26,000 (one key takes nearly all the weight; exp2 underflows for the
    rest). At that size a float32 dot product alone is off by ~1e-3 of a score unit, so the
    yardstick is the same formula computed in float32 by PyTorch: the kernel's error
    against float64 stays within twice that one's."""
    _runnable(isa)
    q, k, v = _inputs(2, 200, 32, 32, seed=3)
    q, k, scale = q * 30, k * 30, 32**-0.5
    out = band_kernel.band_attention(q, k, v, 9, 9, scale, isa=isa).output
    assert torch.isfinite(out).all()
    exact = _reference(q, k, v, 9, scale)
    i = torch.arange(200)
    scores = (q @ k.transpose(-2, -1)) * scale  # (N, L, L), float32
    outside = (i[:, None] - i[None, :]).abs() > 9
    plain = torch.softmax(scores.masked_fill(outside, -torch.inf), dim=-1) @ v  # float32
    plain_error = (plain.double() - exact).abs().max().item()
    assert plain_error > 1e-5  # the case really strains float32
    assert (out.double() - exact).abs().max().item() <= 2 * plain_error


def _band64(q, k, v, **kwargs):
    return band_kernel.band_attention(q, k, v, 64, 64, 0.125, **kwargs).output


@needs_kernel
def test_instruction_sets_thread_counts_and_thread_kinds_agree():
    """Each row is computed by one thread: any thread count, on PyTorch's OpenMP team or on
    POSIX threads of the kernel's own, gives the same bits."""
    q, k, v = _inputs(3, 1500, 64, 64, seed=1)
    runs = [_band64(q, k, v, threads=t) for t in (1, 2, 3, 7)]
    openmp = native.torch_openmp_parallel()
    assert openmp != 0, "PyTorch's OpenMP runtime was not found"
    try:
        band_kernel._band.use_openmp(0)  # POSIX threads
        runs += [_band64(q, k, v, threads=t) for t in (2, 5)]
    finally:
        band_kernel._band.use_openmp(openmp)
    for other in runs[1:]:
        assert torch.equal(runs[0], other)
    for isa in band_kernel.status().isas:
        other = _band64(q, k, v, isa=isa)
        torch.testing.assert_close(other, runs[0], atol=3e-6, rtol=1e-5)


@needs_kernel
def test_non_contiguous_inputs():
    q, k, v = _inputs(2, 90, 16, 16, seed=2)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # same values, column-major rows
    vs = torch.cat([v, v], dim=-1)[..., :16]  # every row strided by 32
    assert not qt.is_contiguous() and not vs.is_contiguous()
    out = band_kernel.band_attention(qt, k, vs, 4, 4, 0.25).output
    torch.testing.assert_close(out.double(), _reference(q, k, v, 4, 0.25), atol=2e-5, rtol=1e-5)


@needs_kernel
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"halo": 10}, "left must be in \\[0, L - 1 = 9\\], got 10"),
        ({"halo": -1}, "left must be in"),
        ({"dtype": torch.float64}, "float32 CPU tensors, q is torch.float64"),
        ({"v_len": 9}, "band kernel needs q, k"),
        ({"isa": "sse9"}, "isa 'sse9' is not one this CPU runs"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, message):
    q, k, v = _inputs(1, 10, 4, 4)
    q = q.to(kwargs.get("dtype", torch.float32))
    v = v[:, : kwargs.get("v_len", 10)]
    with pytest.raises(ValueError, match=message):
        halo = kwargs.get("halo", 2)
        band_kernel.band_attention(q, k, v, halo, 2, 0.5, isa=kwargs.get("isa"))


@pytest.fixture
def kernel_calls(monkeypatch):
    """Count the calls ``local`` makes to the kernel."""
    calls = []
    real = band_kernel.band_attention

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(band_kernel, "band_attention", spy)
    return calls


@needs_kernel
def test_local_uses_the_kernel_where_it_can(kernel_calls):
    q, k, v = (t.view(2, 3, 150, 16) for t in _inputs(6, 150, 16, 16, seed=4))
    fast = attend(q, k, v, "local", window_size=33).output
    assert kernel_calls == [torch.Size([6, 150, 16])]  # (B·H, L, E): one call
    with band_kernel.disabled():
        slow = attend(q, k, v, "local", window_size=33).output
    assert len(kernel_calls) == 1 and band_kernel.status().available
    torch.testing.assert_close(fast, slow, atol=3e-6, rtol=1e-5)
    reference = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=masks.local(150, 33)
    )
    torch.testing.assert_close(fast.double(), reference, atol=2e-5, rtol=1e-5)


@needs_kernel
def test_local_falls_back_where_the_kernel_cannot(kernel_calls):
    q, k, v = (t.view(1, 2, 40, 8) for t in _inputs(2, 40, 8, 8, seed=5))
    attend(q.double(), k.double(), v.double(), "local", window_size=9)  # float64
    attend(q, k, v, "local", window_size=9, mask=masks.causal(40))  # a user mask
    attend(q, k, v, "local", window_size=9, dropout_p=0.1)  # dropout
    attend(q, k[..., :30, :], v[..., :30, :], "local", window_size=9)  # L != S
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = attend(*leaves, "local", window_size=9).output  # autograd
    assert kernel_calls == []
    out.sum().backward()
    assert all(t.grad is not None for t in leaves)
    with torch.no_grad():  # no gradient wanted: the kernel again
        attend(*leaves, "local", window_size=9)
    assert len(kernel_calls) == 1


def test_openmp_runtimes_are_found_in_the_process_map():
    torch_lib = str(Path(torch.__file__).parent / "lib" / "libgomp.so.1")
    maps = (
        "7f0 r-xp 0 08:01 5 /usr/lib/x86_64-linux-gnu/libiomp5.so\n"
        f"7f1 r-xp 0 08:01 6 {torch_lib}\n"
        f"7f2 r--p 0 08:01 6 {torch_lib}\n"
        "7f3 rw-p 0 00:00 0 [heap]\n"
        "7f4 r-xp 0 08:01 7 /usr/lib/libgompish_not_omp_dir/libc.so.6\n"
    )
    found = native.loaded_openmp_libraries(maps)
    assert found == [torch_lib, "/usr/lib/x86_64-linux-gnu/libiomp5.so"]


def test_a_missing_or_stale_build_is_not_used(monkeypatch):
    q, k, v = (t.view(1, 1, 50, 8) for t in _inputs(1, 50, 8, 8, seed=6))
    expected = attend(q, k, v, "local", window_size=7).output

    class Stale:
        VERSION = band_kernel.KERNEL_VERSION - 1

    monkeypatch.setattr(band_kernel, "_band", Stale())
    monkeypatch.setattr(band_kernel, "_SWITCHED_OFF", False)
    state = band_kernel.status()
    assert not state.available and "rebuild" in state.reason
    torch.testing.assert_close(attend(q, k, v, "local", window_size=7).output, expected)
    monkeypatch.setattr(band_kernel, "_band", None)
    assert "not built" in band_kernel.status().reason
    torch.testing.assert_close(attend(q, k, v, "local", window_size=7).output, expected)
    with pytest.raises(RuntimeError, match="not available"):
        band_kernel.band_attention(q[0], k[0], v[0], 3, 3, 0.5)


# (N, L, E, Ev, left, right): all keys, causal, an asymmetric band, one token, all keys over
# two chunks of rows
DENSE_CASES = [
    (2, 50, 16, 16, 49, 49),
    (1, 70, 8, 12, 69, 0),
    (2, 300, 64, 64, 3, 40),
    (1, 1, 4, 4, 0, 0),
    (3, 600, 32, 32, 599, 599),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(("N", "L", "E", "Ev", "left", "right"), DENSE_CASES)
def test_dense_weights_and_scores_equal_the_formula(isa, N, L, E, Ev, left, right):
    _runnable(isa)
    q, k, v = _inputs(N, L, E, Ev, seed=7)
    result = band_kernel.band_attention(q, k, v, left, right, 0.3, need_weights=True, isa=isa)
    out, weights, scores = _reference(q, k, v, left, 0.3, right, with_weights=True)
    torch.testing.assert_close(result.output.double(), out, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(result.weights.double(), weights, atol=2e-6, rtol=1e-5)
    outside = _outside(L, left, right).expand(N, L, L)
    assert (result.weights[outside] == 0).all()
    assert (result.scores[outside] == torch.finfo(torch.float32).min).all()
    torch.testing.assert_close(
        result.scores[~outside].double(), scores[~outside], atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("variant", ["scaled", "basic", "stable"])
def test_dense_weights_never_come_from_the_kernel(variant, kernel_calls):
    """The weights a learner sees for the dense variants come from the PyTorch formula
    (``dense_attention``), never from the kernel, and equal the float64 formula."""
    q, k, v = (t.view(2, 2, 80, 16) for t in _inputs(4, 80, 16, 16, seed=8))
    result = attend(q, k, v, variant, need_weights=True)
    assert kernel_calls == []
    scale = 1.0 if variant == "basic" else 16**-0.5
    out, weights, scores = _reference(q, k, v, 79, scale, with_weights=True)
    torch.testing.assert_close(result.output.double(), out, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(result.weights.double(), weights, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(result.scores.double(), scores, atol=1e-5, rtol=1e-5)


@needs_kernel
def test_weights_of_local_come_from_the_kernel(kernel_calls):
    """``local`` with weights (float32, no mask) runs the kernel and gives what its
    readable path and the float64 formula give; a mask or dropout leaves the kernel out."""
    q, k, v = (t.view(2, 2, 80, 16) for t in _inputs(4, 80, 16, 16, seed=8))
    fast = attend(q, k, v, "local", need_weights=True, window_size=21)
    assert kernel_calls == [torch.Size([4, 80, 16])]
    with local_fast.disabled():
        slow = attend(q, k, v, "local", need_weights=True, window_size=21)
    out, weights, scores = _reference(q, k, v, 10, 16**-0.5, with_weights=True)
    for ours in (fast, slow):
        torch.testing.assert_close(ours.output.double(), out, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(ours.weights.double(), weights, atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(ours.scores.double(), scores, atol=1e-5, rtol=1e-5)
    attend(q, k, v, "local", need_weights=True, mask=masks.causal(80), window_size=21)
    attend(q, k, v, "local", need_weights=True, dropout_p=0.2, window_size=21)
    assert len(kernel_calls) == 1


@pytest.mark.parametrize(
    ("value", "off"), [("1", True), ("yes", True), ("", False), ("0", False), ("false", False)]
)
def test_the_environment_switch_reads_its_value(value, off):
    assert native.switched_off_by_env({native.NO_KERNEL_ENV: value}) is off
    assert native.switched_off_by_env({}) is False


def test_the_environment_switch_turns_the_kernel_off_in_a_fresh_process():
    """``ATTENTION_CORE_NO_KERNEL=1``: the kernel reports itself off with the reason, and
    ``local`` still gives the float64 formula's values (its PyTorch paths)."""
    script = (
        "import torch\n"
        "from attention_core import attend, masks\n"
        "from attention_core.variants import band_kernel\n"
        "s = band_kernel.status()\n"
        "g = torch.Generator().manual_seed(0)\n"
        "q, k, v = (torch.randn(1, 2, 40, 8, generator=g) for _ in range(3))\n"
        "out = attend(q, k, v, 'local', window_size=9).output.double()\n"
        "ref = torch.nn.functional.scaled_dot_product_attention(\n"
        "    q.double(), k.double(), v.double(), attn_mask=masks.local(40, 9))\n"
        "print(s.available, band_kernel.can_run(q, k, v), repr(s.reason),\n"
        "      float((out - ref).abs().max()) < 1e-5)\n"
    )
    env = {**os.environ, native.NO_KERNEL_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    expected = "False False 'switched off by ATTENTION_CORE_NO_KERNEL' True"
    assert done.stdout.strip().splitlines()[-1] == expected
