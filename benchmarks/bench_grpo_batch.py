"""Score one GRPO-sized batch of real answers on all cores: sequential tests against parallel tests.

A GRPO step scores every sampled response of a batch before the update, so the
time to score the batch (and its slowest programs) is on the training loop's
critical path. This builds a batch from ../shared/data/leetcode:

- correct: the problem's reference solution;
- wrong (often): the real model answer (the record's ``response``);
- slow: the reference solution burning 0.2, 0.5, 1.5 or 5 s of CPU per test
  (the last one past the 4 s limit: a time-limit answer);
- hostile: a memory hog, a fork bomb, an output flood, an endless loop, a sleeper,
  a /tmp filler, runaway recursion;

in the shares given by ``--mix``, each with ``--tests-per-program`` tests (the
problem's tests, repeated when it has fewer), as stdin programs inside a fenced
answer. Every response goes through :func:`cobalt.reward.compute_score` (code
extraction, execution, shaping), the training path, with ``--workers`` rows in
flight; ``--via embedded`` runs the sandboxes in this process, ``--via serve``
deploys the Ray Serve evaluator (one replica with ``--workers`` CPUs) and scores
through it, as the training workers do.

The batch runs twice in one run: tests of a program one after another (1 at a
time) and up to 4 at once (the paper's number, ``Limits.test_parallelism``).
Printed for each: time to score the batch, p50/p99 seconds per program (its
evaluation, not its wait for a free worker), the share of the cores' time spent
in the programs themselves (the tests' CPU time / (cores x wall); a program cut
by the 27 s cap in profile ``paper`` reports no test times, so its CPU is not
counted), and in embedded mode the share spent in this host process (judging, shaping); then the ratio.

    .venv/bin/python benchmarks/bench_grpo_batch.py --programs 128 --workers 2
    .venv/bin/python benchmarks/bench_grpo_batch.py --via serve            # a 16-core GPU machine
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
DEFAULT_DATA = SHARED / "leetcode" / "leetcode_problems.jsonl.gz"
DEFAULT_MIX = "correct=0.35,wrong=0.5,slow=0.1,hostile=0.05"

SLOW_CPU_S = (0.2, 0.5, 1.5, 5.0)
HOSTILE = {
    "memory hog": "x = bytearray(3 << 30)\n",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "output flood": "while True:\n    print('x' * 65536)\n",
    "endless loop": "while True:\n    pass\n",
    "sleeper": "import time\ntime.sleep(3600)\n",
    "tmp filler": "with open('/tmp/f', 'wb') as f:\n    while True:\n        f.write(b'\\0' * (1 << 20))\n",
    "runaway recursion": "def f(n):\n    return f(n + 1) + 1\nf(0)\n",
}


@dataclass
class Row:
    """One response to score."""

    kind: str
    task_id: str
    response: str
    tests: dict


def parse_mix(text: str) -> dict[str, float]:
    """``'correct=0.35,wrong=0.5,...'`` -> shares summing to 1."""
    mix = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in ("correct", "wrong", "slow", "hostile"):
            raise SystemExit(f"--mix: unknown kind {name.strip()!r} (correct, wrong, slow, hostile)")
        mix[name.strip()] = float(value)
    total = sum(mix.values())
    if total <= 0:
        raise SystemExit("--mix: the shares must add up to more than 0")
    return {k: v / total for k, v in mix.items()}


def fenced(code: str, question: str) -> str:
    """A well-formed model-style answer: a thinking part (the start of the problem's real
    statement, so token counting has real text to count), then ``code`` in one python block."""
    return (f"<think>\nThe task: {question[:1500]}\nWait, check the edge cases first.\n</think>\n"
            f"```python\n{code}\n```\nThis reads the input and prints the answer.\n")


def build_batch(problems, n: int, tests_per_program: int, mix: dict[str, float], seed: int = 0) -> list[Row]:
    """``n`` rows over the problems in turn, each of a kind drawn with the shares of ``mix``."""
    from cobalt.text import extract_code

    rng = random.Random(seed)
    kinds, weights = zip(*mix.items())
    hostile = list(HOSTILE.values())
    rows = []
    for i in range(n):
        p = problems[i % len(problems)]
        tests = p.stdin_tests()
        idx = [j % len(tests) for j in range(tests_per_program)]
        tests = tests.subset(idx).to_dict()
        kind = rng.choices(kinds, weights)[0]
        if kind == "correct":
            code = p.stdin_program()
        elif kind == "wrong":
            code = p.stdin_program(extract_code(p.model_response) or p.model_response)
        elif kind == "slow":
            burn = SLOW_CPU_S[i % len(SLOW_CPU_S)]
            code = (f"import time as _t\n_s = _t.process_time()\nwhile _t.process_time() - _s < {burn}:\n    pass\n"
                    + p.stdin_program())
        else:
            code = hostile[i % len(hostile)]
        rows.append(Row(kind, p.task_id, fenced(code, p.question), tests))
    return rows


class Recorder:
    """Passes every call to the real client and keeps its result and duration."""

    def __init__(self, client):
        self.client = client
        self.timeout_s = client.timeout_s
        self.results, self.seconds = [], []

    async def evaluate(self, code, tests):
        """The real client's evaluate, timed."""
        start = time.perf_counter()
        res = await self.client.evaluate(code, tests)
        self.seconds.append(time.perf_counter() - start)
        self.results.append(res)
        return res


