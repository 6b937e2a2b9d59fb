"""The shaped reward, branch by branch, on real model answers (METHOD.md §3).

Every expected value below was computed by hand from the rule; the think,
answer and explanation token counts it needs (o200k_base) are pinned by
``test_fixture_token_counts`` so that a change in the fixtures shows up there.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.reward import (
    RewardBreakdown,
    format_violation,
    keyword_bonus,
    shaped_reward,
    shaped_reward_breakdown,
)
from cobalt.reward import shaped as S

# 0.075 * tanh(T / 1024) for the think lengths of the fixtures. The fixtures'
# think parts start with "<think>\n": the paper profile counts that tag (3 tokens
# in o200k_base), as the original does; the cobalt profile counts the reasoning alone.
F95 = 0.006938113982152284
F110 = 0.0080257932433508
F120 = 0.008749049150306163
F128 = 0.009326475132869714
F98 = 0.007155900528844939  # paper: 95 + 3
F113 = 0.008242934962270685
F123 = 0.008965710973948533
F131 = 0.009542724514844081

FIXTURE_TOKENS = {
    # kind: (T, A, E) in o200k_base tokens, cobalt profile (paper: T + 3)
    "clean": (95, 391, 177),
    "kw3": (120, 391, 177),
    "kw6": (128, 391, 177),
    "kw5x": (110, 391, 177),
    "long_think": (5082, 391, 177),
    "long_answer": (95, 9199, 177),
    "long_expl": (95, 848, 634),
    "all_long": (5082, 9656, 634),
}
TAG_TOKENS = 3  # "<think>" in o200k_base

TANH, NONE = True, False
HAND_TANH = {95: F95, 110: F110, 120: F120, 128: F128, 98: F98, 113: F113, 123: F123, 131: F131}
"""The hand constants above by think length T."""

TABLE = [
    # id, response kind, pass rate p, previous best b, expected score without the think term,
    # and whether the score adds 0.075 * tanh(T / 1024) for the fixture's think length T
    # -- correctness tiers (well-formed, short: format 0 when r >= 0) --
    ("tier_full", "clean", 1.0, 0.0, 1.0, NONE),
    ("tier_half_exactly", "clean", 0.5, 0.0, 0.2, NONE),
    ("tier_high", "clean", 0.75, 0.0, 0.2, NONE),
    ("tier_just_under_one", "clean", 0.999, 0.0, 0.2, NONE),
    ("tier_just_under_half", "clean", 0.4999, 0.0, 0.0, NONE),
    ("tier_tiny", "clean", 1e-9, 0.0, 0.0, NONE),
    ("tier_zero", "clean", 0.0, 0.0, -0.1, TANH),  # r < 0: + 0.075 tanh(95/1024), no keywords
    # -- improvement --
    ("gain_high_tier", "clean", 0.75, 0.5, 0.25, NONE),  # 0.2 + 0.1 * 0.25 / 0.5
    ("gain_low_tier", "clean", 0.4, 0.2, 0.025, NONE),  # 0.0 + 0.1 * 0.2 / 0.8
    ("gain_small", "clean", 0.3, 0.25, 0.1 * 0.05 / 0.75, NONE),  # 0.00666...
    ("full_after_partial", "clean", 1.0, 0.5, 1.0, NONE),  # p == 1: no improvement term
    ("no_gain", "clean", 0.5, 0.5, -0.1, TANH),  # replaced by -0.1 + 0, then r < 0 bonus
    ("regression", "clean", 0.25, 0.5, -0.15, TANH),  # -0.1 + 0.1 * (-0.25 / 0.5)
    ("regression_to_zero", "clean", 0.0, 0.5, -0.2, TANH),  # -0.1 + 0.1 * (-1)
    ("below_perfect_prev", "clean", 0.5, 1.0, -0.15, TANH),  # -0.1 + 0.1 * (-0.5 / 1)
    # -- each -0.9 format trigger alone (p = 1: 1 - 0.9) --
    ("fmt_no_think_end", "no_think_end", 1.0, 0.0, 0.1, NONE),
    ("fmt_two_think_end", "two_think_end", 1.0, 0.0, 0.1, NONE),
    ("fmt_two_python_fences", "two_python", 1.0, 0.0, 0.1, NONE),
    ("fmt_no_python_fence", "no_python", 1.0, 0.0, 0.1, NONE),
    ("fmt_no_closing_fence", "unclosed", 1.0, 0.0, 0.1, NONE),
    ("fmt_extra_closing_fence", "extra_fence", 1.0, 0.0, 0.1, NONE),
    ("fmt_backtick_in_code", "backtick_code", 1.0, 0.0, 0.1, NONE),
    ("fmt_repetition_40x8", "repeat8", 1.0, 0.0, 0.1, NONE),
    ("fmt_repetition_40x7_ok", "repeat7", 1.0, 0.0, 1.0, NONE),
    ("fmt_repetition_31x8_ok", "repeat31x8", 1.0, 0.0, 1.0, NONE),
    ("fmt_high_tier", "backtick_code", 0.5, 0.0, -0.7, NONE),  # 0.2 - 0.9
    ("fmt_failing_no_bonus", "no_think_end", 0.0, 0.0, -1.0, NONE),  # -0.1 - 0.9, no length terms
    ("fmt_long_failing", "repeat8", 0.25, 0.0, -0.9, NONE),  # 0.0 - 0.9
    # -- length terms --
    ("len_think_passing", "long_think", 1.0, 0.0, 0.99, NONE),
    ("len_answer_passing", "long_answer", 1.0, 0.0, 0.99, NONE),
    ("len_expl_passing", "long_expl", 1.0, 0.0, 0.99, NONE),
    ("len_expl_high_tier", "long_expl", 0.5, 0.0, 0.19, NONE),
    ("len_all_passing", "all_long", 1.0, 0.0, 0.99, NONE),  # -0.01 once
    ("len_think_failing", "long_think", 0.0, 0.0, -0.2, NONE),  # -0.1 - 0.1, no tanh/keywords
    ("len_answer_failing", "long_answer", 0.0, 0.0, -0.2, TANH),  # -0.1 + tanh term - 0.1
    ("len_expl_failing", "long_expl", 0.0, 0.0, -0.2, TANH),
    ("len_all_failing", "all_long", 0.0, 0.0, -0.4, NONE),  # -0.1 - 0.1 - 0.1 - 0.1
    ("len_all_regression", "all_long", 0.0, 0.5, -0.5, NONE),  # -0.2 - 0.3
    # -- keyword bonus (failing answers only) --
    ("kw_three", "kw3", 0.0, 0.0, -0.1 + 0.015, TANH),  # wait, but, verify
    ("kw_cap", "kw6", 0.0, 0.0, -0.1 + 0.025, TANH),  # 7 keywords, capped
    ("kw_five_times", "kw5x", 0.0, 0.0, -0.1 + 0.005, TANH),  # wait x5 earns nothing, error x1
    ("kw_passing_no_bonus", "kw3", 1.0, 0.0, 1.0, NONE),
    # -- clipping --
    ("clip_low", "repeat8", 0.0, 0.5, -1.0, NONE),  # -0.2 - 0.9 = -1.1
    ("clip_low_prev_perfect", "two_python", 0.0, 1.0, -1.0, NONE),  # -0.2 - 0.9
    ("clip_high_is_one", "clean", 1.0, 0.99, 1.0, NONE),
]


def expected_score(kind: str, base: float, tanh: bool, profile: str) -> float:
    """``base`` plus, when ``tanh``, the hand constant of the fixture's think length in ``profile``
    (the paper profile counts the ``<think>`` tag too)."""
    if not tanh:
        return base
    think = FIXTURE_TOKENS[kind][0] + (TAG_TOKENS if profile == "paper" else 0)
    return base + HAND_TANH[think]


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
@pytest.mark.parametrize("kind,p,b,base,tanh", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_shaped_reward_table(responses, kind, p, b, base, tanh, profile):
    expected = expected_score(kind, base, tanh, profile)
    chosen = {} if profile == "paper" else {"profile": profile}  # paper: the default, called as such
    assert shaped_reward(responses[kind], p, b, **chosen) == pytest.approx(expected, abs=1e-12)


def test_fixture_token_counts(responses):
    for kind, (t, a, e) in FIXTURE_TOKENS.items():
        got = shaped_reward_breakdown(responses[kind], 0.0, profile="cobalt")
        assert (got.think_tokens, got.answer_tokens, got.explanation_tokens) == (t, a, e), kind
        paper = shaped_reward_breakdown(responses[kind], 0.0)
        assert (paper.think_tokens, paper.answer_tokens, paper.explanation_tokens) == (t + TAG_TOKENS, a, e), kind


def test_think_counts_follow_the_original_independently(responses):
    """T for paper is the o200k_base length of the text before </think>, stripped (tag included),
    counted here with tiktoken directly, not through cobalt.reward.tokens."""
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    for kind in ("clean", "kw3", "long_think"):
        text = responses[kind]
        before = text[: text.index("</think>")].strip()
        assert before.startswith("<think>")
        assert shaped_reward_breakdown(text, 0.0).think_tokens == len(enc.encode(before))
        inner = before[len("<think>"):].strip()
        assert shaped_reward_breakdown(text, 0.0, profile="cobalt").think_tokens == len(enc.encode(inner))


def test_hand_constants_match_tanh():
    for t, value in HAND_TANH.items():
        assert value == pytest.approx(0.075 * math.tanh(t / 1024), abs=1e-15)


@pytest.mark.parametrize(
    "kind,p,b,is_val,expected",
    [
        ("clean", 1.0, 0.0, True, 1.0),
        ("no_think_end", 1.0, 0.0, True, 1.0),  # format plays no part in validation
        ("clean", 0.999, 0.0, True, 0.0),
        ("clean", 0.0, 0.5, True, 0.0),
        ("clean", None, 0.0, False, -1.0),  # no code block, training
        ("clean", None, 0.0, True, 0.0),  # no code block, validation
        ("all_long", None, 0.5, False, -1.0),
    ],
)
def test_validation_and_no_code(responses, kind, p, b, is_val, expected):
    assert shaped_reward(responses[kind], p, b, is_val=is_val) == expected


def test_breakdown_components(responses):
    got = shaped_reward_breakdown(responses["clean"], 0.25, 0.5)
    assert isinstance(got, RewardBreakdown)
    assert got.correctness == 0.0
    assert got.improvement == pytest.approx(-0.15, abs=1e-12)
    assert got.format == pytest.approx(F98, abs=1e-12)
    assert got.format_violation is None
    assert got.score == pytest.approx(got.correctness + got.improvement + got.format, abs=1e-12)
    assert got.to_dict()["score"] == got.score
    bad = shaped_reward_breakdown(responses["repeat8"], 0.0, 0.5)
    assert bad.format == -0.9 and "repeated" in bad.format_violation
    assert bad.think_tokens is None  # tokens are not counted once the penalty fires
    assert bad.score == -1.0 and bad.correctness + bad.improvement + bad.format == pytest.approx(-1.1)


@pytest.mark.parametrize(
    "kind,reason",
    [
        ("no_think_end", "no </think>"),
        ("two_think_end", "2 </think> tags"),
        ("two_python", "2 opening ```python fences after </think>"),
        ("no_python", "0 opening ```python fences after </think>"),
        ("unclosed", "0 closing fences after the ```python fence"),
        ("extra_fence", "3 closing fences after the ```python fence"),
        ("backtick_code", "backtick in the code"),
        ("repeat8", "a block of >= 32 characters repeated >= 8 times"),
        ("clean", None),
        ("repeat7", None),
    ],
)
def test_format_violation_reasons(responses, kind, reason):
    assert format_violation(responses[kind]) == reason


def test_backticks_outside_the_code_are_fine(responses):
    # The real explanation quotes names in backticks; only the code is checked.
    assert "`" in responses["clean"].split("\n```")[-1]
    assert format_violation(responses["clean"]) is None


@pytest.mark.parametrize(
    "think,bonus",
    [
        ("nothing to see", 0.0),
        ("Wait.", 0.005),
        ("WAIT, However, BUT", 0.015),  # lower-cased first
        ("butter waiting errors reevaluate rewrite mistaken", 0.0),  # whole words only
        ("wait " * 4, 0.005),
        ("wait " * 5, 0.0),  # more than 4 times: no bonus for that word
        ("wait " * 5 + "error", 0.005),
        ("wait mistake however but retry", 0.025),
        ("wait mistake however but retry error verify wrong evaluate", 0.025),  # cap
        ("wait-but: error/verify", 0.02),  # punctuation separates words
    ],
)
def test_keyword_bonus(think, bonus):
    assert keyword_bonus(think) == pytest.approx(bonus, abs=1e-15)


class WordCounter:
    """A simple real tokenizer (whitespace words), to put lengths exactly on the limits."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def _words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def _sized(think: int, answer: int, expl: int) -> str:
    # The answer's words: the opening fence, the code words, the closing fence, the explanation.
    code = _words(answer - expl - 2, "v")
    return f"<think>{_words(think, 't')}</think>\n```python\n{code}\n```\n{_words(expl, 'e')}"


