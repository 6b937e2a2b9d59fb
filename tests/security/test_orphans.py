"""No sandbox outlives the process that started it, whatever moment that process dies
or gives up (issue: a bubblewrap process left blocked forever after a replica was
killed mid-request).

bubblewrap's first sandbox process (PID 1 of the sandbox's namespace) waits on an
eventfd for the outer bubblewrap's go-ahead before it arms ``--die-with-parent``;
an outer bubblewrap killed in that window leaves it blocked forever. These tests
drive real bubblewrap through that window and the rest of start-up:

1. deterministically: bubblewrap held right before its go-ahead (``--userns-block-fd``),
   killed the old way (outer only) and the new way (``kill_sandbox``), and swept;
2. the executor's own kill path (a caller that gives up) at many moments of start-up;
3. the owner process SIGKILLed at many moments of start-up.

Each sandbox of a test is marked by a tmpfs size used by no other sandbox on the
machine (bubblewrap's ``--size`` argument), so that sandboxes of concurrent runs are
never counted or touched. Waits are hang guards, not timings: the assertion is what
is left once the guard expires.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cobalt.execution import sandbox as sbx
from cobalt.execution.base import Limits
from cobalt.execution.local import LocalExecutor

REPO_ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 20.0
"""Hang guard: how long a killed sandbox may take to disappear before the test fails."""
SLEEPER = "import time\ntime.sleep(600)\n"
SLEEP_TESTS = {"inputs": [""], "outputs": [""]}
START_UP_POINTS_S = [k * 0.004 for k in range(16)]
"""Moments (after the owner starts its sandboxes) at which it dies or gives up: from
before bubblewrap exists to well after the program runs."""


def _unique_tmpfs_bytes() -> int:
    return (48 << 20) + secrets.randbelow(1 << 16) * 4096


def _long_limits(tmpfs_bytes: int) -> Limits:
    # Far longer than any test here: a sandbox still there at the end outlived its owner.
    return Limits(test_wall_s=300.0, test_cpu_s=300.0, program_wall_s=600.0, memory_bytes=256 << 20,
                  tmpfs_bytes=tmpfs_bytes)


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:].split()[0] != "Z"  # a zombie is dead: its parent just has not reaped it


def _marked(tmpfs_bytes: int) -> list[int]:
    """Live processes whose command line carries this test's marker (bubblewrap's
    outer process and each sandbox's PID 1; a program runs only under such a PID 1)."""
    mark = str(tmpfs_bytes).encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in argv and b"--size" in argv and _alive(int(name)):
            out.append(int(name))
    return out


def _describe(pid: int) -> str:
    try:
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return f"pid {pid} (gone)"
    return f"pid {pid} ppid {status['PPid'].strip()} NSpid {status.get('NSpid', '').split()} waiting in {wchan}"


def _wait_gone(pids_of, timeout: float = GONE_WITHIN_S) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = pids_of()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture
def marker():
    """A unique tmpfs size; whatever still carries it at the end is killed (so a failing
    run leaves nothing behind)."""
    tmpfs_bytes = _unique_tmpfs_bytes()
    yield tmpfs_bytes
    for pid in _marked(tmpfs_bytes):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _held_before_go_ahead(tmpfs_bytes: int) -> tuple[subprocess.Popen, int, int]:
    """Real bubblewrap stopped for good right before it lets the sandbox's PID 1 go on:
    ``--userns-block-fd`` makes the outer process wait on a pipe that nobody writes,
    at the very place where it would otherwise write the go-ahead. Returns the outer
    process, PID 1 (from bubblewrap's own ``--info-fd`` report) and the pipe's write end."""
    argv = sbx.bwrap_argv(tmpfs_bytes=tmpfs_bytes, allow_packages=False)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    extra = ["--unshare-user", "--info-fd", str(info_w), "--userns-block-fd", str(block_r)]
    argv = [argv[0], *extra, *(a for a in argv[1:] if a != "--disable-userns")]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    with os.fdopen(info_r) as fh:
        info = fh.read()  # bubblewrap closes it before blocking
    return proc, int(json.loads(info)["child-pid"]), block_w


# --- 1. the mechanism, deterministically -------------------------------------------------

