"""Build of the optional C extensions ``attention_core._band`` (the banded kernel behind
``local``) and ``attention_core._ggml`` (decoding and packing a GGUF file's 4-bit and Q6_K
blocks); everything else is declared in pyproject.toml.

Both are optional: where no C compiler (or no POSIX threads) is available the install
still succeeds, ``local`` runs its pure-PyTorch path (see
``attention_core/variants/band_kernel.py``) and the GGUF loader its torch decoders (see
``attention_core/pretrained/ggml_kernel.py``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "attention_core._band",
            sources=["attention_core/_native/band.c"],
            depends=["attention_core/_native/band_impl.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,
        ),
        Extension(
            "attention_core._ggml",
            sources=["attention_core/_native/ggml.c"],
            # no fused multiply-adds: the values must be ggml's float32 products, bit for bit
            extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off"],
            optional=True,
        ),
    ]
)
