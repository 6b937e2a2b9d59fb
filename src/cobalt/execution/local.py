"""The sandboxed executor: one bubblewrap sandbox per program, one fork per test.

:class:`LocalExecutor` starts one sandbox for a program, sends it the program
and the test inputs (never the expected outputs), reads one record per test
back from a dedicated pipe, and judges each record on the host. Blocking work
runs in a thread pool so that :meth:`LocalExecutor.run` is a plain coroutine.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import marshal
import os
import select
import signal
import subprocess
import threading
import time
import warnings
from dataclasses import asdict
from typing import Any

from cobalt.execution import compare, feedback
from cobalt.execution import sandbox as sbx
from cobalt.execution.base import HOST_GRACE_S, ExecOptions, ExecutionResult, Limits, Status, TestCases, test_output_cap

log = logging.getLogger(__name__)

# How often a running sandbox checks whether its caller gave up.
CANCEL_POLL_S = 0.1
MEMORY_ERROR_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")


RECORD_HEADER_BYTES = 1 << 20
"""Room for a record's JSON header (its stderr head and tail, escaped) beyond its
stdout and return value, each of which is capped at ``Limits.output_bytes``."""


def max_record_bytes(limits: Limits, stdout_cap: int | None = None) -> int:
    """The largest record the host accepts from a runner: stdout and a return value, each
    within ``stdout_cap`` (default the limits' output cap; ``paper`` raises it per test from
    the expected output), and the header."""
    cap = int(limits.output_bytes) if stdout_cap is None else int(stdout_cap)
    return 2 * cap + RECORD_HEADER_BYTES


class RecordReader:
    """Parses the runner's records from a byte stream in time linear in its size.

    A record is a line ``R <header bytes> <stdout bytes> <return-value bytes or -1>``,
    then the JSON header, the raw stdout and the raw return value. Nothing is escaped,
    so 1 MiB of output costs 1 MiB on the pipe, and each byte is copied a bounded
    number of times (``bytes_copied`` counts them)."""

    def __init__(self, max_record_bytes: int):
        self.max_record_bytes = max_record_bytes
        self._buf = bytearray()
        self._pos = 0
        self._need: tuple[int, int, int] | None = None
        self.bytes_read = 0
        self.bytes_copied = 0

    def feed(self, chunk: bytes) -> list[dict]:
        """Add ``chunk``; return the records it completed (``stdout``/``ret`` as bytes)."""
        self.bytes_read += len(chunk)
        self._buf += chunk
        self.bytes_copied += len(chunk)
        out = []
        while True:
            if self._need is None:
                end = self._buf.find(b"\n", self._pos, self._pos + 64)
                if end < 0:
                    if len(self._buf) - self._pos >= 64:
                        raise RuntimeError("sandbox protocol violation (record frame)")
                    break
                parts = bytes(self._buf[self._pos:end]).split(b" ")
                if len(parts) != 4 or parts[0] != b"R":
                    raise RuntimeError("sandbox protocol violation (record frame)")
                try:
                    head, out_n, ret_n = int(parts[1]), int(parts[2]), int(parts[3])
                except ValueError:
                    raise RuntimeError("sandbox protocol violation (record frame)") from None
                if min(head, out_n) < 0 or ret_n < -1 or head + out_n + ret_n > self.max_record_bytes:
                    raise RuntimeError("sandbox protocol violation (record size)")
                self._need = (head, out_n, ret_n)
                self._pos = end + 1
            head, out_n, ret_n = self._need
            total = head + out_n + max(ret_n, 0)
            if len(self._buf) - self._pos < total:
                break
            p = self._pos
            rec = json.loads(bytes(self._buf[p:p + head]))
            if not isinstance(rec, dict):
                raise RuntimeError("sandbox protocol violation (record header)")
            rec["stdout"] = bytes(self._buf[p + head:p + head + out_n])
            if ret_n >= 0:
                rec["ret"] = bytes(self._buf[p + head + out_n:p + total])
            self.bytes_copied += total
            self._pos = p + total
            self._need = None
            out.append(rec)
        if self._pos and self._pos * 2 >= len(self._buf):
            # Drop what was consumed once it is at least half the buffer: each byte moves
            # at most a bounded number of times (amortised linear).
            self.bytes_copied += len(self._buf) - self._pos
            del self._buf[: self._pos]
            self._pos = 0
        return out


class CgroupUnavailable(RuntimeError):
    """A configured cgroup could not be made for one sandbox (that program is a sandbox error)."""


class NoSandboxWarning(UserWarning):
    """Programs are running without isolation."""


def lossy_program(code: str, fn_name: str) -> str:
    """The paper's conversion of a call-based program to stdin/stdout: append a line
    that reads one input line, splits it on whitespace and prints the call's result.
    Arguments arrive as strings, which is why this mode is lossy."""
    target = f"Solution().{fn_name}" if "class Solution" in code else fn_name
    return f"{code}\n\nprint({target}(*input().split()))\n"


class LocalExecutor:
    """Runs programs in bubblewrap sandboxes on this machine."""

    def __init__(
        self,
        limits: Limits | None = None,
        options: ExecOptions | None = None,
        *,
        sandbox: str = "bwrap",
        max_workers: int | None = None,
        cgroups: bool = True,
    ):
        if sandbox not in ("bwrap", "none"):
            raise ValueError(f"sandbox must be 'bwrap' or 'none', got {sandbox!r}")
        self.limits = limits or Limits()
        self.options = options or ExecOptions()
        self.sandbox = sandbox
        self.max_workers = max_workers or max(4, (os.cpu_count() or 1) * 4)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._in_flight = 0
        self._lock = threading.Lock()
        self._cgroups = None
        # As root the runner makes one cgroup per test inside the sandbox's; without
        # root (tests share the runner's uid) the sandbox is one cgroup, not seen inside.
        self._nested_cgroups = sbx._is_root()
        if sandbox == "bwrap" and cgroups:
            from cobalt.execution import cgroups as cg

            self._cgroups = cg.usable_here(self._nested_cgroups)
        sbx.raise_stack_limit()
        if sandbox == "bwrap":
            sandbox_mod_check = sandbox_check_cached()
            log.debug("sandbox: %s", sandbox_mod_check)
            reaped = sbx.reap_orphans()
            if reaped:
                log.warning("cobalt: killed %d sandbox(es) left behind by a process that died", reaped)
        else:
            warnings.warn(
                "Running programs WITHOUT a sandbox: only resource limits apply. Model-written code can "
                "read and change your files and reach the network. Use this for trusted code only.",
                NoSandboxWarning,
                stacklevel=2,
            )
            log.warning("cobalt: --no-sandbox: programs run without isolation (trusted code only)")

    # -- async API -------------------------------------------------------------
    async def run(self, program: str, tests: TestCases, options: ExecOptions | None = None) -> ExecutionResult:
        """Run ``program`` on every test in a sandbox; see :meth:`run_sync`."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.max_workers, thread_name_prefix="cobalt-exec")
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        future = loop.run_in_executor(self._pool, lambda: self.run_sync(program, tests, options, cancel=cancel))
        try:
            return await future
        except asyncio.CancelledError:
            # The caller gave up (its timeout): stop the sandbox now rather than
            # letting the program run on to the end of its budget.
            cancel.set()
            raise

    # -- blocking implementation ---------------------------------------------------
    def run_sync(
        self, program: str, tests: TestCases, options: ExecOptions | None = None, *, cancel: threading.Event | None = None
    ) -> ExecutionResult:
        """Run ``program`` on ``tests`` and judge every test (blocking). Setting ``cancel``
        kills the sandbox within about 0.1 s; the tests not yet run then fail."""
        opts = options or self.options
        tests = TestCases.from_obj(tests)
        if len(tests) == 0:
            return ExecutionResult((), (), ())
        code, fn_name = program, tests.fn_name
        if fn_name and opts.call_mode == "lossy":
            code, fn_name = lossy_program(program, fn_name), None
        try:
            def judge_now(idx: int, rec: dict) -> tuple[bool, Status, str]:
                return self._judge_one_safely(tests.inputs[idx], tests.outputs[idx], rec, opts, fn_name)

            def test_failed(idx: int, rec: dict) -> bool:
                return not rec["verdict"][0]

            failed = test_failed if opts.stop_on_first_failure else None
            with self._lock:
                self._in_flight += 1
            try:
                caps = [test_output_cap(self.limits, e, opts.profile) for e in tests.outputs]
                records, error, stats = self._execute(code, list(tests.inputs), fn_name, opts, len(tests), failed, cancel,
                                                      judge=judge_now, output_caps=caps)
            finally:
                with self._lock:
                    self._in_flight -= 1
        except sbx.SandboxUnavailable:
            raise
        except CgroupUnavailable as exc:
            return ExecutionResult.failure(len(tests), f"sandbox error: {exc}")
        except Exception as exc:  # never let one program fail a batch
            log.exception("sandbox failure")
            return ExecutionResult.failure(len(tests), f"sandbox error: {type(exc).__name__}: {exc}")
        try:
            return dataclasses.replace(self._judge(tests, records, error, opts, fn_name), extra=stats)
        except Exception as exc:  # a bug in judging must cost this program only, never the batch
            log.exception("judging failure")
            return ExecutionResult.failure(len(tests), f"could not judge the program: {type(exc).__name__}: {exc}")

    def _job(self, code: str, inputs: list[str], fn_name: str | None, opts: ExecOptions) -> dict[str, Any]:
        uid = sbx.fresh_uid() if self.sandbox == "bwrap" else None
        job: dict[str, Any] = {
            "code": code,
            "inputs": inputs,
            "fn_name": fn_name,
            "limits": asdict(self.limits),
            "uid": uid,
            "test_uid": sbx.test_uid(uid),
            "own_pid_namespace": self.sandbox == "bwrap",
            "prologue": opts.profile,
            "workdir": _workdir(opts) if self.sandbox == "bwrap" else None,
        }
        bad = {i: why for i, why in enumerate(map(undeliverable_input, inputs)) if why}
        if bad:
            job["undeliverable"] = sorted(bad)
            job["inputs"] = ["" if i in bad else inp for i, inp in enumerate(inputs)]
        if opts.allow_packages:
            py = sbx.python_install()
            job["sys_path_extra"] = list(py.site_packages) + list(py.venv_site_packages)
        return job

    def _argv(self, opts: ExecOptions, seccomp_fd: int | None = None, cgroup_fds: dict | None = None) -> list[str]:
        if self.sandbox == "none":
            return sbx.direct_argv()
        return sbx.bwrap_argv(
            tmpfs_bytes=self.limits.tmpfs_bytes, allow_packages=opts.allow_packages, seccomp_fd=seccomp_fd,
            cgroup_dirs=cgroup_fds or None, workdir=_workdir(opts),
        )

    def _parallel_tests(self, opts: ExecOptions) -> int:
        """How many tests of one program run at once: the paper's fixed number in profile
        ``paper``; in ``cobalt`` as many as the cores left free by the programs in flight."""
        if opts.stop_on_first_failure:
            return 1
        if opts.profile == "paper":
            return self.limits.test_parallelism
        free = (os.cpu_count() or 1) // max(1, self._in_flight)
        return max(1, min(self.limits.test_parallelism, free))

    def _execute(
        self, code: str, inputs: list[str], fn_name: str | None, opts: ExecOptions, n_tests: int, failed=None,
        cancel: threading.Event | None = None, judge=None, *, output_caps: list[int] | None = None,
    ) -> tuple[dict[int, dict], str | None, dict]:
        """Start the sandbox, stream records back, and stop as soon as ``failed(i, record)``
        says so (stop-on-first-failure: the runner then waits for the host's word before
        each next test, so none starts after the host decided to stop). Returns the
        records by test index and an error text for records that never came.

        With ``judge(i, record)``, each record is judged as it arrives: its verdict is
        kept under ``"verdict"`` and its raw stdout and return value are freed at once,
        so the host holds at most one record's bytes per program (plus the reader's
        buffer), never the raw output of every test until the end."""
        res_r, res_w = os.pipe()
        ctl_r = ctl_w = None
        if failed is not None:
            ctl_r, ctl_w = os.pipe()
        filter_fd = sbx.seccomp_fd() if self.sandbox == "bwrap" else None
        job = self._job(code, inputs, fn_name, opts)
        if output_caps:
            job["output_caps"] = list(output_caps)
        job["result_fd"] = res_w
        job["control_fd"] = ctl_r
        job["parallel"] = self._parallel_tests(opts)
        cgroup = (self._cgroups.create(job.get("uid"), self.limits, job["parallel"], nested=self._nested_cgroups)
                  if self._cgroups else None)
        if self._cgroups is not None and cgroup is None:
            for fd in (res_r, res_w, filter_fd, ctl_r, ctl_w):
                if fd is not None:
                    os.close(fd)
            raise CgroupUnavailable("the sandbox's cgroup could not be created: the program was not run "
                                    "(it would have run without its memory bound)")
        if cgroup is not None and self._nested_cgroups:
            # Each test's cgroup gets exactly the memory limit the user set (no slack).
            job["cgroup"] = {"version": cgroup.version, "dirs": {c: f"{sbx.CGROUP_IN_SANDBOX}/{c}" for c in cgroup.dirs}}
        payload = marshal.dumps(job)  # host -> runner only: the runner needs no json to read it
        env = dict(sbx.MINIMAL_ENV)
        cg_fds = {}
        if cgroup is not None and self._nested_cgroups:
            cg_fds = {c: os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for c, d in cgroup.dirs.items()}
        passed = [res_w] + [fd for fd in (filter_fd, ctl_r) if fd is not None] + list(cg_fds.values())
        argv = self._argv(opts, filter_fd, cg_fds)
        if cgroup is not None and not self._nested_cgroups:
            from cobalt.execution.cgroups import enter_argv

            argv = enter_argv(list(cgroup.dirs.values()), argv)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=tuple(passed),
                env=env,
                cwd="/",
                close_fds=True,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            if ctl_w is not None:
                os.close(ctl_w)
            os.close(res_r)
            raise
        finally:
            for fd in passed:
                os.close(fd)
        records: dict[int, dict] = {}
        error = None
        deadline = time.monotonic() + self.limits.program_wall_s + HOST_GRACE_S
        stop_early = False
        reader = RecordReader(max_record_bytes(self.limits, max(output_caps or [self.limits.output_bytes])))
        try:
            _write_all_then_close(proc, payload)
            stderr_chunks: list[bytes] = []
            fds = {res_r: "res", proc.stderr.fileno(): "err"}
            while fds:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    error = f"the program ran out of its {self.limits.program_wall_s:g}-second budget"
                    break
                if cancel is not None and cancel.is_set():
                    error = "cancelled by the caller"
                    break
                wait = remaining if cancel is None else min(remaining, CANCEL_POLL_S)
                ready, _, _ = select.select(list(fds), [], [], wait)
                for fd in ready:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        del fds[fd]
                        continue
                    if fds[fd] == "err":
                        if sum(map(len, stderr_chunks)) < 65536:
                            stderr_chunks.append(chunk)
                        continue
                    for rec in reader.feed(chunk):
                        if stop_early:
                            break  # records after the first failure count as skipped
                        idx = rec.get("i")
                        if not isinstance(idx, int) or idx in records or not 0 <= idx < n_tests:
                            raise RuntimeError(f"sandbox protocol violation (record {idx!r})")
                        records[idx] = rec
                        if judge is not None:
                            rec["verdict"] = judge(idx, rec)
                            rec.pop("stdout", None)
                            rec.pop("ret", None)
                        if failed is not None:
                            if failed(idx, rec):
                                stop_early = True
                            elif ctl_w is not None:
                                try:
                                    os.write(ctl_w, b"c")  # the runner may start the next test
                                except OSError:
                                    pass
                if len(records) == n_tests:
                    break  # all in: no need to wait for the sandbox to wind down
                if stop_early:
                    break
            if len(records) < n_tests and error is None and not stop_early:
                err_text = b"".join(stderr_chunks).decode("utf-8", "replace").strip()
                proc_rc = proc.poll()
                error = "the sandbox stopped before finishing" + (
                    f" (exit {proc_rc}): {err_text[-2000:]}" if err_text or proc_rc else ""
                )
        finally:
            if ctl_w is not None:
                os.close(ctl_w)  # end of input: a runner waiting for the word stops
            _kill(proc, sandboxed=self.sandbox == "bwrap")
            os.close(res_r)
            if cgroup is not None:
                cgroup.remove()
        stats = {"result_bytes": reader.bytes_read, "host_bytes_copied": reader.bytes_copied,
                 "parallel_tests": job["parallel"], "cgroup": cgroup is not None}
        return records, error, stats

    def _judge(
        self, tests: TestCases, records: dict[int, dict], error: str | None, opts: ExecOptions, fn_name: str | None
    ) -> ExecutionResult:
        over_cap = (error is not None and "budget" in error) or any(r.get("budget") for r in records.values())
        if over_cap and opts.profile == "paper":
            # The original: past the program cap the whole program is one failing entry.
            reason = feedback.program_timeout_feedback(self.limits.program_wall_s, profile="paper")
            return ExecutionResult.failure(1, reason, Status.TIMEOUT)
        passing, fb, status, walls, cpus = [], [], [], [], []
        for i, (inp, expected) in enumerate(zip(tests.inputs, tests.outputs)):
            rec = records.get(i)
            if rec is None:
                st = Status.SKIPPED if (opts.stop_on_first_failure and error is None) else Status.SANDBOX_ERROR
                reason = "not run: an earlier test failed" if st is Status.SKIPPED else f"not run: {error}"
                if error and "budget" in error:
                    st = Status.TIMEOUT
                passing.append(False)
                fb.append(feedback.test_feedback(inp, "", expected, note=reason, profile=opts.profile) if st is not Status.TIMEOUT
                          else feedback.test_feedback(inp, "", expected, timed_out_after=self.limits.test_wall_s, profile=opts.profile))
                status.append(st.value)
                walls.append(0.0)
                cpus.append(0.0)
                continue
            ok, st, text = rec["verdict"] if "verdict" in rec else self._judge_one_safely(inp, expected, rec, opts, fn_name)
            passing.append(ok)
            status.append(st.value)
            fb.append(text)
            walls.append(float(rec.get("wall", 0.0)))
            cpus.append(float(rec.get("cpu", 0.0)))
        # ``error`` tells a broken or killed sandbox apart from a failing program.
        return ExecutionResult(tuple(passing), tuple(fb), tuple(status), tuple(walls), tuple(cpus), error=error)

    def _judge_one_safely(
        self, inp: str, expected: str, rec: dict, opts: ExecOptions, fn_name: str | None
    ) -> tuple[bool, Status, str]:
        """:meth:`_judge_one`, with any failure of judging (a value too large or too deep
        for the host's parsers, ...) turned into this test's failing verdict with a reason."""
        try:
            return self._judge_one(inp, expected, rec, opts, fn_name)
        except Exception as exc:
            reason = f"the output could not be judged: {type(exc).__name__}: {str(exc)[:200]}"
            return False, Status.WRONG_ANSWER, feedback.test_feedback(inp, "", expected, error=reason, profile=opts.profile)

    def _over_limits(self, rec: dict) -> bool:
        """True when the test's measured wall time or CPU time (its children and
        orphans included) exceeds its limit, whatever else the record says: a test that held
        up its runner must not pass on a finished-looking record."""
        try:
            wall, cpu = float(rec.get("wall", 0.0)), float(rec.get("cpu", 0.0))
        except (TypeError, ValueError):
            return True
        return wall > self.limits.test_wall_s or cpu > self.limits.test_cpu_s

    def _judge_one(
        self, inp: str, expected: str, rec: dict, opts: ExecOptions, fn_name: str | None
    ) -> tuple[bool, Status, str]:
        raw_stdout = bytes(rec.get("stdout") or b"")
        if opts.profile == "paper":
            try:  # the original decodes the program's output strictly: invalid UTF-8 fails the test
                raw_stdout.decode("utf-8")
            except UnicodeDecodeError as exc:
                return False, Status.RUNTIME_ERROR, feedback.test_feedback(inp, "", expected, note=str(exc),
                                                                           profile=opts.profile)
        stdout = raw_stdout.decode("utf-8", "replace")
        stderr = rec.get("stderr", "")
        ret = bytes(rec.get("ret") or b"").decode("utf-8", "replace")
        shown_output = ret if fn_name else stdout
        if rec.get("oom"):  # the test's cgroup killed a process for memory: that decides
            limit_mib = self.limits.memory_bytes / (1 << 20)
            return False, Status.MEMORY_LIMIT, feedback.test_feedback(
                inp, shown_output, expected,
                error=(stderr + "\n" if stderr else "") + f"MemoryError: the test used more than {limit_mib:g} MiB",
                profile=opts.profile,
            )
        if rec.get("undeliverable"):
            reason = "the test's input could not be delivered to the program: " + (undeliverable_input(inp) or "")
            return False, Status.RUNTIME_ERROR, feedback.test_feedback(inp, "", expected, error=reason, profile=opts.profile)
        if rec.get("skipped") or rec.get("timeout") or self._over_limits(rec):
            return False, Status.TIMEOUT, feedback.test_feedback(inp, shown_output, expected, timed_out_after=self.limits.test_wall_s, profile=opts.profile)
        exit_code = rec.get("exit")
        if exit_code in (-signal.SIGXCPU, -signal.SIGKILL) and rec.get("cpu", 0.0) >= self.limits.test_cpu_s - 0.05:
            return False, Status.TIMEOUT, feedback.test_feedback(inp, shown_output, expected, timed_out_after=self.limits.test_wall_s, profile=opts.profile)
        if rec.get("olimit"):
            limit_mib = test_output_cap(self.limits, expected, opts.profile) / (1 << 20)
            return False, Status.OUTPUT_LIMIT, feedback.test_feedback(
                inp, stdout, expected, error=f"output limit exceeded (more than {limit_mib:g} MiB)", profile=opts.profile
            )
        if exit_code != 0:
            if exit_code == -signal.SIGXFSZ:
                err = stderr or "File size limit exceeded"
            elif exit_code is not None and exit_code < 0:
                err = (stderr + "\n" if stderr else "") + f"Killed by signal {signal.Signals(-exit_code).name}" if -exit_code in signal.valid_signals() else stderr
            else:
                err = stderr or f"Exit code {exit_code}"
            tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
            st = Status.MEMORY_LIMIT if any(tail.startswith(m) for m in MEMORY_ERROR_MARKERS) else Status.RUNTIME_ERROR
            return False, st, feedback.test_feedback(inp, shown_output, expected, error=err, stderr=stderr, profile=opts.profile)
        if fn_name:
            if not ret:
                return False, Status.RUNTIME_ERROR, feedback.test_feedback(inp, "", expected, error=stderr or "no return value", profile=opts.profile)
            try:
                actual = compare.parse_json(ret)
            except ValueError as exc:  # not JSON, or nested beyond what the host parses
                return False, Status.WRONG_ANSWER, feedback.test_feedback(
                    inp, ret, expected, error=f"the return value could not be judged: {str(exc)[:200]}",
                    profile=opts.profile,
                )
            ok = compare.values_match(actual, compare.parse_value(expected), opts.float_tol)
        elif opts.compare == "tolerant":
            ok = compare.outputs_match_tolerant(stdout, expected, opts.float_tol)
        else:
            ok = compare.outputs_match_exact(stdout, expected, opts.profile)
        return ok, (Status.PASSED if ok else Status.WRONG_ANSWER), feedback.test_feedback(
            inp, shown_output, expected, profile=opts.profile
        )


