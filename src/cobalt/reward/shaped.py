"""The paper's shaped reward for one response, as pure functions (METHOD.md §3).

    score = clip(correctness + improvement + format, -1, 1)      (training)
    score = 1 if pass_rate == 1 else 0                             (validation)

- correctness: a tier of the pass rate ``p`` (1.0 / 0.2 / 0.0 / -0.1);
- improvement: only when ``p < 1`` and the previous best ``b > 0``; a gain adds
  ``0.1 * (p - b) / (1 - b)``, no gain *replaces* the reward by
  ``-0.1 + 0.1 * (p - b) / b`` (reported as ``improvement = replaced - correctness``);
- format: ``-0.9`` when the response is ill-formed (and then nothing else);
  otherwise a length term that depends on the sign of ``r = correctness +
  improvement``: for ``r >= 0`` ``0`` or ``-0.01`` for an over-long answer, for
  ``r < 0`` a small bonus for reasoning (``0.075 * tanh(T / 1024)`` plus keyword
  bonus) or ``-0.1`` for over-long thinking, minus ``0.1`` per over-long part.

A response without a code block scores -1 in training and 0 in validation,
before any other term.

One rule depends on the profile (docs/FIDELITY.md): the think length ``T``.
``paper`` counts what the original counts, the text before ``</think>``
stripped, so an opening ``<think>`` tag that the model generated (Qwen3 does;
R1-Distill's chat template puts it in the prompt) adds its tokens; ``cobalt``
counts the reasoning alone, without the tag. Every weight and threshold is a named constant below,
the one place they are defined; docs/REWARD.md explains each choice.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from cobalt.profile import profile_name
from cobalt.reward.repetition import has_repetition
from cobalt.reward.tokens import SpecialTokenError, TokenCounter, get_token_counter  # noqa: F401 (re-exported)
from cobalt.text import THINK_END, split_think

# -- step 1: no code block -------------------------------------------------------
NO_CODE_TRAIN_REWARD = -1.0
NO_CODE_VAL_REWARD = 0.0

# -- step 2: correctness tiers -----------------------------------------------------
FULL_PASS_REWARD = 1.0
HIGH_PASS_THRESHOLD = 0.5
HIGH_PASS_REWARD = 0.2
LOW_PASS_REWARD = 0.0
ZERO_PASS_REWARD = -0.1

# -- step 3: improvement over the previous best ------------------------------------
IMPROVEMENT_SCALE = 0.1
NO_GAIN_BASE = -0.1
NO_GAIN_SCALE = 0.1

# -- step 4: format ------------------------------------------------------------------
FORMAT_PENALTY = -0.9
REPETITION_MIN_LEN = 32
REPETITION_MIN_REPEATS = 8
PYTHON_FENCE = "```python"
CLOSING_FENCE = "\n```"
"""A closing fence is a line that starts with three backticks."""

THINK_TOKEN_LIMIT = 4096
ANSWER_TOKEN_LIMIT = 2048
EXPLANATION_TOKEN_LIMIT = 512
LONG_PASSING_PENALTY = -0.01
THINK_BONUS_SCALE = 0.075
THINK_BONUS_TOKENS = 1024.0
LONG_THINK_PENALTY = -0.1
LONG_ANSWER_PENALTY = -0.1
LONG_EXPLANATION_PENALTY = -0.1
KEYWORDS = ("wait", "mistake", "however", "but", "retry", "error", "verify", "wrong", "evaluate")
KEYWORD_BONUS = 0.005
KEYWORD_MIN_COUNT = 1
KEYWORD_MAX_COUNT = 4
KEYWORD_BONUS_CAP = 0.025

# -- step 5: clip and validation ----------------------------------------------------
REWARD_MIN = -1.0
REWARD_MAX = 1.0
VAL_PASS_REWARD = 1.0
VAL_FAIL_REWARD = 0.0

_KEYWORD_RE = re.compile(r"\b(" + "|".join(map(re.escape, KEYWORDS)) + r")\b")


@dataclass(frozen=True)
class FormatCheck:
    """The format term of one response and what it was computed from."""

    value: float
    violation: str | None = None
    """Why the -0.9 penalty fired (None when the response is well-formed)."""
    think_tokens: int | None = None
    answer_tokens: int | None = None
    explanation_tokens: int | None = None
    keyword_bonus: float = 0.0


@dataclass(frozen=True)
class RewardBreakdown:
    """A scored response: the final score and its parts, for logging.

    In training ``score == clip(correctness + improvement + format)``; in
    validation and for a response without code the parts are not computed
    (``correctness`` holds the score, the others are 0).
    """

    score: float
    correctness: float
    improvement: float
    format: float
    pass_rate: float | None
    prev_best_pass_rate: float
    is_val: bool
    format_violation: str | None = None
    think_tokens: int | None = None
    answer_tokens: int | None = None
    explanation_tokens: int | None = None
    keyword_bonus: float = 0.0

    def to_dict(self) -> dict:
        """Flat JSON-ready dict (``score`` first), as veRL logs extra reward info."""
        return {
            "score": self.score,
            "pass_rate": self.pass_rate,
            "prev_best_pass_rate": self.prev_best_pass_rate,
            "correctness": self.correctness,
            "improvement": self.improvement,
            "format": self.format,
            "format_violation": self.format_violation,
            "think_tokens": self.think_tokens,
            "answer_tokens": self.answer_tokens,
            "explanation_tokens": self.explanation_tokens,
            "keyword_bonus": self.keyword_bonus,
            "is_val": self.is_val,
        }


def correctness_reward(pass_rate: float) -> float:
    """Step 2: the correctness tier of a pass rate.

    >>> [correctness_reward(p) for p in (1.0, 0.5, 0.25, 0.0)]
    [1.0, 0.2, 0.0, -0.1]
    """
    if pass_rate == 1.0:
        return FULL_PASS_REWARD
    if pass_rate >= HIGH_PASS_THRESHOLD:
        return HIGH_PASS_REWARD
    if pass_rate > 0.0:
        return LOW_PASS_REWARD
    return ZERO_PASS_REWARD


def improvement_reward(pass_rate: float, prev_best_pass_rate: float, base: float) -> float:
    """Step 3: ``base`` (the correctness tier) adjusted for progress over ``prev_best_pass_rate``.

    >>> round(improvement_reward(0.75, 0.5, 0.2), 10)   # gain: 0.2 + 0.1 * 0.25 / 0.5
    0.25
    >>> round(improvement_reward(0.25, 0.5, 0.0), 10)   # regression replaces: -0.1 + 0.1 * -0.25 / 0.5
    -0.15
    """
    if pass_rate >= 1.0 or prev_best_pass_rate <= 0.0:
        return base
    gain = pass_rate - prev_best_pass_rate
    # The original's order of operations (divide, then scale): the same value,
    # bit for bit, where ``scale * gain / x`` can differ in the last place.
    if gain > 0.0:
        return base + gain / (1.0 - prev_best_pass_rate) * IMPROVEMENT_SCALE
    return NO_GAIN_BASE + gain / prev_best_pass_rate * NO_GAIN_SCALE


def format_violation(response: str) -> str | None:
    """Why ``response`` earns the -0.9 format penalty, or None when it is well-formed.

    >>> format_violation("<think>plan</think>\\n```python\\nprint(1)\\n```\\ndone") is None
    True
    >>> format_violation("```python\\nprint(1)\\n```")
    'no </think>'
    """
    think_ends = response.count(THINK_END)
    if think_ends == 0:
        return "no </think>"
    if think_ends > 1:
        return f"{think_ends} </think> tags"
    answer = split_think(response)[1].strip()
    opens = answer.count(PYTHON_FENCE)
    if opens != 1:
        return f"{opens} opening ```python fences after </think>"
    after_open = answer[answer.index(PYTHON_FENCE) + len(PYTHON_FENCE):]
    closes = after_open.count(CLOSING_FENCE)
    if closes != 1:
        return f"{closes} closing fences after the ```python fence"
    if "`" in after_open[:after_open.index(CLOSING_FENCE)]:
        return "backtick in the code"
    # Last: by far the most expensive check.
    if has_repetition(response, REPETITION_MIN_LEN, REPETITION_MIN_REPEATS):
        return f"a block of >= {REPETITION_MIN_LEN} characters repeated >= {REPETITION_MIN_REPEATS} times"
    return None


def keyword_bonus(think: str) -> float:
    """Bonus for reflective words: ``KEYWORD_BONUS`` per keyword that occurs as a whole
    word 1 to 4 times in the lower-cased ``think`` text, capped at ``KEYWORD_BONUS_CAP``.

    >>> keyword_bonus("Wait, that is wrong. But wait: verify.")
    0.02
    """
    counts = Counter(_KEYWORD_RE.findall(think.lower()))
    bonus = 0.0
    for count in counts.values():
        if KEYWORD_MIN_COUNT <= count <= KEYWORD_MAX_COUNT:
            bonus += KEYWORD_BONUS  # summed one by one, as the original: 3 * 0.005 != 0.005 + 0.005 + 0.005
    return min(bonus, KEYWORD_BONUS_CAP)



def think_text(response: str, profile: str = "paper") -> str:
    """The think part whose tokens make ``T``: the text before the first ``</think>``, stripped;
    ``paper`` keeps a leading ``<think>`` tag (as the original), ``cobalt`` drops it.
    Empty when there is no ``</think>``.

    >>> think_text("<think> plan </think>code"), think_text("<think> plan </think>code", "cobalt")
    ('<think> plan', 'plan')
    """
    if profile_name(profile) == "cobalt":
        think, _ = split_think(response)
        return "" if think is None else think.strip()
    before, found, _ = response.partition(THINK_END)
    return before.strip() if found else ""


def format_reward(
    response: str, r: float, token_counter: TokenCounter | None = None, *, profile: str = "paper"
) -> FormatCheck:
    """Step 4: the format term for ``response`` given ``r`` (the result of steps 1-3).

    -0.9 alone when :func:`format_violation` finds a problem; else the length
    terms. Tokens are counted only on this path (``o200k_base`` by default).
    ``profile`` chooses what the think length counts (:func:`think_text`).
    """
    violation = format_violation(response)
    if violation is not None:
        return FormatCheck(FORMAT_PENALTY, violation)
    counter = token_counter or get_token_counter()
    think = think_text(response, profile)
    answer = split_think(response)[1].strip()
    after_open = answer[answer.index(PYTHON_FENCE) + len(PYTHON_FENCE):]
    explanation = after_open[after_open.index(CLOSING_FENCE) + len(CLOSING_FENCE):].strip()
    count = _length_counter(counter, profile)
    t, a, e = count(think), count(answer), count(explanation)
    lengths = {"think_tokens": t, "answer_tokens": a, "explanation_tokens": e}
    if r >= 0.0:
        within = t <= THINK_TOKEN_LIMIT and a <= ANSWER_TOKEN_LIMIT and e <= EXPLANATION_TOKEN_LIMIT
        return FormatCheck(0.0 if within else LONG_PASSING_PENALTY, **lengths)
    bonus = 0.0
    if t <= THINK_TOKEN_LIMIT:
        bonus = keyword_bonus(think)
        value = THINK_BONUS_SCALE * math.tanh(t / THINK_BONUS_TOKENS) + bonus
    else:
        value = LONG_THINK_PENALTY
    if a > ANSWER_TOKEN_LIMIT:
        value += LONG_ANSWER_PENALTY
    if e > EXPLANATION_TOKEN_LIMIT:
        value += LONG_EXPLANATION_PENALTY
    return FormatCheck(value, keyword_bonus=bonus, **lengths)


def _length_counter(counter: TokenCounter, profile: str):
    """``paper`` counts as the original's ``enc.encode``: special-token text raises
    :class:`SpecialTokenError` (the row then scores as failed); ``cobalt`` counts it as text."""
    strict = getattr(counter, "count_strict", None)
    if profile_name(profile) == "paper" and strict is not None:
        return strict
    return counter.count


def _check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def shaped_reward_breakdown(
    response: str,
    pass_rate: float | None,
    prev_best_pass_rate: float = 0.0,
    *,
    is_val: bool = False,
    token_counter: TokenCounter | None = None,
    profile: str = "paper",
) -> RewardBreakdown:
    """Score one response (METHOD §3) and return the score with its parts.

    ``pass_rate`` is the fraction of tests passed, or None when the response
    has no code block; ``prev_best_pass_rate`` is the best pass rate of the
    trajectory so far (0 for a first turn). ``profile`` (``paper`` or
    ``cobalt``) chooses how the think length is counted (:func:`think_text`).
    """
    if not isinstance(response, str):
        raise TypeError(f"response must be str, got {type(response).__name__}")
    profile_name(profile)
    b = _check_rate("prev_best_pass_rate", prev_best_pass_rate)
    if pass_rate is None:
        score = NO_CODE_VAL_REWARD if is_val else NO_CODE_TRAIN_REWARD
        return RewardBreakdown(score, score, 0.0, 0.0, None, b, is_val, "no code block")
    p = _check_rate("pass_rate", pass_rate)
    correctness = correctness_reward(p)
    r = improvement_reward(p, b, correctness)
    if is_val:
        if profile_name(profile) == "paper":
            # The original computes the format term before it looks at the split, so a
            # response whose lengths it cannot measure raises in validation too.
            format_reward(response, r, token_counter, profile=profile)
        score = VAL_PASS_REWARD if p == 1.0 else VAL_FAIL_REWARD
        return RewardBreakdown(score, score, 0.0, 0.0, p, b, True)
    fmt = format_reward(response, r, token_counter, profile=profile)
    score = min(REWARD_MAX, max(REWARD_MIN, r + fmt.value))
    return RewardBreakdown(
        score=score,
        correctness=correctness,
        improvement=r - correctness,
        format=fmt.value,
        pass_rate=p,
        prev_best_pass_rate=b,
        is_val=False,
        format_violation=fmt.violation,
        think_tokens=fmt.think_tokens,
        answer_tokens=fmt.answer_tokens,
        explanation_tokens=fmt.explanation_tokens,
        keyword_bonus=fmt.keyword_bonus,
    )


def shaped_reward(
    response: str,
    pass_rate: float | None,
    prev_best_pass_rate: float = 0.0,
    *,
    is_val: bool = False,
    token_counter: TokenCounter | None = None,
    profile: str = "paper",
) -> float:
    """The paper's reward for one response (see :func:`shaped_reward_breakdown`).

    >>> shaped_reward("no code at all", None)
    -1.0
    >>> shaped_reward("no code at all", None, is_val=True)
    0.0
    >>> shaped_reward("<think>x</think>```python\\nprint(1)\\n```", 1.0, is_val=True)
    1.0
    """
    return shaped_reward_breakdown(
        response, pass_rate, prev_best_pass_rate, is_val=is_val, token_counter=token_counter, profile=profile
    ).score
