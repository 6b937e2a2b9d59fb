"""The sandboxed executor: one bubblewrap sandbox per program, one fork per test.

:class:`LocalExecutor` starts one sandbox for a program, sends it the program
and the test inputs (never the expected outputs), reads one record per test
back from a dedicated pipe, and judges each record on the host. Blocking work
runs in a thread pool so that :meth:`LocalExecutor.run` is a plain coroutine.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
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
from cobalt.execution.base import ExecOptions, ExecutionResult, Limits, Status, TestCases

log = logging.getLogger(__name__)

# Slack on top of the program budget before the host kills the whole sandbox.
HOST_GRACE_S = 2.0
# How often a running sandbox checks whether its caller gave up.
CANCEL_POLL_S = 0.1
MEMORY_ERROR_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")


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
    ):
        if sandbox not in ("bwrap", "none"):
            raise ValueError(f"sandbox must be 'bwrap' or 'none', got {sandbox!r}")
        self.limits = limits or Limits()
        self.options = options or ExecOptions()
        self.sandbox = sandbox
        self.max_workers = max_workers or max(4, (os.cpu_count() or 1) * 4)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        sbx.raise_stack_limit()
        if sandbox == "bwrap":
            sandbox_mod_check = sandbox_check_cached()
            log.debug("sandbox: %s", sandbox_mod_check)
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
            failed = None
            if opts.stop_on_first_failure:
                def failed(idx: int, rec: dict) -> bool:
                    return not self._judge_one(tests.inputs[idx], tests.outputs[idx], rec, opts, fn_name)[0]
            records, error = self._execute(code, list(tests.inputs), fn_name, opts, len(tests), failed, cancel)
        except sbx.SandboxUnavailable:
            raise
        except Exception as exc:  # never let one program fail a batch
            log.exception("sandbox failure")
            return ExecutionResult.failure(len(tests), f"sandbox error: {type(exc).__name__}: {exc}")
        return self._judge(tests, records, error, opts, fn_name)

    def _job(self, code: str, inputs: list[str], fn_name: str | None, opts: ExecOptions) -> dict[str, Any]:
        job: dict[str, Any] = {
            "code": code,
            "inputs": inputs,
            "fn_name": fn_name,
            "limits": asdict(self.limits),
            "uid": sbx.fresh_uid() if self.sandbox == "bwrap" else None,
            "own_pid_namespace": self.sandbox == "bwrap",
        }
        if opts.allow_packages:
            py = sbx.python_install()
            job["sys_path_extra"] = list(py.site_packages) + list(py.venv_site_packages)
        return job

    def _argv(self, opts: ExecOptions, seccomp_fd: int | None = None) -> list[str]:
        if self.sandbox == "none":
            return sbx.direct_argv()
        return sbx.bwrap_argv(
            tmpfs_bytes=self.limits.tmpfs_bytes, allow_packages=opts.allow_packages, seccomp_fd=seccomp_fd
        )

    def _execute(
        self, code: str, inputs: list[str], fn_name: str | None, opts: ExecOptions, n_tests: int, failed=None,
        cancel: threading.Event | None = None,
    ) -> tuple[dict[int, dict], str | None]:
        """Start the sandbox, stream records back, and stop as soon as ``failed(i, record)``
        says so (stop-on-first-failure). Returns the records by test index and an
        error text for records that never came."""
        res_r, res_w = os.pipe()
        filter_fd = sbx.seccomp_fd() if self.sandbox == "bwrap" else None
        job = self._job(code, inputs, fn_name, opts)
        job["result_fd"] = res_w
        payload = marshal.dumps(job)  # host -> runner only: the runner needs no json to read it
        env = dict(sbx.MINIMAL_ENV)
        try:
            proc = subprocess.Popen(
                self._argv(opts, filter_fd),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(res_w,) if filter_fd is None else (res_w, filter_fd),
                env=env,
                cwd="/",
                close_fds=True,
            )
        finally:
            os.close(res_w)
            if filter_fd is not None:
                os.close(filter_fd)
        records: dict[int, dict] = {}
        error = None
        deadline = time.monotonic() + self.limits.program_wall_s + HOST_GRACE_S
        stop_early = False
        try:
            _write_all_then_close(proc, payload)
            buf = b""
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
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if stop_early:
                            break  # records after the first failure count as skipped
                        rec = json.loads(line)
                        idx = rec.get("i")
                        if not isinstance(idx, int) or idx in records or not 0 <= idx < n_tests:
                            raise RuntimeError(f"sandbox protocol violation (record {idx!r})")
                        records[idx] = rec
                        if failed is not None and failed(idx, rec):
                            stop_early = True
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
            _kill(proc)
            os.close(res_r)
        return records, error

    def _judge(
        self, tests: TestCases, records: dict[int, dict], error: str | None, opts: ExecOptions, fn_name: str | None
    ) -> ExecutionResult:
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
            ok, st, text = self._judge_one(inp, expected, rec, opts, fn_name)
            passing.append(ok)
            status.append(st.value)
            fb.append(text)
            walls.append(float(rec.get("wall", 0.0)))
            cpus.append(float(rec.get("cpu", 0.0)))
        # ``error`` tells a broken or killed sandbox apart from a failing program.
        return ExecutionResult(tuple(passing), tuple(fb), tuple(status), tuple(walls), tuple(cpus), error=error)

    def _judge_one(
        self, inp: str, expected: str, rec: dict, opts: ExecOptions, fn_name: str | None
    ) -> tuple[bool, Status, str]:
        stdout = rec.get("stdout", "").encode("latin-1").decode("utf-8", "replace")
        stderr = rec.get("stderr", "")
        shown_output = rec.get("ret", "") if fn_name else stdout
        if rec.get("skipped") or rec.get("timeout"):
            return False, Status.TIMEOUT, feedback.test_feedback(inp, shown_output, expected, timed_out_after=self.limits.test_wall_s, profile=opts.profile)
        exit_code = rec.get("exit")
        if exit_code in (-signal.SIGXCPU, -signal.SIGKILL) and rec.get("cpu", 0.0) >= self.limits.test_cpu_s - 0.05:
            return False, Status.TIMEOUT, feedback.test_feedback(inp, shown_output, expected, timed_out_after=self.limits.test_wall_s, profile=opts.profile)
        if rec.get("olimit"):
            limit_mib = self.limits.output_bytes / (1 << 20)
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
            ret = rec.get("ret")
            if not ret:
                return False, Status.RUNTIME_ERROR, feedback.test_feedback(inp, "", expected, error=stderr or "no return value", profile=opts.profile)
            try:
                actual = json.loads(ret)
            except json.JSONDecodeError:
                return False, Status.WRONG_ANSWER, feedback.test_feedback(inp, ret, expected, profile=opts.profile)
            ok = compare.values_match(actual, compare.parse_value(expected), opts.float_tol)
        elif opts.compare == "tolerant":
            ok = compare.outputs_match_tolerant(stdout, expected, opts.float_tol)
        else:
            ok = compare.outputs_match_exact(stdout, expected)
        return ok, (Status.PASSED if ok else Status.WRONG_ANSWER), feedback.test_feedback(inp, shown_output, expected, profile=opts.profile)


def _write_all_then_close(proc: subprocess.Popen, payload: bytes) -> None:
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
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
