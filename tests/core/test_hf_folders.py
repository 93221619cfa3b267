"""Hugging Face folders in a models folder: listed beside GGUF files with
kind ``"hf"``, a Hub cache snapshot named as the Hub names it, every other candidate left
out with its reason, and the card read from the headers alone, checked against
transformers' own config and the ``safetensors`` library's tensor sizes."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from attention_core.pretrained import model_files, read_hf_card
from attention_core.pretrained.hf_config import HF_ARCHITECTURES
from tests.core.hf_tiny import TinySpec, write_tiny_hf
from tests.tiny_gguf import write_tiny_gguf

pytest.importorskip("transformers")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CACHED = f"hub/models--lab--qwen/snapshots/{COMMIT}"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder: a llama folder, a Hub cache snapshot of a qwen2 one (bfloat16
    shards), a GGUF file, and the candidates that must be left out; and a link to a folder
    outside it, which is not followed."""
    root = tmp_path_factory.mktemp("models")
    outside = tmp_path_factory.mktemp("outside")
    llama = write_tiny_hf(root / "tiny-llama", TinySpec("llama"))
    write_tiny_hf(root / CACHED, TinySpec("qwen2", tied=False, sharded_bf16=True))
    write_tiny_gguf(root / "tiny.gguf")
    gemma = root / "gemma"
    shutil.copytree(llama, gemma)
    settings = json.loads((gemma / "config.json").read_text())
    (gemma / "config.json").write_text(json.dumps({**settings, "model_type": "gemma"}))
    bin_only = root / "bin-only"
    shutil.copytree(llama, bin_only)
    (bin_only / "model.safetensors").rename(bin_only / "pytorch_model.bin")
    no_tokenizer = root / "no-tokenizer"
    shutil.copytree(llama, no_tokenizer)
    (no_tokenizer / "tokenizer.json").unlink()
    broken = root / "broken"
    shutil.copytree(llama, broken)
    (broken / "config.json").write_text("{not json")
    (root / "settings").mkdir()
    (root / "settings" / "config.json").write_text("{}")  # a lone config: not a model
    shutil.copytree(llama, outside / "elsewhere")
    (root / "linked").symlink_to(outside / "elsewhere")
    return root, llama


def test_folders_are_listed_beside_gguf_files_and_left_out_with_reasons(models):
    root, llama = models
    scan = model_files.scan_models([root])
    listed = {m.name: m for m in scan.models}
    assert sorted(listed) == ["lab/qwen@0123456", "tiny-llama", "tiny.gguf"]
    assert listed["tiny-llama"].kind == "hf" and listed["tiny-llama"].path == llama.resolve()
    assert listed["tiny-llama"].size == (llama / "model.safetensors").stat().st_size
    assert listed["tiny.gguf"].kind == "gguf"
    shards = sorted((root / CACHED).glob("*.safetensors"))
    assert len(shards) > 1 and listed["lab/qwen@0123456"].size == sum(
        p.stat().st_size for p in shards
    )
    left_out = {e.name: (e.reason, dict(e.detail)) for e in scan.left_out}
    supported = ", ".join(HF_ARCHITECTURES)
    assert left_out == {
        "gemma": ("architecture", {"architecture": "gemma", "supported": supported}),
        "bin-only": ("no_safetensors", {}),
        "no-tokenizer": ("no_tokenizer", {}),
        "broken": ("bad_config", {}),
    }
    assert set(model_files.LEFT_OUT_REASONS) >= {r for r, _ in left_out.values()}


def test_a_folder_link_is_not_followed_but_a_linked_configured_folder_is(models, tmp_path):
    root, _ = models
    (tmp_path / "linked").symlink_to(root / "tiny-llama")  # a folder link is not followed
    assert model_files.scan_models([tmp_path]).models == ()
    link_root = tmp_path / "root-link"
    link_root.symlink_to(root)  # the configured folder itself may be a link
    names = [m.name for m in model_files.scan_models([link_root]).models]
    assert "tiny-llama" in names and "linked" not in names


def test_the_configured_folder_itself_may_be_the_model(models):
    _, llama = models
    (only,) = model_files.scan_models([llama]).models
    assert only.name == llama.name and only.kind == "hf"


@pytest.mark.parametrize("which", ["tiny-llama", CACHED])
def test_the_card_matches_transformers_config_and_the_safetensors_headers(models, which):
    from safetensors import safe_open
    from transformers import AutoConfig

    root, _ = models
    folder = root / which
    card = read_hf_card(folder)
    config = AutoConfig.from_pretrained(folder)
    assert card.architecture == config.model_type
    assert (card.layers, card.heads, card.kv_heads) == (
        config.num_hidden_layers,
        config.num_attention_heads,
        config.num_key_value_heads,
    )
    assert card.head_dim == getattr(config, "head_dim", None) or (
        config.hidden_size // config.num_attention_heads
    )
    assert card.vocab_size == config.vocab_size
    assert card.context_length == config.max_position_embeddings
    assert card.tied == config.tie_word_embeddings and card.rope_style == "half"
    counts, parameters, size = {}, 0, 0
    for path in sorted(folder.glob("*.safetensors")):
        size += path.stat().st_size
        with safe_open(path, framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                view = handle.get_slice(key)
                dtype = view.get_dtype()
                counts[dtype] = counts.get(dtype, 0) + 1
                shape = view.get_shape()
                parameters += math.prod(shape)
    assert dict(card.storage_types) == counts
    assert card.parameters == parameters and card.file_bytes == size


def test_the_copy_test_starts_a_folder_model_with_its_own_bos(models):
    """Llama's vocabulary has no ``<|im_start|>``: the repeated sequence starts with the
    BOS transformers' tokenizer names, and draws no control token."""
    from transformers import AutoTokenizer

    from attention_core.experiments.head_ablation import repeated_tokens
    from attention_core.pretrained import load_hf

    _, llama = models
    tokenizer = AutoTokenizer.from_pretrained(llama)
    ids = repeated_tokens(load_hf(llama), 40, 0)
    assert ids[0] == tokenizer.bos_token_id
    assert not set(ids[1:].tolist()) & set(tokenizer.all_special_ids)