def undeliverable_input(text: str) -> str | None:
    """Why ``text`` cannot be written to a test's stdin (None when it can). A test's
    input reaches the program as UTF-8 bytes (the code points U+DC80..U+DCFF standing
    for raw bytes, as Python's surrogateescape decodes them); any other lone surrogate,
    valid in JSON, has no byte form."""
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        return f"it holds a lone surrogate (U+{ord(text[exc.start]):04X} at character {exc.start}), which has no UTF-8 form"
    return None


def feedback_program_timeout(cap_s: float) -> str:
    """The one failing entry of a program that ran past its cap (profile ``paper``)."""
    return f"TimeoutError: the program's tests took longer than {cap_s:g} seconds in all"


def _workdir(opts: ExecOptions) -> str:
    """The sandbox's writable working directory: /tmp, or the original's /dev/shm under ``paper``
    (with /tmp read-only there)."""
    return sbx.PAPER_WORKDIR if opts.profile == "paper" else "/tmp"


def _write_all_then_close(proc: subprocess.Popen, payload: bytes) -> None:
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _kill(proc: subprocess.Popen, sandboxed: bool) -> None:
    """Kill and reap a sandbox (its PID namespace first: see ``sandbox.kill_sandbox``)
    or, without one, the runner."""
    if proc.poll() is None:
        if sandboxed:
            sbx.kill_sandbox(proc)
        else:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log.error("sandbox process %d did not die", proc.pid)
    for stream in (proc.stdin, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()


_SANDBOX_VERSION: str | None = None


def sandbox_check_cached() -> str:
    """Check once per process that bubblewrap works; raise SandboxUnavailable if not."""
    global _SANDBOX_VERSION
    if _SANDBOX_VERSION is None:
        _SANDBOX_VERSION = sbx.check_sandbox()
    return _SANDBOX_VERSION
