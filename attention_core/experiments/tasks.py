"""Four synthetic sequence tasks whose correct attention is known, for training a tiny model.

Each task maps a sequence of tokens (B, L) to a target token per position and to the one
key that query should attend to, so a trained head can be compared with the right pattern:

* ``shift``: output the previous token; query i should attend to key i − 1 (position 0
  has no previous token and is not scored).
* ``reverse``: output the sequence reversed; query i should attend to key L − 1 − i (the
  anti-diagonal).
* ``sort``: output the tokens in ascending order; query i should attend to the key that
  holds the i-th smallest token. Tokens are drawn without repetition, so that key is unique.
* ``induction``: a first part of h distinct random tokens, then its first L − h tokens
  again, with h drawn per sequence in [ceil(L / 2), L − 2]. Query i of the repeat predicts
  the next token x[i + 1]: the token after the earlier occurrence of x[i], at key
  i − h + 1. The model is causal for this task (otherwise it could read x[i + 1] directly);
  the first part and the last position are not scored. Because h varies, the key cannot be
  found from positions alone: one head must first copy each token's predecessor into it
  (key j then says "x[j − 1] was here"), and a second layer matches x[i] against that, which
  is why induction needs two layers. That holds from L = 8 (h ∈ {4, 5, 6}) on: h takes one
  value at L = 4 and 5 and two at L = 6 and 7, so positions give the key away and one layer
  reaches 100 % too (measured in tests/dashboard/test_induction_lesson.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attention_core.validation import check_choice, check_int

TASKS = ("shift", "reverse", "sort", "induction")
CAUSAL_TASKS = frozenset({"induction"})
IGNORE = -100  # target of an unscored position (``F.cross_entropy``'s default ignore_index)
NO_KEY = -1  # target key of an unscored position
MIN_VOCAB = 16
MIN_TASK_LEN = 4
MAX_TASK_LEN = 64
MAX_BATCH = 4096


@dataclass(frozen=True)
class TaskBatch:
    """One batch of a task.

    Attributes:
        tokens: (B, L) int64 inputs in [0, vocab).
        targets: (B, L) int64 target tokens, :data:`IGNORE` where a position is not scored.
        target_keys: (B, L) int64, the key each query should attend to, :data:`NO_KEY` where
            the position is not scored.
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    target_keys: torch.Tensor

    @property
    def scored(self) -> torch.Tensor:
        """(B, L) bool, True where the position has a target."""
        return self.targets != IGNORE


def check_task(task: object) -> str:
    """Return ``task`` after checking it names one of :data:`TASKS`.

    Raises:
        ValueError: naming the value and listing the valid tasks.
    """
    return str(check_choice("task", task, TASKS))


def vocab_size(seq_len: int) -> int:
    """Vocabulary size used at sequence length L: max(16, L), so L distinct tokens exist."""
    return max(MIN_VOCAB, seq_len)


def induction_lengths(seq_len: int) -> tuple[int, int]:
    """The range [low, high] of h, the first part of an induction sequence of length L."""
    return math.ceil(seq_len / 2), seq_len - 2


def _distinct_tokens(batch: int, length: int, vocab: int, generator) -> torch.Tensor:
    """(B, length) int64, each row ``length`` distinct tokens of [0, vocab) in random order."""
    noise = torch.rand(batch, vocab, generator=generator)  # (B, V)
    return noise.argsort(dim=-1)[:, :length]  # (B, length): a random partial permutation


def sample_tokens(task: str, batch: int, seq_len: int, generator: torch.Generator):
    """Draw the inputs of one batch of ``task``.

    Args:
        task: one of :data:`TASKS`.
        batch: B, in [1, 4096].
        seq_len: L, in [4, 64].
        generator: the torch generator every draw comes from.

    Returns:
        (B, L) int64 tokens in [0, vocab_size(L)): uniform with repetition for ``shift`` and
        ``reverse``, distinct per row for ``sort``, a distinct first part then its repeat
        for ``induction``.

    Raises:
        ValueError: for an unknown task or an out-of-range batch or length.
    """
    task = check_task(task)
    batch = check_int("batch", batch, low=1, high=MAX_BATCH)
    L = check_int("seq_len", seq_len, low=MIN_TASK_LEN, high=MAX_TASK_LEN)
    vocab = vocab_size(L)
    if task in ("shift", "reverse"):
        return torch.randint(0, vocab, (batch, L), generator=generator)  # (B, L)
    if task == "sort":
        return _distinct_tokens(batch, L, vocab, generator)  # (B, L)
    low, high = induction_lengths(L)
    h = torch.randint(low, high + 1, (batch, 1), generator=generator)  # (B, 1)
    first = _distinct_tokens(batch, L, vocab, generator)  # (B, L), only the first h used
    positions = torch.arange(L).expand(batch, L)  # (B, L)
    source = torch.where(positions < h, positions, positions - h)  # (B, L): j, then j - h
    return first.gather(1, source)  # (B, L)


