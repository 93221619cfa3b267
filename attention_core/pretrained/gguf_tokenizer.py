"""The tokenizer a GGUF file describes in its ``tokenizer.ggml.*`` metadata, as llama.cpp reads it.

:func:`build_gguf_tokenizer` reads the fields, checks them, and builds a
``tokenizers.Tokenizer`` for the two kinds of vocabulary decoder families ship:

* ``tokenizer.ggml.model == "gpt2"``: byte-level BPE (SmolLM, Llama 3.x, Qwen2, Qwen3), with
  the pre-tokeniser ``tokenizer.ggml.pre`` names (:mod:`~attention_core.pretrained.bpe`); a
  file without one gets llama.cpp's ``"default"``, with a warning;
* ``tokenizer.ggml.model == "llama"``: SentencePiece BPE with scores and byte fallback
  (Llama 2, TinyLlama, Mistral 7B; :mod:`~attention_core.pretrained.spm`).

Special ids and the BOS/EOS rule follow the metadata, with llama.cpp's defaults where a key
is absent: ``<unk>``/``<s>``/``</s>`` = 0/1/2 for ``"llama"`` files and none for ``"gpt2"``;
BOS added for ``"llama"`` files and for ``"llama-bpe"`` (Llama 3), not for the other
byte-level families; EOS not added. The built tokenizer adds them itself (a
``TemplateProcessing`` post-processor), so ``tokenizer.encode(text).ids`` are the ids the
model expects. Control, unknown and user-defined tokens are matched whole in the text.

:func:`read_gguf_tokenizer` does the same checks but leaves the ``tokenizers`` object to be
built on first use (:class:`LazyTokenizer`): a 128k-token vocabulary takes a tenth of a
second or more to build, which a model load need not wait for.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tokenizers
from tokenizers import processors

from attention_core.pretrained.bpe import (
    BYTE_LEVEL,
    BYTE_LEVEL_MODEL,
    NORMAL_TOKEN_TYPE,
    PRE_TOKENIZERS,
    SENTENCEPIECE,
    bpe_tokenizer_from,
    check_bpe_fields,
)
from attention_core.pretrained.spm import SPM_MODEL, build_spm_tokenizer, check_spm_fields
from attention_core.validation import check_int

MODEL_KEY = "tokenizer.ggml.model"
PRE_KEY = "tokenizer.ggml.pre"
TOKENS_KEY = "tokenizer.ggml.tokens"
TYPES_KEY = "tokenizer.ggml.token_type"
SCORES_KEY = "tokenizer.ggml.scores"
MERGES_KEY = "tokenizer.ggml.merges"
BOS_KEY = "tokenizer.ggml.bos_token_id"
EOS_KEY = "tokenizer.ggml.eos_token_id"
UNK_KEY = "tokenizer.ggml.unknown_token_id"
PAD_KEY = "tokenizer.ggml.padding_token_id"
ADD_BOS_KEY = "tokenizer.ggml.add_bos_token"
ADD_EOS_KEY = "tokenizer.ggml.add_eos_token"
SPACE_PREFIX_KEY = "tokenizer.ggml.add_space_prefix"

MODELS = (BYTE_LEVEL_MODEL, SPM_MODEL)
"""The supported ``tokenizer.ggml.model`` values."""
DEFAULT_PRE = "default"
SPM_DEFAULT_IDS = {BOS_KEY: 1, EOS_KEY: 2, UNK_KEY: 0}
"""llama.cpp's special ids for a ``"llama"`` file that does not name them."""
MIN_MAX_LENGTH = 1
INTEGER_KINDS = "iu"  # numpy dtype kinds of token types
NUMBER_KINDS = "fiu"  # numpy dtype kinds of scores (llama.cpp reads float32 or int32)


