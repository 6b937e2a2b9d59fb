"""Harness for the escape and abuse suite: hostile programs in the real sandbox.

Every attack runs through :class:`cobalt.execution.local.LocalExecutor` (real
bubblewrap, real runner). Around each run the harness sets up things on the
host that a successful attack would touch, and checks them afterwards:

- a canary folder in the test's tmp dir (a secret file and a file to delete):
  unchanged, nothing added;
- no file named after the attack's token in the host's /tmp, /var/tmp,
  /dev/shm, /root, the repository or the test's tmp dir;
- no process left: none with the sandbox's uid (root mode draws a fresh uid per
  sandbox, so any survivor would carry it), no new child of the test process;
- listeners the program may try to reach (TCP and UDP on 127.0.0.1, a unix
  socket file, an abstract unix socket) received nothing;
- a host sentinel process is still alive (kill(-1) and friends missed it);
- the runner's source file is unchanged.

Attacks name host facts as ``@@NAME@@`` placeholders in their code and
expected outputs; :func:`Host.fill` substitutes them.
"""
from __future__ import annotations

import hashlib
import os
import platform
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from cobalt.execution import sandbox as sbx
from cobalt.execution.base import ExecOptions, ExecutionResult, Limits, TestCases
from cobalt.execution.local import LocalExecutor

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
DATASET_FILE = SHARED_DATA / "leetcode" / "leetcode_problems.jsonl.gz"
ENV_SECRET_NAME = "COBALT_SECURITY_SUITE_SECRET"

# Reduced limits that keep each attack's meaning (a limit is still hit) while
# the suite stays fast and light on this shared 2-core machine.
SUITE_LIMITS = Limits(
    test_wall_s=1.0,
    test_cpu_s=1.0,
    memory_bytes=256 << 20,
    program_wall_s=6.0,
    output_bytes=256 << 10,
    max_processes=16,
    file_size_bytes=2 << 20,
    tmpfs_bytes=8 << 20,
)
PROCESS_GONE_WITHIN_S = 5.0


@dataclass(frozen=True)
class Attack:
    """One hostile program and the verdict it must get."""

    id: str
    code: str
    outputs: tuple[str, ...] = ("",)
    inputs: tuple[str, ...] | None = None
    status: tuple[str, ...] | frozenset[str] = ("runtime_error",)
    """Exact statuses per test (tuple), or the set of acceptable statuses for every test."""
    limits: dict = field(default_factory=dict)
    fn_name: str | None = None
    note: str = ""

    def tests(self, host: "Host") -> TestCases:
        """The test cases with host placeholders filled in."""
        outs = tuple(host.fill(o) for o in self.outputs)
        ins = tuple(host.fill(i) for i in (self.inputs or ("",) * len(outs)))
        return TestCases(ins, outs, self.fn_name)


