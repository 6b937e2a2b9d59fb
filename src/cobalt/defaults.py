"""Every default that more than one part of Cobalt relies on, defined once.

Commands, configs and library functions import these names instead of
repeating the numbers; ``tests/unit/test_defaults.py`` checks that each is
defined here only. docs/DEFAULTS.md explains them, the timeout chain as one table.
"""
from __future__ import annotations

# ---------------------------------------------------------------- conversation

HISTORY_MAX_CHARS = 6000
"""How much of an assistant turn a multi-turn history keeps with thinking enabled (METHOD §9)."""

# ---------------------------------------------------------------- sampling (METHOD §6, §9)

TEMPERATURE = 0.6
"""Sampling temperature of evaluation rollouts and of validation in training."""
TOP_P = 0.95
"""Nucleus-sampling threshold of evaluation rollouts and of validation in training."""
MAX_NEW_TOKENS = 8192
"""New tokens per response of an engine request."""

# ---------------------------------------------------------------- data

DATA_DIR_ENV = "COBALT_DATA_DIR"
"""Environment variable naming the folder of the veRL datasets (``<run>/train.parquet``)."""
DATA_DIR = "~/cobalt/data/verl"
"""That folder when the variable is unset."""

# ---------------------------------------------------------------- the timeout chain
# Each link must outlast the one before it, so that the innermost limit decides.

TEST_WALL_S = 4.0
"""Wall-clock limit of one test (METHOD §2)."""
TEST_CPU_S = 4.0
"""CPU-time limit of one test (METHOD §2)."""
PROGRAM_WALL_S = 27.0
"""Wall-clock cap on all tests of one program together (METHOD §9)."""
HOST_GRACE_S = 2.0
"""Slack on top of the program cap before the host kills the whole sandbox."""
CALLER_TIMEOUT_S = 300.0
"""How long an evaluator client waits for one program by default (the reward's 300 s, METHOD §9)."""
COMMAND_EVAL_TIMEOUT_S = 30.0
"""``--eval-timeout`` of ``cobalt rollout`` and ``cobalt eval`` under ``cobalt``: what their client
waits per program."""
PAPER_CALLER_WAIT_S = 300.0
"""``--eval-timeout`` of ``cobalt rollout`` and ``cobalt eval`` under ``paper``: the original
inference scripts' wait for one evaluation."""
COBALT_CALLER_WAIT_S = COMMAND_EVAL_TIMEOUT_S
"""The same under ``cobalt`` (the evaluator's own program cap is shorter)."""


def caller_wait_s(profile: str = "paper") -> float:
    """How long a rollout or ``cobalt eval`` waits for one program's tests by default.

    >>> caller_wait_s(), caller_wait_s("cobalt")
    (300.0, 30.0)
    """
    from cobalt.profile import profile_name

    return PAPER_CALLER_WAIT_S if profile_name(profile) == "paper" else COBALT_CALLER_WAIT_S


PAPER_EVALUATOR_WAIT_S = 30.0
"""``paper``: the original reward function waits this for the evaluator, whatever the client's timeout."""
REWARD_CLIENT_GRACE_S = 5.0
"""The reward waits its client's timeout plus this for one scoring call."""
REWARD_MANAGER_TIMEOUT_S = {"paper": 300.0, "cobalt": 120.0}
"""Per-row timeout of the veRL reward manager, by profile (``reward.reward_kwargs.timeout_s``)."""
