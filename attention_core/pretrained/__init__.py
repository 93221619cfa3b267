"""Loaders for real checkpoints: a small BERT encoder (all-MiniLM-L6-v2), no hub access."""

from attention_core.pretrained.bert import (
    INSTALL_HINT,
    MINILM_SHA256,
    MODEL_PACKAGE_PIN,
    BertConfig,
    Encoder,
    EncodeResult,
    EncoderOutput,
    ModelNotInstalledError,
    cosine_similarity,
    default_model_folder,
    load_bert,
    load_minilm,
    model_available,
)
from attention_core.pretrained.tokenizer import UNK_TOKEN, Tokenized, load_tokenizer, tokenize

__all__ = [
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
