"""MultiHeadSelfAttention against torch.nn.MultiheadAttention with the same weights."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attention_core import VARIANTS, MultiHeadSelfAttention, masks
from tests.core.references import torch_twin

B, L, D, H = 2, 7, 12, 3
ATOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def _pair(dtype=torch.float64, variant="scaled", seed=0, **params):
    """Our module and nn.MultiheadAttention sharing the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadSelfAttention(D, H, variant=variant, **params).to(dtype).eval()
    return ours, torch_twin(ours)


def _x(dtype=torch.float64, L=L, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, L, D, generator=g, dtype=torch.float64).to(dtype)


def _compare(ours, ref, x, *, our_mask=None, attn_mask=None, key_padding_mask=None):
    atol = ATOL[x.dtype]
    out, weights = ours(x, mask=our_mask)
    ref_out, ref_avg = ref(
        x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=True
    )
    _, ref_heads = ref(
        x,
        x,
        x,
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    assert out.shape == (B, x.shape[1], D) and weights.shape == (B, H, x.shape[1], x.shape[1])
    torch.testing.assert_close(out, ref_out, atol=atol, rtol=0)
    torch.testing.assert_close(weights.mean(dim=1), ref_avg, atol=atol, rtol=0)
    torch.testing.assert_close(weights, ref_heads, atol=atol, rtol=0)
    no_weights_out, none = ours(x, mask=our_mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(no_weights_out, ref_out, atol=atol, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_matches_nn_multihead_attention_without_mask(dtype):
    ours, ref = _pair(dtype)
    _compare(ours, ref, _x(dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_matches_with_causal_bool_mask(dtype):
    ours, ref = _pair(dtype)
    causal = masks.causal(L)
    _compare(ours, ref, _x(dtype), our_mask=causal, attn_mask=~causal)  # theirs: True = blocked


def test_matches_with_key_padding_mask():
    ours, ref = _pair()
    padding = masks.padding([5, 7], L)  # (B, 1, L)
    _compare(ours, ref, _x(), our_mask=padding, key_padding_mask=~padding.squeeze(1))


def test_matches_with_float_mask():
    ours, ref = _pair()
    g = torch.Generator().manual_seed(3)
    float_mask = torch.randn(L, L, generator=g, dtype=torch.float64)
    float_mask = float_mask.masked_fill(~masks.causal(L), -math.inf)
    _compare(ours, ref, _x(), our_mask=float_mask, attn_mask=float_mask)


def test_matches_with_per_batch_mask():
    ours, ref = _pair()
    g = torch.Generator().manual_seed(4)
    per_batch = (torch.rand(B, L, L, generator=g) < 0.5) | torch.eye(L, dtype=torch.bool)
    theirs = (~per_batch).repeat_interleave(H, dim=0)  # (B·H, L, L), batch-major
    _compare(ours, ref, _x(), our_mask=per_batch, attn_mask=theirs)


def test_matches_with_per_head_mask():
    ours, ref = _pair()
    g = torch.Generator().manual_seed(5)
    per_head = (torch.rand(B, H, L, L, generator=g) < 0.5) | torch.eye(L, dtype=torch.bool)
    theirs = (~per_head).reshape(B * H, L, L)
    _compare(ours, ref, _x(), our_mask=per_head, attn_mask=theirs)


@pytest.mark.parametrize(
    ("variant", "params"),
    [("chunked", {"chunk_size": 3, "key_chunk_size": 2}), ("stable", {})],
)
def test_dense_variants_inside_the_module(variant, params):
    ours, ref = _pair(variant=variant, **params)
    _compare(ours, ref, _x())
    causal = masks.causal(L)
    _compare(ours, ref, _x(), our_mask=causal, attn_mask=~causal)


@pytest.mark.parametrize("window_size", [1, 4, 5])
def test_local_variant_inside_the_module(window_size):
    ours, ref = _pair(variant="local", window_size=window_size)
    band = masks.local(L, window_size)
    _compare(ours, ref, _x(), attn_mask=~band)
    causal = masks.causal(L)
    _compare(ours, ref, _x(), our_mask=causal, attn_mask=~(band & causal))


@pytest.mark.parametrize("name", sorted(n for n, s in VARIANTS.items() if s.pattern is not None))
def test_sparse_variants_inside_the_module(name):
    ours, ref = _pair(variant=name)
    spec = VARIANTS[name]
    pattern = spec.pattern(L, L, **spec.defaults())
    _compare(ours, ref, _x(), attn_mask=~pattern)


def test_basic_variant_is_unscaled():
    """basic = softmax(QKᵀ)V: nn.MultiheadAttention on q pre-multiplied by sqrt(E)."""
    ours, ref = _pair(variant="basic")
    x = _x()
    with torch.no_grad():
        ref.in_proj_weight[:D] *= math.sqrt(D // H)
        ref.in_proj_bias[:D] *= math.sqrt(D // H)
    _compare(ours, ref, x)


def test_linear_variant_inside_the_module():
    """Linear in the module equals the kernel formula applied per head."""
    ours, _ = _pair(variant="linear", causal=True)
    x = _x()
    q, k, v = ours.project_qkv(x)  # (B, H, L, E) each
    phi_q, phi_k = nn.functional.elu(q) + 1, nn.functional.elu(k) + 1
    kernel = (phi_q @ phi_k.transpose(-2, -1)) * masks.causal(L)  # (B, H, L, L)
    weights = kernel / kernel.sum(-1, keepdim=True)
    expected = ours.out_linear(ours.merge_heads(weights @ v))
    out, got_weights = ours(x)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(got_weights, weights, atol=1e-10, rtol=0)


def test_empty_row_gives_output_bias_only():
    """A batch item with no valid key attends to nothing: output = out_linear's bias."""
    ours, _ = _pair()
    out, weights = ours(_x(), mask=masks.padding([0, 7], L))
    assert (weights[0] == 0).all()
    torch.testing.assert_close(out[0], ours.out_linear.bias.expand(L, D), atol=0, rtol=0)
    assert torch.isfinite(out).all()


def test_gradients_match_nn_multihead_attention():
    ours, ref = _pair()
    x = _x()
    causal = masks.causal(L)
    ours(x, mask=causal)[0].square().sum().backward()
    ref(x, x, x, attn_mask=~causal, need_weights=False)[0].square().sum().backward()
    ours_in = torch.cat([ours.q_linear.weight.grad, ours.k_linear.weight.grad])
    ours_in = torch.cat([ours_in, ours.v_linear.weight.grad])
    torch.testing.assert_close(ours_in, ref.in_proj_weight.grad, atol=1e-10, rtol=0)
    torch.testing.assert_close(ours.out_linear.weight.grad, ref.out_proj.weight.grad)


def test_split_merge_heads_and_project_qkv():
    ours, _ = _pair()
    x = _x()
    heads = ours.split_heads(x)
    assert heads.shape == (B, H, L, D // H)
    # head h holds features [h·E, (h+1)·E) of every position
    torch.testing.assert_close(heads[:, 1], x[:, :, D // H : 2 * (D // H)], atol=0, rtol=0)
    torch.testing.assert_close(ours.merge_heads(heads), x, atol=0, rtol=0)
    q, k, v = ours.project_qkv(x)
    torch.testing.assert_close(ours.merge_heads(q), ours.q_linear(x), atol=0, rtol=0)
    torch.testing.assert_close(ours.merge_heads(v), ours.v_linear(x), atol=0, rtol=0)
    assert k.shape == (B, H, L, D // H)
    assert (ours.embed_dim, ours.num_heads, ours.head_dim, ours.variant) == (D, H, D // H, "scaled")


def test_dropout_only_in_training():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(D, H, dropout=0.5).double()
    plain = MultiHeadSelfAttention(D, H).double()
    plain.load_state_dict(ours.state_dict())
    x = _x()
    ours.eval()
    torch.testing.assert_close(ours(x)[0], plain(x)[0], atol=1e-12, rtol=0)
    ours.train()
    torch.manual_seed(1)
    first = ours(x)
    torch.manual_seed(1)
    again = ours(x)
    assert torch.equal(first[0], again[0])
    assert not torch.allclose(first[0], plain(x)[0])
    dropped = first[1]
    zero_fraction = (dropped == 0).double().mean().item()
    assert abs(zero_fraction - 0.5) < 0.1


def test_set_variant_keeps_weights():
    ours, ref = _pair()
    ours.set_variant("chunked", chunk_size=2)
    assert ours.variant == "chunked" and ours.params["chunk_size"] == 2
    _compare(ours, ref, _x())


def test_dropout_with_a_generator_is_reproducible():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(D, H, variant="local", dropout=0.3, window_size=5).double()
    ours.train()
    x = _x()

    def run(seed):
        return ours(x, generator=torch.Generator().manual_seed(seed))

    first, again, other = run(2), run(2), run(3)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])
    ours.eval()
    plain = ours(x, generator=torch.Generator().manual_seed(2))
    assert not (plain[1][masks.local(L, 5).expand(B, H, L, L)] == 0).any()


@pytest.mark.parametrize("bias", [True, False])
def test_init_seed_draws_what_torch_manual_seed_would(bias):
    torch.manual_seed(11)
    reference = MultiHeadSelfAttention(24, 3, bias=bias)  # nn.Linear's own init, seeded
    before = torch.get_rng_state()
    seeded = MultiHeadSelfAttention(24, 3, bias=bias, init_seed=11)
    assert torch.equal(torch.get_rng_state(), before)  # the global generator was not used
    for name, value in reference.state_dict().items():
        assert torch.equal(seeded.state_dict()[name], value), name
    assert not torch.equal(
        MultiHeadSelfAttention(24, 3, init_seed=12).q_linear.weight, seeded.q_linear.weight
    )


def test_seeded_layer_is_a_trainable_cpu_layer_without_torch_s_symbolic_machinery():
    """The seeded build allocates its parameters directly: Module.to_empty on meta tensors
    imported sympy and torch's symbolic shapes (0.23 s of a fresh process here)."""
    import subprocess
    import sys
    from pathlib import Path

    layer = MultiHeadSelfAttention(8, 2, init_seed=0)
    for name, param in layer.named_parameters():
        assert param.device.type == "cpu" and param.requires_grad, name
        assert isinstance(param, nn.Parameter) and torch.isfinite(param).all(), name
    code = (
        "import sys; from attention_core import MultiHeadSelfAttention; "
        "MultiHeadSelfAttention(16, 2, init_seed=3); print('sympy' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "False", result.stdout + result.stderr


def test_seeded_layers_built_in_threads_at_once_are_reproducible():
    """Dashboard sessions build seeded layers concurrently; with torch.manual_seed around the
    constructor (the old way) 186 of 240 such builds here drew other sessions' numbers."""
    import threading

    expected = {s: MultiHeadSelfAttention(64, 4, init_seed=s).q_linear.weight for s in range(6)}
    wrong = []

    def build(seed: int) -> None:
        for _ in range(20):
            torch.randn(256)  # other work on the global generator meanwhile
            layer = MultiHeadSelfAttention(64, 4, init_seed=seed)
            if not torch.equal(layer.q_linear.weight, expected[seed]):
                wrong.append(seed)

    threads = [threading.Thread(target=build, args=(s,)) for s in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_init_seed(bad):
    with pytest.raises(ValueError, match="init_seed"):
        MultiHeadSelfAttention(8, 2, init_seed=bad)


@pytest.mark.parametrize(
    ("variant", "scale"),
    [("scaled", None), ("scaled", 0.3), ("basic", None), ("local", None), ("chunked", 0.7)],
)
def test_forward_intermediates_return_the_module_scores(variant, scale):
    """Per-head scores are q·kᵀ·scale from the module's own projections and scale (the
    variant's default when None), masked; softmax(scores) is the weights forward returns."""
    torch.manual_seed(0)
    module = MultiHeadSelfAttention(D, H, variant=variant, scale=scale).double().eval()
    x = _x()
    mask = masks.causal(L)
    result = module.forward_intermediates(x, mask=mask)
    q, k, _ = module.project_qkv(x)  # (B, H, L, E)
    expected_scale = scale or (1.0 if variant == "basic" else 1.0 / math.sqrt(D // H))
    expected = (q @ k.transpose(-2, -1)) * expected_scale  # (B, H, L, L)
    expected = expected.masked_fill(~mask, torch.finfo(torch.float64).min)
    assert result.scores.shape == (B, H, L, L)
    torch.testing.assert_close(result.scores, expected, atol=1e-10, rtol=0)
    out, weights = module(x, mask=mask)
    torch.testing.assert_close(result.output, out, atol=0, rtol=0)
    torch.testing.assert_close(result.weights, weights, atol=0, rtol=0)
    torch.testing.assert_close(torch.softmax(result.scores, dim=-1), weights, atol=1e-10, rtol=0)


def test_forward_intermediates_of_linear_have_no_scores():
    module = MultiHeadSelfAttention(D, H, variant="linear").double().eval()
    result = module.forward_intermediates(_x())
    assert result.scores is None and result.weights.shape == (B, H, L, L)
    assert module.forward_intermediates(_x(), need_weights=False).weights is None