class RecordingExecutor(LocalExecutor):
    """The real executor, remembering the uid each sandbox ran as."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.uids: list[int] = []

    def _job(self, *args, **kwargs):
        job = super()._job(*args, **kwargs)
        for key in ("uid", "test_uid"):
            if job.get(key):
                self.uids.append(job[key])
        return job


@dataclass
class Host:
    """Things on the host that attacks aim at, and the checks that they were not reached."""

    tmp: Path
    token: str
    canary_dir: Path
    secret: str
    env_secret: str
    tcp: socket.socket
    udp: socket.socket
    unix: socket.socket
    unix_path: Path
    abstract: socket.socket
    abstract_name: str
    sentinel: subprocess.Popen
    runner_sha: str

    def facts(self) -> dict[str, str]:
        """Placeholder values for attack code."""
        return {
            "TOKEN": self.token,
            "CANARY_DIR": str(self.canary_dir),
            "SECRET_FILE": str(self.canary_dir / "secret.txt"),
            "VICTIM_FILE": str(self.canary_dir / "victim.txt"),
            "SECRET": self.secret,
            "ENV_NAME": ENV_SECRET_NAME,
            "ENV_SECRET": self.env_secret,
            "DATASET": str(DATASET_FILE.resolve()),
            "DATASET_SIZE": str(DATASET_FILE.stat().st_size),
            "TCP_PORT": str(self.tcp.getsockname()[1]),
            "UDP_PORT": str(self.udp.getsockname()[1]),
            "UNIX_PATH": str(self.unix_path),
            "ABSTRACT": self.abstract_name,
            "HOST_PID": str(os.getpid()),
            "SENTINEL_PID": str(self.sentinel.pid),
            "REPO": str(REPO_ROOT),
            "ROOT_NAMES": repr(sorted(os.listdir("/root")) if os.path.isdir("/root") else []),
            "PREFIX": sbx.python_install().prefix,
            "RUNNER_SOURCE": str(sbx.RUNNER_SOURCE),
            "NR_CLONE": str(getattr(sbx._SECCOMP_ARCH.get(platform.machine()), "clone", 56)),
        }

    def fill(self, text: str) -> str:
        """``text`` with every ``@@NAME@@`` replaced by its host fact."""
        for key, value in self.facts().items():
            text = text.replace(f"@@{key}@@", value)
        assert "@@" not in text, f"unfilled placeholder in: {text[:200]}"
        return text

    # -- checks -------------------------------------------------------------
    def snapshot_canary(self) -> dict[str, bytes]:
        """Every file under the canary folder with its bytes."""
        return {str(p.relative_to(self.canary_dir)): p.read_bytes() for p in sorted(self.canary_dir.rglob("*")) if p.is_file()}

    def token_files(self) -> list[str]:
        """Host files whose name carries the attack token (a successful write would)."""
        found = []
        prefix = sbx.python_install().prefix
        for base in ("/", "/tmp", "/var/tmp", "/dev/shm", "/dev", "/root", "/usr", "/usr/lib", "/usr/bin",
                     prefix, prefix + "/bin", prefix + "/lib", str(REPO_ROOT), str(SHARED_DATA)):
            try:
                names = os.listdir(base)
            except OSError:
                continue
            found += [os.path.join(base, n) for n in names if self.token in n]
        found += [str(p) for p in self.tmp.rglob(f"*{self.token}*")]
        return found

    def listener_hits(self) -> list[str]:
        """Connections or datagrams that reached the host listeners."""
        hits = []
        for name, sock in (("tcp", self.tcp), ("unix", self.unix), ("abstract", self.abstract)):
            try:
                conn, _ = sock.accept()
                conn.close()
                hits.append(name)
            except BlockingIOError:
                pass
        try:
            self.udp.recvfrom(4096)
            hits.append("udp")
        except BlockingIOError:
            pass
        return hits


def _uid_processes(uid: int) -> list[int]:
    out = []
    for proc in psutil.process_iter(["uids"]):
        try:
            uids = proc.info["uids"]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if uids is not None and uid in (uids.real, uids.effective, uids.saved):
            out.append(proc.pid)
    return out


def _is_sandbox_side(proc: psutil.Process) -> bool:
    """A process the executor started (bubblewrap or the runner), or one that came out
    of it. Other children of the test process (Ray or tokenizer helpers that earlier
    test modules left winding down) are not the attack's doing."""
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "bwrap" in cmd or "runner.py" in cmd or " -S " in f" {cmd} "


def _children(exclude: set[int]) -> list[int]:
    try:
        kids = psutil.Process(os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if k.pid in exclude or k.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.NoSuchProcess:
            continue
        if _is_sandbox_side(k) or _descends_from_sandbox(k):
            out.append(k.pid)
    return out


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:160]
    except psutil.Error:
        return "?"


def _descends_from_sandbox(proc: psutil.Process) -> bool:
    try:
        return any(_is_sandbox_side(p) for p in proc.parents())
    except psutil.NoSuchProcess:
        return False


