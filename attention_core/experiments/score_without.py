"""One part removed from an attention row: what the direct path predicts, what a forward pass
without the part measures, and which parts changed between the two (self-repair).

:func:`predicted_attention_without` takes the cell matrices of
:func:`~attention_core.experiments.score_parts.score_parts` for every key of a query, drops
the removed part's row and column (every term with the part on the query or the key side) and
takes the softmax over the keys: the prediction if nothing downstream reacted. The measured
row comes from :func:`~attention_core.experiments.score_run.record_run` with the part's write
zeroed at every position (for a head, the decoder's own zero ablation
``ablate=[(layer, head)]``; a test checks the two rows are equal). Later heads and MLPs that
read the part write something else, and the norms' scales move: the parts whose share of the
row's scores changed most are the self-repair.

Shapes: E head size, n the parts of one cell, S = query + 1 the keys a query may see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attention_core.experiments.heads import readonly
from attention_core.experiments.score_parts import BIAS, cell_names, check_cell, side_parts
from attention_core.experiments.score_run import ScoreRun, check_decoder, record_run, score_run
from attention_core.pretrained.llama import Decoder


@dataclass(frozen=True)
class AttentionWithout:
    """One attention row without one part: predicted by the direct path, measured by a real
    forward pass with that part turned off.

    Attributes:
        part: the removed part's name.
        clean: read-only (S,) the model's row.
        predicted: (S,) softmax over the keys of the scores less every term with the part on
            the query or the key side.
        measured: (S,) the row of a forward pass with the part's write zeroed everywhere (for
            a head the decoder's ``ablate=[(layer, head)]``).
        names: the n part names of the cell.
        shares_clean: (n, S) each part's share of every key's score (half its query-side
            plus half its key-side sum: the shares add up to the score), less its mean over
            the S keys (softmax ignores a shift), in the model's run.
        shares_measured: (n, S) the same in the ablated run.
        repair: (name, change) for every part but the removed one, ranked by the size of
            the change: the shares' change at the key where it is largest (self-repair).
    """

    part: str
    clean: np.ndarray
    predicted: np.ndarray
    measured: np.ndarray
    names: tuple[str, ...]
    shares_clean: np.ndarray
    shares_measured: np.ndarray
    repair: tuple[tuple[str, float], ...]


def _row_parts(
    decoder: Decoder, run: ScoreRun, layer: int, head: int, query: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(query parts (n, E), key parts (n, S, E)) of one attention row, float64, /√E folded
    into the query parts."""
    q = side_parts(decoder, run, layer=layer, head=head, positions=[query], side="query")
    keys = list(range(query + 1))
    k = side_parts(decoder, run, layer=layer, head=head, positions=keys, side="key")
    return q[:, 0] / math.sqrt(decoder.config.head_dim), k  # (n, E), (n, S, E)


def _centred_shares(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Each part's half query-side plus half key-side sum of every key's score, less its mean
    over the keys: (n, S) float64 from q (n, E) and k (n, S, E)."""
    query_side = k.sum(dim=0) @ q.T  # (S, E) @ (E, n) -> (S, n)
    key_side = k @ q.sum(dim=0)  # (n, S, E) @ (E,) -> (n, S)
    shares = (query_side.T + key_side) / 2  # (n, S)
    return shares - shares.mean(dim=1, keepdim=True)  # (n, S)


def _check_part(names: tuple[str, ...], part) -> int:
    """The index of a removable part of the cell (not the bias); ValueError naming it."""
    removable = tuple(n for n in names if n != BIAS)
    if not isinstance(part, str) or part not in removable:
        shown = ", ".join(removable[:6]) + (", …" if len(removable) > 6 else "")
        raise ValueError(
            f"part must name a part of the stream before this layer ({shown}), got {part!r}"
        )
    return names.index(part)


def predicted_attention_without(
    decoder: Decoder, input_ids, *, layer, head, query, part
) -> AttentionWithout:
    """The attention row of (layer, head) at ``query`` without one part: predicted by the
    direct path (the score matrices less that part's row and column, softmax over the
    query's keys) and measured by a forward pass with that part zeroed at every position.

    The difference between the two is what the model does downstream of the part: later
    heads and MLPs that read it write something else (self-repair), and the norms' scales
    move. ``repair`` ranks the parts by how much their share of the row's scores changed.

    Args:
        decoder, input_ids, layer, head, query: as :func:`score_parts`.
        part: a name from the cell's parts other than ``"bias"`` (the embedding, a head
            ``"L{j}H{h}"`` or an MLP ``"MLP{j}"`` with j < layer).

    Returns:
        :class:`AttentionWithout`. The measured run is one more forward pass (not cached).

    Raises:
        ValueError: as :func:`score_parts`, and for a part that is not in the cell or is
            the bias.
    """
    check_decoder(decoder)
    run = score_run(decoder, input_ids)
    layer, head, query, _ = check_cell(decoder, run, layer, head, query)
    names = cell_names(decoder, run, layer)
    index = _check_part(names, part)
    ablated = record_run(decoder, run.input_ids, removed=part)
    with torch.inference_mode():
        q, k = _row_parts(decoder, run, layer, head, query)  # (n, E), (n, S, E)
        whole_q, whole_k = q.sum(dim=0), k.sum(dim=0)  # (E,), (S, E)
        kept = (
            whole_k @ whole_q  # (S, E) @ (E,) -> (S,)
            - whole_k @ q[index]  # the part on the query side, (S,)
            - k[index] @ whole_q  # the part on the key side, (S,)
            + k[index] @ q[index]  # counted twice above, (S,)
        )
        predicted = torch.softmax(kept, dim=0).numpy()  # (S,)
        clean_shares = _centred_shares(q, k)  # (n, S)
        measured_shares = _centred_shares(*_row_parts(decoder, ablated, layer, head, query))
        change = (measured_shares - clean_shares).numpy()  # (n, S)
        clean = run.weights[layer, head, query, : query + 1].double().numpy()  # (S,)
        measured = ablated.weights[layer, head, query, : query + 1].double().numpy()  # (S,)
    at = np.abs(change).argmax(axis=1)  # (n,)
    biggest = change[np.arange(len(names)), at]  # (n,)
    ranked = sorted(
        ((names[i], float(biggest[i])) for i in range(len(names)) if i != index),
        key=lambda pair: -abs(pair[1]),
    )
    return AttentionWithout(
        part=part,
        clean=readonly(clean),
        predicted=readonly(predicted),
        measured=readonly(measured),
        names=names,
        shares_clean=readonly(clean_shares.numpy()),
        shares_measured=readonly(measured_shares.numpy()),
        repair=tuple(ranked),
    )