class LazyTokenizer:
    """A ``tokenizers.Tokenizer`` built on first use, once, even when several threads ask
    at the same moment; any attribute (``encode``, ``decode``, ``token_to_id``, …) is the
    built tokenizer's.

    Args:
        build: makes the tokenizer (called at most once; the fields it reads were checked
            before).
    """

    def __init__(self, build: Callable[[], tokenizers.Tokenizer]) -> None:
        self._build: Callable[[], tokenizers.Tokenizer] | None = build
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._lock = threading.Lock()

    @property
    def is_built(self) -> bool:
        """Whether the tokenizer has been built yet."""
        return self._tokenizer is not None

    def get(self) -> tokenizers.Tokenizer:
        """The tokenizer, built now if this is its first use."""
        tokenizer = self._tokenizer
        if tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = self._build()
                    self._build = None  # let the fields it captured go
                tokenizer = self._tokenizer
        return tokenizer

    def __getattr__(self, name: str):
        if name.startswith("_"):  # copy, pickle and our own fields: never build for them
            raise AttributeError(name)
        return getattr(self.get(), name)


@dataclass(frozen=True)
class GGUFTokenizer:
    """A GGUF file's tokenizer and what the metadata says about it.

    Attributes:
        tokenizer: the ``tokenizers.Tokenizer`` (a :class:`LazyTokenizer` from
            :func:`read_gguf_tokenizer`); ``encode(text)`` adds BOS (and EOS) when the file
            asks for them.
        spelling: how its tokens spell bytes, ``"byte_level"`` or ``"sentencepiece"``
            (for :func:`~attention_core.pretrained.bpe.token_bytes`).
        model: ``tokenizer.ggml.model`` (``"gpt2"`` or ``"llama"``).
        pre: the byte-level pre-tokeniser's name; None for ``"llama"``.
        bos_id, eos_id, unk_id, pad_id: the special ids (None when the file has none).
        add_bos, add_eos: whether ``encode`` adds BOS first / EOS last.
        vocab_size: V, the number of tokens.
    """

    tokenizer: tokenizers.Tokenizer | LazyTokenizer
    spelling: str
    model: str
    pre: str | None
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    vocab_size: int
    add_eos: bool = False
    unk_id: int | None = None
    pad_id: int | None = None


def _model_name(metadata: dict) -> str:
    """``tokenizer.ggml.model``, one of :data:`MODELS`."""
    if MODEL_KEY not in metadata:
        raise ValueError(f"GGUF metadata lacks {MODEL_KEY!r}")
    model = metadata[MODEL_KEY]
    if model not in MODELS:
        raise ValueError(f"{MODEL_KEY} {model!r} is not supported; supported: {', '.join(MODELS)}")
    return model


def _pre_name(metadata: dict) -> str:
    """``tokenizer.ggml.pre``, one of the byte-level pre-tokenisers (default when absent)."""
    if PRE_KEY not in metadata:
        warnings.warn(
            f"GGUF metadata lacks {PRE_KEY!r}; using llama.cpp's {DEFAULT_PRE!r} split, "
            "which may not be the one the model was trained with",
            stacklevel=4,  # the caller of read_gguf_tokenizer (load_gguf)
        )
        return DEFAULT_PRE
    pre = metadata[PRE_KEY]
    if not isinstance(pre, str) or pre not in PRE_TOKENIZERS:
        raise ValueError(
            f"{PRE_KEY} {pre!r} is not supported; supported: {', '.join(PRE_TOKENIZERS)}"
        )
    return pre


def _string_list(metadata: dict, key: str) -> list[str]:
    """A list of strings stored under ``key``."""
    if key not in metadata:
        raise ValueError(f"GGUF metadata lacks {key!r}")
    value = metadata[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key} must be a list of strings, got {type(value).__name__}")
    return value


def _tokens(metadata: dict) -> list[str]:
    """``tokenizer.ggml.tokens``: a non-empty list of distinct strings."""
    tokens = _string_list(metadata, TOKENS_KEY)
    if not tokens:
        raise ValueError(f"{TOKENS_KEY} is empty")
    repeated = len(tokens) - len(set(tokens))
    if repeated:
        raise ValueError(f"{TOKENS_KEY} repeats {repeated} tokens")
    return tokens


