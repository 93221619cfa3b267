"""The real decoder (SmolLM2-135M, or a GGUF file of the server's own): cached generation
steps, causal maps, RoPE shifts, sinks.

Every function takes plain values and returns read-only numpy arrays or small tables; the
model is named by its listed name (``model``: :data:`SMOLLM2` by default, or a name of
:func:`dashboard.data.own_models.decoder_choices`), looked up and loaded once per server
process by :mod:`dashboard.data.own_models`, and never modified (variants run on
weight-sharing twins).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention_core import pretrained
from attention_core.experiments import decoding
from attention_core.validation import check_int
from dashboard.data import own_models
from dashboard.data.tables import readonly
from dashboard.data.token_text import shown_text, shown_token, token_labels

DECODER_INSTALL_HINT = pretrained.SMOLLM2_INSTALL_HINT
DECODER_WEIGHTS_DTYPE = own_models.SMOLLM2_WEIGHTS_DTYPE
DECODER_ATTENTION_TOLERANCE = pretrained.INT4_ATTENTION_TOLERANCE
DECODER_LOGIT_TOLERANCE = pretrained.INT4_LOGIT_TOLERANCE
DECODER_TEXT_MAX_CHARS = 200
DECODER_MAX_TOKENS = 48
DECODER_MAX_STEPS = 16
DECODER_MAX_SHIFT = 4000
DECODER_TOP_K = 5
DECODER_LAYERS, DECODER_HEADS, DECODER_KV_HEADS = 30, 9, 3  # SmolLM2's (the Heads page's)
SMOLLM2 = own_models.SMOLLM2_CHOICE
"""The listed name of the shipped model, the ``model`` of every function by default."""
DECODER_PRESETS = {
    "capital": "The capital of France is",
    "zh_cat": "那只猫坐在垫子上，它看起来很舒服。",
    "emoji": "I love pizza 🍕 and coffee ☕ at 9:30!",
    "lighthouse": "The old lighthouse keeper climbed the stairs every evening to light the lamp.",
}
SINK_PARAGRAPH = (
    "Once upon a time, in a small village at the edge of a great forest, there lived a young "
    "girl named Mira. Every morning she walked to the river to fetch water for her family, "
    "and every evening she told her little brother stories about the animals she had seen. "
    "One day, while she was filling her bucket, she noticed a fox watching her from the reeds."
)
SINK_TOKENS = 40


def decoder_installed() -> bool:
    """Return True when SmolLM2's GGUF file is on this machine: its package installed, or
    the Hub's copy cached (nothing is imported or requested)."""
    return pretrained.smollm2_available()


def fetch_smollm2(progress: Callable[[int, int], object]) -> bool:
    """Download SmolLM2's GGUF file from the Hub (pinned commit, into the Hub cache) unless it
    is on this machine, with ``progress(bytes so far, in all)``; False when it can be neither
    found nor fetched (the page then shows the pip line)."""
    try:
        pretrained.fetch_smollm2(progress)
    except pretrained.ModelNotInstalledError:
        return False
    return True


def smollm2_decoder() -> pretrained.Decoder:
    """SmolLM2-135M, loaded once per server process (SHA-256 checked, exact attention), its
    layer matrices kept as the file's 4-bit codes and the embedding in bfloat16
    (:data:`DECODER_WEIGHTS_DTYPE`: 123 MiB of weights instead of 513 MiB in float32; within
    :data:`DECODER_ATTENTION_TOLERANCE` and :data:`DECODER_LOGIT_TOLERANCE` of transformers'
    float32 run); the Heads page's model too.

    Raises:
        ModelNotInstalledError: when the package is missing (the message has the pip line).
        ValueError: when the file's SHA-256 differs from the pinned one.
    """
    return own_models.loaded_model(SMOLLM2).decoder


def _decoder(model: str) -> pretrained.Decoder:
    """The model called ``model``, loaded once per server (:func:`own_models.loaded_model`)."""
    return own_models.loaded_model(model).decoder


