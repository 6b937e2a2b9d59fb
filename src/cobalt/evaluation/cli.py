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
from cobalt.defaults import HISTORY_MAX_CHARS
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
    parser.add_argument("--history-max-chars", type=positive_int, default=HISTORY_MAX_CHARS,
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


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt eval``."""
    import asyncio

    from cobalt.evaluation.hidden import EvalStats, evaluate_file
    from cobalt.evaluation.passk import format_table, load_pass_table
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient
    from cobalt.health import BreakerOpen, PreflightError, preflight
    from cobalt.io import (MAX_SAVED_ERRORS, JsonlAppender, RecordError, count_unique_records, empty_input_warning,
                           resume_guard, save_settings, write_json_atomic)
    from cobalt.profile import profile_from_args

    profile = str(profile_from_args(args))
    if args.eval_timeout is None:
        from cobalt.defaults import caller_wait_s

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
