"""Building the bubblewrap command that isolates one program run.

What the sandbox sees (everything read-only unless said otherwise):

- ``/usr`` (and the ``/bin``, ``/lib``, ``/lib64``, ``/sbin`` links or binds of a
  merged-/usr system) and the Python installation's prefix, with its
  site-packages hidden by an empty tmpfs unless packages are allowed;
- the runner script, at ``/cobalt/runner.py``;
- a private ``/proc`` of its own PID namespace, a ``/dev`` holding only null,
  zero, random and urandom, and a private, size-limited, writable ``/tmp``.

Nothing else of the host exists inside: not /etc, not /home or /root, not the
working directory with its datasets and hidden tests. The environment is
replaced by a minimal one. All namespaces but the mount namespace's view are
unshared (network, IPC, UTS, PID, cgroup); the sandbox runs in a new session
and dies with its parent.

Ending a sandbox (see :func:`kill_sandbox`, :func:`reap_orphans`): bubblewrap's
``--die-with-parent`` is armed in the sandbox's first process (PID 1 of its
namespace) only after bubblewrap's set-up, and that process waits on an eventfd
for the outer bubblewrap's go-ahead; killing the outer bubblewrap in that window
leaves PID 1 blocked forever, reparented to the host's init (bubblewrap issue
#633). So the host never kills the outer bubblewrap alone: it kills PID 1 of the
sandbox's namespace first (which takes every process in the namespace with it),
then bubblewrap. The runner ends the sandbox itself when the host goes away
(its result channel breaks), and every new executor sweeps sandboxes whose
bubblewrap parent is gone.

When the caller is root, bubblewrap runs without a user namespace, keeps only
CAP_SETUID/CAP_SETGID, and the runner immediately becomes a fresh unprivileged
uid (so RLIMIT_NPROC is enforced and no capability remains). Otherwise the
sandbox runs in a new user namespace as uid 65534.
"""
from __future__ import annotations

import errno
import functools
import os
import platform
import secrets
import shutil
import signal
import site
import struct
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

RUNNER_SOURCE = Path(__file__).with_name("_runner.py")
RUNNER_IN_SANDBOX = "/cobalt/runner.py"
CGROUP_IN_SANDBOX = "/cobalt/cg"
"""Where a sandbox's own cgroup directories appear inside it (one folder per controller)."""
SANDBOX_UID = 65534
# Fresh uids for root mode are drawn from this range (no such users exist).
UID_RANGE = (1 << 21, 1 << 30)
STACK_BYTES = 256 << 20