def _number_array(metadata: dict, key: str, count: int, kinds: str) -> np.ndarray:
    """A 1-D array of ``count`` numbers whose numpy dtype kind is one of ``kinds``."""
    array = np.asarray(metadata[key])
    if array.ndim != 1 or array.dtype.kind not in kinds:
        raise ValueError(f"{key} must be a 1-D array of numbers, got {metadata[key]!r:.80}")
    if array.shape[0] != count:
        raise ValueError(f"{key} has {array.shape[0]} values for a vocabulary of {count} tokens")
    return array


def _token_types(metadata: dict, count: int) -> np.ndarray:
    """``tokenizer.ggml.token_type`` (all normal when absent, as llama.cpp reads it)."""
    if TYPES_KEY not in metadata:
        return np.full(count, NORMAL_TOKEN_TYPE, dtype=np.int32)
    return _number_array(metadata, TYPES_KEY, count, INTEGER_KINDS)


def _scores(metadata: dict, count: int) -> np.ndarray:
    """``tokenizer.ggml.scores``: one finite number per piece."""
    if SCORES_KEY not in metadata:
        raise ValueError(f"GGUF metadata lacks {SCORES_KEY!r} (SentencePiece needs its scores)")
    scores = _number_array(metadata, SCORES_KEY, count, NUMBER_KINDS).astype(np.float64)
    if not np.isfinite(scores).all():
        raise ValueError(f"{SCORES_KEY} holds values that are not finite")
    return scores


def _flag(metadata: dict, key: str, default: bool) -> bool:
    """A boolean field, ``default`` when absent."""
    value = metadata.get(key, default)
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return bool(value)


def _token_id(metadata: dict, key: str, model: str, count: int) -> int | None:
    """A special id in [0, V); llama.cpp's default for ``"llama"`` files when absent."""
    if key in metadata:
        return check_int(key, metadata[key], low=0, high=count - 1)
    default = SPM_DEFAULT_IDS.get(key) if model == SPM_MODEL else None
    return default if default is not None and default < count else None


def _post_processor(
    tokens: list[str], bos_id: int | None, eos_id: int | None
) -> processors.TemplateProcessing:
    """Put BOS first and EOS last (each when given) around one text or a pair of texts."""
    bos = [f"{tokens[bos_id]}:0"] if bos_id is not None else []
    eos = [f"{tokens[eos_id]}:0"] if eos_id is not None else []
    bos_b = [f"{tokens[bos_id]}:1"] if bos_id is not None else []
    eos_b = [f"{tokens[eos_id]}:1"] if eos_id is not None else []
    specials = {tokens[i]: i for i in (bos_id, eos_id) if i is not None}
    return processors.TemplateProcessing(
        single=" ".join([*bos, "$A:0", *eos]),
        pair=" ".join([*bos, "$A:0", *eos, *bos_b, "$B:1", *eos_b]),
        special_tokens=list(specials.items()),
    )


def _required_id(metadata: dict, flag_key: str, default: bool, token_id: int | None) -> bool:
    """A BOS/EOS flag; llama.cpp's rule: a token that is to be added must exist."""
    flag = _flag(metadata, flag_key, default)
    if flag and token_id is None:
        id_key = BOS_KEY if flag_key == ADD_BOS_KEY else EOS_KEY
        raise ValueError(f"{flag_key} is true, but {id_key} is not set")
    return flag


def _specials(metadata: dict, model: str, pre: str | None, count: int) -> dict:
    """The special ids and the BOS/EOS flags, as the fields of :class:`GGUFTokenizer`."""
    ids = {
        name: _token_id(metadata, key, model, count)
        for name, key in (("bos_id", BOS_KEY), ("eos_id", EOS_KEY), ("unk_id", UNK_KEY))
    }
    ids["pad_id"] = _token_id(metadata, PAD_KEY, model, count)
    default_bos = model == SPM_MODEL or PRE_TOKENIZERS[pre].add_bos
    ids["add_bos"] = _required_id(metadata, ADD_BOS_KEY, default_bos, ids["bos_id"])
    ids["add_eos"] = _required_id(metadata, ADD_EOS_KEY, False, ids["eos_id"])
    return ids


