"""Soak the Ray Serve evaluator: high concurrency for a bounded time, then account
for every result.

Each program prints a token that names it and the test (``tok<i>:<j>``), and
each program has its own known pass/fail pattern, so a result that is lost,
duplicated or delivered to the wrong caller is caught: its feedback shows
another program's token, or its pattern is wrong. Printed: programs and tests
per second, latency percentiles (p50/p95/p99 of one evaluate call), lost and
duplicated counts, the replicas' RSS before and after, and sandbox processes or
temporary files left behind.

    .venv/bin/python benchmarks/soak_service.py --duration 60 --programs 2000 --tests 20 --concurrency 64

Without ``--address`` a local Ray (all CPUs of this machine) and the evaluator
app are started and shut down at the end; with it, an already deployed app is
used and left alone.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field

TOKEN = re.compile(r"tok(\d+):(\d+)")
SANDBOX_UID_MIN = 1 << 21  # root-mode sandboxes run as uids drawn above this


def make_job(i: int, n_tests: int) -> tuple[str, dict]:
    """Program ``i``: prints its token for each input; every 7th-ish test expects something else."""
    code = f"t = input()\nprint('tok{i}:' + t)\n"
    inputs = [str(j) for j in range(n_tests)]
    outputs = [f"tok{i}:{j}" if expected_pass(i, j) else f"other{i}:{j}" for j in range(n_tests)]
    return code, {"inputs": inputs, "outputs": outputs}


def expected_pass(i: int, j: int) -> bool:
    """The known verdict of test ``j`` of program ``i``."""
    return (i * 31 + j) % 7 != 0


def check_result(i: int, n_tests: int, result) -> str:
    """'' when ``result`` is exactly program ``i``'s, else 'lost' or 'dup' (someone else's)."""
    if result.error or len(result.passing) != n_tests:
        return "lost"
    for j, fb in enumerate(result.feedback):
        owners = {(int(a), int(b)) for a, b in TOKEN.findall(fb.split("Expected output:")[0])}
        if owners != {(i, j)}:
            return "dup" if owners else "lost"
    if tuple(result.passing) != tuple(expected_pass(i, j) for j in range(n_tests)):
        return "lost"
    return ""


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def replica_processes(root_pid: int | None = None) -> list:
    """Serve replica processes of the Ray started by this process (its descendants)."""
    import psutil

    out = []
    for proc in psutil.Process(root_pid or os.getpid()).children(recursive=True):
        try:
            if "ServeReplica:evaluator" in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.Error:
            pass
    return out


def rss_mb(procs) -> float:
    """Total resident memory of ``procs`` in MiB."""
    import psutil

    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total / (1 << 20)


def sandbox_leftovers(replicas) -> list[str]:
    """bwrap/runner processes under the replicas, and host temp files owned by sandbox uids."""
    import psutil

    left = []
    for rep in replicas:
        try:
            kids = rep.children(recursive=True)
        except psutil.Error:
            continue
        for kid in kids:
            try:
                cmd = " ".join(kid.cmdline())
            except psutil.Error:
                continue
            if "bwrap" in cmd or "/cobalt/runner.py" in cmd:
                left.append(f"process {kid.pid}: {cmd[:80]}")
    for base in ("/tmp", "/dev/shm", "/var/tmp"):
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid >= SANDBOX_UID_MIN:
                    left.append(f"file {entry.path}")
            except OSError:
                pass
    return left


def wait_no_leftovers(replicas, timeout_s: float = 10.0) -> list[str]:
    """Poll :func:`sandbox_leftovers` until empty or ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = sandbox_leftovers(replicas)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@dataclass
