"""``python -m bench``: the attention benchmark (see :mod:`bench.attention_bench`)."""

from bench.attention_bench import main

raise SystemExit(main())