def prompt_ids(text: str, model: str = SMOLLM2) -> tuple[tuple[str, ...], tuple[int, ...], bool]:
    """Tokens and ids of ``text`` for ``model``, cut at :data:`DECODER_MAX_TOKENS`; and
    whether it was cut.

    Raises:
        ValueError: for a non-string, blank or over-long text, or a model not listed.
    """
    if not isinstance(text, str) or len(text) > DECODER_TEXT_MAX_CHARS:
        raise ValueError(
            f"text must be a string of at most {DECODER_TEXT_MAX_CHARS} characters, got {text!r}"
        )
    tokenized = _decoder(model).tokenize(text)
    cut = len(tokenized.input_ids) > DECODER_MAX_TOKENS
    ids = tuple(tokenized.input_ids[:DECODER_MAX_TOKENS])
    return tuple(tokenized.tokens[:DECODER_MAX_TOKENS]), ids, cut


@dataclass(frozen=True)
class _Generation:
    """Internal: the sequence after some greedy steps, with the torch cache to continue."""

    ids: tuple[int, ...]
    cache: pretrained.DecoderCache
    next_logits: torch.Tensor  # (V,)
    new_rows: torch.Tensor  # (N, H, S): the newest token's attention
    cached_vs_full: float | None


@st.cache_resource(max_entries=64, show_spinner=False)
def _generation(text: str, steps: int, model: str) -> _Generation:
    """Greedy generation of ``steps`` tokens after the prompt, one cached step at a time."""
    decoder = _decoder(model)
    if steps == 0:
        _, ids, _ = prompt_ids(text, model)
        out = decoder(torch.tensor([ids]), need_weights=True, last_logits_only=True)
        rows = torch.stack([a[0, :, -1] for a in out.attentions])  # (N, H, S)
        return _Generation(ids, out.cache, out.logits[0, -1], rows, None)  # logits (V,)
    previous = _generation(text, steps - 1, model)
    token = int(previous.next_logits.argmax())
    out = decoder(torch.tensor([[token]]), cache=previous.cache, need_weights=True)
    ids = (*previous.ids, token)
    full = decoder(torch.tensor([ids]), last_logits_only=True)  # all again, no cache
    difference = float((full.logits[0, -1] - out.logits[0, -1]).abs().max())
    rows = torch.stack([a[0, :, 0] for a in out.attentions])  # (N, H, S)
    return _Generation(ids, out.cache, out.logits[0, -1], rows, difference)


@dataclass(frozen=True)
class DecodeStep:
    """The state after ``steps`` generated tokens (read-only arrays).

    Attributes:
        tokens, labels: all tokens so far (prompt then generated) and their axis labels.
        prompt_length: tokens of the prompt.
        text: the generated text so far (:func:`shown_text`: a character not yet complete
            shows its bytes, e.g. ``⟨E7 9D⟩``).
        new_rows: (H, N, S) the newest token's attention in every head and layer (one
            panel per head, one row per layer).
        top_tokens, top_probs: the next token's :data:`DECODER_TOP_K` likeliest candidates
            (as :func:`shown_token` writes them) and their probabilities.
        cache_tokens, cache_bytes: what the KV cache holds now.
        cached_vs_full: max |cached − recomputed logits| of this step (None at step 0).
    """

    tokens: tuple[str, ...]
    labels: tuple[str, ...]
    prompt_length: int
    text: str
    new_rows: np.ndarray
    top_tokens: tuple[str, ...]
    top_probs: tuple[float, ...]
    cache_tokens: int
    cache_bytes: int
    cached_vs_full: float | None


@st.cache_resource(max_entries=4, show_spinner=False)
def _control_tokens(model: str) -> frozenset[str]:
    """The decoder's control tokens (``<|endoftext|>``, ``<|im_end|>``, …), which
    ``Decoder.decode`` leaves out of a text."""
    added = _decoder(model).tokenizer.get_added_tokens_decoder().values()
    return frozenset(token.content for token in added if token.special)