@pytest.mark.parametrize(
    "t,a,e,p,expected",
    [
        (4096, 30, 10, 1.0, 1.0),
        (4097, 30, 10, 1.0, 0.99),
        (4096, 30, 10, 0.0, -0.1 + 0.075 * math.tanh(4.0)),
        (4097, 30, 10, 0.0, -0.2),
        (10, 2048, 512, 1.0, 1.0),
        (10, 2049, 512, 1.0, 0.99),
        (10, 600, 513, 1.0, 0.99),
        (10, 2049, 512, 0.0, -0.2 + 0.075 * math.tanh(10 / 1024)),
        (10, 600, 513, 0.0, -0.2 + 0.075 * math.tanh(10 / 1024)),
        (10, 2049, 513, 0.0, -0.3 + 0.075 * math.tanh(10 / 1024)),
    ],
)
def test_length_limits_are_inclusive(t, a, e, p, expected):
    got = shaped_reward_breakdown(_sized(t, a, e), p, token_counter=WordCounter())
    assert got.format_violation is None
    assert (got.think_tokens, got.answer_tokens, got.explanation_tokens) == (t, a, e)
    assert got.score == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "p,b",
    [(1.5, 0.0), (-0.1, 0.0), (float("nan"), 0.0), (0.5, 1.2), (0.5, -0.5), (True, 0.0), ("1", 0.0)],
)
def test_rejects_out_of_range_rates(responses, p, b):
    with pytest.raises(ValueError):
        shaped_reward(responses["clean"], p, b)