def _model_builder(metadata: dict, model: str, tokens: list[str], types: np.ndarray):
    """Check the fields of ``model``; return what builds the bare tokenizer from them, its
    spelling and its pre-tokeniser name."""
    if model == SPM_MODEL:
        unk_id = _token_id(metadata, UNK_KEY, model, len(tokens))
        if unk_id is None:
            raise ValueError(f"GGUF metadata lacks {UNK_KEY!r} and the default 0 is not a token")
        scores = _scores(metadata, len(tokens))
        space_prefix = _flag(metadata, SPACE_PREFIX_KEY, True)
        check_spm_fields(tokens, scores, types, unk_id=unk_id)

        def build_spm() -> tokenizers.Tokenizer:
            return build_spm_tokenizer(
                tokens, scores, types, unk_id=unk_id, add_space_prefix=space_prefix
            )

        return build_spm, SENTENCEPIECE, None
    pre = _pre_name(metadata)
    merges = _string_list(metadata, MERGES_KEY)
    vocab, pairs = check_bpe_fields(tokens, merges, types, model=model, pre_tokenizer=pre)
    return lambda: bpe_tokenizer_from(vocab, pairs, types, pre_tokenizer=pre), BYTE_LEVEL, pre


def read_gguf_tokenizer(metadata: dict, *, max_length: int | None = None) -> GGUFTokenizer:
    """Check a GGUF file's tokenizer fields now and build its tokenizer on first use.

    Args:
        metadata, max_length: as for :func:`build_gguf_tokenizer`.

    Returns:
        :class:`GGUFTokenizer` whose ``tokenizer`` is a :class:`LazyTokenizer`: the same
        tokenizer :func:`build_gguf_tokenizer` returns, built the first time it is used.

    Raises:
        ValueError: as :func:`build_gguf_tokenizer` does, for every field (only building the
            ``tokenizers`` object is left for later).
    """
    if max_length is not None:
        max_length = check_int("max_length", max_length, low=MIN_MAX_LENGTH)
    model = _model_name(metadata)
    tokens = _tokens(metadata)
    types = _token_types(metadata, len(tokens))
    build_model, spelling, pre = _model_builder(metadata, model, tokens, types)
    specials = _specials(metadata, model, pre, len(tokens))

    def build() -> tokenizers.Tokenizer:
        tokenizer = build_model()
        if specials["add_bos"] or specials["add_eos"]:
            tokenizer.post_processor = _post_processor(
                tokens,
                specials["bos_id"] if specials["add_bos"] else None,
                specials["eos_id"] if specials["add_eos"] else None,
            )
        if max_length is not None:
            tokenizer.enable_truncation(max_length=max_length)
        return tokenizer

    return GGUFTokenizer(
        tokenizer=LazyTokenizer(build),
        spelling=spelling,
        model=model,
        pre=pre,
        vocab_size=len(tokens),
        **specials,
    )


def build_gguf_tokenizer(metadata: dict, *, max_length: int | None = None) -> GGUFTokenizer:
    """Build the tokenizer a GGUF file's ``tokenizer.ggml.*`` metadata describes.

    Args:
        metadata: ``GGUFFile.metadata`` (:func:`~attention_core.pretrained.gguf_file.parse_gguf`):
            strings, ints, bools, lists of strings, and numpy arrays for numeric arrays.
            Read: ``model``, ``pre``, ``tokens``, ``token_type``, ``scores`` (``"llama"``),
            ``merges`` (``"gpt2"``), ``bos_token_id``, ``eos_token_id``,
            ``unknown_token_id``, ``padding_token_id``, ``add_bos_token``,
            ``add_eos_token``, ``add_space_prefix`` (``"llama"``), all under
            ``tokenizer.ggml.``.
        max_length: cut texts at this many tokens, BOS/EOS included (None: no cut).

    Returns:
        :class:`GGUFTokenizer`.

    Raises:
        ValueError: naming the key, for a missing or malformed field (no model or tokens,
            an unsupported model or pre-tokeniser, a repeated token, token types or scores
            not one per token, a special id outside the vocabulary, a flag that is not a
            bool, BOS or EOS to be added but not named), or a ``max_length`` below 1.
    """
    read = read_gguf_tokenizer(metadata, max_length=max_length)
    return dataclasses.replace(read, tokenizer=read.tokenizer.get())
