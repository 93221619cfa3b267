"""The dashboard's data layer: the only place that touches torch and ``attention_core``.

Every public function is a cached call (``st.cache_resource`` for results holding read-only
numpy arrays, ``st.cache_data`` for small tables) or a pure numpy/pandas helper on what
those return. Arguments are plain values or frozen configs (:class:`dashboard.config.LayerConfig`),
which Streamlit's caches hash field by field. Arrays handed out are read-only.

Modules, by concern:

* :mod:`~dashboard.data.catalogue` — the variant registry (read-only) and the devices.
* :mod:`~dashboard.data.inputs` — tokens, embeddings, random inputs and masks of a run.
* :mod:`~dashboard.data.runs` — cached layer runs (weights, scores, output) and peak memory.
* :mod:`~dashboard.data.tables` — pooling, heatmap matrices, CSV tables, short figures.
* :mod:`~dashboard.data.teaching` — head patterns, head statistics, the Q/K/V walkthrough.
* :mod:`~dashboard.data.lab` — the Scaling, Variants, Properties, Gradients, Practice calls.
* :mod:`~dashboard.data.model` — the real pretrained encoders (multilingual e5-small, MiniLM).
* :mod:`~dashboard.data.probe` — which heads send one word to another, on a real model.
* :mod:`~dashboard.data.decoder` — the real decoder (SmolLM2-135M): generation, maps, sinks.
* :mod:`~dashboard.data.heads` — Heads at work: census, copy test, attribution, masks;
  :mod:`~dashboard.data.heads_prefetch` — its likely next moves filled in the background.
* :mod:`~dashboard.data.heads_cost` — Heads at work: a long computation's time, before it starts.
* :mod:`~dashboard.data.heads_e5` — Heads at work in e5: census, pronoun link, heads off.
* :mod:`~dashboard.data.writes` — What a head writes: the logit lens, every part's share of
  the answer; :mod:`~dashboard.data.writes_heads` — one head's write, the copying scores.
* :mod:`~dashboard.data.memo` — the byte-bounded cache of the layer runs.
* :mod:`~dashboard.data.training` — Watch it learn: training runs streamed, kept by config.

Importing this package computes nothing, starts no thread and imports neither torch nor
the library: each name below is imported from its module the first time a page uses it
(:pep:`562`), so a page that needs no tensor (a landing page, say) never pays torch's
import. ``from dashboard.data import X`` and ``data.X`` work as usual.

:data:`_EXPORTS` is the one list of those names (the modules keep no ``__all__`` copy; a
name a module re-exports from the library is imported there with ``# noqa: F401``), and
``tests/dashboard/test_data_exports.py`` ties it to the modules.
"""

from __future__ import annotations

import importlib

TORCH_FREE_MODULES = frozenset({"analogies", "memo"})
"""Modules of this package that import no torch (the landing page's first charts use them)."""
WHOLE_TORCH_MODULES = frozenset({"training"})
"""Modules of this package that may reach torch's lazy modules (an optimizer imports
``torch._dynamo``): imported after :func:`dashboard.runtime.threads.import_whole_torch`."""

