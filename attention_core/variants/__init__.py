"""One module per family; each exports ``SPECS``, collected here in display order."""

from attention_core.variants import chunked, full, linear, local, sparse

ALL_SPECS = (*full.SPECS, *local.SPECS, *sparse.SPECS, *linear.SPECS, *chunked.SPECS)

__all__ = ["ALL_SPECS"]
