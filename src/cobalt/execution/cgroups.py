"""Per-sandbox cgroups: all processes of a test together within its memory and process limits.

RLIMIT_AS bounds one process's address space, but not memfd or shared-memory
pages, files in the sandbox's tmpfs, or the sum over the processes of a test.
Where the host lets this process manage cgroups, each sandbox gets a cgroup of
its own, created under this process's OWN cgroup (read from
``/proc/self/cgroup``; never at the root of a hierarchy):

- cgroup v1 as root: the ``memory`` and ``pids`` hierarchies, each where this
  process's cgroup is not the hierarchy root and the directory is writable;
- cgroup v2: the unified hierarchy, where this process's cgroup is a delegated
  subtree that enables ``memory`` (and ``pids``) for its children, or one that
  this user owns, where this process first moves itself into a leaf
  (:data:`HOST_LEAF`) and then enables them (``systemd-run --user --scope -p
  Delegate=yes``).

The sandbox's cgroup bounds the whole sandbox (``test_parallelism`` tests plus
the tmpfs and the runner). As root its directory is owned by the runner's uid
and bound into the sandbox, where the runner makes one child cgroup per test
with the per-test limits (exactly ``Limits.memory_bytes``, and
``Limits.max_processes``); test processes run under another uid and can write
nothing there. The limit files of the sandbox's own cgroup stay root's.
Without root (tests share the runner's uid) the sandbox's cgroup is not bound:
bubblewrap is started inside it (:func:`enter_argv`), so it bounds the sandbox
as a whole. Names carry a random part; the host removes the cgroups with the
sandbox at any depth. A cgroup that cannot be created is reported once at
warning level, and the caller fails that program. Where no cgroup is usable,
the resource limits alone apply, and one warning line names the missing bounds.
"""
from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids")
RUNNER_OVERHEAD_BYTES = 256 << 20
"""Memory of a sandbox beyond its tests' limits and its tmpfs: the runner and bwrap."""
TEST_SLACK_BYTES = 64 << 20
"""Room per running test in the sandbox's cgroup beyond the test's own limit (the test's
cgroup itself gets exactly ``Limits.memory_bytes``): the runner's copy-on-write pages
touched for the test, pipes and records."""
_SEQ = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        _hid, controllers, path = line.split(":", 2)
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c in CONTROLLERS:
                out[c] = path
    return out


