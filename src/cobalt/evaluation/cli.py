"""`cobalt eval`: hidden-test pass rate of every turn and Pass@1 per turn (eval_multi_turn.py).

Reads a rollout's inference records, runs every turn's program on the hidden
tests (each distinct program of a problem once), writes the records again with
``hidden_pass_rate`` on every turn (appended per problem; a rerun resumes),
then prints Pass@1 per turn and its change against turn 0 as a percentage of
turn 0, and saves them as ``<output>.summary.json``.

Profile ``paper``: the program is the one in the turn's history text and the
estimator's n is fixed at 16, as the original; ``cobalt``: the program of the
full response and each problem's own number of samples.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cobalt.defaults import COMMAND_EVAL_TIMEOUT_S, HISTORY_MAX_CHARS
from cobalt.profile import add_profile_argument

SUMMARY_SUFFIX = ".summary.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt eval``."""
    parser.add_argument("--input", required=True, help="inference records of a rollout (JSONL)")
    parser.add_argument("--output", required=True,
                        help="evaluated records (JSONL, hidden_pass_rate on every turn), appended; a rerun resumes")
    parser.add_argument("--enable-thinking", choices=("auto", "on", "off"), default="auto",
                        help="history cut for the 'paper' program choice: auto takes the record's enable_thinking "
                        "(what the rollout used)")
    parser.add_argument("--history-max-chars", type=int, default=HISTORY_MAX_CHARS, help="history cut of an assistant turn")
    parser.add_argument("--pass-n", type=int, default=None,
                        help="n of the pass@1 estimator (default: 16 under --profile paper, as the original; "
                        "each problem's own sample count under cobalt)")
    parser.add_argument("--max-problems", type=int, default=8, help="problems evaluated at once")
    parser.add_argument("--evaluator", choices=("embedded", "ray"), default="embedded",
                        help="embedded sandbox in this process, or the Ray Serve 'evaluator' app")
    parser.add_argument("--ray-address", default=None, help="Ray cluster address for --evaluator ray")
    parser.add_argument("--eval-concurrency", type=int, default=None, help="programs in the sandbox at once")
    parser.add_argument("--eval-timeout", type=float, default=COMMAND_EVAL_TIMEOUT_S, help="seconds a caller waits for one program")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_profile_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt eval``."""
    import asyncio

    from cobalt.evaluation.hidden import EvalStats, evaluate_file
    from cobalt.evaluation.passk import PassTable, format_table, summarize
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient
    from cobalt.io import MAX_SAVED_ERRORS, JsonlAppender, RecordError, write_json_atomic
    from cobalt.profile import profile_from_args

    profile = str(profile_from_args(args))
    if not Path(args.input).exists():
        print(f"cobalt eval: {args.input}: no such file", file=sys.stderr)
        return 2
    if args.pass_n is not None and args.pass_n < 1:
        print("cobalt eval: --pass-n must be at least 1", file=sys.stderr)
        return 2
    thinking = {"auto": None, "on": True, "off": False}[args.enable_thinking]
    client = EvaluatorClient(mode=args.evaluator, ray_address=args.ray_address, timeout_s=args.eval_timeout,
                             max_concurrency=args.eval_concurrency, options=ExecOptions(profile=profile))
    stats = EvalStats()
    output = Path(args.output)
    with JsonlAppender(output) as out:
        bar = None
        if not args.no_progress:
            from tqdm import tqdm

            total = sum(1 for line in open(args.input, "rb") if line.strip())
            bar = tqdm(total=total, unit="problem", desc="eval", file=sys.stderr, dynamic_ncols=True)
        try:
            errors = asyncio.run(evaluate_file(args.input, out.write, client, profile=profile,
                                               enable_thinking=thinking, history_max_chars=args.history_max_chars,
                                               max_problems=max(1, args.max_problems),
                                               done={str(d) for d in out.done}, stats=stats, progress=bar))
        except RecordError as exc:
            print(f"cobalt eval: {exc}", file=sys.stderr)
            return 1
        finally:
            if bar is not None:
                bar.close()
    summary = summarize(output, profile=profile, pass_n=args.pass_n)
    summary["input"] = str(args.input)
    summary["stats"] = dict(vars(stats))
    summary["errors"] = errors[:MAX_SAVED_ERRORS]
    write_json_atomic(output.with_name(output.name + SUMMARY_SUFFIX), summary)
    table = PassTable(turns=summary["turns"], problems=summary["problems"], n=summary["n"],
                      pass_at_1=summary["pass_at_1"])
    print(format_table([(output.stem, table)]))
    print(f"{summary['problems']} problems, n = {summary['n'] or 'per problem'} ({profile}); "
          f"{stats.distinct_programs} distinct programs, {stats.no_code} turns without a program", file=sys.stderr)
    if "note" in summary:
        print(f"note: {summary['note']}", file=sys.stderr)
    for err in errors[:10]:
        print(f"cobalt eval: skipped: {err}", file=sys.stderr)
    return 1 if errors else 0
