"""The reward function that verl calls: a thin adapter over :func:`cobalt.reward.compute_score`.

verl 0.9.1 loads it with ``reward.custom_reward_function.path=pkg://cobalt.verl_plugin.reward``
(``name=compute_score``, the default) and, because it is a coroutine function,
awaits it inside the reward worker's event loop. verl passes keyword arguments
``data_source``, ``solution_str`` (the decoded response, special tokens skipped),
``ground_truth`` (``reward_model.ground_truth`` of the row: the test cases as
JSON) and ``extra_info`` (the row's ``extra_info`` dict; verl's ``naive`` manager adds
``num_turns`` and ``rollout_reward_scores`` to it), plus anything listed under
``custom_reward_function.reward_kwargs``.

verl never tells the function whether a row is a validation row, so the flag
comes from the data: ``extra_info["is_val"]`` (written by ``cobalt make-verl-data``).

The profile (``paper`` or ``cobalt``, docs/FIDELITY.md) comes from the
``profile`` keyword (``custom_reward_function.reward_kwargs.profile`` or our
reward manager's ``reward.reward_kwargs.profile``), else from ``$COBALT_PROFILE``,
else ``paper``: this module is an entry point, so it may read the environment.
The same profile runs the executor: without a ``client`` keyword, the response
is judged by this process's evaluator client for that profile
(:func:`cobalt.reward.scoring.default_client`).

The dict returned here has ``score`` (the reward) and a fixed set of flat keys
(:data:`REWARD_INFO_KEYS`): verl turns every key into a per-sample column,
stacking rows by the keys of the first one, so a key missing from one row, or
a nested value, would break the batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["COMPONENT_KEYS", "REWARD_INFO_KEYS", "RewardTally", "compute_score", "flatten_for_verl"]

COMPONENT_KEYS = ("correctness", "improvement", "format")
_NUMBER_KEYS = (
    "score",
    "acc",
    "pass_rate",
    "prev_best_pass_rate",
    *COMPONENT_KEYS,
    "keyword_bonus",
    "think_tokens",
    "answer_tokens",
    "explanation_tokens",
    "n_tests",
)
REWARD_INFO_KEYS = (*_NUMBER_KEYS, "has_code", "is_val", "reward_failed", "infra_failed", "reason")
"""Every row's extra info carries exactly these keys (see :func:`flatten_for_verl`)."""


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one response for verl: Cobalt's shaped reward in training, 1/0 in validation.

    Delegates to :func:`cobalt.reward.compute_score` (imported on first call, so
    that loading this module through ``pkg://`` stays cheap) and returns its
    result flattened by :func:`flatten_for_verl`.
    """
    from cobalt.profile import resolve_profile
    from cobalt.reward import compute_score as cobalt_compute_score

    kwargs["profile"] = resolve_profile(kwargs.get("profile"))  # it also picks the default client's profile
    result = await cobalt_compute_score(
        data_source=data_source,
        solution_str=solution_str,
        ground_truth=ground_truth,
        extra_info=dict(extra_info or {}),
        **kwargs,
    )
    return flatten_for_verl(result)


def flatten_for_verl(result: Mapping[str, Any] | float, *, failed: bool = False) -> dict[str, Any]:
    """A reward result as verl's extra info: exactly the keys of :data:`REWARD_INFO_KEYS`.

    verl stacks the extra info of a batch key by key, taking the keys of the
    first row, so every row must carry the same keys whatever branch of the
    reward (or of a failure) it went through. ``score`` is a float; numbers are
    floats or ``None`` when unknown (verl's metrics skip ``None``); flags
    (``has_code``, ``is_val``, ``reward_failed``, ``infra_failed``) are 0/1; ``reason`` is text.
    ``infra_failed`` is 1 when the evaluation could not run (the evaluator or the
    sandbox failed: an infrastructure error, counted by the reward manager).
    ``acc`` is the result's ``acc``, else 1.0/0.0 for a fully/not fully passing
    ``pass_rate``, else the score (a bare number, as verl does). Components may
    also sit under a nested ``components`` mapping. ``reward_failed`` is 1 when
    ``failed`` is given or the result says its evaluation failed (``eval_failed``);
    a failed row's ``acc`` is 0.
    """
    if not isinstance(result, Mapping):
        result = {"score": result}
    if "score" not in result:
        raise KeyError(f"reward result has no 'score' key (keys: {sorted(result)})")
    nested = result.get("components")
    nested = nested if isinstance(nested, Mapping) else {}
    flat: dict[str, Any] = {key: _number_or_none(result.get(key, nested.get(key))) for key in _NUMBER_KEYS}
    flat["score"] = float(result["score"])
    failed = failed or bool(result.get("eval_failed")) or bool(result.get("reward_failed"))  # flattened twice
    acc = 0.0 if failed else flat["acc"]
    if acc is None and flat["pass_rate"] is not None:
        acc = 1.0 if flat["pass_rate"] >= 1.0 else 0.0
    flat["acc"] = flat["score"] if acc is None else acc
    for key in ("has_code", "is_val"):
        flat[key] = _flag(result.get(key))
    flat["reward_failed"] = 1 if failed else 0
    flat["infra_failed"] = 1 if result.get("infra_failed") else 0
    reason = result.get("reason")
    flat["reason"] = reason if isinstance(reason, str) else ""
    return {key: flat[key] for key in REWARD_INFO_KEYS}


@dataclass
class RewardTally:
    """Running totals of the training rows one reward worker scored, for a log line.

    verl 0.9.1 reports the reward components (:data:`COMPONENT_KEYS`) of
    validation rows only; this tally is how a training run shows what its
    rewards were made of and how many responses the evaluator judged. Rows are
    :func:`flatten_for_verl` results; validation rows are not counted.

    >>> tally = RewardTally()
    >>> tally.add({"score": 1.0, "correctness": 1.0, "improvement": 0.0, "format": 0.0, "n_tests": 4.0,
    ...            "has_code": 1, "is_val": 0, "reward_failed": 0})
    >>> tally.add({"score": -1.0, "correctness": None, "improvement": None, "format": None, "n_tests": 4.0,
    ...            "has_code": 0, "is_val": 0, "reward_failed": 0})
    >>> print(tally.line())
    cobalt reward: 2 training responses judged (1 with a program, 4 tests run, 0 failed, 0 not evaluated: infrastructure); means: score 0.000, correctness 1.000, improvement 0.000, format 0.000
    """

    rows: int = 0
    with_code: int = 0
    failed: int = 0
    infra_failed: int = 0
    """Rows whose evaluation could not run (``infra_failed``)."""
    tests: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, extra: Mapping[str, Any]) -> None:
        """Count one scored row (its verl extra info); validation rows are skipped."""
        if extra.get("is_val"):
            return
        self.rows += 1
        has_code = bool(extra.get("has_code"))
        self.with_code += int(has_code)
        self.failed += int(bool(extra.get("reward_failed")))
        self.infra_failed += int(bool(extra.get("infra_failed")))
        if has_code:  # a row without a program still reports its number of tests; none of them ran
            self.tests += int(extra.get("n_tests") or 0)
        for key in ("score", *COMPONENT_KEYS):
            value = extra.get(key)
            if value is not None:
                self.sums[key] = self.sums.get(key, 0.0) + float(value)
                self.counts[key] = self.counts.get(key, 0) + 1

    def line(self) -> str:
        """One log line: the counts, then the mean of the score and of each component (over the rows that have it)."""
        means = ", ".join(
            f"{key} {self.sums[key] / self.counts[key]:.3f}" if self.counts.get(key) else f"{key} n/a"
            for key in ("score", *COMPONENT_KEYS)
        )
        return (f"cobalt reward: {self.rows} training responses judged ({self.with_code} with a program, "
                f"{self.tests} tests run, {self.failed} failed, {self.infra_failed} not evaluated: infrastructure); "
                f"means: {means}")


def _flag(value: Any) -> int | None:
    """A yes/no value as 1/0, ``None`` when absent."""
    return None if value is None else int(bool(value))


def _number_or_none(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is absent, not a number or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)
