"""Pictures of a head's query–key map (:mod:`~attention_core.experiments.qk_map`) and how far
they can be trusted.

* :func:`project_pca` (a float64 SVD of the centred points) and :func:`project_tsne`
  (scikit-learn's Barnes–Hut t-SNE, seeded) project the joint points to 2-D.
* :func:`map_trust`: Spearman's correlation between the 2-D distance of a query and a key
  and −q·k, over every (query, key) pair that may attend within a sentence (1 = the nearer
  a key is drawn, the more the query wants it).
* :func:`translation_distances`: on e5, the distance between the two sides of a translation
  pair (猫 ↔ cat, 垫子 ↔ mat) against random English–Chinese token pairs.

Shapes: L_i tokens of sentence i, T = Σ L_i tokens, P = 2·T points (every query, then every
key), E head size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_core.experiments.explain import spearman
from attention_core.experiments.qk_map import MAX_MAP_TOKENS, TRANSLATION_PAIRS, HeadQK

TSNE_PERPLEXITY = 30.0
"""t-SNE's perplexity (scikit-learn's default); lowered to (P − 1) / 3 for few points."""
TSNE_ITERATIONS = 500
"""t-SNE's iterations, the first 250 exaggerated (scikit-learn's default 1,000, halved for a
live page: 1,000 points in about 1 s on 2 cores, bench/qk_map.py)."""


@dataclass(frozen=True)
class Projection:
    """A 2-D picture of a point set.

    Attributes:
        method: ``"pca"`` or ``"tsne"``.
        coords: (P, 2) float64.
        explained: PCA's share of the variance on each axis (two floats); NaN for t-SNE.
    """

    method: str
    coords: np.ndarray
    explained: tuple[float, float]


@dataclass(frozen=True)
class MapTrust:
    """How far a picture keeps the head's preferences.

    Attributes:
        spearman: Spearman's correlation between the 2-D query–key distance and −q·k over
            every (query, key) pair that may attend within a sentence (1: the nearer, the
            more attention; NaN when every score or distance is equal).
        pairs: how many pairs it was computed over.
    """

    spearman: float
    pairs: int


@dataclass(frozen=True)
class TranslationDistances:
    """Translation pairs against random English–Chinese pairs, in one space.

    Attributes:
        pairs: ((English word, Chinese word, kind, distance), …): kind ``"query"`` or
            ``"key"``, the distance between the two words' points (a word of several tokens:
            the mean of its tokens' points).
        random_median: the median distance of every English–Chinese token pair of the two
            sentences (same kind).
        share_closer: per entry of ``pairs``, the share of those random pairs that are closer
            than it (0 = no random pair is closer).
    """

    pairs: tuple[tuple[str, str, str, float], ...]
    random_median: float
    share_closer: tuple[float, ...]


def _check_points(points) -> np.ndarray:
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3 or not np.isfinite(x).all():
        raise ValueError(
            f"points must be a finite (P, E) array with P >= 3, got shape {np.shape(points)}"
        )
    if x.shape[0] > 2 * MAX_MAP_TOKENS:
        raise ValueError(
            f"a map takes at most 2 · MAX_MAP_TOKENS = {2 * MAX_MAP_TOKENS} points, got "
            f"{x.shape[0]}"
        )
    return x


def project_pca(points) -> Projection:
    """The two principal axes of the centred points (a float64 SVD).

    Each axis's sign is fixed so that its largest loading is positive (the same picture on
    every run).

    Args:
        points: (P, E) finite, 3 <= P <= 2 · :data:`MAX_MAP_TOKENS`.

    Returns:
        :class:`Projection` with coords (P, 2) and each axis's share of the variance.

    Raises:
        ValueError: for a badly shaped, non-finite or too large array.
    """
    x = _check_points(points)
    centred = x - x.mean(axis=0)  # (P, E)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)  # vt: (min(P, E), E)
    axes = vt[:2]  # (2, E)
    signs = np.sign(axes[np.arange(axes.shape[0]), np.abs(axes).argmax(axis=1)])
    axes = axes * np.where(signs == 0, 1.0, signs)[:, None]
    coords = centred @ axes.T  # (P, E) @ (E, 2) -> (P, 2)
    total = float((singular**2).sum())
    shares = [float(s**2 / total) if total > 0 else math.nan for s in singular[:2]]
    shares += [math.nan] * (2 - len(shares))
    if coords.shape[1] < 2:  # E == 1: a second axis of zeros
        coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
    return Projection("pca", coords, (shares[0], shares[1]))


def project_tsne(points, *, seed: int = 0, threads: int = 1) -> Projection:
    """t-SNE of the points (scikit-learn: Barnes–Hut gradients, PCA initialisation).

    An approximation of the neighbourhoods, not of the distances: judge it with
    :func:`map_trust`. Perplexity :data:`TSNE_PERPLEXITY` (lowered to (P − 1) / 3 for few
    points), :data:`TSNE_ITERATIONS` iterations (scikit-learn's first 250 exaggerated).

    Args:
        points: (P, E) finite, 3 <= P <= 2 · :data:`MAX_MAP_TOKENS`.
        seed: scikit-learn's ``random_state``: the same seed gives the same picture.
        threads: scikit-learn's ``n_jobs`` (the caller owns the process's threads).

    Returns:
        :class:`Projection` with coords (P, 2); ``explained`` is NaN.

    Raises:
        ValueError: as :func:`project_pca`, or a negative seed or a thread count below 1.
        ModuleNotFoundError: when scikit-learn is not installed.
    """
    from sklearn.manifold import TSNE

    x = _check_points(points)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
    perplexity = min(TSNE_PERPLEXITY, (x.shape[0] - 1) / 3)
    coords = TSNE(
        n_components=2,
        perplexity=perplexity,
        init="pca",
        method="barnes_hut",
        max_iter=TSNE_ITERATIONS,
        random_state=seed,
        n_jobs=threads,
    ).fit_transform(x)  # (P, 2)
    return Projection("tsne", np.asarray(coords, dtype=np.float64), (math.nan, math.nan))


def pair_scores(qk: HeadQK, coords) -> tuple[np.ndarray, np.ndarray]:
    """Every (query, key) pair that may attend within a sentence: its 2-D distance and −q·k.

    Args:
        qk: the head's :class:`HeadQK`. coords: (P, 2), the rows of :func:`joint_points`.

    Returns:
        (distances, negative scores), each (pairs,) float64.

    Raises:
        ValueError: when ``coords`` does not have one row per point of ``qk``.
    """
    c = np.asarray(coords, dtype=np.float64)
    total = qk.token_count
    if c.ndim != 2 or c.shape[0] != 2 * total:
        raise ValueError(f"coords must have {2 * total} rows (P = 2·T), got shape {c.shape}")
    q_xy, k_xy = c[:total], c[total:]  # (T, 2) each
    distances, negatives = [], []
    start = 0
    for q, k in zip(qk.queries, qk.keys, strict=True):
        n = q.shape[0]
        qs, ks = q_xy[start : start + n], k_xy[start : start + n]  # (L, 2) each
        d = np.linalg.norm(qs[:, None, :] - ks[None, :, :], axis=-1)  # (L, L)
        keep = np.tril(np.ones((n, n), dtype=bool)) if qk.causal else np.ones((n, n), bool)
        distances.append(d[keep])
        negatives.append(-(q @ k.T)[keep])  # (L, L) -> (pairs,)
        start += n
    return np.concatenate(distances), np.concatenate(negatives)


def map_trust(qk: HeadQK, coords) -> MapTrust:
    """Spearman's correlation between 2-D distance and −q·k over the sentences' pairs.

    Args:
        qk: the head's :class:`HeadQK`. coords: (P, 2), a projection of its
            :func:`joint_points`.

    Returns:
        :class:`MapTrust`.

    Raises:
        ValueError: as :func:`pair_scores`, or fewer than 2 pairs.
    """
    distances, negatives = pair_scores(qk, coords)
    return MapTrust(float(spearman(distances, negatives)), int(distances.size))


def _word_point(points: np.ndarray, offsets, text: str, word: str) -> np.ndarray:
    """The mean point of the tokens whose character span overlaps ``word`` in ``text``."""
    start = text.find(word)
    if start < 0 or offsets is None:
        raise ValueError(f"word {word!r} not found in {text!r} (or no offsets)")
    end = start + len(word)
    picked = [i for i, (a, b) in enumerate(offsets) if a < end and b > start and b > a]
    if not picked:
        raise ValueError(f"no token of {text!r} covers {word!r}")
    return points[picked].mean(axis=0)


def translation_distances(
    qk: HeadQK, coords, pairs: Sequence[tuple[str, str]] = TRANSLATION_PAIRS
) -> TranslationDistances:
    """The distance between translated words against random English–Chinese token pairs.

    Uses the first English and the first Chinese sentence of ``qk`` that hold the pairs'
    words (the :data:`TRANSLATION_SENTENCES`).

    Args:
        qk: the head's :class:`HeadQK` (with offsets). coords: (P, D) rows of
            :func:`joint_points` (a 2-D projection, or the normalised points themselves).
        pairs: (English word, Chinese word) pairs.

    Returns:
        :class:`TranslationDistances` for queries and keys.

    Raises:
        ValueError: when no sentence holds a pair's word, or no token covers it.
    """
    c = np.asarray(coords, dtype=np.float64)
    total = qk.token_count
    if c.ndim != 2 or c.shape[0] != 2 * total:
        raise ValueError(f"coords must have {2 * total} rows (P = 2·T), got shape {c.shape}")

    def holder(language: str, words) -> int:
        for index, (text, lang) in enumerate(zip(qk.sentences, qk.languages, strict=True)):
            if lang == language and all(w in text for w in words):
                return index
        raise ValueError(f"no {language} sentence holds all of {list(words)}")

    en = holder("en", [p[0] for p in pairs])
    zh = holder("zh", [p[1] for p in pairs])
    starts = np.cumsum([0, *[len(t) for t in qk.tokens]])
    found, closer = [], []
    random_all = []
    for kind, base in (("query", 0), ("key", total)):
        en_xy = c[base + starts[en] : base + starts[en + 1]]  # (L_en, D)
        zh_xy = c[base + starts[zh] : base + starts[zh + 1]]  # (L_zh, D)
        random = np.linalg.norm(en_xy[:, None] - zh_xy[None], axis=-1).ravel()  # all pairs
        random_all.append(random)
        for word_en, word_zh in pairs:
            a = _word_point(en_xy, qk.offsets[en], qk.sentences[en], word_en)
            b = _word_point(zh_xy, qk.offsets[zh], qk.sentences[zh], word_zh)
            distance = float(np.linalg.norm(a - b))
            found.append((word_en, word_zh, kind, distance))
            closer.append(float((random < distance).mean()))
    return TranslationDistances(
        tuple(found), float(np.median(np.concatenate(random_all))), tuple(closer)
    )
