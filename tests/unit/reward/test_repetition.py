"""has_repetition equals the paper's direct predicate: one regex search per block length."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cobalt.reward import has_repetition
from reward_data import load_leetcode


def reference(text: str, min_len: int = 32, min_repeats: int = 8) -> bool:
    """The direct way: for each block length L, search a block followed by min_repeats - 1 copies."""
    for length in range(min_len, len(text) // min_repeats + 1):
        if re.search(r"(.{%d})\1{%d}" % (length, min_repeats - 1), text, re.DOTALL):
            return True
    return False


PARAMS = [(32, 8), (1, 1), (1, 2), (2, 2), (3, 3), (4, 4), (5, 8), (8, 5), (16, 3), (6, 9), (7, 2), (1, 3), (1, 8)]
ALPHABETS = ["a", "ab", "abc", "ab\n", "xyzw", "aé😀\n", "\x00\u200b "]


def _chars(alphabet: str):
    return st.text(alphabet=st.sampled_from(list(alphabet)), max_size=60)


@st.composite
def structured(draw, min_len: int, min_repeats: int):
    """Blocks near min_len repeated near min_repeats times, between random or periodic text."""
    alphabet = draw(st.sampled_from(ALPHABETS))
    pieces = []
    for _ in range(draw(st.integers(1, 3))):
        pieces.append(draw(_chars(alphabet)))
        size = max(1, min_len + draw(st.integers(-2, 2)))
        if draw(st.booleans()):  # a block that itself has a short period (overlapping periods)
            unit = draw(st.text(alphabet=st.sampled_from(list(alphabet)), min_size=1, max_size=4))
            block = (unit * size)[:size]
        else:
            block = draw(st.text(alphabet=st.sampled_from(list(alphabet)), min_size=size, max_size=size))
        reps = max(1, min_repeats + draw(st.integers(-2, 1)))
        run = block * reps
        cut = draw(st.integers(0, 3))  # trim a little off either end
        pieces.append(run[cut:len(run) - draw(st.integers(0, 3))] if len(run) > 6 else run)
    pieces.append(draw(_chars(alphabet)))
    return "".join(pieces)


@pytest.mark.parametrize("min_len,min_repeats", PARAMS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_equals_reference_structured(min_len, min_repeats, data):
    text = data.draw(structured(min_len, min_repeats))
    assert has_repetition(text, min_len, min_repeats) == reference(text, min_len, min_repeats)


@pytest.mark.parametrize("min_len,min_repeats", PARAMS)
@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300), small=st.text(alphabet="ab", max_size=300))
def test_equals_reference_random(min_len, min_repeats, text, small):
    for s in (text, small):
        assert has_repetition(s, min_len, min_repeats) == reference(s, min_len, min_repeats)


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.text(max_size=80),
    suffix=st.text(max_size=80),
    block=st.text(min_size=28, max_size=36),
    reps=st.integers(5, 10),
)
def test_equals_reference_paper_defaults(prefix, suffix, block, reps):
    text = prefix + block * reps + suffix
    assert has_repetition(text) == reference(text)


def _real_text(n: int) -> str:
    return "".join(r["response"] for r in load_leetcode())[:n]


REAL = _real_text(4000)


def _case(block_len: int, reps: int, where: str, offset: int = 1000) -> str:
    block = REAL[offset:offset + block_len]
    run = block * reps
    if where == "start":
        return run + REAL[:600]
    if where == "end":
        return REAL[:600] + run
    return REAL[:600] + run + REAL[2000:2600]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize(
    "block_len,reps,expected",
    [(31, 8, False), (32, 7, False), (32, 8, True), (33, 7, False), (33, 8, True), (31, 9, False), (64, 8, True), (100, 7, False)],
)
def test_real_text_blocks(block_len, reps, where, expected):
    text = _case(block_len, reps, where)
    assert has_repetition(text) is expected
    assert reference(text) is expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a" * 255, False),  # period 1: a 32-char block x 8 needs 256 characters
        ("a" * 256, True),
        ("ab" * 127 + "a", False),
        ("ab" * 128, True),
        ("abc" * 85, False),  # period 3: smallest block >= 32 is 33, x 8 = 264
        ("abc" * 88, True),
        ("abc" * 87 + "ab", False),
        (("x" * 31 + "y") * 8, True),
        (("x" * 31 + "y") * 7 + "x" * 31, False),
        ("😀" * 256, True),
        ("é\n" * 127, False),
        ("", False),
    ],
)
def test_adversarial_cases(text, expected):
    assert has_repetition(text) is expected
    assert reference(text) is expected


def test_real_model_answers_agree_with_reference(leetcode_rows):
    texts = [r["response"] for r in leetcode_rows[::3]]
    texts += [t + t[-40:] * 8 for t in texts[:20]]  # real tails repeated 8 times
    for text in texts:
        assert has_repetition(text) == reference(text)
    assert sum(has_repetition(t) for t in texts) >= 20


def test_long_text_with_runs_just_short_of_the_bound():
    # 94 runs of 255 'a's (one short of 32 x 8), separated by distinct characters.
    text = "".join("a" * 255 + chr(0x4E00 + i) for i in range(94))
    assert not has_repetition(text)
    assert has_repetition(text + "a" * 256)


@pytest.mark.parametrize(
    "min_len,min_repeats,message",
    [
        (0, 8, "min_len must be a positive int, got 0"),
        (32, 0, "min_repeats must be a positive int, got 0"),
        (-1, 2, "min_len must be a positive int, got -1"),
        (2.5, 3, "min_len must be a positive int, got 2.5"),
        (True, 3, "min_len must be a positive int, got True"),
        (4, False, "min_repeats must be a positive int, got False"),
        (4, "8", "min_repeats must be a positive int, got '8'"),
    ],
)
def test_rejects_bad_parameters(min_len, min_repeats, message):
    with pytest.raises(ValueError) as info:
        has_repetition("abc", min_len, min_repeats)
    assert str(info.value) == message


def test_rejects_non_string():
    with pytest.raises(TypeError) as info:
        has_repetition(b"abc" * 100)
    assert str(info.value) == "text must be str, got bytes"


@pytest.mark.parametrize(
    "text,min_len,min_repeats,expected",
    [
        # blocks of one character: the first level of the scan holds period 1 alone
        ("xaaa", 1, 3, True),
        ("aaxa", 1, 3, False),
        ("bbaaabaababaaba", 1, 3, True),  # "aaa" in the middle
        ("babaabbabb", 1, 3, False),  # no block three times in a row
        ("ab" * 3, 1, 3, True),  # "ab" x 3 (a block of 2 >= 1)
        ("xy" + "q" * 8, 1, 8, True),
        ("xy" + "q" * 7 + "xy", 1, 8, False),
    ],
)
def test_one_character_minimum_block(text, min_len, min_repeats, expected):
    assert has_repetition(text, min_len, min_repeats) is expected
    assert reference(text, min_len, min_repeats) is expected


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab", min_size=1, max_size=120), m=st.integers(1, 6), k=st.integers(1, 6))
def test_monotone_in_parameters(text, m, k):
    assume(len(text) >= 1)
    if has_repetition(text, m + 1, k):
        assert has_repetition(text, m, k)
    if has_repetition(text, m, k + 1):
        assert has_repetition(text, m, k)