MINIMAL_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class PythonInstall:
    """Where the interpreter and its standard library live on the host."""

    executable: str
    prefix: str
    site_packages: tuple[str, ...]
    venv_site_packages: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def python_install() -> PythonInstall:
    """The host interpreter that sandboxed programs run with (the base one, not a venv's link)."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    base_site = []
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix}).get(key)
        if path and os.path.isdir(path) and path not in base_site:
            base_site.append(os.path.realpath(path))
    venv_site = []
    if sys.prefix != sys.base_prefix:
        for path in site.getsitepackages():
            real = os.path.realpath(path)
            if os.path.isdir(real) and real not in venv_site and real not in base_site:
                venv_site.append(real)
    return PythonInstall(exe, prefix, tuple(base_site), tuple(venv_site))


def _is_root() -> bool:
    return os.geteuid() == 0


def _ancestor_dirs(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    out, cur = [], ""
    for part in parts:
        cur += "/" + part
        out.append(cur)
    return out


def _system_dirs() -> list[str]:
    """bwrap arguments recreating /bin, /lib, /lib64, /sbin as on the host."""
    args: list[str] = []
    for name in ("bin", "lib", "lib64", "lib32", "sbin"):
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return args


# --- seccomp ------------------------------------------------------------------
# One classic-BPF filter, installed by bubblewrap (--seccomp FD) on the runner and
# inherited by every test process. It refuses:
#
# - user namespaces (unshare/clone with CLONE_NEWUSER): inside one, a program holds
#   every capability over the namespaces it makes; it could mount a tmpfs of its own
#   without a size limit (escaping the /tmp limit and filling the host's memory) and
#   reach kernel code that is otherwise closed to unprivileged users. clone3 gets
#   ENOSYS (its flags lie in memory that a filter cannot read), so the C library falls
#   back to clone, whose flags are checked;
# - kernel objects that are keyed by uid and outlive the process that made them:
#   keyrings (add_key, request_key, keyctl: they live in the host kernel after the
#   sandbox, under a quota that starts afresh for every fresh uid, and /proc/key-users
#   shows every uid's counts to every sandbox), System V message queues, semaphores
#   and shared memory (msgget, semget, shmget) and POSIX message queues (mq_open):
#   those live until the sandbox's IPC namespace dies, outside every per-test limit,
#   and would carry state from one test to the next;
# - channels between sandboxes through the files they share read-only (/usr, the
#   interpreter): inotify (it also sees the host's own opens of those files), fanotify,
#   and file locks (flock, and fcntl's record and open-file-description locks), which
#   every sandbox running at the same time would see;
# - IPv4 and IPv6 sockets: the sandbox has no network, and the socket buffers of
#   loopback TCP and UDP are charged neither to a memory cgroup (v1 leaves TCP
#   accounting off) nor to RLIMIT_AS, so they were memory outside every bound
#   (unix sockets stay: their buffers are charged to the sender);
# - other system-call ABIs (i386, x32 on x86_64), outright.
CLONE_NEWUSER = 0x10000000
REFUSED_SOCKET_FAMILIES = (2, 10)
"""AF_INET and AF_INET6: ``socket`` with either domain gets EPERM."""
LOCK_FCNTL_COMMANDS = (5, 6, 7, 36, 37, 38)
"""F_GETLK, F_SETLK, F_SETLKW and the F_OFD_* variants: ``fcntl`` with them gets EPERM."""


@dataclass(frozen=True)
class SyscallTable:
    """The system-call numbers the filter needs, for one architecture."""

    audit_arch: int
    unshare: int
    clone: int
    clone3: int
    socket: int
    fcntl: int
    refused: tuple[tuple[str, int], ...]
    """(name, number) of the calls that always get EPERM."""


_SECCOMP_ARCH = {
    "x86_64": SyscallTable(0xC000003E, 272, 56, 435, 41, 72, (
        ("add_key", 248), ("request_key", 249), ("keyctl", 250),
        ("msgget", 68), ("semget", 64), ("shmget", 29), ("mq_open", 240),
        ("inotify_init", 253), ("inotify_init1", 294), ("fanotify_init", 300), ("flock", 73),
    )),
    "aarch64": SyscallTable(0xC00000B7, 97, 220, 435, 198, 25, (
        ("add_key", 217), ("request_key", 218), ("keyctl", 219),
        ("msgget", 186), ("semget", 190), ("shmget", 194), ("mq_open", 180),
        ("inotify_init1", 26), ("fanotify_init", 262), ("flock", 32),
    )),
}
_X32_SYSCALL_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def refused_syscalls(machine: str | None = None) -> dict[str, int]:
    """Name -> number of the system calls the filter refuses outright on ``machine``."""
    table = _SECCOMP_ARCH.get(machine or platform.machine())
    return dict(table.refused) if table else {}


def _refuse_arg_values(nr: int, arg: int, values: tuple[int, ...], eperm: int) -> list[bytes]:
    """Instructions: system call ``nr`` whose argument ``arg`` (low 32 bits) is one of
    ``values`` gets EPERM; any other value is allowed; other calls fall through."""
    body = [_bpf(_LD_ABS, 16 + 8 * arg)]
    for v in values:
        body += [_bpf(_JEQ, v, 0, 1), _bpf(_RET, eperm)]
    body.append(_bpf(_RET, _RET_ALLOW))
    return [_bpf(_JEQ, nr, 0, len(body))] + body


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The compiled filter (struct sock_filter[]) for ``machine`` (default: this one),
    or None for an architecture without a system-call table here."""
    t = _SECCOMP_ARCH.get(machine or platform.machine())
    if t is None:
        return None
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    prog = [
        _bpf(_LD_ABS, 4),                        # seccomp_data.arch
        _bpf(_JEQ, t.audit_arch, 1, 0),          # native ABI -> skip the refusal
        _bpf(_RET, eperm),
        _bpf(_LD_ABS, 0),                        # seccomp_data.nr
        _bpf(_JGE, _X32_SYSCALL_BIT, 0, 1),      # x32 -> refuse
        _bpf(_RET, eperm),
        _bpf(_JEQ, t.clone3, 0, 1),
        _bpf(_RET, enosys),
    ]
    for _name, nr in t.refused:
        prog += [_bpf(_JEQ, nr, 0, 1), _bpf(_RET, eperm)]
    prog += _refuse_arg_values(t.socket, 0, REFUSED_SOCKET_FAMILIES, eperm)
    prog += _refuse_arg_values(t.fcntl, 1, LOCK_FCNTL_COMMANDS, eperm)
    prog += [
        _bpf(_JEQ, t.unshare, 2, 0),             # -> flags check
        _bpf(_JEQ, t.clone, 1, 0),               # -> flags check
        _bpf(_RET, _RET_ALLOW),
        _bpf(_LD_ABS, 16),                       # low word of args[0] (the flags)
        _bpf(_JSET, CLONE_NEWUSER, 0, 1),
        _bpf(_RET, eperm),
        _bpf(_RET, _RET_ALLOW),
    ]
    return b"".join(prog)