def test_rejects_non_string_response():
    with pytest.raises(TypeError):
        shaped_reward(b"bytes", 1.0)


@settings(max_examples=300, deadline=None)
@given(
    p=st.one_of(st.none(), st.floats(0.0, 1.0)),
    b=st.floats(0.0, 1.0),
    kind=st.sampled_from(sorted(FIXTURE_TOKENS) + ["repeat8", "two_python", "no_think_end"]),
    is_val=st.booleans(),
)
def test_score_always_within_bounds(responses, p, b, kind, is_val):
    got = shaped_reward_breakdown(responses[kind], p, b, is_val=is_val)
    assert -1.0 <= got.score <= 1.0
    if is_val:
        assert got.score in (0.0, 1.0)
    elif p is not None:
        total = got.correctness + got.improvement + got.format
        assert got.score == pytest.approx(min(1.0, max(-1.0, total)), abs=1e-12)


def test_constants_live_in_one_place():
    import inspect

    from cobalt.reward import has_repetition

    defaults = inspect.signature(has_repetition).parameters
    assert defaults["min_len"].default == S.REPETITION_MIN_LEN == 32
    assert defaults["min_repeats"].default == S.REPETITION_MIN_REPEATS == 8
    assert (S.THINK_TOKEN_LIMIT, S.ANSWER_TOKEN_LIMIT, S.EXPLANATION_TOKEN_LIMIT) == (4096, 2048, 512)


