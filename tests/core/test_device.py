"""Device choice, dtype parsing, byte formatting and the memory budget."""

import pytest
import torch

from attention_core import device
from attention_core.device import MemoryBudgetError


def test_pick_device_explicit_cpu_wins():
    choice = device.pick_device("cpu")
    assert choice.device == torch.device("cpu")
    assert "cpu" in choice.available
    assert "explicit" in choice.reason


def test_pick_device_auto_is_best_available():
    choice = device.pick_device()
    assert choice.device.type == device.available_devices()[0]
    assert device.pick_device("auto").device == choice.device
    assert device.available_devices()[-1] == "cpu"


def test_pick_device_unknown_raises():
    with pytest.raises(ValueError, match="tpu"):
        device.pick_device("tpu")


def test_pick_device_unavailable_cuda_raises():
    if torch.cuda.is_available():
        pytest.skip("cuda is available here")
    with pytest.raises(ValueError, match="cuda"):
        device.pick_device("cuda")


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("float32", torch.float32),
        ("float64", torch.float64),
        ("float16", torch.float16),
        ("bfloat16", torch.bfloat16),
        (torch.float16, torch.float16),
    ],
)
def test_parse_dtype(name, dtype):
    assert device.parse_dtype(name) is dtype


@pytest.mark.parametrize("name", ["int8", "float", "", torch.int32])
def test_parse_dtype_rejects(name):
    with pytest.raises(ValueError):
        device.parse_dtype(name)


def test_compute_dtype_upcasts_half_only():
    assert device.compute_dtype(torch.float16) is torch.float32
    assert device.compute_dtype(torch.bfloat16) is torch.float32
    assert device.compute_dtype(torch.float64) is torch.float64


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (512 * 2**20, "512.0 MiB"),
        (3 * 2**30, "3.0 GiB"),
    ],
)
def test_format_bytes(nbytes, text):
    assert device.format_bytes(nbytes) == text


def test_tensor_bytes():
    assert device.tensor_bytes((2, 3, 4), torch.float32) == 96
    assert device.tensor_bytes((8,), torch.float16) == 16


def test_check_budget_under_and_over():
    device.check_budget(1024, "small", budget=1024)
    with pytest.raises(MemoryBudgetError, match=r"scores \(1, 8\).*2.0 KiB.*1.0 KiB"):
        device.check_budget(2048, "scores (1, 8)", budget=1024)
    assert issubclass(MemoryBudgetError, ValueError)


def test_resolve_budget_default_env_and_explicit(monkeypatch):
    monkeypatch.delenv(device.BUDGET_ENV_VAR, raising=False)
    assert device.resolve_budget() == 512 * 2**20
    monkeypatch.setenv(device.BUDGET_ENV_VAR, "3")
    assert device.resolve_budget() == 3 * 2**20
    assert device.resolve_budget(100) == 100
    monkeypatch.setenv(device.BUDGET_ENV_VAR, "lots")
    with pytest.raises(ValueError, match="lots"):
        device.resolve_budget()


@pytest.mark.parametrize("budget", [0, -5, 1.5, True])
def test_resolve_budget_rejects(budget):
    with pytest.raises(ValueError):
        device.resolve_budget(budget)