def seccomp_fd() -> int | None:
    """A pipe's read end holding :func:`seccomp_program`, for ``bwrap --seccomp``
    (None where no filter exists). The caller passes it to bwrap and closes it."""
    prog = seccomp_program()
    if prog is None:
        return None
    r, w = os.pipe()
    try:
        os.write(w, prog)  # well under 1 KiB: always fits the pipe's buffer
    finally:
        os.close(w)
    return r


def bwrap_argv(
    *, tmpfs_bytes: int, allow_packages: bool, as_root: bool | None = None, seccomp_fd: int | None = None,
    cgroup_dirs: dict[str, int] | None = None, tmp_dir: str | None = None, workdir: str = "/tmp",
) -> list[str]:
    """The full command line: bubblewrap options, then the runner under ``python -S``.
    ``seccomp_fd``: a descriptor from :func:`seccomp_fd`, inherited by bwrap.
    ``cgroup_dirs``: controller -> an open descriptor (inherited by bwrap) of the host
    directory of the sandbox's own cgroup, bound writable at ``CGROUP_IN_SANDBOX/<controller>``. ``tmp_dir``: a host-made tmpfs
    (with an inode limit) to bind at /tmp instead of bwrap's own tmpfs. ``workdir``: the writable
    working directory (/tmp; under ``paper`` :data:`PAPER_WORKDIR`, /tmp then read-only)."""
    py = python_install()
    as_root = _is_root() if as_root is None else as_root
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [
        bwrap,
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
    ]
    args += _system_dirs()
    made: set[str] = {"/usr"}
    binds = [py.prefix] if not py.prefix.startswith("/usr/") and py.prefix != "/usr" else []
    if allow_packages:
        binds += [p for p in py.venv_site_packages if not any(p.startswith(b + "/") for b in binds)]
    for target in binds:
        for d in _ancestor_dirs(target + "/x"):
            if d not in made and d != target:
                args += ["--perms", "0755", "--dir", d]
                made.add(d)
        args += ["--ro-bind", target, target]
    if not allow_packages:
        # The interpreter's own site-packages: present on disk, hidden inside.
        for path in py.site_packages:
            if os.path.isdir(path):
                args += ["--tmpfs", path, "--remount-ro", path]
    args += ["--perms", "0755", "--dir", "/cobalt", "--ro-bind", str(RUNNER_SOURCE), RUNNER_IN_SANDBOX]
    if cgroup_dirs:
        # Bound from descriptors: bwrap's command line (visible inside as pid 1) names
        # no host path of the cgroup.
        args += ["--perms", "0755", "--dir", CGROUP_IN_SANDBOX]
        for ctl, dir_fd in cgroup_dirs.items():
            args += ["--bind-fd", str(int(dir_fd)), f"{CGROUP_IN_SANDBOX}/{ctl}"]
    args += ["--proc", "/proc", "--perms", "0755", "--dir", "/dev"]
    for dev in ("null", "zero", "random", "urandom"):
        args += ["--dev-bind", f"/dev/{dev}", f"/dev/{dev}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    args += _scratch_mounts(workdir, tmp_dir, tmpfs_bytes)
    if as_root:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--chdir", workdir, "--", py.executable, "-S", "-B", RUNNER_IN_SANDBOX]
    return args


PAPER_WORKDIR = "/dev/shm"
"""``paper``: the writable working directory, as the original runs its programs from /dev/shm
while the rest of the file system, /tmp included, is read-only."""


def _scratch_mounts(workdir: str, tmp_dir: str | None, tmpfs_bytes: int) -> list[str]:
    """The one writable directory (``workdir``: /tmp, or ``PAPER_WORKDIR`` with /tmp read-only)."""
    if tmp_dir:
        args = ["--bind", tmp_dir, workdir]
    else:
        args = ["--perms", "1777", "--size", str(int(tmpfs_bytes)), "--tmpfs", workdir]
    if workdir != "/tmp":
        args += ["--perms", "1777", "--tmpfs", "/tmp", "--remount-ro", "/tmp"]
    return args


def _children(pid: int) -> list[int]:
    """The children of single-threaded process ``pid`` (empty when it is gone)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _stat_ppid(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


def _kill_if_child_of(pid: int, parent: int | None) -> bool:
    """SIGKILL ``pid`` through a pidfd, once that pidfd is known to name a child of
    ``parent`` (a pid reused in the meantime is left alone). True when signalled."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if parent is not None and _stat_ppid(pid) != parent:
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def kill_sandbox(proc: subprocess.Popen) -> None:
    """SIGKILL a sandbox started from :func:`bwrap_argv`, at any stage of its start-up.

    PID 1 of the sandbox's namespace (bubblewrap's only direct child) goes first:
    the kernel then kills every process of the namespace. Only then the outer
    bubblewrap: killed first, it could leave PID 1 blocked in its set-up forever.
    When no child exists yet, bubblewrap is stopped first so that it cannot make
    one between the look and the kill. The caller reaps ``proc``."""
    pid = proc.pid
    if proc.returncode is not None:
        return
    kids = _children(pid)
    if not kids:
        try:
            os.kill(pid, signal.SIGSTOP)
            # Stopped (or already exited): its set of children is final now.
            os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        except (ProcessLookupError, ChildProcessError):
            pass
        kids = _children(pid)
    for kid in kids:
        _kill_if_child_of(kid, pid)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _ns_pids(pid: int) -> list[str]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return line.split()[1:]
    except OSError:
        pass
    return []


def _comm(pid: int | None) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def orphaned_sandboxes() -> list[int]:
    """Host pids of sandboxes that lost their outer bubblewrap: bubblewrap processes
    running this runner that are PID 1 of a namespace below ours and whose parent is
    no longer a bubblewrap. No host process supervises them any more; one may be
    blocked in bubblewrap's set-up forever, or be running a program past every limit
    that the host enforced."""
    marker = RUNNER_IN_SANDBOX.encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or _comm(name) != "bwrap":
            continue
        pid = int(name)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker not in argv:
            continue
        ns = _ns_pids(pid)
        if len(ns) < 2 or ns[-1] != "1":
            continue  # an outer bubblewrap, or not a sandbox's PID 1
        if _comm(_stat_ppid(pid)) != "bwrap":
            out.append(pid)
    return out


def reap_orphans() -> int:
    """SIGKILL every sandbox of :func:`orphaned_sandboxes` (its whole PID namespace
    dies with it); returns how many. Every executor does this when it starts, so a
    restarted service cleans up after the process that was killed before it."""
    killed = 0
    for pid in orphaned_sandboxes():
        if _kill_if_child_of(pid, _stat_ppid(pid)):
            killed += 1
    return killed


def direct_argv() -> list[str]:
    """The runner without a sandbox (``--no-sandbox``: resource limits only)."""
    return [python_install().executable, "-S", "-B", str(RUNNER_SOURCE)]


def fresh_uid() -> int | None:
    """A random unprivileged uid for one root-mode sandbox (None when not root)."""
    if not _is_root():
        return None
    lo, hi = UID_RANGE
    return lo + secrets.randbelow(hi - lo)


def test_uid(uid: int | None) -> int | None:
    """The uid that the test processes of a root-mode sandbox run as: not the
    runner's own, so that a test can neither signal nor trace its runner."""
    return None if uid is None else uid + 1


def raise_stack_limit() -> None:
    """Raise this process's soft stack limit (inherited by sandboxes) so deep recursion works.
    Done once in the parent: a preexec_fn is unsafe in a threaded process."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = STACK_BYTES if hard == resource.RLIM_INFINITY else min(STACK_BYTES, hard)
    try:
        resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
    except (ValueError, OSError):
        pass


@functools.lru_cache(maxsize=4)
def check_sandbox(tmpfs_bytes: int = 1 << 20) -> str:
    """Run a trivial program in the sandbox; return bwrap's version or raise
    :class:`SandboxUnavailable` saying why and what to do."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed. Install it with 'sudo apt-get install bubblewrap' "
            "(Debian/Ubuntu) or 'dnf install bubblewrap'; without root, ask an administrator, or "
            "use a conda environment ('conda install -c conda-forge bubblewrap'). "
            "Only for trusted code: --no-sandbox."
        )
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"cannot run {bwrap}: {exc}") from None
    filter_fd = seccomp_fd()
    argv = bwrap_argv(tmpfs_bytes=tmpfs_bytes, allow_packages=False, seccomp_fd=filter_fd)
    argv = argv[: argv.index("--") + 1] + [python_install().executable, "-S", "-c", "print('ok')"]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=MINIMAL_ENV,
                                pass_fds=() if filter_fd is None else (filter_fd,))
    except OSError as exc:
        raise SandboxUnavailable(f"bubblewrap failed to start: {exc}") from None
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired as exc:
        kill_sandbox(proc)
        proc.communicate()
        raise SandboxUnavailable(f"bubblewrap failed to start: {exc}") from None
    if proc.returncode != 0 or out.strip() != "ok":
        raise SandboxUnavailable(
            f"bubblewrap cannot create its sandbox here ({version or 'unknown version'}): "
            f"{err.strip() or 'exit code ' + str(proc.returncode)}. "
            "Unprivileged user namespaces may be disabled: enable them "
            "(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also "
            "kernel.apparmor_restrict_unprivileged_userns=0), run as root, or, inside Docker, "
            "start the container with --security-opt seccomp=unconfined --cap-add SYS_ADMIN. "
            "Only for trusted code: --no-sandbox."
        )
    return version
