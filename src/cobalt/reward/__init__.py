"""Cobalt's reward: the paper's shaped reward (METHOD.md §3) and its async scorer.

- :func:`shaped_reward` / :func:`shaped_reward_breakdown`: pure functions of a
  response and its pass rate (weights and thresholds in :mod:`cobalt.reward.shaped`);
- :func:`has_repetition`: the repetition predicate, exact and fast;
- :class:`TokenCounter` and :func:`get_token_counter`: token lengths (o200k_base by default);
- :func:`compute_score`: async, runs the code through the evaluator client (veRL's signature).

Importing this package loads neither Ray, torch nor verl, nor any tokenizer.
"""
from cobalt.reward.repetition import has_repetition
from cobalt.reward.scoring import compute_score, is_validation_row
from cobalt.reward.shaped import (
    FormatCheck,
    RewardBreakdown,
    correctness_reward,
    format_reward,
    format_violation,
    improvement_reward,
    keyword_bonus,
    shaped_reward,
    shaped_reward_breakdown,
)
from cobalt.reward.tokens import (
    HFTokenCounter,
    TiktokenCounter,
    TokenCounter,
    get_token_counter,
    make_token_counter,
)

__all__ = [
    "FormatCheck",
    "HFTokenCounter",
    "RewardBreakdown",
    "TiktokenCounter",
    "TokenCounter",
    "compute_score",
    "correctness_reward",
    "format_reward",
    "format_violation",
    "get_token_counter",
    "has_repetition",
    "improvement_reward",
    "is_validation_row",
    "keyword_bonus",
    "make_token_counter",
    "shaped_reward",
    "shaped_reward_breakdown",
]