def _mounts() -> dict[str, str]:
    """controller (or '' for v2) -> mount point of its hierarchy, from /proc/self/mountinfo."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        mount_point, fstype, options = fields[4], rfields[0], rfields[2].split(",")
        if fstype == "cgroup2":
            out.setdefault("", mount_point)
        elif fstype == "cgroup":
            for c in CONTROLLERS:
                if c in options:
                    out.setdefault(c, mount_point)
    return out


@dataclass
class SandboxCgroup:
    """The cgroup directories of one sandbox (controller -> host path)."""

    version: int
    dirs: dict[str, str]

    def remove(self) -> None:
        """Remove the test cgroups the runner left and the sandbox's own (processes
        gone first); retried in a background thread while the kernel still holds them."""
        if not self._try_remove():
            threading.Thread(target=self._remove_later, name="cobalt-cgroup-rm", daemon=True).start()

    def _try_remove(self) -> bool:
        ok = True
        for path in self.dirs.values():
            # Deepest first, whatever depth was made below the sandbox's cgroup.
            for sub, _dirs, _files in os.walk(path, topdown=False):
                _kill_procs(sub)
                try:
                    os.rmdir(sub)
                except FileNotFoundError:
                    pass
                except OSError:
                    ok = False
        return ok

    def _remove_later(self) -> None:
        for _ in range(100):
            time.sleep(0.05)
            if self._try_remove():
                return
        log.warning("cobalt: could not remove the sandbox cgroups %s", list(self.dirs.values()))


def _kill_procs(path: str) -> None:
    import signal

    for _ in range(20):
        try:
            pids = [int(x) for x in Path(path, "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


class CgroupManager:
    """Finds where this process may create cgroups and makes one per sandbox."""

    def __init__(self, version: int, bases: dict[str, str]):
        self.version = version
        self.bases = bases
        """controller -> the host directory of this process's own cgroup in it."""

    @classmethod
    def detect(cls) -> "CgroupManager | None":
        """A manager when some controller is usable here, else None (see :func:`describe`)."""
        found = _detect()
        return cls(*found) if found else None

    def create(self, uid: int | None, limits, parallel: int, nested: bool = True) -> SandboxCgroup | None:
        """One cgroup per controller for a new sandbox, owned by ``uid``; None on failure
        (warned once per process; the caller must not run the program unbounded).
        ``nested``: the runner makes per-test cgroups inside (root mode); otherwise the
        sandbox is one leaf that the host starts bubblewrap in (:func:`enter_argv`)."""
        name = f"cobalt-{os.getpid()}-{next(_SEQ)}-{secrets.token_hex(4)}"
        dirs: dict[str, str] = {}
        try:
            for ctl, base in self.bases.items():
                path = os.path.join(base, name)
                os.mkdir(path)
                dirs[ctl] = path
                if ctl in ("memory", "unified"):
                    total = (int(limits.memory_bytes) + TEST_SLACK_BYTES) * max(1, parallel) + int(limits.tmpfs_bytes) + RUNNER_OVERHEAD_BYTES
                    if self.version == 2:
                        _write(os.path.join(path, "memory.max"), str(total))
                        if os.path.exists(os.path.join(path, "memory.swap.max")):
                            _write(os.path.join(path, "memory.swap.max"), "0")
                    else:
                        _write(os.path.join(path, "memory.limit_in_bytes"), str(total))
                        memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                        if os.path.exists(memsw):
                            _write(memsw, str(total))
                if ctl in ("pids", "unified") and os.path.exists(os.path.join(path, "pids.max")):
                    _write(os.path.join(path, "pids.max"), str(int(limits.max_processes) * max(1, parallel) + 8))
                if uid is not None:
                    # The runner (this uid) makes the per-test cgroups inside; the sandbox's
                    # own limit files stay root's.
                    os.chown(path, uid, uid)
                    if self.version == 2:
                        for f in ("cgroup.procs", "cgroup.subtree_control"):
                            if os.path.exists(os.path.join(path, f)):
                                os.chown(os.path.join(path, f), uid, uid)
        except OSError as exc:
            _warn_once(f"cobalt: cannot create a sandbox cgroup under {', '.join(self.bases.values())}: {exc}; "
                       "programs that need one fail as sandbox errors")
            SandboxCgroup(self.version, dirs).remove()
            return None
        if self.version == 2 and nested:
            try:
                _write(os.path.join(dirs["unified"], "cgroup.subtree_control"),
                       " ".join("+" + c for c in CONTROLLERS if c in _read(os.path.join(dirs["unified"], "cgroup.controllers"))))
            except (OSError, KeyError):
                pass
        return SandboxCgroup(self.version, dirs)


_WARNED: list = []


