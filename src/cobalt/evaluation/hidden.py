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
from pathlib import Path
from typing import Any, Mapping

from cobalt.data.problems import ProblemRecord, problem_from_dict
from cobalt.data.records import evaluator_failure, read_turns, with_hidden_rates  # noqa: F401  (public name)
from cobalt.defaults import HISTORY_MAX_CHARS
from cobalt.health import FailureBreaker, InfrastructureError
from cobalt.text import extract_code, history_text



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
        return extract_code(shown, profile)
    if "code" in turn:
        return turn["code"]
    return extract_code(response, profile)


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
    turns = read_turns(record, path=path, line=line)
    programs = [[turn_program(turn, profile=profile, enable_thinking=thinking, history_max_chars=history_max_chars)
                 for turn in sample] for sample in turns]
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
    no_hidden = len(problem.hidden) == 0
    found = [[program is not None for program in row] for row in programs]
    stats.turns += sum(len(row) for row in programs)
    stats.no_code += sum(not ok for row in found for ok in row)
    hidden = [[rates[p] if p is not None else (None if no_hidden else 0.0) for p in row] for row in programs]
    return with_hidden_rates(record, hidden, found, {
        "profile": str(profile), "enable_thinking": thinking,
        "program_from": "history" if str(profile) == "paper" else "response"})


async def evaluate_file(input_path: str | Path, write, client, *, profile: str, enable_thinking: bool | None,
                        history_max_chars: int, max_problems: int, done: set, stats, progress=None,
                        breaker=None) -> list[str]:
    """Evaluate every record of ``input_path`` not in ``done``; ``write`` each as it finishes.

    Returns the error messages of records that could not be evaluated (left out of the output):
    bad records, records whose evaluation met an infrastructure error, and records flagged by
    :func:`cobalt.evaluation.hidden.evaluator_failure`. ``breaker`` (a
    :class:`cobalt.health.FailureBreaker`) counts the evaluator calls; once it opens, the
    remaining records are not started and :class:`cobalt.health.BreakerOpen` is raised.
    """
    from cobalt.health import BreakerOpen
    from cobalt.io import RecordError, iter_jsonl

    breaker = breaker if breaker is not None else FailureBreaker("evaluator")

    errors: list[str] = []
    slots = asyncio.Semaphore(max_problems)
    tasks = []

    async def one(line: int, record) -> None:
        try:
            flagged = evaluator_failure(record) if isinstance(record, dict) else None
            if flagged is not None:
                stats.problems_failed += 1
                errors.append(f"{input_path}:{line}: problem {record.get('id')}: not scored: its rollout fed an "
                              f"evaluator failure to the model ({flagged}); rerun its rollout")
                return
            out = await evaluate_record(record, client, profile=profile, enable_thinking=enable_thinking,
                                        history_max_chars=history_max_chars, stats=stats, path=str(input_path),
                                        line=line, breaker=breaker)
            write(out)
        except BreakerOpen:
            stats.problems_failed += 1
        except InfrastructureError as exc:
            stats.problems_failed += 1
            errors.append(f"{input_path}:{line}: {exc}; rerun the same command to retry it")
        except (RecordError, KeyError, TypeError, ValueError) as exc:
            stats.problems_failed += 1
            errors.append(str(exc) if isinstance(exc, RecordError) else f"{input_path}:{line}: {exc!r}")
        finally:
            slots.release()
            if progress is not None:
                progress.update(1)

    for line, record in iter_jsonl(input_path):
        stats.problems += 1
        rid = record.get("id") if isinstance(record, dict) else None
        if rid is not None and str(rid) in done:
            stats.problems_resumed += 1
            if progress is not None:
                progress.update(1)
            continue
        await slots.acquire()
        if breaker.tripped is not None:
            slots.release()
            break
        tasks.append(asyncio.create_task(one(line, record)))
    if tasks:
        await asyncio.gather(*tasks)
    breaker.check()
    return errors