def wait_no_leftovers(uids: list[int], exclude: set[int], timeout: float = PROCESS_GONE_WITHIN_S) -> list[str]:
    """Poll until no process of the sandbox uids and no extra child of ours remain;
    return what is still there after ``timeout`` (empty when clean)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [f"uid {u}: pid {p}" for u in uids for p in _uid_processes(u)]
        left += [f"child pid {p} ({_cmdline(p)})" for p in _children(exclude)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0


@pytest.fixture(scope="session")
def sentinel_proc():
    """A host process that no sandboxed signal may reach."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def host(tmp_path, monkeypatch, sentinel_proc):
    """Host-side targets for one attack, torn down afterwards."""
    token = "cbt" + secrets.token_hex(6)
    canary = tmp_path / "canary"
    canary.mkdir()
    secret = "hidden-answer-" + secrets.token_hex(8)
    (canary / "secret.txt").write_text(secret)
    (canary / "victim.txt").write_text("do not delete")
    env_secret = "env-" + secrets.token_hex(8)
    monkeypatch.setenv(ENV_SECRET_NAME, env_secret)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = tmp_path / f"listener-{token[:6]}.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen(8)
    abstract_name = f"cobalt-abstract-{token}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(8)
    for s in (tcp, udp, unix, abstract):
        s.setblocking(False)
    runner_sha = hashlib.sha256(sbx.RUNNER_SOURCE.read_bytes()).hexdigest()
    h = Host(tmp_path, token, canary, secret, env_secret, tcp, udp, unix, unix_path, abstract,
             abstract_name, sentinel_proc, runner_sha)
    yield h
    for s in (tcp, udp, unix, abstract):
        s.close()


@dataclass
class Outcome:
    """What an attack produced."""

    result: ExecutionResult
    shmem_growth_kb: int


def _outputs_shown(result: ExecutionResult) -> list[str]:
    out = []
    for fb in result.feedback:
        # Both profiles' layouts: "Program's Output:" (paper) or "Your output:" (cobalt).
        label = next((lab for lab in ("Program's Output:\n", "Your output:\n") if lab in fb), None)
        text = fb.split(label, 1)[1] if label else ""
        for end in ("\nExpected output:", "\nExpected Output:", "\nError:", "\nStderr:"):
            text = text.split(end, 1)[0]
        out.append(text)
    return out


@pytest.fixture
def run_attack(host, sentinel_proc):
    """Run an :class:`Attack` in the real sandbox and check the host afterwards."""

    def run(attack: Attack, options: ExecOptions | None = None) -> Outcome:
        limits = Limits(**{**SUITE_LIMITS.__dict__, **attack.limits})
        ex = RecordingExecutor(limits)
        before_canary = host.snapshot_canary()
        # Children that exist before the attack (the sentinel; Ray or tokenizer helpers
        # left by earlier test modules in the same session) are not the attack's.
        known_children = {sentinel_proc.pid, *_children(set())}
        shmem_before = _shmem_kb()
        # Attacks run under cobalt's prologue by default: it leaves every os function in
        # place, so the sandbox alone must stop them (paper's guard only removes some).
        result = ex.run_sync(host.fill(attack.code), attack.tests(host), options or ExecOptions(profile="cobalt"))
        leftovers = wait_no_leftovers(ex.uids, known_children)
        shmem_growth = _shmem_kb() - shmem_before
        assert not leftovers, f"{attack.id}: processes left behind: {leftovers}"
        assert host.snapshot_canary() == before_canary, f"{attack.id}: host canary folder changed"
        assert not host.token_files(), f"{attack.id}: wrote host files {host.token_files()}"
        assert not host.listener_hits(), f"{attack.id}: reached host listeners {host.listener_hits()}"
        assert sentinel_proc.poll() is None, f"{attack.id}: the host sentinel process died"
        assert hashlib.sha256(sbx.RUNNER_SOURCE.read_bytes()).hexdigest() == host.runner_sha
        assert os.environ.get(ENV_SECRET_NAME) == host.env_secret
        return Outcome(result, shmem_growth)

    return run


def check_verdict(attack: Attack, outcome: Outcome) -> None:
    """Assert the statuses the attack must get, and that it never passes unless meant to."""
    res = outcome.result
    if isinstance(attack.status, tuple):
        assert res.status == attack.status, f"{attack.id}: {res.status}\n{res.feedback}"
    else:
        assert set(res.status) <= set(attack.status), f"{attack.id}: {res.status}\n{res.feedback}"
    for st, ok in zip(res.status, res.passing):
        assert ok == (st == "passed")


def shown_outputs(outcome: Outcome) -> list[str]:
    """The program output each test's feedback shows."""
    return _outputs_shown(outcome.result)