_EXPORTS: dict[str, tuple[str, ...]] = {
    "analogies": (
        "LIBRARY_SHELVES",
        "LibraryLookup",
        "MEETING_OTHER_SCORES",
        "MEETING_PEOPLE",
        "library_lookup",
        "meeting_weights",
        "softmax",
    ),
    "catalogue": (
        "KernelInfo",
        "band_kernel_info",
        "device_for",
        "device_options",
        "variant_catalogue",
    ),
    "decoder": (
        "DECODER_ATTENTION_TOLERANCE",
        "DECODER_HEADS",
        "DECODER_INSTALL_HINT",
        "DECODER_KV_HEADS",
        "DECODER_LAYERS",
        "DECODER_LOGIT_TOLERANCE",
        "DECODER_MAX_SHIFT",
        "DECODER_MAX_STEPS",
        "DECODER_MAX_TOKENS",
        "DECODER_PRESETS",
        "DECODER_TEXT_MAX_CHARS",
        "DECODER_TOP_K",
        "DECODER_WEIGHTS_DTYPE",
        "SINK_PARAGRAPH",
        "SINK_SERIES",
        "SINK_TOKENS",
        "DecodeStep",
        "PromptMaps",
        "decode_step",
        "decoder_installed",
        "fetch_smollm2",
        "prompt_maps",
        "rope_versions",
        "sink_head_shares",
        "sink_table",
        "smollm2_decoder",
        "window_table",
    ),
    "token_text": (
        "shown_text",
        "shown_token",
        "token_labels",
    ),
    "qk_map": (
        "OWN_MAX_CHARS",
        "QKMapData",
        "QK_COLOURS",
        "QK_METHODS",
        "QK_MODELS",
        "QK_SHAPES",
        "attention_row",
        "qk_head",
        "qk_map_data",
        "qk_map_table",
        "qk_sentences",
    ),
    "heads_prefetch": (
        "CopyView",
        "Job",
        "copy_job",
        "fill_attribution",
        "fill_copy",
        "fill_top_k",
        "fill_why",
        "length_job",
        "length_neighbours",
        "mask_job",
        "nearest_first",
        "prefetch",
        "prefetch_all",
        "prefetch_wait",
        "why_candidates",
        "window_neighbours",
    ),
    "own_models": (
        "CheckOutcome",
        "DecoderShape",
        "HUB_IDS_ENV",
        "HUB_PREFIX",
        "LoadedModel",
        "MODELS_DIR_ENV",
        "MODELS_DIR_SECRET",
        "MODEL_LIST_TTL_S",
        "ModelCard",
        "SMOLLM2_CHOICE",
        "configured_folders",
        "decoder_choices",
        "decoder_shape",
        "fetch_hub",
        "hub_commit",
        "hub_ids_allowed",
        "hub_name",
        "left_out",
        "left_out_files",
        "loaded_model",
        "model_card",
        "models_configured",
        "own_model_files",
        "own_model_scan",
        "run_model_check",
    ),
    "heads": (
        "HEADS_COPY_DEFAULT",
        "HEADS_COPY_MAX",
        "HEADS_COPY_MIN",
        "HEADS_FLOAT_DTYPE",
        "HEADS_LABELS",
        "HEADS_MAX_OFF",
        "HEADS_MAX_SEED",
        "HEADS_PRESETS",
        "HEADS_SCORES",
        "HEADS_SOURCES",
        "MASK_TEXT",
        "PromptCensus",
        "TooFewTokens",
        "attribution_ids",
        "census_table",
        "copy_census",
        "copy_heads",
        "copy_pair",
        "copy_run",
        "effect_table",
        "explanation",
        "explanation_table",
        "head_attribution",
        "head_effects",
        "head_name",
        "head_names",
        "mask_effect",
        "mask_kept",
        "mask_parts",
        "measured_heads",
        "parse_head",
        "prompt_census",
        "smollm2_float_decoder",
        "top_heads",
        "weakest_heads",
    ),
    "writes": (
        "ANSWER_CHOICES",
        "Attribution",
        "LENS_POSITIONS_DEFAULT",
        "LENS_POSITIONS_MAX",
        "LENS_TOP",
        "LensGrid",
        "NextTokens",
        "PARTS_SHOWN",
        "WRITES_PRESETS",
        "attribution",
        "early_rows",
        "head_shares",
        "lens_grid",
        "lens_table",
        "mlp_shares",
        "next_tokens",
        "parts_table",
        "settled_layer",
    ),
    "writes_heads": (
        "HeadWrite",
        "WRITE_TOKENS",
        "attention_row_table",
        "census_labels",
        "copying_by_label",
        "copying_scores",
        "head_table",
        "head_write",
        "write_table",
    ),
    "heads_cost": (
        "LONG_RUN_S",
        "LinearPace",
        "RunEstimate",
        "effects_estimate",
        "line_through",
        "mask_estimate",
        "measured_head_effects",
        "measured_mask_effect",
    ),
    "heads_why": (
        "WHY_TOP_PARTS",
        "WHY_TOP_REPAIR",
        "WHY_TOP_TERMS",
        "WhyCell",
        "copy_ids",
        "copy_tokens",
        "default_query",
        "induction_key",
        "part_head",
        "part_mlp",
        "repair_table",
        "strongest_induction_head",
        "why_cell",
        "why_without",
    ),
    "heads_e5": (
        "E5Census",
        "E5Link",
        "E5_HEADS",
        "E5_INSTALL_HINT",
        "E5_LABELS",
        "E5_LAYERS",
        "E5_LINK",
        "E5_PROMPT",
        "E5_SCORES",
        "E5_SOURCES",
        "check_head",
        "e5_ablation",
        "e5_census",
        "e5_census_table",
        "e5_installed",
        "e5_off_heads",
        "e5_text",
        "find_link",
        "find_word",
        "link_words",
    ),
    "inputs": (
        "INPUT_KINDS",
        "MASK_KINDS",
        "MAX_SENTENCE_TOKENS",
        "MAX_INPUT_LEN",
        "PRESET_SENTENCES",
        "axis_labels",
        "build_input",
        "build_mask",
        "has_words",
        "input_tokens",
        "tokens_for",
    ),
    "lab": (
        "CostCells",
        "QUADRATIC_MAX_L",
        "SUBQUADRATIC_GROWTH",
        "measurable_variants",
        "LAB_MAX_COMPLEXITY_L",
        "LAB_MAX_D_K",
        "allowed_pattern",
        "causal_leak",
        "checkpoint_table",
        "chunk_memory_estimates",
        "chunk_memory_measured",
        "chunked_exact_diff",
        "complexity_cell",
        "complexity_table",
        "equivariance_check",
        "gradient_by_dk",
        "gradient_by_variant",
        "memory_estimate",
        "precision_table",
        "row_sum_table",
        "scaling_row",
        "scaling_table",
        "softmax_stability",
        "softmax_sweep",
        "variant_pattern",
    ),
    "model": (
        "E5",
        "MINILM",
        "MODEL_GRID_MAX_TOKENS",
        "MODEL_HEAD_VIEW_MAX_TOKENS",
        "MODEL_HUB_NAMES",
        "MODEL_INSTALL_HINT",
        "MODEL_INSTALL_HINTS",
        "MODEL_LINE_MIN_WEIGHT",
        "MODEL_PRESETS",
        "MODEL_TEXT_MAX_CHARS",
        "MODELS",
        "SAME_MAPS_TOL",
        "TRANSLATIONS",
        "UNRELATED_TEXT",
        "ModelRun",
        "SwapComparison",
        "compare_swap",
        "fetch_model",
        "e5_encoder",
        "embedding_cosine",
        "head_view_frame",
        "minilm_encoder",
        "model_grid",
        "model_grid_max_tokens",
        "model_installed",
        "model_run",
        "model_token_frame",
        "top_key",
    ),
    "probe": (
        "PRESET_WORDS",
        "PRONOUN_TOP_HEADS",
        "PairCosine",
        "WordLink",
        "default_words",
        "pair_cosine",
        "sink_share",
        "translation_of",
        "word_link",
    ),
    "runs": (
        "PROJECTIONS",
        "AttentionRun",
        "PeakMemory",
        "attention_peak",
        "attention_run",
        "max_output_difference",
    ),
    "tables": (
        "FULL_HEATMAP_MAX",
        "MAX_CHART_ROWS",
        "POOLED_SIDE",
        "Heatmap",
        "describe_bytes",
        "describe_seconds",
        "heatmap_grid",
        "heatmap_side",
        "long_table",
        "pool_edges",
        "pool_matrix",
        "readonly",
        "weights_table",
    ),
    "teaching": (
        "STEP_D_MODEL",
        "cell_breakdown",
        "head_entropy",
        "masked_scores",
        "mean_distance",
        "pattern_gallery",
        "step_by_step",
    ),
    "training": (
        "DIVERGENCE_FACTOR",
        "Divergence",
        "LOSS_EXPLODED",
        "LOSS_NOT_FINITE",
        "MAX_TRAINING_SECONDS",
        "Snapshot",
        "StepCost",
        "TASKS",
        "TrainingConfig",
        "TrainingRun",
        "TrainingTime",
        "curves_table",
        "estimate_time",
        "finished_run",
        "grad_table",
        "match_table",
        "step_cost",
        "stream_run",
        "training_target",
        "training_time",
        "unscaled_scores",
    ),
}
"""The public names of the package, by the module that defines them."""

_OWNER = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_OWNER)


def __getattr__(name: str):
    """Import a public name from its module on first use (then it is a plain attribute). A
    module that needs torch is imported only once the runtime's torch thread has imported
    torch (:func:`dashboard.runtime.threads.import_torch`), and one of
    :data:`WHOLE_TORCH_MODULES` once it has also imported what torch imports lazily
    (:func:`dashboard.runtime.threads.import_whole_torch`): a script run never imports torch
    beside it.

    Raises:
        AttributeError: for a name the package does not export.
    """
    module = _OWNER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module not in TORCH_FREE_MODULES:
        from dashboard.runtime import threads

        if module in WHOLE_TORCH_MODULES:
            threads.import_whole_torch()
        else:
            threads.import_torch()
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
