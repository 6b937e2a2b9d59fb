"""Executor throughput and per-test overhead, against the paper's design, in one run.

Baseline (the paper's design): a fresh bubblewrap sandbox and a fresh
``python -S`` interpreter for every test, the program re-read and re-compiled
each time (we reuse Cobalt's own runner with a one-test job, so the sandbox and
limits are identical and only the per-test process model differs).

Cobalt: one sandbox per program, the program compiled once, a fork per test.

Both run the same job file: the LeetCode reference solutions as stdin programs
(``../shared/data``), with the same number of programs in flight. Printed:
tests per second for each, the ratio, and the per-test overhead beyond the
program's own CPU time, where a program's own CPU time per test is measured by
running it in-process, without any sandbox, on the same inputs.

    .venv/bin/python benchmarks/bench_executor.py --problems 40 --workers 2
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "leetcode" / "leetcode_problems.jsonl.gz"


def own_cpu_per_test(jobs) -> float:
    """Mean CPU seconds a program spends on one test when run in-process, unsandboxed."""
    total, n = 0.0, 0
    for code, tests in jobs:
        compiled = compile(code, "<bench>", "exec")
        for inp in tests.inputs:
            sys.stdin = io.StringIO(inp)
            sink = io.StringIO()
            start = time.process_time()
            with contextlib.redirect_stdout(sink):
                try:
                    exec(compiled, {"__name__": "__main__"})
                except BaseException:
                    pass
            total += time.process_time() - start
            n += 1
    sys.stdin = sys.__stdin__
    return total / max(n, 1)


class FreshSandboxPerTest:
    """The baseline: every test in its own new sandbox and interpreter."""

    def __init__(self, executor):
        self.executor = executor

    async def run(self, code, tests):
        from cobalt.execution.base import TestCases

        results = []
        for i in range(len(tests)):
            one = TestCases((tests.inputs[i],), (tests.outputs[i],), tests.fn_name)
            results.append(await self.executor.run(code, one))
        return results


def marginal_test_cost(executor, n: int = 400, repeat: int = 3) -> tuple[float, float]:
    """Seconds one more test adds to a program, and the fixed cost of a program's
    sandbox: a trivial program run with 1 and with ``n`` tests, best of ``repeat``."""
    from cobalt.execution.base import TestCases

    code = "a, b = map(int, input().split())\nprint(a + b)\n"
    one = TestCases(("1 2\n",), ("3",))
    many = TestCases(tuple(f"{i} {i}\n" for i in range(n)), tuple(str(2 * i) for i in range(n)))

    def best(tests):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            executor.run_sync(code, tests)
            times.append(time.perf_counter() - start)
        return min(times)

    t_one, t_many = best(one), best(many)
    per_test = (t_many - t_one) / (n - 1)
    return per_test, t_one - per_test


async def timed(run_one, jobs, workers: int) -> float:
    sem = asyncio.Semaphore(workers)

    async def one(job):
        async with sem:
            return await run_one(*job)

    start = time.perf_counter()
    await asyncio.gather(*(one(j) for j in jobs))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LeetCodeDataset JSONL(.gz)")
    parser.add_argument("--problems", type=int, default=40, help="number of problems (programs) in the job")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="programs in flight at once")
    args = parser.parse_args()

    from cobalt.data.leetcode import load_leetcode
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.local import LocalExecutor

    problems = load_leetcode(args.data)[: args.problems]
    jobs = [(p.stdin_program(), p.stdin_tests()) for p in problems]
    n_tests = sum(len(t) for _, t in jobs)
    executor = LocalExecutor(options=ExecOptions(allow_packages=True), max_workers=args.workers)
    own = own_cpu_per_test(jobs)

    async def bench():
        await executor.run(*jobs[0])  # warm-up: sandbox check, page cache
        t_cobalt = await timed(executor.run, jobs, args.workers)
        t_base = await timed(FreshSandboxPerTest(executor).run, jobs, args.workers)
        return t_cobalt, t_base

    t_cobalt, t_base = asyncio.run(bench())
    marginal, startup = marginal_test_cost(executor)
    # The same measure without the per-sandbox and per-test cgroups, in this run.
    plain = LocalExecutor(options=ExecOptions(allow_packages=True), max_workers=args.workers, cgroups=False)
    marginal_plain, startup_plain = marginal_test_cost(plain)
    cores = min(args.workers, os.cpu_count() or 1)
    rows = [("fresh sandbox per test (paper)", t_base), ("cobalt: sandbox per program, fork per test", t_cobalt)]
    print(f"job: {len(jobs)} LeetCode programs, {n_tests} tests, {args.workers} in flight, {os.cpu_count()} CPUs")
    print(f"program's own CPU per test (in-process, no sandbox): {own * 1e3:.3f} ms")
    for name, t in rows:
        # Overhead: core-seconds per test beyond the program's own CPU time.
        overhead = t * cores / n_tests - own
        print(f"{name:<45} {n_tests / t:8.1f} tests/s   {t:7.2f} s   overhead {overhead * 1e3:6.2f} ms/test")
    print(f"speed-up: {t_base / t_cobalt:.1f}x")
    print(f"marginal cost of one more test (fork, limits, pipes, judging; trivial program): {marginal * 1e3:.2f} ms; "
          f"sandbox start-up per program: {startup * 1e3:.1f} ms" + (" (cgroups)" if executor._cgroups else ""))
    print(f"without cgroups: marginal cost {marginal_plain * 1e3:.2f} ms; "
          f"sandbox start-up {startup_plain * 1e3:.1f} ms; "
          f"cgroups add {(startup - startup_plain) * 1e3:+.1f} ms per program, "
          f"{(marginal - marginal_plain) * 1e3:+.2f} ms per test")


if __name__ == "__main__":
    main()