def _shift_targets(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B, L = tokens.shape
    targets = torch.full_like(tokens, IGNORE)
    targets[:, 1:] = tokens[:, :-1]  # y_i = x_{i-1}
    keys = torch.arange(L).expand(B, L) - 1  # (B, L): key i - 1, -1 at i = 0
    return targets, keys.clone()


def _reverse_targets(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B, L = tokens.shape
    keys = (L - 1 - torch.arange(L)).expand(B, L).clone()  # (B, L): the anti-diagonal
    return tokens.flip(-1), keys


def _sort_targets(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    targets, keys = tokens.sort(dim=-1, stable=True)  # (B, L) each
    return targets, keys


def repeat_start(tokens: torch.Tensor) -> torch.Tensor:
    """h per row: the first position whose token occurred before.

    Args:
        tokens: (B, L) integer tensor.

    Returns:
        (B, 1) int64.

    Raises:
        ValueError: when a row repeats no token (it is no induction sequence).
    """
    L = tokens.shape[1]
    same = tokens.unsqueeze(2) == tokens.unsqueeze(1)  # (B, L, L): x_i == x_j
    earlier = torch.ones(L, L, dtype=torch.bool).tril(diagonal=-1)  # (L, L): j < i
    repeated = (same & earlier).any(dim=2)  # (B, L)
    if not bool(repeated.any(dim=1).all()):
        raise ValueError("an induction sequence must repeat its first part; a row repeats nothing")
    return repeated.long().argmax(dim=1, keepdim=True)  # (B, 1): first True


def _induction_targets(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    B, L = tokens.shape
    h = repeat_start(tokens)  # (B, 1)
    positions = torch.arange(L).expand(B, L)  # (B, L)
    scored = (positions >= h) & (positions <= L - 2)  # (B, L): the repeat, not the last
    following = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)  # (B, L): x_{i+1} (wraps)
    targets = torch.where(scored, following, torch.full_like(tokens, IGNORE))
    keys = torch.where(scored, positions - h + 1, torch.full_like(tokens, NO_KEY))  # (B, L)
    return targets, keys


_TARGETS = {
    "shift": _shift_targets,
    "reverse": _reverse_targets,
    "sort": _sort_targets,
    "induction": _induction_targets,
}


def task_targets(task: str, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The target tokens and target keys of ``task`` for given inputs.

    Args:
        task: one of :data:`TASKS`.
        tokens: (B, L) int64 inputs, L >= 4 (for ``sort`` and ``induction`` drawn as
            :func:`sample_tokens` does; ties in ``sort`` go to the earlier key).

    Returns:
        (targets (B, L), target_keys (B, L)), both int64; :data:`IGNORE` and :data:`NO_KEY`
        where a position is not scored.

    Raises:
        ValueError: for an unknown task or tokens that are not a (B, L) integer tensor with
            L >= 4.
    """
    task = check_task(task)
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"tokens must be a (batch, length) integer tensor, got {tokens!r}")
    check_int("seq_len", tokens.shape[1], low=MIN_TASK_LEN)
    return _TARGETS[task](tokens.long())


def make_batch(task: str, batch: int, seq_len: int, generator: torch.Generator) -> TaskBatch:
    """Draw one batch of ``task``: inputs, targets and target keys.

    Args:
        task: one of :data:`TASKS`. batch: B in [1, 4096]. seq_len: L in [4, 64].
        generator: the torch generator every draw comes from.

    Returns:
        TaskBatch of three (B, L) int64 tensors.

    Raises:
        ValueError: for an unknown task or an out-of-range batch or length.
    """
    tokens = sample_tokens(task, batch, seq_len, generator)
    targets, keys = task_targets(task, tokens)
    return TaskBatch(tokens=tokens, targets=targets, target_keys=keys)


def target_pattern(target_keys: torch.Tensor) -> np.ndarray:
    """The correct attention averaged over a batch: an (L, L) map.

    Args:
        target_keys: (B, L) int64, :data:`NO_KEY` for unscored queries.

    Returns:
        float64 (L, L): entry (i, j) is the fraction of the batch whose query i should attend
        to key j; a row of zeros for a query that is never scored.
    """
    B, L = target_keys.shape
    scored = target_keys != NO_KEY  # (B, L)
    one_hot = torch.zeros(B, L, L, dtype=torch.float64)  # (B, L, L)
    one_hot.scatter_(-1, target_keys.clamp(min=0).unsqueeze(-1), scored.unsqueeze(-1).double())
    return one_hot.mean(dim=0).numpy()  # (L, L)


def pattern_match(weights: torch.Tensor, target_keys: torch.Tensor) -> torch.Tensor:
    """Mean weight each head puts on the correct key, over the scored queries of a batch.

    Args:
        weights: (B, H, L, L) attention weights of one layer.
        target_keys: (B, L) int64, :data:`NO_KEY` for unscored queries.

    Returns:
        (H,) float tensor in [0, 1]: 1 when every scored query puts all its weight on its key.
    """
    B, H, L, _ = weights.shape
    scored = target_keys != NO_KEY  # (B, L)
    index = target_keys.clamp(min=0).view(B, 1, L, 1).expand(B, H, L, 1)  # (B, H, L, 1)
    on_key = weights.gather(-1, index).squeeze(-1)  # (B, H, L)
    counted = scored.unsqueeze(1).to(weights.dtype)  # (B, 1, L)
    return (on_key * counted).sum(dim=(0, 2)) / counted.sum().clamp(min=1)  # (H,)
