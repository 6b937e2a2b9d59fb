"""End-to-end demo: judge real programs in the sandbox and score real model answers.

Uses the LeetCode slice shipped in the package (``cobalt/fixtures``): the
reference solutions (call-based, and as stdin programs with a driver), the real
model answers of the data set, a few hostile programs, and the shaped training
reward of each model answer. Prints a summary table; writes every result to
``--output`` (JSONL) when given.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

SAMPLE = Path(__file__).with_name("fixtures") / "leetcode_sample.jsonl.gz"

HOSTILE = {
    "infinite loop": "while True:\n    pass\n",
    "memory bomb": "x = [0] * (10 ** 10)\n",
    "fork bomb": "import os\nwhile True:\n    os.fork()\n",
    "read hidden tests": "print(open('/work/shared/data/README.md').read())\n",
    "network": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n",
    "huge output": "while True:\n    print('x' * 10000)\n",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt demo``."""
    parser.add_argument("--problems", type=Path, default=SAMPLE,
                        help="LeetCodeDataset-format JSONL(.gz) file (default: the 24-problem slice shipped with cobalt)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N problems")
    parser.add_argument("--workers", type=int, default=None, help="programs judged at once (default: CPUs)")
    parser.add_argument("--output", type=Path, default=None, help="write every result here as JSONL")
    parser.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap (trusted code only)")


def run(args: argparse.Namespace) -> int:
    """Run the demo and print the summary table."""
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    from cobalt.data.leetcode import load_leetcode
    from cobalt.execution.base import ExecOptions, TestCases
    from cobalt.execution.client import EvaluatorClient
    from cobalt.execution.sandbox import SandboxUnavailable
    from cobalt.text import extract_code

    problems = load_leetcode(args.problems)[: args.limit]
    profile = getattr(args, "profile", None)  # the command's --profile, where it has one
    client = EvaluatorClient.embedded(
        max_concurrency=args.workers, options=ExecOptions(allow_packages=True), sandbox="none" if args.no_sandbox else "bwrap"
    )
    variants: dict[str, list] = {
        "reference, call-based": [(p.reference, p.call_tests()) for p in problems],
        "reference, stdin + driver": [(p.stdin_program(), p.stdin_tests()) for p in problems],
        "model answer, stdin + driver": [
            (p.stdin_program(extract_code(p.model_response, profile) or ""), p.stdin_tests()) for p in problems
        ],
        "hostile programs": [(code, TestCases(("1\n",), ("1",))) for code in HOSTILE.values()],
    }
    print(f"cobalt demo: {len(problems)} LeetCode problems from {args.problems}", file=sys.stderr)
    rows, all_results = [], {}
    for name, jobs in variants.items():
        start = time.perf_counter()
        try:
            results = await client.evaluate_many(jobs)
        except SandboxUnavailable as exc:
            print(f"cobalt demo: {exc}", file=sys.stderr)
            return 2
        elapsed = time.perf_counter() - start
        n_tests = sum(len(r.passing) for r in results)
        rows.append((name, len(results), n_tests, sum(r.all_passed for r in results),
                     sum(r.pass_rate for r in results) / max(len(results), 1), n_tests / elapsed, elapsed))
        all_results[name] = results
    _print_table(rows)
    hostile = all_results["hostile programs"]
    print("\nhostile programs (all must fail):")
    for (label, _), res in zip(HOSTILE.items(), hostile):
        print(f"  {label:<20} {res.status[0]:<14} {'FAILED as it must' if not res.all_passed else 'PASSED (!)'}")
    rewards = _model_rewards(problems, all_results["model answer, stdin + driver"], profile)
    if rewards:
        print(f"\nshaped training reward of the {len(rewards)} model answers: mean {sum(rewards) / len(rewards):+.3f}, "
              f"min {min(rewards):+.3f}, max {max(rewards):+.3f} (no </think>: the format penalty applies)")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            for name, results in all_results.items():
                for i, r in enumerate(results):
                    fh.write(json.dumps({"variant": name, "index": i, **r.to_dict()}) + "\n")
        print(f"results written to {args.output}", file=sys.stderr)
    ok = all(not r.all_passed for r in hostile) and rows[0][3] == rows[0][1]
    return 0 if ok else 1


def _model_rewards(problems, results, profile=None) -> list[float]:
    try:
        from cobalt.reward import shaped_reward
    except ImportError:
        return []
    from cobalt.text import extract_code

    out = []
    for p, r in zip(problems, results):
        has_code = extract_code(p.model_response, profile) is not None
        out.append(shaped_reward(p.model_response, r.pass_rate if has_code else None, 0.0))
    return out


def _print_table(rows) -> None:
    header = ("variant", "programs", "tests", "all pass", "mean pass rate", "tests/s", "seconds")
    widths = (30, 9, 7, 9, 15, 9, 8)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for name, n, tests, full, rate, tps, secs in rows:
        cells = (name, str(n), str(tests), str(full), f"{rate:.3f}", f"{tps:.0f}", f"{secs:.1f}")
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))