@pytest.mark.parametrize("module", ["shaped", "repetition", "tokens", "scoring"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"cobalt.reward.{module}"))
    assert result.attempted >= 1 and result.failed == 0


@pytest.mark.parametrize(
    "response,paper,cobalt",
    [
        ("<think> a plan </think>code", "<think> a plan", "a plan"),
        ("  <think>\nq\n</think>\n```", "<think>\nq", "q"),
        ("no tag at all</think>x</think>", "no tag at all", "no tag at all"),
        ("</think>at once", "", ""),
        ("no end tag", "", ""),
    ],
)
def test_think_text_by_profile(response, paper, cobalt):
    from cobalt.profile import Profile

    assert S.think_text(response) == paper and S.think_text(response, "paper") == paper
    assert S.think_text(response, "cobalt") == cobalt and S.think_text(response, Profile.COBALT) == cobalt


def test_breakdown_fields_by_hand(responses):
    """Every field of the breakdown on each branch, written out by hand."""
    RB = RewardBreakdown
    no_code = shaped_reward_breakdown(responses["clean"], None, 0.25)
    assert no_code == RB(-1.0, -1.0, 0.0, 0.0, None, 0.25, False, "no code block")
    no_code_val = shaped_reward_breakdown(responses["clean"], None, 0.25, is_val=True)
    assert no_code_val == RB(0.0, 0.0, 0.0, 0.0, None, 0.25, True, "no code block")
    val = shaped_reward_breakdown(responses["no_think_end"], 1.0, 0.5, is_val=True)
    assert val == RB(1.0, 1.0, 0.0, 0.0, 1.0, 0.5, True)
    val_fail = shaped_reward_breakdown(responses["clean"], 0.75, 0.5, is_val=True)
    assert val_fail == RB(0.0, 0.0, 0.0, 0.0, 0.75, 0.5, True)
    bad = shaped_reward_breakdown(responses["repeat8"], 0.0, 0.5)
    assert bad.score == -1.0 and bad.pass_rate == 0.0 and bad.prev_best_pass_rate == 0.5 and not bad.is_val
    assert (bad.correctness, bad.format, bad.think_tokens, bad.answer_tokens, bad.explanation_tokens) == (
        -0.1, -0.9, None, None, None)
    assert bad.improvement == pytest.approx(-0.1, abs=1e-15)  # r = -0.1 + 0.1 * (0 - 0.5) / 0.5 = -0.2
    assert bad.format_violation == "a block of >= 32 characters repeated >= 8 times" and bad.keyword_bonus == 0.0
    # 10 think words (the tag glued to the first), 30 answer words, 5 explanation words
    f10 = 0.075 * math.tanh(10 / 1024)
    words = shaped_reward_breakdown(_sized(10, 30, 5), 0.0, token_counter=WordCounter())
    assert words == RB(pytest.approx(-0.1 + f10, abs=1e-15), -0.1, 0.0, pytest.approx(f10, abs=1e-15), 0.0, 0.0,
                       False, None, 10, 30, 5, 0.0)
    kw = shaped_reward_breakdown(responses["kw3"], 0.0)
    assert kw.keyword_bonus == pytest.approx(0.015, abs=1e-15) and kw.think_tokens == 123
    assert kw.format == pytest.approx(F123 + 0.015, abs=1e-15)
    gain = shaped_reward_breakdown(responses["clean"], 0.75, 0.5)
    assert (gain.correctness, gain.format) == (0.2, 0.0) and gain.improvement == pytest.approx(0.05, abs=1e-15)
    assert (gain.think_tokens, gain.answer_tokens, gain.explanation_tokens) == (98, 391, 177)


