"""Faults around the evaluator: a replica killed mid-request, the service
unreachable, a full output disk. Every call must return a result (failing, with
the reason, when the call failed); nothing may hang or be corrupted. These tests
assert behaviour only (a kill happened, a result came, what it says); how long
recovery takes is measured by benchmarks/soak_service.py, not asserted here.
A generous outer wait turns a hang into a failure instead of a stuck run."""
from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from cobalt.execution.base import Limits
from cobalt.execution.client import EvaluatorClient
from support.ray_cluster import RayCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST = Limits(test_wall_s=2.0, test_cpu_s=2.0, program_wall_s=10.0, memory_bytes=256 << 20)
TINY_BYTES = 16 << 10
HANG_GUARD_S = 300


def _jobs_file(path: Path, n: int) -> list[str]:
    ids = [f"job-{i}" for i in range(n)]
    with open(path, "w") as fh:
        for i, job_id in enumerate(ids):
            # A long feedback line per job, so that a tiny disk fills after a few.
            rec = {"id": job_id, "code": f"print('{job_id}' + '-' * 300)",
                   "test_cases": {"inputs": [""] * 4, "outputs": [job_id + "-" * 300] * 4}}
            fh.write(json.dumps(rec) + "\n")
    return ids


def _exec(jobs: Path, out: Path, fsize: int | None = None) -> subprocess.CompletedProcess:
    """``cobalt exec`` on ``jobs``; with ``fsize``, no file it writes may grow past that
    many bytes (RLIMIT_FSIZE, soft limit only: the sandboxes' runner sets its own)."""
    cmd = [str(Path(sys.executable).with_name("cobalt")), "exec", "--input", str(jobs), "--output", str(out),
           "--workers", "2", "--no-progress", "--memory-mb", "256"]

    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=REPO_ROOT,
                          preexec_fn=limit_files if fsize else None)


class Disk:
    """Where the results go, and how that place runs out of room."""

    def __init__(self, kind: str, folder: Path):
        self.kind, self.folder = kind, folder
        # A full tmpfs says ENOSPC; a file at the size limit says EFBIG. Python ignores
        # SIGXFSZ, so cobalt exec gets the error from write() in both cases.
        self.error = "No space left on device" if kind == "tmpfs" else "File too large"

    def run(self, jobs: Path, out: Path) -> subprocess.CompletedProcess:
        return _exec(jobs, out, fsize=TINY_BYTES if self.kind == "fsize" else None)


@pytest.fixture(params=["tmpfs", "fsize"])
def tiny_disk(request, tmp_path):
    """A place that takes only 16 KiB of results.

    ``fsize`` runs everywhere: cobalt exec gets a 16 KiB file-size limit (RLIMIT_FSIZE),
    and a write past it fails mid-line as on a full disk (the same OSError path).
    ``tmpfs`` is a real 16 KiB tmpfs, which needs root: mount(2) needs CAP_SYS_ADMIN in
    the mount namespace's owning user namespace. A user namespace (``unshare -rm``) would
    give that without root, but cobalt exec would then have to run inside it as the
    namespace's uid 0, and a uid 0 process runs sandboxes in root mode (each program
    setuid()s to a fresh uid), which such a namespace, mapping one uid only, refuses;
    so non-root machines run the ``fsize`` variant only."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if request.param == "tmpfs":
        if os.geteuid() != 0:
            pytest.skip("a real tmpfs needs root (see the fixture's docstring); the fsize variant runs")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TINY_BYTES}", "tmpfs", str(mnt)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        yield Disk("tmpfs", mnt)
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    else:
        yield Disk("fsize", mnt)


def test_full_output_disk_nothing_corrupted_rerun_resumes(tmp_path, tiny_disk):
    jobs = tmp_path / "jobs.jsonl"
    ids = _jobs_file(jobs, 60)
    out = tiny_disk.folder / "results.jsonl"
    first = tiny_disk.run(jobs, out)
    assert first.returncode != 0, "a full disk must not look like success"
    assert tiny_disk.error in first.stderr, first.stderr[-2000:]
    # Whatever reached the disk is whole lines (a torn tail is cut on the next open).
    partial = out.read_bytes()
    assert 0 < len(partial) <= TINY_BYTES
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
    out = tiny_disk.folder / "results.jsonl"
    first = tiny_disk.run(jobs, out)
    assert first.returncode != 0
    assert "Traceback" not in first.stderr
    assert str(out) in first.stderr and tiny_disk.error in first.stderr, first.stderr[-2000:]


# --- the Ray Serve service -------------------------------------------------------

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """This module's private Ray cluster (2 CPUs) and the evaluator app (1 replica)."""
    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app

    with RayCluster(tmp_path_factory.mktemp("ray"), num_cpus=2, serve=True) as cluster:
        cluster.connect()
        config = ServiceConfig(num_replicas=1, cpus_per_replica=2, memory_gb_per_replica=1, max_ongoing_requests=64)
        serve.run(build_app(config, limits=FAST), name=APP_NAME, route_prefix=ROUTE_PREFIX)
        yield APP_NAME


def _replica_name() -> str:
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a.get("namespace") == "serve" and "Evaluator" in a["name"] and "REPLICA" in a["name"].upper()]
    assert len(names) == 1, names
    return names[0]


def _replica_pids() -> set[int]:
    """Replica worker processes of this module's own cluster (descendants of this process)."""
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
        tasks = [asyncio.ensure_future(client.evaluate(c, t)) for c, t in progs]
        await asyncio.sleep(0.7)
        ray.kill(ray.get_actor(victim[0], namespace="serve"), no_restart=False)
        # The kill happened: the replica's process is gone.
        gone, alive = await asyncio.to_thread(
            psutil.wait_procs, [psutil.Process(pid) for pid in victim[1]], timeout=HANG_GUARD_S)
        assert not alive, alive
        # A result came for every call (the guard only turns a hang into a failure).
        results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=HANG_GUARD_S)
        return victim, results

    victim, results = asyncio.run(scenario())
    assert len(results) == 12
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


def test_wrong_app_name_fails_cleanly_with_the_reason(served):
    client = EvaluatorClient.ray(app_name="no-such-evaluator", timeout_s=4.0, retries=1)

    async def call():
        return await asyncio.wait_for(
            client.evaluate("print(1)", {"inputs": ["", ""], "outputs": ["1", "1"]}), timeout=HANG_GUARD_S)

    res = asyncio.run(call())
    assert res.passing == (False, False) and res.error
    assert res.feedback[0] == res.error
    # Either the handle lookup names the missing app, or the call ran out of its timeout.
    assert "no-such-evaluator" in res.error or "timed out after 4 seconds" in res.error, res.error


def test_no_cluster_fails_cleanly_with_the_reason():
    # A fresh interpreter, so that no Ray is initialised: the address leads nowhere.
    script = textwrap.dedent(
        """
        import asyncio, json, time
        from cobalt.execution.client import EvaluatorClient
        client = EvaluatorClient.ray(address="127.0.0.1:1", timeout_s=5.0, retries=1)
        res = asyncio.run(client.evaluate("print(1)", {"inputs": [""], "outputs": ["1"]}))
        print(json.dumps({"passing": res.passing, "error": res.error, "status": res.status}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD_S,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["passing"] == [False] and out["error"]
    assert out["error"].startswith(("evaluator call failed", "evaluation timed out")), out
