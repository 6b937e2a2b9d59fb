"""The Ray Serve evaluator held at high concurrency: every result accounted for.

Each program prints tokens naming itself and the test, and has a known pass/fail
pattern (benchmarks/soak_service.py builds and checks them), so a lost,
duplicated or misdelivered result is caught. After the load: no sandbox process
under the replica, no host temp file owned by a sandbox uid, bounded replica
memory. Latency percentiles are printed (run with -s to see them); speed itself
is the benchmark's business, not asserted here.
"""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from cobalt.execution.base import Limits
from cobalt.execution.client import EvaluatorClient

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import soak_service  # noqa: E402  (the soak's workload and checks, shared with the benchmark)
from support.ray_cluster import RayCluster  # noqa: E402

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

RSS_GROWTH_LIMIT_MB = 150


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """This module's private Ray cluster (2 CPUs) and the evaluator app; yields the replica processes."""
    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app

    with RayCluster(tmp_path_factory.mktemp("ray"), num_cpus=2, serve=True) as cluster:
        cluster.connect()
        config = ServiceConfig(num_replicas=1, cpus_per_replica=2, memory_gb_per_replica=1, max_ongoing_requests=128)
        serve.run(build_app(config, limits=Limits(memory_bytes=256 << 20)), name=APP_NAME, route_prefix=ROUTE_PREFIX)
        procs = soak_service.replica_processes()  # descendants of this process: the cluster's head is one
        assert len(procs) == 1
        yield procs


def _hold(replicas, *, programs: int, tests: int, concurrency: int, duration_s: float):
    client = EvaluatorClient.ray(timeout_s=120.0, max_concurrency=concurrency)

    async def run():
        warm = await client.evaluate(*soak_service.make_job(10**6, 2))
        assert soak_service.check_result(10**6, 2, warm) == "", warm
        rss_start = soak_service.rss_mb(replicas)
        report = await soak_service.soak(client, programs=programs, tests=tests, concurrency=concurrency,
                                         duration_s=duration_s, progress=False)
        report.replica_rss_start_mb, report.replica_rss_end_mb = rss_start, soak_service.rss_mb(replicas)
        return report

    report = asyncio.run(run())
    report.leftovers = soak_service.wait_no_leftovers(replicas)
    print("\n" + soak_service.format_report(report))
    return report


def _assert_clean(report, programs: int) -> None:
    assert report.programs == programs, "every submitted program got exactly one result"
    assert report.lost == 0, report.problems
    assert report.dup == 0
    assert report.leftovers == []
    assert report.replica_rss_end_mb - report.replica_rss_start_mb < RSS_GROWTH_LIMIT_MB


def test_checker_catches_misdelivered_results():
    # The accounting must be able to fail: another program's result, a failed call.
    from cobalt.execution.base import ExecutionResult

    fb = [f"Input:\n{j}\nYour output:\ntok7:{j}\nExpected output:\nx" for j in range(3)]
    other = ExecutionResult(tuple(soak_service.expected_pass(7, j) for j in range(3)), tuple(fb), ("passed",) * 3)
    assert soak_service.check_result(7, 3, other) == ""
    assert soak_service.check_result(8, 3, other) == "dup"
    assert soak_service.check_result(7, 3, ExecutionResult.failure(3, "call failed")) == "lost"


def test_concurrent_load_loses_and_duplicates_nothing(replicas):
    report = _hold(replicas, programs=120, tests=5, concurrency=48, duration_s=600)
    _assert_clean(report, 120)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("COBALT_SOAK"), reason="a 4-minute soak: set COBALT_SOAK=1 to run it")
def test_soak_2000_programs_of_20_tests(replicas):
    report = _hold(replicas, programs=2000, tests=20, concurrency=64, duration_s=240)
    _assert_clean(report, report.programs)
    assert report.programs >= 500