class SoakReport:
    """Figures of one soak run."""

    programs: int = 0
    tests_per_program: int = 0
    concurrency: int = 0
    wall_s: float = 0.0
    programs_per_s: float = 0.0
    tests_per_s: float = 0.0
    p50_s: float = 0.0
    p95_s: float = 0.0
    p99_s: float = 0.0
    max_s: float = 0.0
    lost: int = 0
    dup: int = 0
    replica_rss_start_mb: float = 0.0
    replica_rss_end_mb: float = 0.0
    leftovers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def soak(client, *, programs: int, tests: int, concurrency: int, duration_s: float, progress: bool = True) -> SoakReport:
    """Submit up to ``programs`` programs, ``concurrency`` in flight, for at most ``duration_s``
    (no new program starts after it); check every result."""
    from tqdm import tqdm

    report = SoakReport(tests_per_program=tests, concurrency=concurrency)
    latencies: list[float] = []
    seen: dict[int, int] = {}
    next_i = 0
    start = time.monotonic()
    bar = tqdm(total=programs, desc="soak", unit="prog", disable=not progress)

    async def worker() -> None:
        nonlocal next_i
        while next_i < programs and time.monotonic() - start < duration_s:
            i = next_i
            next_i += 1
            code, cases = make_job(i, tests)
            t0 = time.monotonic()
            result = await client.evaluate(code, cases)
            latencies.append(time.monotonic() - t0)
            seen[i] = seen.get(i, 0) + 1
            verdict = check_result(i, tests, result)
            if verdict == "lost":
                report.lost += 1
                if len(report.problems) < 10:
                    report.problems.append(f"program {i}: {result.error or result.status}")
            elif verdict == "dup":
                report.dup += 1
            bar.update(1)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    bar.close()
    report.wall_s = time.monotonic() - start
    report.programs = len(seen)
    report.dup += sum(n - 1 for n in seen.values() if n > 1)
    report.programs_per_s = report.programs / report.wall_s
    report.tests_per_s = report.programs * tests / report.wall_s
    report.p50_s, report.p95_s, report.p99_s = (percentile(latencies, q) for q in (0.5, 0.95, 0.99))
    report.max_s = max(latencies, default=0.0)
    return report


def format_report(r: SoakReport) -> str:
    """A short human-readable summary."""
    return (
        f"programs {r.programs} x {r.tests_per_program} tests, concurrency {r.concurrency}, wall {r.wall_s:.1f} s\n"
        f"throughput {r.programs_per_s:.1f} programs/s, {r.tests_per_s:.0f} tests/s\n"
        f"latency per program p50 {r.p50_s:.3f} s, p95 {r.p95_s:.3f} s, p99 {r.p99_s:.3f} s, max {r.max_s:.3f} s\n"
        f"lost {r.lost}, duplicated {r.dup}\n"
        f"replica RSS {r.replica_rss_start_mb:.0f} MiB -> {r.replica_rss_end_mb:.0f} MiB "
        f"({r.replica_rss_end_mb - r.replica_rss_start_mb:+.0f} MiB)\n"
        f"left behind: {len(r.leftovers)} {r.leftovers[:5]}"
    )


async def warm_then_soak(client, replicas, args) -> SoakReport | None:
    """One warm-up program, then the soak, in one event loop; RSS taken around the soak."""
    warm = await client.evaluate(*make_job(10**6, 2))
    if check_result(10**6, 2, warm):
        print(f"warm-up failed: {warm.error or warm.feedback}")
        return None
    rss_start = rss_mb(replicas)
    report = await soak(client, programs=args.programs, tests=args.tests, concurrency=args.concurrency,
                        duration_s=args.duration, progress=not args.no_progress)
    report.replica_rss_start_mb, report.replica_rss_end_mb = rss_start, rss_mb(replicas)
    return report


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds after which no new program starts")
    parser.add_argument("--programs", type=int, default=2000, help="most programs to submit")
    parser.add_argument("--tests", type=int, default=20, help="tests per program")
    parser.add_argument("--concurrency", type=int, default=64, help="programs in flight at once")
    parser.add_argument("--address", default=None, help="Ray address of a running cluster with the app deployed")
    parser.add_argument("--replicas", type=int, default=1, help="replicas to deploy (local Ray only)")
    parser.add_argument("--cpus-per-replica", type=float, default=None,
                        help="CPUs per replica (local Ray only; default: all CPUs / replicas)")
    parser.add_argument("--timeout", type=float, default=120.0, help="client timeout per program, seconds")
    parser.add_argument("--json", default=None, help="also write the report as JSON to this file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()

    import ray
    from ray import serve

    from cobalt.execution.client import EvaluatorClient
    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app

    own_cluster = args.address is None
    if own_cluster:
        cpus = os.cpu_count() or 1
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        config = ServiceConfig(num_replicas=args.replicas, cpus_per_replica=args.cpus_per_replica or cpus / args.replicas,
                               memory_gb_per_replica=1, max_ongoing_requests=max(64, args.concurrency))
        serve.run(build_app(config), name=APP_NAME, route_prefix=ROUTE_PREFIX)
    try:
        client = EvaluatorClient.ray(address=args.address, timeout_s=args.timeout, max_concurrency=args.concurrency)
        replicas = replica_processes() if own_cluster else []
        report = asyncio.run(warm_then_soak(client, replicas, args))
        if report is None:
            return 1
        report.leftovers = wait_no_leftovers(replicas) if own_cluster else []
    finally:
        if own_cluster:
            serve.shutdown()
            ray.shutdown()
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(asdict(report), fh, indent=2)
    return 0 if not (report.lost or report.dup or report.leftovers) else 1


if __name__ == "__main__":
    raise SystemExit(main())
