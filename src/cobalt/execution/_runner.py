"""The runner that executes one program against many test inputs, inside the sandbox.

It runs as ``python3 -S _runner.py`` in bubblewrap, standard library only. It
reads one job (marshal, written by the trusted host) on stdin, compiles the program once, then forks one child
per test: the child sets its resource limits, wires the test input to stdin
and pipes to stdout/stderr, and executes the compiled program. The runner
watches the child's wall time and output size, kills every other process in
the sandbox's PID namespace after each test, and writes one JSON record per
test to file descriptor 3, which no test process can reach (the child closes
it, and the runner is not dumpable, so /proc/<runner>/fd is closed to it).
As root, tests run under a uid of their own, so no test can signal, trace or
re-limit the runner. A test's wall time runs to the moment its exit was seen,
and its CPU time includes its waited-for children and the orphans that PID 1
reaped while it ran; a test over its wall limit is recorded as timed out, and
the host fails a test over either limit.

Expected outputs never enter the sandbox: judging happens on the host.

Start-up cost is paid once per program, so only built-in or C modules are
imported up front; json, traceback and friends load when a program needs them.
"""
import _json
import _signal as signal
import builtins
import io
import marshal
import mmap as _mmap
import os
import resource
import select
import sys
import time

CALL_RET_FD = 3
SOLUTION_FILE = "<solution>"
STDERR_HEAD = 8 * 1024
STDERR_TAIL = 24 * 1024
TRACEBACK_FRAMES = 50
THREAD_STACK_BYTES = 8 * 1024 * 1024
ERROR_RESERVE_BYTES = 8 * 1024 * 1024


class _Exit:
    """``exit``/``quit`` as the site module would define them (the runner uses -S)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code=None):
        raise SystemExit(code)


# Modules imported once in the runner before the first fork, so that a test does
# not pay for them again: the usual set, plus any of PRELOADABLE that the program
# itself imports. Only side-effect-free modules belong here (never antigravity,
# this, tkinter, ...): the import runs in the runner.
PRELOADABLE = frozenset((
    "typing", "collections", "itertools", "functools", "heapq", "bisect", "math", "string", "re",
    "operator", "copy", "inspect",
    "abc", "array", "ast", "base64", "binascii", "calendar", "cmath", "collections.abc", "contextlib",
    "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "graphlib", "hashlib", "io",
    "json", "numbers", "pprint", "queue", "random", "statistics", "struct", "textwrap", "threading",
    "time", "types", "unicodedata", "weakref", "zlib", "numpy", "sortedcontainers",
))
# Installed packages, not the standard library: importable only when the job allows them.
PACKAGES = frozenset(("numpy", "sortedcontainers"))


def _imported_modules(code):
    """Top-level module names of the program's import lines (a cheap scan, no ast:
    a miss only means that module is imported per test instead of once)."""
    names = set()
    for line in code.split("\n"):
        words = line.replace(",", " ").replace(";", " ").split()
        if len(words) >= 2 and words[0] == "import":
            mods = words[1:]  # the word after "as" is an alias, not a module
            names.update(w for k, w in enumerate(mods)
                         if w != "as" and (k == 0 or mods[k - 1] != "as") and w.replace(".", "").isidentifier())
        elif len(words) >= 4 and words[0] == "from" and words[2] == "import":
            names.add(words[1])
    return names


def _preload(code, allow_packages):
    wanted = []
    for name in sorted(_imported_modules(code)):
        if name in PRELOADABLE and name not in wanted:
            if name in PACKAGES and not allow_packages:
                continue
            wanted.append(name)
    for name in wanted:
        try:
            __import__(name)
        except Exception:
            pass


def _is_simple_import(line):
    """True for one plain import statement on one line whose modules are all
    standard-library ones of PRELOADABLE: ``import a, b as c`` or
    ``from a import x, y as z`` / ``*``."""
    text = line.split("#", 1)[0].strip()
    if not text or line[:1].isspace() or any(c in text for c in "\\(;"):
        return False
    words = text.replace(",", " ").split()
    if words[0] not in ("import", "from") or not all(w.replace(".", "").isidentifier() or w == "*" for w in words):
        return False
    names = _imported_modules(text)
    return bool(names) and names <= PRELOADABLE - PACKAGES


def _hoisted_header(code, g):
    """Run the program's leading block of plain standard-library import lines once,
    in the runner, into ``g`` (the globals every test inherits through fork), and
    return the program with those lines blanked (line numbers kept) for the tests.

    Why: in a freshly forked test those imports cost a few tenths of a
    millisecond, mostly in copy-on-write page faults, while binding the same names once in the
    runner costs nothing per test. Only side-effect-free modules of PRELOADABLE,
    already imported by the runner, qualify, and no program code runs here; on any
    doubt (a ``__future__`` line, an import error) the program runs unchanged."""
    lines = code.split("\n")
    n = 0
    while n < len(lines) and (_blank_or_comment(lines[n]) or _is_simple_import(lines[n])):
        n += 1
    while n and _blank_or_comment(lines[n - 1]):
        n -= 1
    if n == 0 or n == len(lines):
        return None
    scratch = dict(g)
    try:
        exec(compile("\n".join(lines[:n]), SOLUTION_FILE, "exec"), scratch)
    except Exception:
        return None  # the tests will raise it themselves, with its line number
    g.update(scratch)
    return compile("\n" * n + "\n".join(lines[n:]), SOLUTION_FILE, "exec")


def _blank_or_comment(line):
    text = line.strip()
    return not text or text.startswith("#")


def _set_not_dumpable():
    """Keep test processes (same uid) from reading this process's fds or memory."""
    try:
        if os.stat("/proc/self").st_uid != os.getuid():
            return  # already not dumpable (changing uid made it so); skip loading ctypes
    except OSError:
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass


