"""Experiments a teacher runs on attention, returning tidy tables or frozen dataclasses.

No plotting here: the dashboard turns these tables into charts.

* :mod:`~attention_core.experiments.patterns` — the tutorial's eight synthetic head patterns.
* :mod:`~attention_core.experiments.scaling` — scores and softmax with and without 1/sqrt(d_k).
* :mod:`~attention_core.experiments.equivariance` — f(Px) = P f(x) and what breaks it;
  causality, row sums, chunked = exact.
* :mod:`~attention_core.experiments.gradients` — gradient norms of W_Q, W_K, W_V and x.
* :mod:`~attention_core.experiments.complexity` — measured time and peak memory against L.
* :mod:`~attention_core.experiments.stability` — naive vs stable softmax, precision, memory.
* :mod:`~attention_core.experiments.inputs` — tokens, token embeddings, sinusoidal positions.
* :mod:`~attention_core.experiments.walkthrough` — single-head attention, every intermediate.
* :mod:`~attention_core.experiments.head_stats` — head entropy and mean attention distance.
* :mod:`~attention_core.experiments.tasks` — shift, reverse, sort, induction: known attention.
* :mod:`~attention_core.experiments.training` — train a tiny attention model, snapshot heads.

On the real decoder (import the module; its names are not re-exported here, so importing
this package loads no checkpoint code): :mod:`~attention_core.experiments.decoding`,
:mod:`~attention_core.experiments.heads` (head census),
:mod:`~attention_core.experiments.head_ablation` (copy test, ablation, attribution),
:mod:`~attention_core.experiments.explain` (saliency vs attention vs rollout, Spearman),
:mod:`~attention_core.experiments.mask_effects` (the mask composer's cost per layer),
:mod:`~attention_core.experiments.model_check` (a loaded model's one-click check),
:mod:`~attention_core.experiments.score_parts` (why a head attends: a score split into the
parts of the model that made it, on the run :mod:`~attention_core.experiments.score_run`
records; one part removed in :mod:`~attention_core.experiments.score_without`) and
:mod:`~attention_core.experiments.logit_lens` (what a head writes: the logit lens, direct logit
attribution, a head's write as tokens) with :mod:`~attention_core.experiments.ov_copying` (OV
copying scores).
"""

from attention_core.experiments.complexity import (
    COMPLEXITY_COLUMNS,
    PEAK_METHODS,
    measure_complexity,
    measure_peak_bytes,
)
from attention_core.experiments.equivariance import (
    CausalLeakResult,
    EquivarianceResult,
    check_causal_leak,
    check_chunked_exact,
    check_perm,
    check_permutation_equivariance,
    equivariance_table,
    random_perm,
    row_sums,
)
from attention_core.experiments.gradients import (
    GRAD_TENSORS,
    GradientNorms,
    GradientProblem,
    gradient_norms_vs_dk,
    gradient_table,
    make_gradient_problem,
    measure_gradient_norms,
)
from attention_core.experiments.head_stats import head_entropy, mean_distance
from attention_core.experiments.inputs import (
    INPUT_KINDS,
    MAX_SENTENCE_TOKENS,
    PRESET_SENTENCES,
    LayerInput,
    check_tokens,
    has_words,
    input_tokens,
    make_input,
    preset_tokens,
    sinusoidal_positions,
    token_embeddings,
    token_vector,
    tokens_for,
)
from attention_core.experiments.patterns import PATTERN_NAMES, head_patterns
from attention_core.experiments.scaling import (
    SCALING_COLUMNS,
    measure_scaling,
    softmax_entropy,
    softmax_jacobian_norm,
)
from attention_core.experiments.stability import (
    checkpointing_estimate,
    chunked_vs_full_memory,
    compare_softmax_stability,
    naive_softmax,
    precision_comparison,
    softmax_overflow_sweep,
)
from attention_core.experiments.tasks import (
    IGNORE,
    NO_KEY,
    TASKS,
    TaskBatch,
    make_batch,
    pattern_match,
    sample_tokens,
    target_pattern,
    task_targets,
)
from attention_core.experiments.training import (
    DIVERGENCE_FACTOR,
    PROJECTIONS,
    Divergence,
    Snapshot,
    TrainingConfig,
    TrainingRun,
    drain,
    estimate_training_bytes,
    iter_training,
    probe_batch,
    run_training,
    train_task,
)
from attention_core.experiments.training_cost import (
    StepCost,
    estimate_training_seconds,
    measure_step_cost,
)
from attention_core.experiments.walkthrough import (
    MATRIX_NAMES,
    STEP_D_MODEL,
    CellBreakdown,
    Walkthrough,
    explain_cell,
    walk_through_attention,
    walk_through_preset,
)

__all__ = [
    "COMPLEXITY_COLUMNS",
    "DIVERGENCE_FACTOR",
    "GRAD_TENSORS",
    "IGNORE",
    "INPUT_KINDS",
    "MATRIX_NAMES",
    "MAX_SENTENCE_TOKENS",
    "NO_KEY",
    "PATTERN_NAMES",
    "PEAK_METHODS",
    "PRESET_SENTENCES",
    "PROJECTIONS",
    "SCALING_COLUMNS",
    "STEP_D_MODEL",
    "TASKS",
    "CausalLeakResult",
    "CellBreakdown",
    "Divergence",
    "EquivarianceResult",
    "GradientNorms",
    "GradientProblem",
    "LayerInput",
    "Snapshot",
    "StepCost",
    "TaskBatch",
    "TrainingConfig",
    "TrainingRun",
    "Walkthrough",
    "check_causal_leak",
    "check_chunked_exact",
    "check_perm",
    "check_permutation_equivariance",
    "check_tokens",
    "checkpointing_estimate",
    "chunked_vs_full_memory",
    "compare_softmax_stability",
    "drain",
    "equivariance_table",
    "estimate_training_bytes",
    "estimate_training_seconds",
    "explain_cell",
    "gradient_norms_vs_dk",
    "gradient_table",
    "has_words",
    "head_entropy",
    "head_patterns",
    "input_tokens",
    "iter_training",
    "make_batch",
    "make_gradient_problem",
    "make_input",
    "mean_distance",
    "measure_complexity",
    "measure_gradient_norms",
    "measure_peak_bytes",
    "measure_scaling",
    "measure_step_cost",
    "naive_softmax",
    "pattern_match",
    "precision_comparison",
    "preset_tokens",
    "probe_batch",
    "random_perm",
    "row_sums",
    "run_training",
    "sample_tokens",
    "sinusoidal_positions",
    "softmax_entropy",
    "softmax_jacobian_norm",
    "softmax_overflow_sweep",
    "target_pattern",
    "task_targets",
    "token_embeddings",
    "token_vector",
    "tokens_for",
    "train_task",
    "walk_through_attention",
    "walk_through_preset",
]
