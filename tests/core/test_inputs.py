"""Tokens, token embeddings and sinusoidal positions of attention_core.experiments.inputs."""

import math
import zlib

import pytest
import torch

from attention_core.experiments import (
    INPUT_KINDS,
    MAX_SENTENCE_TOKENS,
    PRESET_SENTENCES,
    has_words,
    input_tokens,
    make_input,
    preset_tokens,
    sinusoidal_positions,
    token_embeddings,
    token_vector,
    tokens_for,
)


def _pe_formula(pos, col, d):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    i = col // 2
    angle = pos / 10000 ** (2 * i / d)
    return math.sin(angle) if col % 2 == 0 else math.cos(angle)


def test_sinusoidal_positions_literal_values():
    pe = sinusoidal_positions(3, 5, dtype=torch.float64)
    assert pe.dtype == torch.float64 and pe.shape == (3, 5)
    # D = 5: frequencies 1, 10000^(-2/5) = 0.025118864315095794, 10000^(-4/5) = 0.00063095734
    expected_row_1 = [
        0.8414709848078965,  # sin(1)
        0.5403023058681398,  # cos(1)
        math.sin(0.025118864315095794),
        math.cos(0.025118864315095794),
        math.sin(0.000630957344480193),  # odd D: the last column is a sine
    ]
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(pe[1], torch.tensor(expected_row_1, dtype=torch.float64))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
@pytest.mark.parametrize("seq_len, d", [(1, 1), (7, 4), (50, 16), (10, 9)])
def test_sinusoidal_positions_follow_the_formula(seq_len, d, dtype, tol):
    pe = sinusoidal_positions(seq_len, d, dtype=dtype)
    expected = torch.tensor(
        [[_pe_formula(p, c, d) for c in range(d)] for p in range(seq_len)], dtype=torch.float64
    )
    assert pe.dtype == dtype
    torch.testing.assert_close(pe.double(), expected, atol=tol, rtol=0)


@pytest.mark.parametrize(
    "args, kwargs, needle",
    [
        ((0, 4), {}, "seq_len.*0"),
        ((3, 2000), {}, "embed_dim.*2000"),
        ((True, 4), {}, "seq_len.*True"),
        ((3, 4), {"dtype": torch.float16}, "dtype.*float16"),
    ],
)
def test_sinusoidal_positions_bad_input(args, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        sinusoidal_positions(*args, **kwargs)


def test_tokens_words_characters_punctuation():
    assert tokens_for("the cat, sat.") == ("the", "cat", ",", "sat", ".")
    zh = preset_tokens("preset_zh")
    assert zh[:3] == ("那", "只", "猫") and zh[-1] == "。" and len(zh) == 17
    assert tokens_for("猫cat2 坐") == ("猫", "cat2", "坐")
    assert tokens_for("   ") == ()
    assert not has_words(tokens_for("?!.,")) and has_words(("?", "a"))
    assert preset_tokens("preset_en") == tuple(PRESET_SENTENCES["preset_en"].split())


def test_input_tokens_per_kind():
    assert input_tokens("random", "ignored", 3) == ("0", "1", "2")
    assert input_tokens("preset_en", "", 3) == preset_tokens("preset_en")
    assert input_tokens("typed", "a b", 3) == ("a", "b")
    assert input_tokens("typed", " ?! ", 3) == preset_tokens("preset_en")
    long = input_tokens("typed", "w " * 300, 3)
    assert len(long) == MAX_SENTENCE_TOKENS
    assert set(INPUT_KINDS) == {"random", "typed", *PRESET_SENTENCES}


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: input_tokens("images", "", 3), "'images'"),
        (lambda: input_tokens("random", "", 0), "seq_len.*0"),
        (lambda: input_tokens("random", "", 2.5), "seq_len.*2.5"),
        (lambda: input_tokens("typed", None, 3), "sentence.*None"),
        (lambda: preset_tokens("preset_fr"), "'preset_fr'"),
        (lambda: token_embeddings([], 8, 0), "got 0"),
        (lambda: token_embeddings("cat", 8, 0), "'cat'"),
        (lambda: token_embeddings(["a", 3], 8, 0), "3"),
        (lambda: token_embeddings(["a"], 0, 0), "d_model.*0"),
        (lambda: token_embeddings(["a"], 8, -1), "seed.*-1"),
        (lambda: make_input("random", "", 4, 8, 1.5), "seed.*1.5"),
    ],
)
def test_input_bad_values(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()


def test_token_vector_is_seeded_by_its_text():
    seed = 7
    generator = torch.Generator().manual_seed(zlib.crc32(b"cat") * 1_000_003 + seed)
    torch.testing.assert_close(token_vector("Cat", 6, seed), torch.randn(6, generator=generator))
    assert not torch.equal(token_vector("cat", 6, seed), token_vector("cat", 6, seed + 1))
    assert not torch.equal(token_vector("cat", 6, seed), token_vector("dog", 6, seed))


def test_token_embeddings_are_deterministic_vectors_plus_positions():
    tokens = ("the", "cat", "sat", "on", "The", "mat")
    emb = token_embeddings(tokens, 8, 3)
    assert emb.shape == (6, 8) and emb.dtype == torch.float32
    assert torch.equal(emb, token_embeddings(tokens, 8, 3))
    assert not torch.equal(emb, token_embeddings(tokens, 8, 4))
    content = emb - sinusoidal_positions(6, 8)  # (L, D): the token vectors alone
    torch.testing.assert_close(content[0], content[4])  # "the" and "The" share a vector
    assert not torch.allclose(emb[0], emb[4])  # their positions tell them apart
    # a token's vector does not depend on its neighbours or its place in the sentence
    other = token_embeddings(("a", "cat"), 8, 3) - sinusoidal_positions(2, 8)
    torch.testing.assert_close(content[1], other[1])


def test_make_input_random_and_sentence():
    random = make_input("random", "", 5, 8, 11)
    generator = torch.Generator().manual_seed(11)
    assert random.tokens == ("0", "1", "2", "3", "4")
    assert torch.equal(random.x, torch.randn(1, 5, 8, generator=generator))
    typed = make_input("typed", "a cat", 99, 16, 2)
    assert typed.tokens == ("a", "cat")
    assert torch.equal(typed.x, token_embeddings(("a", "cat"), 16, 2)[None])
