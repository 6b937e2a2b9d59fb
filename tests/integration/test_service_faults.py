"""Faults around the evaluator: a replica killed mid-request, the service
unreachable, a full output disk. Every call must return (a result, failing when
the call failed) within its timeout; nothing may hang or be corrupted."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from cobalt.execution.base import Limits
from cobalt.execution.client import EvaluatorClient

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST = Limits(test_wall_s=2.0, test_cpu_s=2.0, program_wall_s=10.0, memory_bytes=256 << 20)


def _jobs_file(path: Path, n: int) -> list[str]:
    ids = [f"job-{i}" for i in range(n)]
    with open(path, "w") as fh:
        for i, job_id in enumerate(ids):
            # A long feedback line per job, so that a tiny disk fills after a few.
            rec = {"id": job_id, "code": f"print('{job_id}' + '-' * 300)",
                   "test_cases": {"inputs": [""] * 4, "outputs": [job_id + "-" * 300] * 4}}
            fh.write(json.dumps(rec) + "\n")
    return ids


def _exec(jobs: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).with_name("cobalt")), "exec", "--input", str(jobs), "--output", str(out),
           "--workers", "2", "--no-progress", "--memory-mb", "256"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 16 KiB tmpfs mounted under the test's tmp dir (needs root; skipped otherwise)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_output_disk_nothing_corrupted_rerun_resumes(tmp_path, tiny_disk):
    jobs = tmp_path / "jobs.jsonl"
    ids = _jobs_file(jobs, 60)
    out = tiny_disk / "results.jsonl"
    first = _exec(jobs, out)
    assert first.returncode != 0, "a full disk must not look like success"
    assert "No space left on device" in first.stderr
    # Whatever reached the disk is whole lines (a torn tail is cut on the next open).
    partial = out.read_bytes()
    # Move the file to a roomy disk and rerun: the done ids are kept, the rest judged once.
    roomy = tmp_path / "results.jsonl"
    roomy.write_bytes(partial)
    second = _exec(jobs, roomy)
    assert second.returncode == 0, second.stderr[-3000:]
    lines = roomy.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["id"] for r in records) == sorted(ids), "every job exactly once"
    assert all(r["passing"] == [True] * 4 for r in records)


def test_full_output_disk_error_is_one_clear_line(tmp_path, tiny_disk):
    jobs = tmp_path / "jobs.jsonl"
    _jobs_file(jobs, 60)
    out = tiny_disk / "results.jsonl"
    first = _exec(jobs, out)
    assert first.returncode != 0
    assert "Traceback" not in first.stderr
    assert str(out) in first.stderr and "No space left on device" in first.stderr


# --- the Ray Serve service -------------------------------------------------------

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")


@pytest.fixture(scope="module")
def served():
    """One local Ray and the evaluator app for this module (2 CPUs, 1 replica)."""
    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = ServiceConfig(num_replicas=1, cpus_per_replica=2, memory_gb_per_replica=1, max_ongoing_requests=64)
    serve.run(build_app(config, limits=FAST), name=APP_NAME, route_prefix=ROUTE_PREFIX)
    yield APP_NAME
    serve.shutdown()
    ray.shutdown()


def _replica_name() -> str:
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a.get("namespace") == "serve" and "Evaluator" in a["name"] and "REPLICA" in a["name"].upper()]
    assert len(names) == 1, names
    return names[0]


def _replica_pids() -> set[int]:
    """Replica worker processes of this test's own Ray (descendants of this process)."""
    out = set()
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "ServeReplica:evaluator" in " ".join(proc.cmdline()):
                out.add(proc.pid)
        except psutil.Error:
            pass
    return out


async def _until_healthy(client: EvaluatorClient, deadline_s: float = 120.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        res = await client.evaluate("print(input())", {"inputs": ["ok"], "outputs": ["ok"]})
        if res.all_passed:
            return True
        await asyncio.sleep(1.0)
    return False


def test_replica_killed_mid_request_every_call_returns(served):
    timeout_s = 20.0
    client = EvaluatorClient.ray(timeout_s=timeout_s, retries=1)

    async def scenario():
        assert await _until_healthy(client)
        victim = _replica_name(), _replica_pids()
        assert len(victim[1]) == 1
        progs = [(f"import time\ntime.sleep(1.0)\nprint('p{i}')", {"inputs": ["", ""], "outputs": [f"p{i}", f"p{i}"]})
                 for i in range(12)]
        start = time.monotonic()
        tasks = [asyncio.ensure_future(client.evaluate(c, t)) for c, t in progs]
        await asyncio.sleep(0.7)
        ray.kill(ray.get_actor(victim[0], namespace="serve"), no_restart=False)
        results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=timeout_s + 15)
        elapsed = time.monotonic() - start
        return victim, results, elapsed

    victim, results, elapsed = asyncio.run(scenario())
    assert len(results) == 12
    assert elapsed < 20.0 + 15
    for i, res in enumerate(results):
        assert len(res.passing) == 2
        if res.all_passed:  # finished before the kill, or retried on the new replica
            continue
        # Otherwise a failing result that says why: the call failed (error set), or the
        # replica's sandbox was killed under it (sandbox_error, "not run: ...").
        assert res.passing == (False, False)
        assert set(res.status) <= {"sandbox_error", "timeout"}, res.status
        assert res.error or all("not run" in fb for fb in res.feedback), res.feedback
    # Ray restarts the replica and the service serves again.
    assert asyncio.run(_until_healthy(EvaluatorClient.ray(timeout_s=timeout_s)))
    assert _replica_pids() and not (_replica_pids() & victim[1]), "the replica was not restarted"


def test_wrong_app_name_fails_cleanly_after_the_timeout(served):
    client = EvaluatorClient.ray(app_name="no-such-evaluator", timeout_s=4.0, retries=1)
    start = time.monotonic()
    res = asyncio.run(client.evaluate("print(1)", {"inputs": ["", ""], "outputs": ["1", "1"]}))
    assert time.monotonic() - start < 4.0 + 10
    assert res.passing == (False, False) and res.error
    assert res.feedback[0] == res.error


def test_no_cluster_fails_cleanly_after_the_timeout():
    # A fresh interpreter, so that no Ray is initialised: the address leads nowhere.
    script = textwrap.dedent(
        """
        import asyncio, json, time
        from cobalt.execution.client import EvaluatorClient
        client = EvaluatorClient.ray(address="127.0.0.1:1", timeout_s=5.0, retries=1)
        start = time.monotonic()
        res = asyncio.run(client.evaluate("print(1)", {"inputs": [""], "outputs": ["1"]}))
        print(json.dumps({"elapsed": time.monotonic() - start, "passing": res.passing, "error": res.error}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["passing"] == [False] and out["error"]
    assert out["elapsed"] < 5.0 + 10, out
