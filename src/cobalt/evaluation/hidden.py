"""Every turn of every trajectory on the hidden tests (METHOD §6, §9).

Which program a turn stands for depends on the profile:

- ``paper``: the program found in the turn's HISTORY text, as the original did
  (after the thinking cut and the 6,000-character cut when thinking is on), so
  a program cut away by the history limit scores 0;
- ``cobalt``: the program of the full response (the one that was executed on the
  public tests during the rollout).

Each distinct program of a problem runs once; no program or a failed/timed-out
call scores 0. The hidden pass rate of each turn is written into the record
(``hidden_pass_rate``), so that the output feeds ``cobalt build-prompts``.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cobalt.data.problems import ProblemRecord, problem_from_dict
from cobalt.data.records import read_turns, with_hidden_rates
from cobalt.defaults import HISTORY_MAX_CHARS
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
                          on_turn: Any = None) -> dict:
    """A copy of ``record`` with ``hidden_pass_rate`` set on every turn.

    ``enable_thinking`` None: the record's own ``enable_thinking`` field (what the
    rollout used), else False. A problem without hidden tests gets ``None`` rates.
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
            try:
                result = await client.evaluate(program, problem.hidden)
            except Exception:  # the client never raises for a program; a crash here scores 0
                stats.evaluator_errors += 1
                rates[program] = 0.0
                return
            if result.error is not None:
                stats.evaluator_errors += 1
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
                        history_max_chars: int, max_problems: int, done: set, stats, progress=None) -> list[str]:
    """Evaluate every record of ``input_path`` not in ``done``; ``write`` each as it finishes.

    Returns the error messages of records that could not be evaluated (left out of the output).
    """
    from cobalt.io import RecordError, iter_jsonl

    errors: list[str] = []
    slots = asyncio.Semaphore(max_problems)
    tasks = []

    async def one(line: int, record) -> None:
        try:
            out = await evaluate_record(record, client, profile=profile, enable_thinking=enable_thinking,
                                        history_max_chars=history_max_chars, stats=stats, path=str(input_path),
                                        line=line)
            write(out)
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
        tasks.append(asyncio.create_task(one(line, record)))
    if tasks:
        await asyncio.gather(*tasks)
    return errors