@st.cache_resource(max_entries=64, show_spinner=False)
def decode_step(text: str, steps: int, model: str = SMOLLM2) -> DecodeStep:
    """Generate ``steps`` greedy tokens after ``text`` with the KV cache, checking each step
    against a full recomputation.

    Args:
        text: the prompt (at most :data:`DECODER_TEXT_MAX_CHARS` characters).
        steps: 0 to :data:`DECODER_MAX_STEPS`.
        model: the listed name of the model (default SmolLM2).

    Returns:
        :class:`DecodeStep`.

    Raises:
        ValueError: for a bad text or step count, or a model not listed or not loadable.
        MemoryBudgetError: for a model too large for the budget.
        ModelNotInstalledError: when SmolLM2's package is missing.
    """
    steps = check_int("steps", steps, low=0, high=DECODER_MAX_STEPS)
    decoder = _decoder(model)
    spelling = decoder.token_spelling
    tokens, ids, _ = prompt_ids(text, model)
    state = _generation(text, steps, model)
    generated = state.ids[len(ids) :]
    all_tokens = (*tokens, *(decoder.tokenizer.id_to_token(i) for i in generated))
    probs = torch.softmax(state.next_logits.double(), dim=-1)  # (V,)
    top = probs.topk(DECODER_TOP_K)
    return DecodeStep(
        tokens=all_tokens,
        labels=tuple(token_labels(all_tokens, spelling=spelling)),
        prompt_length=len(ids),
        text=shown_text(all_tokens[len(ids) :], hidden=_control_tokens(model), spelling=spelling),
        new_rows=readonly(state.new_rows.permute(1, 0, 2).numpy().copy()),  # (H, N, S)
        top_tokens=tuple(
            shown_token(decoder.tokenizer.id_to_token(i), spelling) for i in top.indices.tolist()
        ),
        top_probs=tuple(top.values.tolist()),
        cache_tokens=state.cache.length,
        cache_bytes=state.cache.nbytes,
        cached_vs_full=state.cached_vs_full,
    )


@dataclass(frozen=True)
class PromptMaps:
    """Every attention map of the prompt, and the same maps for the shifted and permuted text.

    Attributes:
        tokens, labels: the prompt's tokens and axis labels.
        truncated: True when the prompt was cut at :data:`DECODER_MAX_TOKENS` tokens.
        maps: (N, H, L, L) causal maps of the prompt at positions 0..L-1.
        shifted: (N, H, L, L) the same text at positions k..k+L-1.
        unpermuted: (N, H, L, L) maps of the permuted text, rows and columns put back in the
            original order (equal to ``maps`` only if attention were permutation-equivariant).
        shift: k.
        above_diagonal: max |weight| above the diagonal over every map (0 for causal maps).
        shift_change: max |shifted − maps| (round-off, mostly bfloat16's: RoPE is relative).
        permutation_change: max |unpermuted − maps|.
    """

    tokens: tuple[str, ...]
    labels: tuple[str, ...]
    truncated: bool
    maps: np.ndarray
    shifted: np.ndarray
    unpermuted: np.ndarray
    shift: int
    above_diagonal: float = 0.0
    shift_change: float = 0.0
    permutation_change: float = 0.0


PERMUTATION_SEED = 0


@st.cache_resource(max_entries=16, show_spinner=False)
def prompt_maps(text: str, shift: int, model: str = SMOLLM2) -> PromptMaps:
    """The prompt's causal maps (every layer and head: 270 for SmolLM2), at position 0,
    shifted by ``shift``, and permuted.

    Args:
        text: the prompt. shift: 0 to :data:`DECODER_MAX_SHIFT` (and within the model's
            context with the prompt). model: the listed name of the model.

    Returns:
        :class:`PromptMaps`.

    Raises:
        ValueError: for a bad text or shift, or a model not listed or not loadable.
    """
    shift = check_int("shift", shift, low=0, high=DECODER_MAX_SHIFT)
    decoder = _decoder(model)
    tokens, ids, cut = prompt_ids(text, model)
    batch = torch.tensor([ids])  # (1, L)

    def stacked(out) -> np.ndarray:
        return torch.stack([a[0] for a in out.attentions]).numpy()  # (N, H, L, L)

    maps = stacked(decoder(batch, need_weights=True))
    shifted = stacked(decoder(batch, need_weights=True, position_offset=shift))
    order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(PERMUTATION_SEED))
    permuted = stacked(decoder(batch[:, order], need_weights=True))  # rows/cols in P order
    inverse = torch.argsort(order).numpy()
    unpermuted = permuted[..., inverse, :][..., inverse]  # back to the original order
    return PromptMaps(
        tokens=tokens,
        labels=tuple(token_labels(tokens, spelling=decoder.token_spelling)),
        truncated=cut,
        maps=readonly(maps),
        shifted=readonly(shifted),
        unpermuted=readonly(np.ascontiguousarray(unpermuted)),
        shift=shift,
        above_diagonal=float(np.abs(np.triu(maps, k=1)).max()),
        shift_change=float(np.abs(shifted - maps).max()),
        permutation_change=float(np.abs(unpermuted - maps).max()),
    )