def test_to_dict_by_hand():
    got = RewardBreakdown(0.25, 0.2, 0.05, 0.0, 0.75, 0.5, False, None, 98, 391, 177, 0.0).to_dict()
    assert got == {
        "score": 0.25, "pass_rate": 0.75, "prev_best_pass_rate": 0.5, "correctness": 0.2, "improvement": 0.05,
        "format": 0.0, "format_violation": None, "think_tokens": 98, "answer_tokens": 391,
        "explanation_tokens": 177, "keyword_bonus": 0.0, "is_val": False,
    }
    assert list(got)[0] == "score"


def test_full_pass_after_a_previous_best_gets_no_improvement_term(responses):
    # p = 1 ends the improvement rule: without the guard, 0.1 * (1 - b) / (1 - b) would be added
    assert S.improvement_reward(1.0, 0.5, 1.0) == 1.0
    got = shaped_reward_breakdown(responses["clean"], 1.0, 0.5)
    assert (got.score, got.correctness, got.improvement, got.format) == (1.0, 1.0, 0.0, 0.0)


def test_previous_best_defaults_to_zero(responses):
    assert shaped_reward(responses["clean"], 0.5) == 0.2  # with b = 1 it would be -0.15 + the think term


def test_long_think_failing_has_no_keyword_bonus(responses):
    got = shaped_reward_breakdown(responses["long_think"], 0.0)
    assert (got.format, got.keyword_bonus, got.score) == (-0.1, 0.0, pytest.approx(-0.2, abs=1e-15))


