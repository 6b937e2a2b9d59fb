"""`cobalt eval`: hidden-test pass rate of every turn and Pass@1 per turn (eval_multi_turn.py).

Reads a rollout's inference records, runs every turn's program on the hidden
tests (each distinct program of a problem once), writes the records again with
``hidden_pass_rate`` on every turn (appended per problem; a rerun resumes),
then prints Pass@1 per turn and its change against turn 0 as a percentage of
turn 0, and saves them as ``<output>.summary.json``.

Profile ``paper``: the program is the one in the turn's history text, as the
original; ``cobalt``: the program of the full response. In both, the
estimator's n is the number of samples drawn for each problem; problems whose
count differs from the rollout's ``samples``, trajectories shorter than the
table and problems without hidden tests are reported (stderr and summary).

Before the first problem the evaluator is checked (bubblewrap, or the Ray
address); a program the evaluator could not run leaves its record out (redone
on the next run, exit status 1), and the run stops through the failure breaker
(:mod:`cobalt.health`). A record whose rollout fed an evaluator failure to the
model is flagged, not scored.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cobalt.cli_support import THINKING_CHOICES, add_alias, positive_float, positive_int
from cobalt.profile import add_profile_argument

SUMMARY_SUFFIX = ".summary.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt eval``."""
    parser.add_argument("--input", required=True, help="inference records of a rollout (JSONL)")
    parser.add_argument("--output", required=True,
                        help="evaluated records (JSONL, hidden_pass_rate on every turn), appended; a rerun resumes")
    parser.add_argument("--thinking", dest="enable_thinking", choices=THINKING_CHOICES, default="auto",
                        help="history cut for the 'paper' program choice: auto takes the record's enable_thinking "
                        "(what the rollout used) (default: auto)")
    add_alias(parser, "--enable-thinking", dest="enable_thinking", choices=THINKING_CHOICES)
    parser.add_argument("--history-max-chars", type=positive_int, default=6000,
                        help="history cut of an assistant turn")
    parser.add_argument("--max-problems", type=positive_int, default=8, help="problems evaluated at once")
    parser.add_argument("--evaluator", choices=("embedded", "ray"), default="embedded",
                        help="embedded sandbox in this process, or the Ray Serve 'evaluator' app")
    parser.add_argument("--ray-address", default=None, help="Ray cluster address for --evaluator ray")
    parser.add_argument("--max-programs", dest="eval_concurrency", type=positive_int, default=None,
                        help="programs in the sandbox at once (default: CPUs embedded, 256 with Ray)")
    add_alias(parser, "--eval-concurrency", dest="eval_concurrency", type=positive_int)
    parser.add_argument("--eval-timeout", type=positive_float, default=None,
                        help="seconds a caller waits for one program (default: 300 under paper, as the original's "
                             "eval_multi_turn.py; 30 under cobalt)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_profile_argument(parser)


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
    import asyncio

    from cobalt.evaluation.hidden import evaluate_record, evaluator_failure
    from cobalt.health import BreakerOpen, FailureBreaker, InfrastructureError
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


def summarize(output: str | Path, *, rollout: str | Path | None = None) -> dict:
    """Pass@1 per turn of an evaluated records file (read back from disk, so resumed runs count whole).

    The same table as ``cobalt report`` and the demo
    (:func:`cobalt.evaluation.passk.load_pass_table`); ``rollout``: the
    evaluated rollout, whose ``<rollout>.config.json`` gives the run's samples.
    """
    from cobalt.evaluation.passk import load_pass_table

    return load_pass_table(output, rollout=rollout).to_dict()


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt eval``."""
    import asyncio

    from cobalt.evaluation.hidden import EvalStats
    from cobalt.evaluation.passk import format_table, load_pass_table
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient
    from cobalt.health import BreakerOpen, PreflightError, preflight
    from cobalt.io import (MAX_SAVED_ERRORS, JsonlAppender, RecordError, count_unique_records, empty_input_warning,
                           resume_guard, save_settings, write_json_atomic)
    from cobalt.profile import profile_from_args

    profile = str(profile_from_args(args))
    if args.eval_timeout is None:
        from cobalt.rollout.turns import caller_wait_s

        args.eval_timeout = caller_wait_s(profile)
    if not Path(args.input).exists():
        print(f"cobalt eval: {args.input}: no such file", file=sys.stderr)
        return 2
    from cobalt.cli_support import require_output_file

    require_output_file(args.output)
    try:
        total = count_unique_records(args.input)
    except RecordError as exc:
        print(f"cobalt eval: {exc}", file=sys.stderr)
        return 1
    if total == 0:
        print(empty_input_warning("cobalt eval", args.input), file=sys.stderr)
        return 1
    settings, refused = resume_guard(args, [args.input], profile=profile)
    if refused:
        print(f"cobalt eval: {refused}", file=sys.stderr)
        return 2
    thinking = {"auto": None, "on": True, "off": False}[args.enable_thinking]
    try:
        preflight(evaluator=args.evaluator, ray_address=args.ray_address)
    except PreflightError as exc:
        print(f"cobalt eval: {exc}", file=sys.stderr)
        return 1
    client = EvaluatorClient(mode=args.evaluator, ray_address=args.ray_address, timeout_s=args.eval_timeout,
                             max_concurrency=args.eval_concurrency, options=ExecOptions(profile=profile))
    stats = EvalStats()
    output = Path(args.output)
    save_settings(output, "cobalt eval", settings)
    with JsonlAppender(output) as out:
        from cobalt.cli_support import progress, resumed_line

        if out.done:
            print(f"eval: {resumed_line(len(out.done), total, 'problems')}", file=sys.stderr)
        bar = progress(total, "eval", "problems", enabled=not args.no_progress)
        try:
            errors = asyncio.run(evaluate_file(args.input, out.write, client, profile=profile,
                                               enable_thinking=thinking, history_max_chars=args.history_max_chars,
                                               max_problems=max(1, args.max_problems),
                                               done={str(d) for d in out.done}, stats=stats, progress=bar))
        except RecordError as exc:
            print(f"cobalt eval: {exc}", file=sys.stderr)
            return 1
        except BreakerOpen as exc:
            print(f"cobalt eval: {exc}", file=sys.stderr)
            return 1
        finally:
            bar.close()
    try:
        table = load_pass_table(output, rollout=args.input)
    except RecordError as exc:
        print(f"cobalt eval: {exc}", file=sys.stderr)
        return 1
    summary = table.to_dict()
    summary["input"] = str(args.input)
    summary["stats"] = dict(vars(stats))
    summary["errors"] = errors[:MAX_SAVED_ERRORS]
    write_json_atomic(output.with_name(output.name + SUMMARY_SUFFIX), summary)
    for note in table.notes():
        print(f"cobalt eval: note: {note}", file=sys.stderr)
    print(format_table([(output.stem, table)]))
    print(f"{stats.distinct_programs} distinct programs, {stats.no_code} turns without a program", file=sys.stderr)
    from cobalt.cli_support import capped

    for err in capped(errors):
        print(f"cobalt eval: skipped: {err}", file=sys.stderr)
    return 1 if errors else 0