def rope_versions(maps: PromptMaps, layer: int, head: int) -> np.ndarray:
    """One head's map as computed, shifted and permuted-then-restored, stacked (3, L, L).

    Args:
        maps: a :class:`PromptMaps`. layer, head: 1-based.

    Raises:
        ValueError: when layer or head is out of range.
    """
    n_layers, n_heads = maps.maps.shape[:2]
    check_int("layer", layer, low=1, high=n_layers)
    check_int("head", head, low=1, high=n_heads)
    versions = (maps.maps, maps.shifted, maps.unpermuted)
    return np.stack([m[layer - 1, head - 1] for m in versions])  # (3, L, L)


SINK_SERIES = ("first_word", "endoftext", "first_word_after")


SINK_MODELS_KEPT = 4


@st.cache_resource(max_entries=SINK_MODELS_KEPT, show_spinner=False)
def _sink_measurements(
    model: str,
) -> tuple[decoding.SinkMeasurement, decoding.SinkMeasurement | None]:
    """The sink on the paragraph's first :data:`SINK_TOKENS` tokens, alone and after
    <|endoftext|> (None for a vocabulary without that token)."""
    decoder = _decoder(model)
    text = decoder.decode(decoder.tokenize(SINK_PARAGRAPH).input_ids[:SINK_TOKENS])
    plain = decoding.measure_sinks(decoder, text)
    if decoder.tokenizer.token_to_id(decoding.ENDOFTEXT) is None:
        return plain, None
    return plain, decoding.measure_sinks(decoder, text, prepend_endoftext=True)


@st.cache_resource(max_entries=SINK_MODELS_KEPT, show_spinner=False)
def sink_head_shares(model: str = SMOLLM2) -> np.ndarray:
    """(H, N) share of attention on token 0 of every head (rows) and layer (columns), on the
    paragraph's first :data:`SINK_TOKENS` tokens (read-only).

    Raises:
        ValueError, MemoryBudgetError: for a model not listed or not loadable.
    """
    plain, _ = _sink_measurements(model)
    return readonly(plain.on_first.T.numpy().copy())  # (H, N)


@st.cache_data(max_entries=SINK_MODELS_KEPT, show_spinner=False)
def sink_table(model: str = SMOLLM2) -> pd.DataFrame:
    """Where the sink sits, per layer, on the first :data:`SINK_TOKENS` tokens of
    :data:`SINK_PARAGRAPH`, alone and after <|endoftext|>.

    Args:
        model: the listed name of the model (default SmolLM2).

    Returns:
        Columns ``layer`` (1-based), ``series`` (one of :data:`SINK_SERIES`: the share on
        the first word of the paragraph alone, on <|endoftext|> in front of it, and on the
        first word after it; the first alone for a vocabulary without <|endoftext|>),
        ``share`` (mean over heads and later queries) and ``sink_heads`` (heads of the
        whole model with more than half on token 0, for the paragraph alone).

    Raises:
        ValueError, MemoryBudgetError: for a model not listed or not loadable.
    """
    plain, moved = _sink_measurements(model)
    shares = {"first_word": plain.layer_shares}  # (N,)
    if moved is not None:
        shares["endoftext"] = moved.layer_shares  # (N,)
        shares["first_word_after"] = moved.on_first_text.mean(dim=1)  # (N,)
    rows = [
        (layer, series, float(value), plain.sink_heads)
        for series in SINK_SERIES
        if series in shares
        for layer, value in enumerate(shares[series].tolist(), start=1)
    ]
    return pd.DataFrame(rows, columns=["layer", "series", "share", "sink_heads"])


@st.cache_data(max_entries=32, show_spinner=False)
def window_table(window_size: int, num_sinks: int, model: str = SMOLLM2) -> pd.DataFrame:
    """Perplexity of :data:`SINK_PARAGRAPH` under full attention, a causal sliding window,
    and the window with the first ``num_sinks`` tokens kept visible.

    Args:
        window_size, num_sinks: the window and the sink tokens kept visible.
        model: the listed name of the model (default SmolLM2).

    Raises:
        ValueError: for a bad window or sink count, or a model not listed or not loadable.
    """
    return decoding.window_perplexities(
        _decoder(model), SINK_PARAGRAPH, window_size=window_size, num_sinks=num_sinks
    )
