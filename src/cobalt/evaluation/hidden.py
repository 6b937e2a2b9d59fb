"""Every turn of every trajectory on the hidden tests (METHOD §6, §9).

Which program a turn stands for depends on the profile:

- ``paper``: the program found in the turn's HISTORY text, as the original did
  (after the thinking cut and the 6,000-character cut when thinking is on), so
  a program cut away by the history limit scores 0;
- ``cobalt``: the program of the full response (the one that was executed on the
  public tests during the rollout).

Each distinct program of a problem runs once; no program or a timed-out call
scores 0. A call that the evaluator could not run (an infrastructure error:
the sandbox or the service failed) is never a score: the record is left out
(raising :class:`~cobalt.health.InfrastructureError`) and redone on the next
run. A record whose rollout fed an evaluator failure to the model (an output
of an older version) is flagged by :func:`evaluator_failure`, not scored. The hidden pass rate of each turn is written into the record
(``hidden_pass_rate``), so that the output feeds ``cobalt build-prompts``.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Mapping

from cobalt.data.problems import ProblemRecord, problem_from_dict
from cobalt.health import FailureBreaker, InfrastructureError
from cobalt.rollout.loop import extract_program
from cobalt.rollout.turns import EVALUATOR_ERROR_FEEDBACK

EVALUATOR_FAILURE_PREFIXES = (
    EVALUATOR_ERROR_FEEDBACK.split("{")[0],
    "evaluator call failed:",
    "evaluation failed:",
    "sandbox error:",
    "could not judge the program:",
)
"""Starts of the public feedback texts that an evaluator failure left in a turn (never a verdict on a program)."""
from cobalt.text import HISTORY_MAX_CHARS, history_text


@dataclass
class EvalStats:
    """Counters of one evaluation run."""

    problems: int = 0
    problems_resumed: int = 0
    problems_failed: int = 0
    turns: int = 0
    distinct_programs: int = 0
    programs_run: int = 0
    no_code: int = 0
    evaluator_errors: int = 0


def turn_program(turn: Mapping[str, Any], *, profile: str, enable_thinking: bool,
                 history_max_chars: int = HISTORY_MAX_CHARS) -> str | None:
    """The program that the hidden evaluation runs for one turn (see the module docstring)."""
    response = turn["response"]
    if str(profile) == "paper":
        shown = history_text(response, enable_thinking=enable_thinking, max_chars=history_max_chars)
        return extract_program(shown, profile)
    if "code" in turn:
        return turn["code"]
    return extract_program(response, profile)


def evaluator_failure(record: Mapping[str, Any]) -> str | None:
    """Where a record's public feedback holds an evaluator-failure text instead of a verdict, else None.

    Such a record comes from a rollout that fed an infrastructure failure to the
    model as repair feedback; its later turns answer that text, so it cannot
    be scored: rerun its rollout.

    >>> turn = {"public": {"passing": [False], "feedback": ["evaluator call failed: ConnectionError"]}}
    >>> evaluator_failure({"samples": [{"turns": [turn]}]})
    'samples[0].turns[0]: evaluator call failed: ConnectionError'
    """
    for i, sample in enumerate(record.get("samples") or []):
        if not isinstance(sample, Mapping):
            continue
        for j, turn in enumerate(sample.get("turns") or []):
            public = turn.get("public") if isinstance(turn, Mapping) else None
            if not isinstance(public, Mapping):
                continue
            for text in public.get("feedback") or []:
                if isinstance(text, str) and text.lstrip().startswith(EVALUATOR_FAILURE_PREFIXES):
                    return f"samples[{i}].turns[{j}]: {' '.join(text.split())[:200]}"
    return None


async def evaluate_record(record: Mapping[str, Any], client: Any, *, profile: str = "paper",
                          enable_thinking: bool | None = None, history_max_chars: int = HISTORY_MAX_CHARS,
                          stats: EvalStats | None = None, path: str = "<records>", line: int | None = None,
                          on_turn: Any = None, breaker: FailureBreaker | None = None) -> dict:
    """A copy of ``record`` with ``hidden_pass_rate`` set on every turn.

    ``enable_thinking`` None: the record's own ``enable_thinking`` field (what the
    rollout used), else False. A problem without hidden tests gets ``None`` rates.
    A program the evaluator could not run raises :class:`~cobalt.health.InfrastructureError`;
    ``breaker`` counts every evaluator call.
    """
    stats = stats if stats is not None else EvalStats()
    problem: ProblemRecord = problem_from_dict(record, path=path, line=line)
    thinking = bool(record.get("enable_thinking", False)) if enable_thinking is None else bool(enable_thinking)
    samples = record.get("samples")
    if not isinstance(samples, list) or not samples:
        from cobalt.io import RecordError

        raise RecordError(path, line, "samples", "expected a non-empty list")
    programs: list[list[str | None]] = []
    for i, sample in enumerate(samples):
        row = []
        for j, turn in enumerate(sample.get("turns") or []):
            if not isinstance(turn, Mapping) or not isinstance(turn.get("response"), str):
                from cobalt.io import RecordError

                raise RecordError(path, line, f"samples[{i}].turns[{j}].response", "expected a string")
            row.append(turn_program(turn, profile=profile, enable_thinking=thinking,
                                    history_max_chars=history_max_chars))
        programs.append(row)
    distinct = sorted({p for row in programs for p in row if p is not None})
    stats.distinct_programs += len(distinct)
    rates: dict[str, float | None] = {}
    if len(problem.hidden) == 0:
        rates = {p: None for p in distinct}
    else:
        async def judge(program: str) -> None:
            if breaker is not None:
                breaker.check()
            try:
                result = await client.evaluate(program, problem.hidden)
            except Exception as exc:  # the machine could not run it: an infrastructure error, never a 0
                stats.evaluator_errors += 1
                if breaker is not None:
                    breaker.failure(exc)
                raise InfrastructureError(f"problem {problem.id}: the evaluator could not run a program: "
                                          f"{type(exc).__name__}: {exc}") from None
            if result.infrastructure_error:
                stats.evaluator_errors += 1
                if breaker is not None:
                    breaker.failure(result.error)
                raise InfrastructureError(f"problem {problem.id}: the evaluator could not judge a program: "
                                          f"{result.error or 'sandbox error'}")
            if breaker is not None:
                breaker.success()
            rates[program] = result.pass_rate
            stats.programs_run += 1
            if on_turn is not None:
                on_turn()

        await asyncio.gather(*(judge(p) for p in distinct))
    out = dict(record)
    new_samples = []
    for sample, row in zip(samples, programs):
        turns = []
        for turn, program in zip(sample["turns"], row):
            turn = dict(turn)
            stats.turns += 1
            if program is None:
                stats.no_code += 1
                turn["hidden_pass_rate"] = None if len(problem.hidden) == 0 else 0.0
            else:
                turn["hidden_pass_rate"] = rates[program]
            turn["hidden_program_found"] = program is not None
            turns.append(turn)
        new_samples.append({**sample, "turns": turns})
    out["samples"] = new_samples
    out["hidden_eval"] = {"profile": str(profile), "enable_thinking": thinking,
                          "program_from": "history" if str(profile) == "paper" else "response"}
    return out