def _warn_once(text: str) -> None:
    """Log ``text`` at warning level, the first time a cgroup could not be made here."""
    with _LOCK:
        if _WARNED:
            return
        _WARNED.append(text)
    log.warning(text)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _usable(path: str) -> bool:
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        return False
    probe = os.path.join(path, f"cobalt-probe-{os.getpid()}-{next(_SEQ)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        os.rmdir(probe)
    except OSError:
        pass
    return True


def _detect() -> tuple[int, dict[str, str]] | None:
    own, mounts = _own_cgroups(), _mounts()
    bases: dict[str, str] = {}
    for ctl in CONTROLLERS:
        if ctl in own and ctl in mounts and own[ctl] not in ("", "/"):
            path = mounts[ctl] + own[ctl]
            if _usable(path):
                bases[ctl] = path
    if "memory" in bases:
        return 1, bases
    if "" in own and "" in mounts and own[""] not in ("", "/"):
        path = mounts[""] + own[""]
        enabled = _read(os.path.join(path, "cgroup.subtree_control")).split()
        if "memory" not in enabled and _delegated_to_us(path):
            enabled = _enable_controllers(path)
        if "memory" in enabled and _usable(path):
            return 2, {"unified": path}
    return None


HOST_LEAF = "cobalt-host"
"""The leaf cgroup this process moves into when it enables controllers in a delegated
v2 cgroup of its own (cgroup v2 lets only a cgroup without processes hand out controllers)."""


def _delegated_to_us(path: str) -> bool:
    """True for a v2 cgroup that this (non-root) user owns and may write (a delegated subtree,
    such as the scope of ``systemd-run --user --scope -p Delegate=yes``) and whose
    parent offers the memory controller."""
    if os.geteuid() == 0:
        return False  # root owns every cgroup: ownership says nothing about delegation
    try:
        owned = os.stat(path).st_uid == os.geteuid()
    except OSError:
        return False
    return owned and os.access(path, os.W_OK) and "memory" in _read(os.path.join(path, "cgroup.controllers")).split()


def _enable_controllers(path: str) -> list[str]:
    """Move this cgroup's processes (this one and its children) into the leaf
    :data:`HOST_LEAF`, then enable ``memory`` (and ``pids``) for its children;
    returns the controllers enabled afterwards (empty on failure)."""
    offered = _read(os.path.join(path, "cgroup.controllers")).split()
    try:
        leaf = os.path.join(path, HOST_LEAF)
        os.makedirs(leaf, exist_ok=True)
        for pid in _read(os.path.join(path, "cgroup.procs")).split():
            try:
                _write(os.path.join(leaf, "cgroup.procs"), pid)
            except OSError:
                pass  # gone meanwhile, or not ours
        _write(os.path.join(path, "cgroup.subtree_control"), " ".join("+" + c for c in CONTROLLERS if c in offered))
    except OSError as exc:
        log.debug("cannot enable controllers in %s: %s", path, exc)
        return []
    return _read(os.path.join(path, "cgroup.subtree_control")).split()


_DETECTED: list = []
_LOCK = threading.Lock()


def manager() -> CgroupManager | None:
    """The process-wide manager (detected once), or None when no cgroup is usable here."""
    with _LOCK:
        if not _DETECTED:
            _DETECTED.append(CgroupManager.detect())
        return _DETECTED[0]


def usable_here(root: bool) -> CgroupManager | None:
    """The manager that sandboxes use: as root any; without root only a delegated v2
    subtree (v1 hierarchies need root). Warns once, listing the missing bounds."""
    mgr = manager()
    if mgr is not None and not root and mgr.version != 2:
        mgr = None
    missing = missing_bounds(mgr, root)
    if missing:
        _warn_missing_once("cobalt: sandboxes here lack " + "; ".join(missing)
                           + " (docs/SECURITY.md, 'Hosts without writable cgroups', says how to get them)")
    return mgr


def missing_bounds(mgr: CgroupManager | None, root: bool) -> list[str]:
    """The bounds that sandboxes lack with ``mgr`` (None: no usable cgroup)."""
    if mgr is None:
        return ["a memory bound over all processes of a test or sandbox (RLIMIT_AS bounds each process "
                "only; memfd, shared-memory and /tmp pages and /tmp's inodes are not bounded by memory)",
                "a process bound per test beyond RLIMIT_NPROC"]
    out = []
    if not root:
        out.append("per-test memory and process bounds (without root the whole sandbox is one cgroup)")
    if mgr.version == 1 and "pids" not in mgr.bases:
        out.append("a pids cgroup (RLIMIT_NPROC bounds the processes)")
    return out


_MISSING_WARNED: list = []


def _warn_missing_once(text: str) -> None:
    with _LOCK:
        if _MISSING_WARNED:
            return
        _MISSING_WARNED.append(text)
    log.warning(text)


_ENTER_SCRIPT = 'while [ "$1" != -- ]; do echo 0 > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'


def enter_argv(cgroup_dirs: list[str], argv: list[str]) -> list[str]:
    """``argv`` started inside the cgroups ``cgroup_dirs``: a shell moves itself into
    each, then executes ``argv``, so that bubblewrap and every process of its sandbox
    are born there (none can leave: the sandbox sees no cgroup). If a move fails, the
    shell exits with status 125 and nothing runs."""
    import shutil

    return [shutil.which("sh") or "/bin/sh", "-c", _ENTER_SCRIPT, "sh", *cgroup_dirs, "--", *argv]


def describe(root: bool) -> str:
    """Which cgroup bounds sandboxes get here, and which are missing."""
    mgr = usable_here(root)
    missing = missing_bounds(mgr, root)
    if mgr is None:
        line = "cgroups: none usable here (per-process limits only)"
    else:
        ctls = ", ".join(c if c != "unified" else "memory+pids (unified)" for c in mgr.bases)
        scope = "per sandbox and per test" if root else "per sandbox"
        line = f"cgroups v{mgr.version}: {ctls} {scope}, under {', '.join(mgr.bases.values())}"
    return line + ("; MISSING: " + "; ".join(missing) if missing else "")
