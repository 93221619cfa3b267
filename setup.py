"""Build of the optional C extension ``attention_core._band`` (the banded kernel behind
``local``); everything else is declared in pyproject.toml.

The extension is optional: where no C compiler (or no POSIX threads) is available the
install still succeeds and ``local`` runs its pure-PyTorch path (see
``attention_core/variants/band_kernel.py``).
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
        )
    ]
)