def test_killing_bubblewrap_alone_in_its_setup_leaves_pid1_blocked_and_the_sweep_ends_it(marker):
    proc, pid1, block_w = _held_before_go_ahead(marker)
    try:
        assert Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split() == [str(pid1)]
        proc.kill()  # what the executor used to do
        proc.wait()
        # The mechanism: PID 1 never got its go-ahead and has no parent-death signal yet.
        assert _wait_gone(lambda: [pid1] if _alive(pid1) else [], timeout=2.0) == [pid1]
        assert pid1 in sbx.orphaned_sandboxes()
        LocalExecutor(_long_limits(marker))  # a new executor (a restarted replica) sweeps it
        assert _wait_gone(lambda: [pid1] if _alive(pid1) else []) == []
    finally:
        os.close(block_w)


def test_kill_sandbox_in_bubblewraps_setup_kills_pid1_too(marker):
    proc, pid1, block_w = _held_before_go_ahead(marker)
    try:
        sbx.kill_sandbox(proc)
        proc.wait()
        assert _wait_gone(lambda: [pid1] if _alive(pid1) else []) == []
        assert _marked(marker) == []
    finally:
        os.close(block_w)


def test_the_sweep_leaves_supervised_sandboxes_alone(marker):
    proc, pid1, block_w = _held_before_go_ahead(marker)
    try:
        assert pid1 not in sbx.orphaned_sandboxes()  # its bubblewrap parent is alive
        assert sbx.reap_orphans() >= 0 and _alive(pid1) and _alive(proc.pid)
    finally:
        sbx.kill_sandbox(proc)
        proc.wait()
        os.close(block_w)


# --- 2. the executor gives up at many moments of start-up --------------------------------

def test_runs_cancelled_during_startup_leave_no_sandbox(marker):
    executor = LocalExecutor(_long_limits(marker), max_workers=4)

    async def one(delay: float) -> None:
        try:
            await asyncio.wait_for(executor.run(SLEEPER, SLEEP_TESTS), delay)
        except asyncio.TimeoutError:
            pass

    async def all_points() -> None:
        points = START_UP_POINTS_S * 2
        for k in range(0, len(points), 4):
            await asyncio.gather(*(one(d + random.uniform(0, 0.004)) for d in points[k:k + 4]))

    asyncio.run(all_points())
    executor._pool.shutdown(wait=True)
    left = _wait_gone(lambda: _marked(marker))
    assert left == [], "sandboxes outlived their cancelled runs:\n" + "\n".join(map(_describe, left))


# --- 3. the owner is SIGKILLed at many moments of start-up -------------------------------

OWNER = """
import sys, threading
from cobalt.execution.base import Limits
from cobalt.execution.local import LocalExecutor
lim = Limits(test_wall_s=300.0, test_cpu_s=300.0, program_wall_s=600.0, memory_bytes=256 << 20,
             tmpfs_bytes=int(sys.argv[1]))
ex = LocalExecutor(lim, max_workers=3)
print("ready", flush=True)
sys.stdin.readline()
runs = [threading.Thread(target=ex.run_sync, args=(sys.argv[2], {"inputs": [""], "outputs": [""]}))
        for _ in range(3)]
for t in runs:
    t.start()
for t in runs:
    t.join()
"""


def _owner(tmpfs_bytes: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmpfs_bytes), SLEEPER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def _has_children(pid: int) -> bool:
    try:
        return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return False


def test_an_owner_killed_during_startup_leaves_no_sandbox():
    ran_on, started = [], 0
    for point in START_UP_POINTS_S + [0.1, 0.2, 0.4]:
        mark = _unique_tmpfs_bytes()
        owner = _owner(mark)
        try:
            owner.stdin.write(b"go\n")
            owner.stdin.flush()
            time.sleep(point + random.uniform(0, 0.004))
            started += bool(_marked(mark))
            owner.kill()  # SIGKILL: no clean-up of any kind runs in the owner
            owner.wait()
            left = _wait_gone(lambda: _marked(mark))
            # A sandbox that got as far as its runner must end by itself once its owner
            # is gone. One still blocked in bubblewrap's set-up (no child yet) cannot act;
            # the next executor to start on this machine must sweep it.
            ran_on += [f"owner killed {point * 1000:.0f} ms in: {_describe(p)}" for p in left if _has_children(p)]
            if left:
                LocalExecutor(_long_limits(mark))
                left = _wait_gone(lambda: _marked(mark))
            assert left == [], "not even the next executor ended:\n" + "\n".join(map(_describe, left))
        finally:
            for pid in _marked(mark):
                os.kill(pid, signal.SIGKILL)
    assert started > 0  # some owners did die with sandboxes on the way
    assert ran_on == [], "sandboxes ran on after their owner died:\n" + "\n".join(ran_on)
