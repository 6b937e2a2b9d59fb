"""Run programs against test cases in the sandbox.

Two forms:

- ``cobalt exec --input jobs.jsonl --output results.jsonl [--workers N]``: each
  job line is ``{"id", "code", "test_cases": {"inputs": [...], "outputs": [...],
  "fn_name"?: str}}``; each result line is ``{"id", "passing", "feedback",
  "status", "wall_s", "cpu_s", "pass_rate"}`` (plus ``"error"`` for a job that
  could not be run). Results are appended and flushed per job; a rerun skips the
  ids already in the output. A bad job gets an error result naming its id and
  line; the batch goes on.
- ``cobalt exec --code prog.py --tests tests.json``: one program, the result
  printed as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from cobalt.cli_support import add_alias, positive_float, positive_int
from cobalt.execution.base import CALLER_TIMEOUT_S, ExecOptions, Limits
from cobalt.profile import profile_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt exec``."""
    src = parser.add_argument_group("what to run")
    src.add_argument("--input", type=Path, help="JSONL job file (id, code, test_cases)")
    src.add_argument("--output", type=Path, help="JSONL result file (appended; resumable)")
    src.add_argument("--code", type=Path, help="one program file (with --tests)")
    src.add_argument("--tests", type=Path, help="JSON test-case file {inputs, outputs, fn_name?} (with --code)")
    run = parser.add_argument_group("how to run")
    run.add_argument("--max-programs", dest="workers", type=positive_int, default=None,
                     help="programs judged at once (default: number of CPUs)")
    add_alias(run, "--workers", dest="workers", type=positive_int)
    run.add_argument("--evaluator", choices=("embedded", "ray"), default="embedded",
                     help="run sandboxes in this process, or call the Ray Serve evaluator app")
    run.add_argument("--ray-address", default=None, help="Ray cluster address for --evaluator ray")
    run.add_argument("--timeout", type=positive_float, default=CALLER_TIMEOUT_S,
                     help="seconds a client waits per program before failing it; must exceed --program-timeout "
                     "plus 2 s, so that the program cap decides (default: %(default)s, the paper's reward wait)")
    run.add_argument("--no-sandbox", action="store_true",
                     help="run WITHOUT bubblewrap, resource limits only: trusted code only")
    judge = parser.add_argument_group("judging")
    judge.add_argument("--compare", choices=("exact", "tolerant"), default="exact",
                       help="exact: stripped stdout equals stripped expected (the paper); tolerant: "
                       "per-line trailing spaces and float tolerance")
    judge.add_argument("--float-tol", type=float, default=1e-6, help="tolerance for floats (tolerant mode, call-based values)")
    judge.add_argument("--call-mode", choices=("call", "lossy"), default="call",
                       help="tests with fn_name: call (JSON arguments, value comparison) or lossy (the paper's "
                       "split-one-line driver)")
    judge.add_argument("--stop-on-first-failure", action="store_true", help="skip the remaining tests after a failure")
    judge.add_argument("--allow-packages", action="store_true",
                       help="make installed packages (numpy, sortedcontainers, ...) importable, read-only")
    lim = parser.add_argument_group("limits")
    d = Limits()
    lim.add_argument("--test-timeout", type=positive_float, default=d.test_wall_s, help="wall seconds per test")
    lim.add_argument("--test-cpu", type=positive_float, default=d.test_cpu_s, help="CPU seconds per test")
    lim.add_argument("--memory-mb", type=positive_int, default=d.memory_bytes >> 20,
                     help="memory limit per test, MiB: RLIMIT_AS of each process and, where a cgroup is usable as "
                     "root, all processes of the test together")
    lim.add_argument("--program-timeout", type=positive_float, default=d.program_wall_s,
                     help="wall seconds for all tests of a program (the paper's cap: 27)")
    lim.add_argument("--parallel-tests", type=positive_int, default=d.test_parallelism,
                     help="tests of one program run at once (paper: always this many; cobalt: up to this many "
                     "when cores are free)")
    lim.add_argument("--open-files", type=positive_int, default=d.open_files, help="open descriptors per process (RLIMIT_NOFILE)")
    lim.add_argument("--output-mb", type=positive_float, default=d.output_bytes / (1 << 20), help="stdout cap per test, MiB")
    lim.add_argument("--max-processes", type=positive_int, default=d.max_processes, help="process/thread limit in the sandbox")
    lim.add_argument("--file-size-mb", type=positive_float, default=d.file_size_bytes / (1 << 20), help="largest file a test may write, MiB")
    lim.add_argument("--tmpfs-mb", type=positive_float, default=d.tmpfs_bytes / (1 << 20), help="size of the sandbox's private /tmp, MiB")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--check", action="store_true",
                        help="print which isolation layers are active on this machine (sandbox, seccomp, "
                        "cgroups, limits) and exit")
    from cobalt.profile import add_profile_argument

    add_profile_argument(parser)


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The :class:`Limits` the flags ask for."""
    return Limits(
        test_wall_s=args.test_timeout,
        test_cpu_s=args.test_cpu,
        memory_bytes=int(args.memory_mb) << 20,
        program_wall_s=args.program_timeout,
        output_bytes=int(args.output_mb * (1 << 20)),
        max_processes=args.max_processes,
        file_size_bytes=int(args.file_size_mb * (1 << 20)),
        tmpfs_bytes=int(args.tmpfs_mb * (1 << 20)),
        test_parallelism=args.parallel_tests,
        open_files=args.open_files,
    )


def options_from_args(args: argparse.Namespace) -> ExecOptions:
    """The :class:`ExecOptions` the flags ask for."""
    return ExecOptions(
        compare=args.compare,
        float_tol=args.float_tol,
        call_mode=args.call_mode,
        stop_on_first_failure=args.stop_on_first_failure,
        allow_packages=args.allow_packages,
        profile=profile_from_args(args).value,
    )


def make_client(args: argparse.Namespace):
    """The evaluator client the flags describe."""
    from cobalt.execution.client import EvaluatorClient

    return EvaluatorClient(
        mode=args.evaluator,
        ray_address=args.ray_address,
        timeout_s=args.timeout,
        max_concurrency=args.workers,
        limits=limits_from_args(args),
        options=options_from_args(args),
        sandbox="none" if args.no_sandbox else "bwrap",
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``cobalt exec``."""
    if args.check:
        return check_isolation(args)
    from cobalt.health import BreakerOpen, PreflightError, preflight

    if args.code or args.tests:
        if not (args.code and args.tests):
            print("cobalt exec: --code and --tests go together", file=sys.stderr)
            return 2
    elif not (args.input and args.output):
        print("cobalt exec: give --input and --output, or --code and --tests (see --help)", file=sys.stderr)
        return 2
    settings = None
    if not args.code:
        from cobalt.cli_support import require_output_file
        from cobalt.io import resume_guard

        require_output_file(args.output)
        settings, refused = resume_guard(args, [args.input])
        if refused:
            print(f"cobalt exec: {refused}", file=sys.stderr)
            return 2
    try:
        preflight(evaluator=args.evaluator, ray_address=args.ray_address,
                  sandbox="none" if args.no_sandbox else "bwrap")
    except PreflightError as exc:
        print(f"cobalt exec: {exc}", file=sys.stderr)
        return 1
    if args.code:
        return asyncio.run(_run_one(args))
    from cobalt.io import save_settings

    try:
        save_settings(args.output, "cobalt exec", settings)
        return asyncio.run(run_jobs(args.input, args.output, make_client(args), progress=not args.no_progress))
    except BreakerOpen as exc:
        print(f"cobalt exec: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # A full or read-only output disk: the results already written are whole
        # lines, and a rerun on a roomier disk resumes after them.
        target = exc.filename or args.output
        print(f"cobalt exec: cannot write results to {target}: {exc.strerror or exc}", file=sys.stderr)
        return 2


def check_isolation(args: argparse.Namespace) -> int:
    """``cobalt exec --check``: one line per isolation layer, and whether it is active here."""
    import platform

    from cobalt.execution import cgroups
    from cobalt.execution import sandbox as sbx

    limits = limits_from_args(args)
    ok = True
    if args.no_sandbox:
        print("sandbox: OFF (--no-sandbox): resource limits only, trusted code only")
    else:
        try:
            version = sbx.check_sandbox()
            root = sbx._is_root()
            print(f"sandbox: {version}: namespaces pid, net, ipc, uts, cgroup, mount; "
                  + ("root mode: fresh uid per sandbox, tests under a uid of their own, capabilities dropped" if root
                     else "user namespace, uid 65534"))
        except sbx.SandboxUnavailable as exc:
            ok = False
            print(f"sandbox: UNAVAILABLE: {exc}")
        refused = sbx.refused_syscalls()
        if sbx.seccomp_program() is None:
            print(f"seccomp: none for {platform.machine()}")
        else:
            print("seccomp: user namespaces refused; foreign ABIs refused; IPv4/IPv6 sockets refused; fcntl file "
                  "locks refused; " + ", ".join(sorted(refused)) + " refused")
        print(cgroups.describe(sbx._is_root()))
    print(f"limits: {limits.test_wall_s:g} s wall and {limits.test_cpu_s:g} s CPU per test, "
          f"{limits.memory_bytes >> 20} MiB per test, {limits.test_parallelism} tests at once, "
          f"{limits.program_wall_s:g} s per program, {limits.max_processes} processes, "
          f"{limits.open_files} open files, {limits.tmpfs_bytes >> 20} MiB /tmp")
    print(f"profile: {profile_from_args(args).value}")
    return 0 if ok else 1


async def _run_one(args: argparse.Namespace) -> int:
    from cobalt.execution.base import TestCaseError, TestCases

    try:
        code = args.code.read_text(encoding="utf-8")
        tests = TestCases.from_obj(args.tests.read_text(encoding="utf-8"), where=str(args.tests))
    except (OSError, UnicodeDecodeError, TestCaseError) as exc:
        print(f"cobalt exec: {exc}", file=sys.stderr)
        return 2
    result = await make_client(args).evaluate(code, tests)
    if result.infrastructure_error:
        print(f"cobalt exec: the evaluator could not judge the program: {result.error}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    return 0 if result.all_passed else 1


def _validate_job(rec: Any, path: Path, line: int):
    """``(id, code, tests)`` of a job line, or raise RecordError naming the id, line and field."""
    from cobalt.execution.base import TestCaseError, TestCases
    from cobalt.io import RecordError

    if not isinstance(rec, dict):
        raise RecordError(path, line, None, f"expected a JSON object, got {type(rec).__name__}")
    if "id" not in rec:
        raise RecordError(path, line, "id", "missing")
    job_id = rec["id"]
    label = f"job {job_id!r}"
    if not isinstance(job_id, (str, int)) or isinstance(job_id, bool):
        raise RecordError(path, line, "id", f"{label}: expected a string or integer")
    if not isinstance(rec.get("code"), str):
        raise RecordError(path, line, "code", f"{label}: " + ("missing" if "code" not in rec else "expected a string"))
    if "test_cases" not in rec:
        raise RecordError(path, line, "test_cases", f"{label}: missing")
    try:
        tests = TestCases.from_obj(rec["test_cases"], where="test_cases")
    except TestCaseError as exc:
        field = str(exc).split(":", 1)[0]
        raise RecordError(path, line, field, f"{label}: {str(exc).split(':', 1)[1].strip()}") from None
    return job_id, rec["code"], tests


async def run_jobs(input_path: Path, output_path: Path, client, *, progress: bool = True) -> int:
    """Judge every job of ``input_path`` not yet in ``output_path``; append results as they finish.

    Returns 0, or 1 when some jobs were bad (they still get an error line) or could not be
    judged because the evaluator failed (an infrastructure error: no line, redone on the
    next run). Raises :class:`cobalt.health.BreakerOpen` when the evaluator keeps failing."""
    from cobalt.cli_support import progress as progress_counter
    from cobalt.cli_support import resumed_line
    from cobalt.health import FailureBreaker
    from cobalt.io import JsonlAppender, RecordError, iter_jsonl

    bad = 0
    infra: list[str] = []
    breaker = FailureBreaker("evaluator")
    with JsonlAppender(output_path) as out:
        pending: list[tuple[Any, str, Any]] = []
        errors: list[RecordError] = []
        seen: set = set()
        for line_no, rec in iter_jsonl(input_path, skip_bad=True, errors=errors):
            try:
                job_id, code, tests = _validate_job(rec, input_path, line_no)
            except RecordError as exc:
                bad += 1
                job_id = rec.get("id") if isinstance(rec, dict) and isinstance(rec.get("id"), (str, int)) else f"line:{line_no}"
                print(f"cobalt exec: {exc}", file=sys.stderr)
                if job_id not in out.done:
                    out.write({"id": job_id, "line": line_no, "error": str(exc), "passing": [], "feedback": [], "status": []})
                continue
            if job_id in out.done or job_id in seen:
                continue
            seen.add(job_id)
            pending.append((job_id, code, tests))
        for exc in errors:
            bad += 1
            print(f"cobalt exec: {exc}", file=sys.stderr)
            job_id = f"line:{exc.line}"
            if job_id not in out.done:
                out.write({"id": job_id, "line": exc.line, "error": str(exc), "passing": [], "feedback": [], "status": []})
        already = len(out.done)
        if already:
            print(f"exec: {resumed_line(already, already + len(pending), 'jobs')}", file=sys.stderr)
        bar = progress_counter(len(pending), "exec", "programs", enabled=progress)

        async def one(job_id: Any, code: str, tests: Any) -> None:
            breaker.check()
            try:
                result = await client.evaluate(code, tests)
            except Exception as exc:  # the evaluator could not run: never a verdict, redone on a rerun
                infra.append(f"job {job_id!r}: {type(exc).__name__}: {exc}")
                breaker.failure(exc)
                return
            if result.infrastructure_error:
                infra.append(f"job {job_id!r}: {result.error}")
                breaker.failure(result.error)
                return
            breaker.success()
            out.write({"id": job_id, **result.to_dict(), "profile": client.options.profile})
            bar.update(1)

        try:
            await asyncio.gather(*(one(*job) for job in pending))
        finally:
            bar.close()
    for text in infra[:10]:
        print(f"cobalt exec: not judged (evaluator failure): {text}", file=sys.stderr)
    not_judged = (f", {len(infra)} not judged because the evaluator failed (rerun to retry them)"
                  if infra else "")
    print(f"cobalt exec: {len(pending) - len(infra)} judged ({resumed_line(already, already + len(pending), 'jobs')}),"
          f" {bad} bad job(s){not_judged}, results in {output_path}", file=sys.stderr)
    return 1 if bad or infra else 0