# Root mode (bubblewrap ran as real root): the runner is (real R, effective T, saved 0)
# and every test process is (T, T, T). A test can then neither signal, trace nor
# re-limit the runner (its real and saved uids are not T), while the runner, through
# its effective uid T, can kill every test process. The saved uid 0 (with only
# CAP_SETUID/CAP_SETGID left in the bounding set) lets the runner take uid R to manage
# the cgroups that the host gave to R, and lets a test child drop to T for good.
_IDS = {}


def _drop_privileges(uid, test_uid=None):
    # Only when bubblewrap ran as real root (no user namespace): become fresh,
    # unprivileged uids so that RLIMIT_NPROC applies and nothing stays privileged.
    if os.getuid() != 0 or not uid:
        return
    test_uid = test_uid or uid
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, test_uid, 0)
    _IDS.update(runner=uid, test=test_uid)


def _become(euid):
    """Switch the runner's effective uid (root mode only; a no-op otherwise)."""
    if _IDS and os.geteuid() != euid:
        os.seteuid(0)
        os.seteuid(euid)


def _drop_to_test_uid():
    """In a test child: become the test uid for good (real, effective and saved)."""
    if _IDS:
        t = _IDS["test"]
        os.seteuid(0)
        os.setresgid(t, t, t)
        os.setresuid(t, t, t)


_PIDNS = []


def _in_sandbox_pid_namespace():
    """True when PID 1 is bubblewrap's init, i.e. this is the sandbox's own namespace."""
    if not _PIDNS:
        try:
            with open("/proc/1/comm") as fh:
                _PIDNS.append(os.getpid() < 64 and fh.read().strip() == "bwrap")
        except OSError:
            _PIDNS.append(False)
    return _PIDNS[0]


def _kill_others():
    """SIGKILL every process in this PID namespace except init (1) and us."""
    me = os.getpid()
    if not _in_sandbox_pid_namespace():
        return 0  # never touch the host's processes
    killed = 0
    for _ in range(3):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in (1, me):
                continue
            found = True
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        if not found:
            break
    return killed


