"""Async scoring of one response for training: extract, execute, shape.

:func:`compute_score` has the signature that veRL's reward loop awaits
(``data_source, solution_str, ground_truth, extra_info``). It takes the last
fenced block of the response (:func:`cobalt.text.extract_code`), runs it on the
row's tests through :class:`~cobalt.execution.client.EvaluatorClient` and
returns the shaped reward with its parts as a dict whose ``score`` key veRL
reads (every other key becomes a logged column; the key set and each value's
type are the same for every row, as veRL stacks rows by the first row's keys).

Two kinds of trouble, kept apart (METHOD §9, docs/REWARD.md "Failures"):

- the *evaluation* fails or times out (the evaluator returns an error, raises,
  or does not answer in time): the row is scored like any other, with the
  pass rate the evaluation gives: 0 in ``paper`` (the original replaces the
  result by one failing test); in ``cobalt`` the verdicts that did come back
  count, the missing ones fail. Shaping then runs as usual, so in training
  the row gets -0.1 plus the format term, not -1, and 0 in validation.
  ``eval_failed`` and ``reason`` say what happened; ``infra_failed`` is set
  when the evaluation could not run at all (the evaluator raised, or the
  sandbox or service reported an infrastructure error; a timeout is not one).
  Such rows keep the original's score, but the reward manager counts them
  and stops the run when they pass a share of a step's rows (docs/REWARD.md).
- the *reward function itself* cannot score the row (malformed ground truth,
  a response that is not text, a bad ``prev_best_pass_rate``, an unexpected
  exception): ``-1``; in ``paper`` also in validation (the original's reward
  manager turns any exception into -1), in ``cobalt`` ``0`` in validation, so
  that a broken row cannot pull the reported accuracy below zero.

Nothing in one row raises into the batch.

The client is built on first use (``EvaluatorClient.from_env(profile=...)``, i.e.
``COBALT_EVALUATOR`` etc. and the row's profile, so that the executor judges
with the profile that shapes the reward) and cached in this module; a caller or test may pass
its own with ``client=...``. The bound on rows in flight (``COBALT_REWARD_CONCURRENCY``,
default 64 as in the paper) is a semaphore made inside the running event loop.
The profile comes from the ``profile=`` keyword (default ``paper``).
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Mapping

from cobalt.defaults import PAPER_EVALUATOR_WAIT_S
from cobalt.defaults import REWARD_CLIENT_GRACE_S as CLIENT_GRACE_S
from cobalt.reward.shaped import RewardBreakdown, shaped_reward_breakdown
from cobalt.profile import Profile, resolve_profile
from cobalt.reward.tokens import TokenCounter
from cobalt.text import extract_code

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 64
CONCURRENCY_ENV = "COBALT_REWARD_CONCURRENCY"
VAL_SPLITS = frozenset({"val", "valid", "validation", "test"})
FAILED_TRAIN_REWARD = -1.0
"""Score of a row that the reward function itself could not score (training, both profiles)."""
FAILED_VAL_REWARD = {"paper": -1.0, "cobalt": 0.0}
"""The same in validation, per profile: the original's -1, or Cobalt's 0 (a failed pass)."""

_state: dict[str, Any] = {"client": None, "sem": None, "loop": None}


def default_client(profile: "str | Profile | None" = None):
    """This process's evaluator client, running the executor with ``profile`` (else
    ``$COBALT_PROFILE``, else paper); made from the environment on first use and again
    when another profile is asked for."""
    name = resolve_profile(profile).value
    client = _state["client"]
    if client is None or client.options.profile != name:
        from cobalt.execution.client import EvaluatorClient

        _state["client"] = client = EvaluatorClient.from_env(profile=name)
    return client


_default_client = default_client


def _semaphore() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if _state["sem"] is None or _state["loop"] is not loop:
        limit = int(os.environ.get(CONCURRENCY_ENV) or DEFAULT_CONCURRENCY)
        _state["sem"] = asyncio.Semaphore(max(limit, 1))
        _state["loop"] = loop
    return _state["sem"]


def is_validation_row(extra_info: Mapping[str, Any] | None) -> bool:
    """Whether a row is scored as validation (1 or 0): ``extra_info["is_val"]`` when
    present, else ``extra_info["split"]`` in {val, valid, validation, test}.

    >>> is_validation_row({"is_val": True}), is_validation_row({"split": "test"}), is_validation_row(None)
    (True, True, False)
    >>> is_validation_row({"is_val": False, "split": "test"})
    False
    """
    if not isinstance(extra_info, Mapping):
        return False
    if extra_info.get("is_val") is not None:
        return bool(extra_info["is_val"])
    split = extra_info.get("split")
    return isinstance(split, str) and split.lower() in VAL_SPLITS


def _prev_best(extra_info: Mapping[str, Any] | None) -> float:
    value = extra_info.get("prev_best_pass_rate") if isinstance(extra_info, Mapping) else None
    if value is None:
        return 0.0
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"extra_info.prev_best_pass_rate must be in [0, 1], got {value!r}")
    return value


def _result(
    breakdown: RewardBreakdown,
    *,
    has_code: bool,
    n_tests: int,
    failed: bool = False,
    reason: str = "",
    infra_failed: bool = False,
) -> dict[str, Any]:
    out = breakdown.to_dict()
    out["format_violation"] = breakdown.format_violation or ""
    for key in ("think_tokens", "answer_tokens", "explanation_tokens"):
        out[key] = -1 if out[key] is None else out[key]
    out["pass_rate"] = 0.0 if breakdown.pass_rate is None else breakdown.pass_rate
    out["acc"] = 1.0 if breakdown.pass_rate == 1.0 else 0.0
    out["has_code"] = has_code
    out["n_tests"] = n_tests
    out["eval_failed"] = failed
    out["infra_failed"] = infra_failed
    out["reason"] = reason or out["format_violation"]
    return out


def failure_score(is_val: bool, profile: str | Profile = "paper") -> float:
    """The score of a row that the reward function itself could not score.

    >>> failure_score(False), failure_score(True), failure_score(True, "cobalt")
    (-1.0, -1.0, 0.0)
    """
    return FAILED_VAL_REWARD[resolve_profile(profile).value] if is_val else FAILED_TRAIN_REWARD


def evaluated_pass_rate(result: Any, n_tests: int, profile: str | Profile = "paper") -> float:
    """The pass rate that a (possibly failed) evaluation of ``n_tests`` tests counts as.

    A result without an error and with one verdict per test: the fraction
    passed. A failed one (``result.error`` set, or a verdict count that differs
    from ``n_tests``, or ``None`` when the evaluation raised or timed out): 0 in
    ``paper``; in ``cobalt`` the verdicts that came back, the missing ones failing.
    """
    if result is None or n_tests <= 0:
        return 0.0
    passing = tuple(result.passing)
    if result.error is None and len(passing) == n_tests:
        return sum(map(bool, passing)) / n_tests
    if resolve_profile(profile) is Profile.PAPER:
        return 0.0
    return sum(map(bool, passing[:n_tests])) / n_tests


def evaluator_wait_s(client: Any, profile: str | Profile = "paper") -> float:
    """How long the reward waits for one evaluation: the original's 30 s in ``paper``;
    the client's own timeout plus a grace in ``cobalt``.

    >>> class C: timeout_s = 300.0
    >>> evaluator_wait_s(C()), evaluator_wait_s(C(), "cobalt")
    (30.0, 305.0)
    """
    client_s = float(getattr(client, "timeout_s", PAPER_EVALUATOR_WAIT_S))  # a broken client fails in both
    if resolve_profile(profile) is Profile.PAPER:
        return PAPER_EVALUATOR_WAIT_S
    return client_s + CLIENT_GRACE_S


def _failure(
    reason: str, *, is_val: bool, prev_best: float, has_code: bool, n_tests: int, where: str,
    profile: str | Profile,
) -> dict:
    log.warning("reward: %s scores as failed: %s", where, reason)
    score = failure_score(is_val, profile)
    breakdown = RewardBreakdown(score, score, 0.0, 0.0, None, prev_best, is_val)
    return _result(breakdown, has_code=has_code, n_tests=n_tests, failed=True, reason=reason)


async def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one response: run its last code block on ``ground_truth`` and shape the reward.

    ``ground_truth`` is the row's test cases (JSON ``{"inputs", "outputs", "fn_name"?}``
    or the mapping itself). From ``extra_info``: ``prev_best_pass_rate`` (default 0)
    and the validation flag (:func:`is_validation_row`). Keyword ``client=`` gives the
    :class:`EvaluatorClient` to use, ``token_counter=`` the tokenizer for the length
    terms; other keywords (veRL passes some) are ignored. Never raises.

    Returns a dict with ``score`` and, for logging, ``pass_rate``, ``acc``,
    ``correctness``, ``improvement``, ``format`` and the details listed in
    docs/REWARD.md. ``profile=`` (``paper`` by default) decides how failures
    score (see the module docstring).
    """
    try:
        profile = resolve_profile(kwargs.get("profile") or "paper")
    except ValueError as exc:
        profile = Profile.PAPER
        log.warning("reward: %s; scoring with the paper profile", exc)
    kwargs = {**kwargs, "profile": profile}
    is_val = is_validation_row(extra_info)
    index = extra_info.get("index") if isinstance(extra_info, Mapping) else None
    where = f"row {index!r} of {data_source!r}" if index is not None else f"a row of {data_source!r}"
    try:
        prev_best = _prev_best(extra_info)
    except (TypeError, ValueError) as exc:
        return _failure(f"bad extra_info: {exc}", is_val=is_val, prev_best=0.0, has_code=False, n_tests=0,
                        where=where, profile=profile)
    async with _semaphore():
        try:
            return await _score(solution_str, ground_truth, is_val, prev_best, where, kwargs)
        except Exception as exc:  # noqa: BLE001 - one row must never fail the batch
            return _failure(
                f"unexpected {type(exc).__name__}: {exc}",
                is_val=is_val, prev_best=prev_best, has_code=False, n_tests=0, where=where, profile=profile,
            )