def test_answer_limit_is_inclusive_for_failing_answers():
    got = shaped_reward_breakdown(_sized(10, 2048, 5), 0.0, token_counter=WordCounter())
    assert got.answer_tokens == 2048 and got.score == pytest.approx(-0.1 + 0.075 * math.tanh(10 / 1024), abs=1e-15)


def test_error_messages_name_the_argument(responses):
    with pytest.raises(ValueError, match=r"^pass_rate must be a number in \[0, 1\], got 1.5$"):
        shaped_reward(responses["clean"], 1.5)
    with pytest.raises(ValueError, match=r"^prev_best_pass_rate must be a number in \[0, 1\], got -0.5$"):
        shaped_reward(responses["clean"], 0.5, -0.5)
    with pytest.raises(TypeError, match=r"^response must be str, got NoneType$"):
        shaped_reward(None, 0.5)
    with pytest.raises(ValueError, match="profile must be 'paper' or 'cobalt'"):
        shaped_reward(responses["clean"], 0.5, profile="Paper")
    with pytest.raises(ValueError, match="profile"):
        S.think_text("<think>x</think>", "papers")


def test_type_error_names_the_given_type():
    with pytest.raises(TypeError, match=r"^response must be str, got bytes$"):
        shaped_reward(b"<think>x</think>", 0.5)


def test_format_reward_defaults_to_paper(responses):
    got = S.format_reward(responses["clean"], -0.1)
    assert got.think_tokens == 98 and got.value == pytest.approx(F98, abs=1e-15)


def test_shaped_reward_uses_the_given_counter():
    # 10 words of thinking; o200k_base would count the same text as more tokens
    f10 = 0.075 * math.tanh(10 / 1024)
    assert shaped_reward(_sized(10, 30, 5), 0.0, token_counter=WordCounter()) == pytest.approx(-0.1 + f10, abs=1e-15)


@pytest.mark.parametrize("p,b,expected", [
    # code_reward_func_think.py, compute_score: a gain adds
    #   (pass_rate - prev_best_pass_rate) / (1.0 - prev_best_pass_rate) * 0.1
    # to the tier; no gain replaces the value by
    #   -0.1 + (pass_rate - prev_best_pass_rate) / prev_best_pass_rate * 0.1
    # Evaluated in that order these are the doubles below; "0.1 * gain / x" gives
    # 0.2416666666666667, 0.22, -0.14285714285714288 and -0.14375000000000002 instead.
    (1 / 2, 1 / 7, 0.24166666666666667),   # 0.2 + (0.5 - 1/7) / (6/7) * 0.1
    (1 / 2, 3 / 8, 0.22000000000000003),   # 0.2 + 0.125 / 0.625 * 0.1
    (1 / 2, 7 / 8, -0.14285714285714285),  # -0.1 + (-0.375) / 0.875 * 0.1
    (1 / 2, 8 / 9, -0.14375),              # -0.1 + (0.5 - 8/9) / (8/9) * 0.1
])
def test_improvement_is_bit_identical_to_the_original(p, b, expected):
    assert S.improvement_reward(p, b, S.correctness_reward(p)) == expected


def _original_steps_2_3(p: float, b: float) -> float:
    """code_reward_func_think.py's compute_score, steps 2-3, written out as the original writes them."""
    if p == 1.0:
        reward_value = 1.0
    elif p >= 0.5:
        reward_value = 0.2
    elif p > 0.0:
        reward_value = 0.0
    else:
        reward_value = -0.1
    if p < 1.0 and b > 0.0:
        if p - b > 0.0:
            reward_value += (p - b) / (1.0 - b) * 0.1
        else:
            reward_value = -0.1 + (p - b) / b * 0.1
    return reward_value


def test_improvement_matches_the_original_on_every_grid_rate():
    # every pass rate k/n and previous best j/m with n, m <= 24: the same double, bit for bit
    rates = sorted({k / n for n in range(1, 25) for k in range(n + 1)})
    for p in rates:
        for b in rates:
            assert S.improvement_reward(p, b, S.correctness_reward(p)) == _original_steps_2_3(p, b), (p, b)