def _clean_traceback(exc):
    """The traceback text from the first frame of the user's code on."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != SOLUTION_FILE:
        tb = tb.tb_next
    # A recursion error can carry a million frames, and the traceback module
    # walks them all even with a limit: keep the innermost frames, cheaply.
    depth, probe = 0, tb
    while probe is not None:
        depth, probe = depth + 1, probe.tb_next
    if depth <= TRACEBACK_FRAMES:
        return "".join(traceback.format_exception(type(exc), exc, tb))
    for _ in range(depth - TRACEBACK_FRAMES):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    head, sep, rest = text.partition("\n")
    return "%s%s  [... %d outer frames omitted ...]\n%s" % (head, sep, depth - TRACEBACK_FRAMES, rest)


# --- call-based mode -----------------------------------------------------------

def _find_callable(g, fn_name):
    target = g.get(fn_name)
    if callable(target) and not isinstance(target, type):
        return target
    sol = g.get("Solution")
    if isinstance(sol, type) and hasattr(sol, fn_name):
        return getattr(sol(), fn_name)
    raise NameError("no function or Solution method named %r" % fn_name)


def _annotation_text(fn, index):
    try:
        import inspect

        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ""
    if index >= len(params):
        return ""
    ann = params[index].annotation
    return ann if isinstance(ann, str) else getattr(ann, "__name__", "") + repr(ann)


def _to_linked(cls, values):
    head = None
    for v in reversed(values):
        head = cls(v, head)
    return head


def _to_tree(cls, values):
    if not values or values[0] is None:
        return None
    nodes = [None if v is None else cls(v) for v in values]
    kids = iter(nodes[1:])
    for node in nodes:
        if node is None:
            continue
        try:
            node.left = next(kids)
            node.right = next(kids)
        except StopIteration:
            break
    return nodes[0]


def _convert_arg(g, fn, index, value):
    # LeetCode passes linked lists and trees as lists; build them when the
    # parameter is annotated with the problem's ListNode/TreeNode class.
    if isinstance(value, list):
        ann = _annotation_text(fn, index)
        if "ListNode" in ann and isinstance(g.get("ListNode"), type):
            return _to_linked(g["ListNode"], value)
        if "TreeNode" in ann and isinstance(g.get("TreeNode"), type):
            return _to_tree(g["TreeNode"], value)
    return value


def _plain(value, depth=0):
    """Return values as JSON-able data; linked lists and trees become lists."""
    if depth > 100000:
        raise ValueError("return value nested too deeply")
    cls = type(value).__name__
    if cls == "ListNode" and hasattr(value, "next"):
        out, seen = [], 0
        while value is not None and seen < 10**6:
            out.append(value.val)
            value, seen = value.next, seen + 1
        return out
    if cls == "TreeNode" and hasattr(value, "left"):
        out, queue = [], [value]
        while queue:
            node = queue.pop(0)
            if node is None:
                out.append(None)
                continue
            out.append(node.val)
            queue.append(node.left)
            queue.append(node.right)
        while out and out[-1] is None:
            out.pop()
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, depth + 1) for v in value), key=repr)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _run_call(g, fn_name, text, ret_fd, cap):
    import json

    fn = _find_callable(g, fn_name)
    lines = [ln for ln in text.split("\n") if ln.strip()]
    args = [_convert_arg(g, fn, i, json.loads(ln)) for i, ln in enumerate(lines)]
    result = fn(*args)
    data = json.dumps(_plain(result)).encode()
    # Past the output cap, one byte more than the cap is enough for the runner to say so.
    view = memoryview(data)[: cap + 1]
    while view:
        view = view[os.write(ret_fd, view):]


# --- one test -----------------------------------------------------------------

def _child(job, code_obj, g, i, in_fd, out_w, err_w, ret_w, cgroups=()):
    """Runs in the forked child; never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        if cgroups:
            _become(_IDS.get("runner", 0))
            for _ctl, path in cgroups:
                _cg_write(path + "/cgroup.procs", "0")
        _drop_to_test_uid()
        os.dup2(in_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        # Close every other descriptor, the runner's result channel included, so
        # the program can never write records; fd 3 carries a call's return value.
        if ret_w is not None:
            os.dup2(ret_w, CALL_RET_FD)
        else:
            os.dup2(os.open("/dev/null", os.O_WRONLY), CALL_RET_FD)
        os.closerange(CALL_RET_FD + 1, 65536)
        lim = job["limits"]
        cpu = int(-(-lim["test_cpu_s"] // 1))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size_bytes"], lim["file_size_bytes"]))
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["max_processes"], lim["max_processes"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        nofile = int(lim.get("open_files") or 256)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        # New threads take their stack size from RLIMIT_STACK, which the host raised
        # for deep recursion in the main thread: under the address-space limit that
        # left room for hardly any thread. Give them a usual 8 MiB; a program can
        # still ask for more with threading.stack_size().
        import _thread

        _thread.stack_size(THREAD_STACK_BYTES)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        # The runner's own stdio objects, never used by the runner after start-up,
        # now sit on the test's descriptors: no need to build new ones per test.
        sys.stdin, sys.stdout, sys.stderr = _STDIO
        sys.argv = ["solution.py"]
        if "random" in sys.modules:
            sys.modules["random"].seed()  # each test its own seed, as in a fresh process
        fn_name = job.get("fn_name")
        # Room to report a MemoryError: freed before the traceback is formatted, so that
        # the imports and text of the report fit under the address-space limit.
        # An untouched anonymous mapping: address space only, no page is touched.
        reserve = _mmap.mmap(-1, ERROR_RESERVE_BYTES)
        if job.get("prologue") == "paper":
            _paper_guard()
        try:
            exec(code_obj, g)
            if fn_name:
                _run_call(g, fn_name, job["inputs"][i], CALL_RET_FD, _output_cap(job, i))
            status = 0
        except SystemExit as exc:
            code = exc.code
            if code is None:
                status = 0
            elif isinstance(code, int):
                status = code & 0xFF
            else:
                sys.stderr.write(str(code) + "\n")
                status = 1
        except BaseException as exc:  # the program's own error: report it like python does
            reserve.close()
            try:
                sys.stdout.flush()
            except BaseException:
                pass
            _register_source()
            sys.stderr.write(_clean_traceback(exc))
            status = 1
        try:
            sys.stdout.flush()
        except BaseException as exc:
            if status == 0:
                sys.stderr.write(_clean_traceback(exc))
                status = 1
    except BaseException:
        status = 121
    os._exit(status)


def _read_into(fd, buf, cap):
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        return False
    if not chunk:
        return False
    if len(buf) < cap:
        buf.extend(chunk[: cap - len(buf)])
    return True


# --- per-test cgroups ------------------------------------------------------------
# Where the host could give the sandbox a cgroup of its own, it binds that cgroup's
# directory (owned by the runner's uid R, its limit files by root) into the sandbox;
# test processes (uid T) can write nothing there.
# The runner makes one child cgroup per test there, with the per-test memory and
# process limits; the test's first process moves itself in before it runs any user
# code, so all processes of a test together stay within the test's limits.

def _cg_write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _cg_read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _cg_make(job, i):
    """Create test ``i``'s cgroups; returns their directories (empty when unavailable)."""
    cg = job.get("cgroup")
    if not cg:
        return []
    lim = job["limits"]
    made = []
    for ctl, base in cg["dirs"].items():
        path = "%s/t%d" % (base, i)
        try:
            os.mkdir(path)
            made.append((ctl, path))
            if ctl in ("memory", "unified"):
                mem = str(int(lim["memory_bytes"]))
                if cg["version"] == 2:
                    _cg_write(path + "/memory.max", mem)
                    try:
                        _cg_write(path + "/memory.swap.max", "0")
                    except OSError:
                        pass
                else:
                    _cg_write(path + "/memory.limit_in_bytes", mem)
                    try:
                        _cg_write(path + "/memory.memsw.limit_in_bytes", mem)
                    except OSError:
                        pass
            if ctl in ("pids", "unified") and os.path.exists(path + "/pids.max"):
                _cg_write(path + "/pids.max", str(int(lim["max_processes"])))
        except OSError:
            continue
    return made


def _cg_procs(path):
    return [int(x) for x in _cg_read(path + "/cgroup.procs").split() if x.isdigit()]


def _cg_kill(dirs):
    """SIGKILL every process left in a test's cgroups (until none is left)."""
    for _ctl, path in dirs:
        for _ in range(100):
            pids = _cg_procs(path)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)


def _cg_oom_kills(job, dirs):
    for ctl, path in dirs:
        if ctl not in ("memory", "unified"):
            continue
        name = "/memory.events" if job["cgroup"]["version"] == 2 else "/memory.oom_control"
        for line in _cg_read(path + name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


def _cg_remove(dirs):
    for _ctl, path in dirs:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.002)


class _Test:
    """One running test: its process, pipes and what it has written so far."""

    def __init__(self, job, code_obj, g, i, deadline_program):
        lim = job["limits"]
        self.i = i
        data = job["inputs"][i].encode("utf-8", "surrogateescape")
        in_fd = os.memfd_create("stdin")
        view = memoryview(data)
        while view:
            view = view[os.write(in_fd, view):]
        os.lseek(in_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ret_r = ret_w = None
        if job.get("fn_name"):
            ret_r, ret_w = os.pipe()
        _become(_IDS.get("runner", 0))
        try:
            self.cgroups = _cg_make(job, i)
        finally:
            _become(_IDS.get("test", 0))
        self.start = time.monotonic()
        self.end = None
        self.orphan_cpu = 0.0
        self.init_cpu = _init_children_cpu()
        pid = os.fork()
        if pid == 0:
            _child(job, code_obj, g, i, in_fd, out_w, err_w, ret_w, self.cgroups)
        for fd in (in_fd, out_w, err_w, ret_w):
            if fd is not None:
                os.close(fd)
        self.pid = pid
        _LIVE_TESTS[pid] = self.cgroups
        self.pidfd = os.pidfd_open(pid)
        self.deadline = min(self.start + lim["test_wall_s"], deadline_program)
        self.budget_cut = deadline_program < self.start + lim["test_wall_s"]
        self.out, self.err_head, self.ret = bytearray(), bytearray(), bytearray()
        self.err_tail = b""
        self.out_limit = _output_cap(job, i)
        self.out_cap = self.out_limit + 1
        self.open_fds = {out_r: "out", err_r: "err"}
        if ret_r is not None:
            self.open_fds[ret_r] = "ret"
        self.timed_out = self.olimit = self.exited = False
        self.done = False
        self.over_budget = False

    def watch(self):
        return list(self.open_fds) + ([] if self.exited else [self.pidfd])

    def on_ready(self, fd):
        if fd == self.pidfd:
            self.exited = True
            self.end = time.monotonic()
        else:
            kind = self.open_fds[fd]
            if kind == "out":
                alive = _read_into(fd, self.out, self.out_cap)
                if len(self.out) >= self.out_cap:
                    self.olimit = True
            elif kind == "ret":
                # A return value shares the output cap (one test, one cap).
                alive = _read_into(fd, self.ret, self.out_cap)
                if len(self.ret) >= self.out_cap:
                    self.olimit = True
            else:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                alive = bool(chunk)
                if len(self.err_head) < STDERR_HEAD:
                    take = STDERR_HEAD - len(self.err_head)
                    self.err_head.extend(chunk[:take])
                    chunk = chunk[take:]
                if chunk:
                    self.err_tail = (self.err_tail + chunk)[-STDERR_TAIL:]
            if not alive:
                del self.open_fds[fd]
                os.close(fd)
        if self.olimit or (self.exited and not self.open_fds):
            self.done = True
        elif self.exited and self.open_fds:
            # The program exited but a descendant still holds its pipes: give
            # it a moment, then stop waiting for it.
            self.deadline = min(self.deadline, time.monotonic() + 0.05)

    def check_time(self, now):
        if not self.done and now >= self.deadline:
            self.timed_out = not self.exited
            self.over_budget = self.timed_out and self.budget_cut
            self.done = True

    def finish(self, job, kill_all):
        """Kill what is left of the test, reap it and return its record."""
        lim = job["limits"]
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.timed_out or self.olimit or not self.exited:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, wstatus, usage = os.wait4(self.pid, 0)
        _LIVE_TESTS.pop(self.pid, None)
        # The wall time runs to the moment the exit was seen (or to now): a runner that
        # was held up meanwhile still measures the whole span, and the limit decides.
        wall = (self.end or time.monotonic()) - self.start
        if wall > lim["test_wall_s"] and not self.timed_out:
            self.timed_out = True
            self.over_budget = self.budget_cut
        _cg_kill(self.cgroups)
        if kill_all and job.get("own_pid_namespace"):
            # Only inside the sandbox's own PID namespace: outside it, "every other
            # process" would be the host's.
            _kill_others()
            _wait_reaped(0.05)
        # Orphans of this test (or of a test beside it: then it is charged to both)
        # that PID 1 reaped while it ran.
        self.orphan_cpu = max(0.0, _init_children_cpu() - self.init_cpu)
        oom = _cg_oom_kills(job, self.cgroups) if self.cgroups else 0
        _become(_IDS.get("runner", 0))
        try:
            _cg_remove(self.cgroups)
        finally:
            _become(_IDS.get("test", 0))
        os.close(self.pidfd)
        for fd in self.open_fds:
            os.close(fd)
        if os.WIFSIGNALED(wstatus):
            exit_code = -os.WTERMSIG(wstatus)
        else:
            exit_code = os.WEXITSTATUS(wstatus)
        stderr = bytes(self.err_head) + (
            b"\n...(stderr truncated)...\n" if len(self.err_tail) == STDERR_TAIL else b""
        ) + self.err_tail
        rec = {
            "i": self.i,
            "exit": exit_code,
            "timeout": self.timed_out,
            "olimit": self.olimit,
            "wall": wall,
            "cpu": usage.ru_utime + usage.ru_stime + self.orphan_cpu,
            "maxrss_kb": usage.ru_maxrss,
            "stderr": stderr.decode("utf-8", "replace"),
        }
        if self.over_budget:
            rec["budget"] = True
        if oom:
            rec["oom"] = True
        stdout = bytes(self.out[: self.out_limit])
        ret = bytes(self.ret[: self.out_limit]) if job.get("fn_name") else None  # the same cap as stdout
        return rec, stdout, ret


def _init_children_cpu():
    """CPU seconds of every process that PID 1 of the sandbox (bubblewrap's init) has
    reaped so far: orphans of test processes end there. Its growth while a test runs
    is CPU that the test's own wait4 cannot see (0 outside the sandbox's namespace)."""
    if not _in_sandbox_pid_namespace():
        return 0.0
    try:
        with open("/proc/1/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / _CLK_TCK[0]
    except (OSError, IndexError, ValueError):
        return 0.0


_CLK_TCK = [100]


def _wait_reaped(wait_s):
    """Wait up to ``wait_s`` until PID 1 has reaped every other process of the namespace
    (so that their CPU time shows in its counters)."""
    me, deadline = os.getpid(), time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # The runner's own test children not yet reaped (finished in the same round) are
        # its to reap, not PID 1's.
        if not any(n.isdigit() and int(n) not in (1, me) and int(n) not in _LIVE_TESTS for n in os.listdir("/proc")):
            return
        time.sleep(0.002)


_RESULT_FD = [None]
_LIVE_TESTS = {}
"""pid -> cgroup dirs of every test process not yet reaped (to stop them all at once)."""


class HostGone(Exception):
    """The host closed its end of the result channel: it exited or was killed."""


def _host_gone():
    """True once nobody reads the result channel any more (a pipe's write end then
    reports POLLERR). The host holds the only read end, so this is its death."""
    p = select.poll()
    p.register(_RESULT_FD[0], 0)
    return bool(p.poll(0))


def _stop_everything(job):
    """Kill every test and what it started, then return (the runner then exits, and
    with it the sandbox): nobody is left to judge them or to enforce the program's cap."""
    for pid, cgroups in list(_LIVE_TESTS.items()):
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _cg_kill(cgroups)
    if job.get("own_pid_namespace"):
        _kill_others()


def _json_value(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _json.encode_basestring_ascii(v)
    return repr(v)


def _emit(rec, stdout=b"", ret=None):
    """One record: a line ``R <header bytes> <stdout bytes> <return-value bytes or -1>``,
    the JSON header, then stdout and the return value as raw bytes (no escaping)."""
    head = ("{" + ",".join('"%s":%s' % (k, _json_value(v)) for k, v in rec.items()) + "}").encode()
    parts = [b"R %d %d %d\n" % (len(head), len(stdout), -1 if ret is None else len(ret)), head, stdout]
    if ret is not None:
        parts.append(ret)
    view = memoryview(b"".join(parts))
    while view:
        view = view[os.write(_RESULT_FD[0], view):]


def _run_tests(job, code_obj, g):
    """Run every test, up to ``job["parallel"]`` at once, within the program's budget.
    With a control descriptor (stop-on-first-failure), one at a time, and the next test
    starts only after the host has said to go on."""
    n = len(job["inputs"])
    control = job.get("control_fd")
    parallel = 1 if control is not None else max(1, int(job.get("parallel") or 1))
    deadline_program = time.monotonic() + job["limits"]["program_wall_s"]
    pending = list(range(n - 1, -1, -1))
    undeliverable = frozenset(job.get("undeliverable") or ())
    running = []
    warm = [False]

    def after(rec):
        if rec["exit"] == 1 and not warm[0] and "traceback" not in sys.modules and "Traceback" in rec["stderr"]:
            warm[0] = True
            _register_source()  # errors repeat across tests: format them from warm modules
            import traceback  # noqa: F401

    while pending or running:
        now = time.monotonic()
        while pending and len(running) < parallel:
            i = pending.pop()
            if i in undeliverable:
                # The host found that this input cannot be written to a test's stdin.
                _emit({"i": i, "undeliverable": True, "exit": None, "timeout": False, "olimit": False,
                       "wall": 0.0, "cpu": 0.0, "stderr": ""}, b"", b"" if job.get("fn_name") else None)
                continue
            if now >= deadline_program:
                _emit({"i": i, "skipped": "budget", "budget": True, "exit": None, "timeout": True,
                       "olimit": False, "wall": 0.0, "cpu": 0.0, "stderr": ""})
                continue
            running.append(_Test(job, code_obj, g, i, deadline_program))
        if not running:
            continue
        watch = {}
        for t in running:
            for fd in t.watch():
                watch[fd] = t
        remaining = min(t.deadline for t in running) - time.monotonic()
        if watch and remaining > 0:
            # The result channel's write end turns "readable" only when its reader,
            # the host, is gone (POLLERR): then stop at once.
            ready, _, _ = select.select(list(watch) + [_RESULT_FD[0]], [], [], remaining)
            if _RESULT_FD[0] in ready:
                raise HostGone()
            for fd in ready:
                watch[fd].on_ready(fd)
        now = time.monotonic()
        for t in running:
            t.check_time(now)
        finished = [t for t in running if t.done]
        running = [t for t in running if not t.done]
        for t in finished:
            rec, stdout, ret = t.finish(job, kill_all=not running)
            _emit(rec, stdout, ret)
            after(rec)
            if control is not None and pending:
                try:
                    go = os.read(control, 1)
                except OSError:
                    go = b""
                if go != b"c":
                    return  # the host stopped the program: no further test starts
    if job.get("own_pid_namespace"):
        _kill_others()


_STDIO = (None, None, None)
_SOURCE = ""


def _register_source():
    """Let tracebacks show the program's lines (loads linecache only on an error)."""
    import linecache

    linecache.cache[SOLUTION_FILE] = (len(_SOURCE), None, _SOURCE.splitlines(True), SOLUTION_FILE)


PAPER_GUARDED_OS = (
    "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
    "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
    "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
)
"""``paper``: the ``os`` functions the original's reliability guard sets to None."""
PAPER_GUARDED_SHUTIL = ("rmtree", "move", "chown")
PAPER_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")
"""``paper``: modules the original's guard makes unimportable (``sys.modules[name] = None``)."""
PAPER_RECURSION_LIMIT = 1000
"""``paper``: Python's default, which the original keeps (counted from the program's module frame)."""


def _output_cap(job, i):
    """Test ``i``'s stdout cap in bytes: the job's per-test caps when the host sized them, else
    the limits' ``output_bytes``."""
    caps = job.get("output_caps")
    return caps[i] if caps else job["limits"]["output_bytes"]


def _interpreter_settings(job):
    """exit/quit, the int-to-str digit limit and the recursion limit, by the job's prologue.

    ``paper`` keeps Python's defaults as the original does (its guard disables
    exit/quit later, in :func:`_paper_guard`); ``cobalt`` defines exit/quit (the
    runner runs with -S), lifts the digit limit and raises the recursion limit.
    """
    if job.get("prologue") == "paper":
        import shutil  # noqa: F401  (loaded once here: every test's guard patches them)
        import subprocess  # noqa: F401
        return
    for name in ("exit", "quit"):
        if not hasattr(builtins, name):
            setattr(builtins, name, _Exit(name))
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    sys.setrecursionlimit(job.get("recursion_limit") or 1000000)


def _paper_guard():
    """In a test's child, just before the program runs: the original's reliability guard
    (exit/quit None, several os and shutil functions None, subprocess.Popen None, some
    modules unimportable, OMP_NUM_THREADS=1), and its recursion limit of 1000 counted
    from the program's own module frame, as when the file runs as a script."""
    import shutil
    import subprocess

    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in PAPER_GUARDED_OS:
        setattr(os, name, None)
    for name in PAPER_GUARDED_SHUTIL:
        setattr(shutil, name, None)
    subprocess.Popen = None
    for name in PAPER_BLOCKED_MODULES:
        sys.modules[name] = None
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    # The caller's frames (this one excluded) sit below the program's module frame.
    sys.setrecursionlimit(PAPER_RECURSION_LIMIT + depth - 1)


def main():
    global _STDIO
    raw = sys.stdin.buffer.read()
    _STDIO = (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="surrogateescape"),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 65536), encoding="utf-8", errors="surrogateescape"),
        io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True),
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = _STDIO
    job = marshal.loads(raw)
    # The host's descriptors must not sit where a test's own descriptors go (0-3).
    for key in ("result_fd", "control_fd"):
        if job.get(key) is not None and job[key] <= CALL_RET_FD:
            moved = os.dup(job[key])
            while moved <= CALL_RET_FD:
                moved = os.dup(moved)
            os.close(job[key])
            job[key] = moved
    _RESULT_FD[0] = job["result_fd"]
    _drop_privileges(job.get("uid"), job.get("test_uid"))
    _set_not_dumpable()
    # SIGPIPE stays ignored here (as Python starts): a write to a host that went
    # away fails with EPIPE, and the runner then stops every test instead of dying
    # and leaving them running unwatched. Each test restores the default.
    if _host_gone():
        return  # the host died while sending the job: no test may start
    try:
        os.chdir(job.get("workdir") or "/tmp")
    except OSError:
        pass
    for path in job.get("sys_path_extra") or ():
        sys.path.append(path)
    _interpreter_settings(job)
    code = job["code"]
    global _SOURCE
    _SOURCE = code
    try:
        code_obj = compile(code, SOLUTION_FILE, "exec")
    except (SyntaxError, ValueError) as exc:
        import traceback

        text = "".join(traceback.format_exception_only(type(exc), exc))
        for i in range(len(job["inputs"])):
            _emit({"i": i, "exit": 1, "timeout": False, "olimit": False, "wall": 0.0, "cpu": 0.0,
                   "stderr": text, "compile_error": True}, b"", b"" if job.get("fn_name") else None)
        return
    _preload(code, bool(job.get("sys_path_extra")))
    # The globals each test starts from (a private copy in every forked child).
    g = {"__name__": "solution" if job.get("fn_name") else "__main__", "__builtins__": builtins,
         "__file__": SOLUTION_FILE}
    code_obj = _hoisted_header(code, g) or code_obj
    if job.get("fn_name"):
        import json  # noqa: F401  (call mode parses arguments in every test)

        if "ListNode" in code or "TreeNode" in code:
            import inspect  # noqa: F401
    import gc

    gc.collect()
    gc.freeze()  # keep the children's garbage collector off the shared pages

    try:
        _CLK_TCK[0] = os.sysconf("SC_CLK_TCK") or 100
    except (OSError, ValueError):
        pass
    try:
        _run_tests(job, code_obj, g)
    except (HostGone, BrokenPipeError):
        _stop_everything(job)


if __name__ == "__main__":
    main()