async def _score(
    response: Any, ground_truth: Any, is_val: bool, prev_best: float, where: str, kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    from cobalt.execution.base import TestCaseError, TestCases

    profile = kwargs["profile"]

    def failed(reason: str, has_code: bool = False, n_tests: int = 0) -> dict:
        return _failure(reason, is_val=is_val, prev_best=prev_best, has_code=has_code, n_tests=n_tests,
                        where=where, profile=profile)

    if not isinstance(response, str):
        return failed(f"response is {type(response).__name__}, not str")
    try:
        tests = TestCases.from_obj(ground_truth, where="ground_truth")
        problem = "" if len(tests) else "malformed ground truth: no test cases"
    except TestCaseError as exc:
        tests, problem = None, f"malformed ground truth: {exc}"
    counter: TokenCounter | None = kwargs.get("token_counter")
    code = extract_code(response, profile)
    if code is None:  # checked before the tests are used, as the original does
        breakdown = shaped_reward_breakdown(response, None, prev_best, is_val=is_val)
        return _result(breakdown, has_code=False, n_tests=len(tests or ()), reason="no code block")
    if problem:
        return failed(problem)
    client = kwargs.get("client") or default_client(profile)
    wait_s = evaluator_wait_s(client, profile)
    result = None
    infra = False
    try:
        result = await asyncio.wait_for(client.evaluate(code, tests), timeout=wait_s)
        infra = result.infrastructure_error
    except asyncio.TimeoutError:
        problem = f"evaluation did not return within {wait_s:g} s"
    except Exception as exc:  # noqa: BLE001 - the evaluator's trouble is scored, not raised
        problem = f"evaluation raised {type(exc).__name__}: {exc}"
        infra = True
    if result is not None and (result.error is not None or len(result.passing) != len(tests)):
        problem = result.error or f"{len(result.passing)} verdicts for {len(tests)} tests"
    pass_rate = evaluated_pass_rate(result, len(tests), profile)
    if problem:
        log.warning("reward: %s: evaluation failed (%s); scored with pass rate %g", where, problem, pass_rate)
    # Token counting and the repetition scan take milliseconds: keep them off the event loop.
    breakdown = await asyncio.to_thread(
        shaped_reward_breakdown, response, pass_rate, prev_best, is_val=is_val, token_counter=counter,
        profile=profile.value,
    )
    reason = f"evaluation failed: {problem}" if problem else ""
    return _result(breakdown, has_code=True, n_tests=len(tests), failed=bool(problem), reason=reason,
                   infra_failed=infra)


def reset_client() -> None:
    """Forget the cached client (e.g. after changing ``COBALT_EVALUATOR``)."""
    _state["client"] = None