async def score_batch(rows: list[Row], client, workers: int) -> tuple[float, Recorder, list[dict]]:
    """Score every row through compute_score with ``workers`` rows in flight."""
    from cobalt.reward import compute_score

    rec = Recorder(client)
    sem = asyncio.Semaphore(workers)

    async def one(i: int, row: Row) -> dict:
        async with sem:
            return await compute_score("leetcode", row.response, row.tests, {"index": i}, client=rec)

    start = time.perf_counter()
    scores = await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
    return time.perf_counter() - start, rec, scores


def make_client(args, parallel: int):
    """The evaluator client for one pass: embedded, or a fresh Ray Serve deployment."""
    from cobalt.execution.base import ExecOptions, Limits
    from cobalt.execution.client import EvaluatorClient

    limits = Limits(test_parallelism=parallel)
    options = ExecOptions(allow_packages=True, profile=args.profile)
    if args.via == "embedded":
        return EvaluatorClient.embedded(limits=limits, options=options, max_concurrency=args.workers)
    import ray
    from ray import serve

    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app

    if not ray.is_initialized():
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    config = ServiceConfig(num_replicas=1, cpus_per_replica=args.workers, memory_gb_per_replica=1,
                           max_ongoing_requests=max(64, 2 * args.workers))
    serve.run(build_app(config, limits=limits, options=options), name=APP_NAME, route_prefix=ROUTE_PREFIX)
    return EvaluatorClient.ray(max_concurrency=args.workers)


def report(name: str, wall: float, rec: Recorder, scores: list[dict], cores: int, host_cpu: float | None) -> None:
    """One block of figures for one pass."""
    cpu_in_programs = sum(sum(r.cpu_s) for r in rec.results)
    secs = sorted(rec.seconds)
    p99 = secs[min(len(secs) - 1, int(round(0.99 * (len(secs) - 1))))]
    print(f"{name}: batch scored in {wall:.1f} s ({len(scores) / wall:.1f} programs/s); "
          f"per program p50 {statistics.median(secs):.2f} s, p99 {p99:.2f} s, max {secs[-1]:.2f} s")
    line = f"    cores' time in the programs themselves: {cpu_in_programs / (cores * wall):.1%}"
    if host_cpu is not None:
        line += f"; in this host process (judging, shaping, scheduling): {host_cpu / (cores * wall):.1%}"
    print(line)
    mean = statistics.fmean(s["score"] for s in scores)
    print(f"    mean reward {mean:.3f}, all tests passed {sum(s['acc'] for s in scores):.0f}/{len(scores)}, "
          f"evaluation failed {sum(s['eval_failed'] for s in scores)}")


def cpu_now() -> float:
    """CPU seconds so far of this process. (Not of the sandboxes: the host kills a
    sandbox once its records are in, so their times never reach RUSAGE_CHILDREN.)"""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LeetCodeDataset JSONL(.gz)")
    parser.add_argument("--programs", type=int, default=2048, help="responses in the batch (GRPO: 2,048)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="programs scored at once (default: all cores)")
    parser.add_argument("--tests-per-program", type=int, default=20, help="tests per program")
    parser.add_argument("--via", choices=("embedded", "serve"), default="embedded",
                        help="embedded: sandboxes in this process; serve: the Ray Serve evaluator (training path)")
    parser.add_argument("--mix", default=DEFAULT_MIX, help="shares of correct, wrong, slow and hostile answers")
    parser.add_argument("--profile", choices=("paper", "cobalt"), default="paper",
                        help="judging rules (paper: always the fixed number of tests at once)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kind drawn for each row")
    parser.add_argument("--passes", default="1,4",
                        help="tests of a program at once in each pass, comma-separated (1,4: both; 4: the paper's alone)")
    args = parser.parse_args()
    passes = [int(x) for x in args.passes.split(",") if x.strip()]
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))

    from cobalt.data.leetcode import load_leetcode

    problems = load_leetcode(args.data)
    rows = build_batch(problems, args.programs, args.tests_per_program, parse_mix(args.mix), args.seed)
    counts = {k: sum(r.kind == k for r in rows) for k in ("correct", "wrong", "slow", "hostile")}
    cores = os.cpu_count() or 1
    print(f"batch: {len(rows)} programs x {args.tests_per_program} tests ({counts}), {args.workers} in flight, "
          f"{cores} CPUs, via {args.via}, profile {args.profile}")

    walls = {}
    for parallel in passes:
        name = "sequential tests (1 at a time)" if parallel == 1 else f"parallel tests (up to {parallel} at once)"
        client = make_client(args, parallel)
        # Warm-up outside the clock: sandbox check, page cache, the Ray handle.
        asyncio.run(score_batch(rows[:1], client, 1))
        before = cpu_now()
        wall, rec, scores = asyncio.run(score_batch(rows, client, args.workers))
        after = cpu_now()
        report(name, wall, rec, scores, cores, after - before if args.via == "embedded" else None)
        walls[parallel] = wall
    if 1 in walls and 4 in walls:
        print(f"parallel tests vs sequential: {walls[1] / walls[4]:.2f}x faster to score the batch")
    if args.via == "serve":
        import ray
        from ray import serve

        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
