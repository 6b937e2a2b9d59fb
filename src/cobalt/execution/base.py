"""The execution interface: test cases, limits, options and results.

Every part of Cobalt that runs a program goes through an :class:`Executor`
(``async run(program, tests) -> ExecutionResult``). This module holds only
the typed records and the interface; the sandboxed implementation lives in
``local.py`` and the Ray Serve one in ``service.py``/``client.py``.

The limits below are the single source of truth for the paper's numbers
(METHOD.md §2 and §9): 4 s wall per test, 1 GiB of memory per test, up to 4
tests of a program at once, and a 27 s cap on the whole program; a caller
waits up to 300 s (the reward function's wait), always longer than the cap,
so that the cap and not the caller decides.
"""
from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

# CALLER_TIMEOUT_S and HOST_GRACE_S are imported here for the execution modules that read them from base
from cobalt.defaults import CALLER_TIMEOUT_S, HOST_GRACE_S, PROGRAM_WALL_S, TEST_CPU_S, TEST_WALL_S


class TestCaseError(ValueError):
    """A test-case payload that cannot be used (missing field, wrong type, ...)."""

    __test__ = False  # not a pytest test class


class Status(str, enum.Enum):
    """Outcome of one test."""

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SANDBOX_ERROR = "sandbox_error"
    """The infrastructure status: the sandbox or the evaluator could not judge the test
    (never a verdict on the program; see :attr:`ExecutionResult.infrastructure_error`)."""
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one program. Defaults are the paper's (METHOD §2)."""

    test_wall_s: float = TEST_WALL_S
    """Wall-clock limit of one test."""
    test_cpu_s: float = TEST_CPU_S
    """CPU-time limit of one test (RLIMIT_CPU, rounded up to whole seconds)."""
    memory_bytes: int = 1 << 30
    """Memory of one test: the address-space limit of each process (RLIMIT_AS) and,
    where a cgroup is writable, the limit of all its processes together (shmem,
    memfd and tmpfs pages included)."""
    program_wall_s: float = PROGRAM_WALL_S
    """Wall-clock cap on all tests of one program together (METHOD §9: 27 s). Past it,
    profile ``paper`` returns one failing entry for the whole program; ``cobalt`` keeps
    the tests that finished and fails the rest as timed out."""
    test_parallelism: int = 4
    """Tests of one program that run at once (METHOD §9: up to 4). Profile ``paper``
    always runs this many; ``cobalt`` runs up to this many when cores are free."""
    output_bytes: int = 1 << 20
    """Stdout cap per test; beyond it the test fails with 'output limit exceeded'."""
    max_processes: int = 32
    """Process/thread-count limit of the sandbox user (RLIMIT_NPROC) and, where a pids
    cgroup is writable, of each test."""
    open_files: int = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    tmpfs_inodes: int = 4096
    """Files and directories the private /tmp may hold (tmpfs nr_inodes, where the host
    can mount it; elsewhere the memory cgroup bounds their kernel memory)."""
    file_size_bytes: int = 16 << 20
    """Largest file a test may write (RLIMIT_FSIZE)."""
    tmpfs_bytes: int = 64 << 20
    """Size of the sandbox's private writable /tmp."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")


PAPER_OUTPUT_CAP_FACTOR = 2
PAPER_OUTPUT_CAP_SLACK_BYTES = 64 * 1024


def test_output_cap(limits: "Limits", expected: str, profile: str = "paper") -> int:
    """The stdout cap of one test in bytes.

    ``cobalt``: ``limits.output_bytes``. ``paper``: the original has no cap, so
    the cap is sized never to fail a correct answer while still bounding the
    host: ``max(output_bytes, 2 x the expected output's bytes + 64 KiB)``.

    >>> test_output_cap(Limits(), "x" * 1_100_000), test_output_cap(Limits(), "x" * 1_100_000, "cobalt")
    (2265536, 1048576)
    """
    if profile != "paper":
        return limits.output_bytes
    size = len(expected.encode("utf-8", "surrogateescape"))
    return max(limits.output_bytes, PAPER_OUTPUT_CAP_FACTOR * size + PAPER_OUTPUT_CAP_SLACK_BYTES)


test_output_cap.__test__ = False  # type: ignore[attr-defined]  (library code, not a pytest test)


@dataclass(frozen=True)
class ExecOptions:
    """How programs are run and judged."""

    compare: str = "exact"
    """'exact' (the paper: stripped stdout equals stripped expected output) or
    'tolerant' (per-line trailing whitespace ignored, floats within ``float_tol``)."""
    float_tol: float = 1e-6
    """Absolute/relative tolerance for numbers in 'tolerant' mode and call-based values."""
    call_mode: str = "call"
    """For tests with ``fn_name``: 'call' (arguments are JSON values, one per line,
    the return value is compared as a value) or 'lossy' (the paper: append a line
    that splits one input line on whitespace and prints the call's result)."""
    stop_on_first_failure: bool = False
    """Skip the remaining tests once one fails (the reward needs all, so off)."""
    allow_packages: bool = False
    """Make the host's installed site-packages importable (read-only)."""
    profile: str = "paper"
    """'paper' (the original code's feedback text, stripping and limits) or 'cobalt'
    (the corrected behaviour); see :mod:`cobalt.profile` and docs/FIDELITY.md."""

    def __post_init__(self) -> None:
        if self.profile not in ("paper", "cobalt"):
            raise ValueError(f"profile must be 'paper' or 'cobalt', got {self.profile!r}")
        if self.compare not in ("exact", "tolerant"):
            raise ValueError(f"compare must be 'exact' or 'tolerant', got {self.compare!r}")
        if self.call_mode not in ("call", "lossy"):
            raise ValueError(f"call_mode must be 'call' or 'lossy', got {self.call_mode!r}")


@dataclass(frozen=True)
class TestCases:
    """Test cases of one problem: stdin inputs and expected stdout, or call-based."""

    __test__ = False  # not a pytest test class

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None = None

    def __len__(self) -> int:
        return len(self.inputs)

    @classmethod
    def from_obj(cls, obj: Any, *, where: str = "test_cases") -> "TestCases":
        """Validate a ``{"inputs": [...], "outputs": [...], "fn_name"?: str}`` mapping
        (or its JSON string) and return it typed. Errors name ``where`` and the field."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise TestCaseError(f"{where}: not valid JSON ({exc.msg} at char {exc.pos})") from None
        if isinstance(obj, TestCases):
            return obj
        if not isinstance(obj, Mapping):
            raise TestCaseError(f"{where}: expected an object with 'inputs' and 'outputs', got {type(obj).__name__}")
        for key in ("inputs", "outputs"):
            if key not in obj:
                raise TestCaseError(f"{where}.{key}: missing")
            if not isinstance(obj[key], (list, tuple)):
                raise TestCaseError(f"{where}.{key}: expected a list, got {type(obj[key]).__name__}")
            for i, item in enumerate(obj[key]):
                if not isinstance(item, str):
                    raise TestCaseError(f"{where}.{key}[{i}]: expected a string, got {type(item).__name__}")
        if len(obj["inputs"]) != len(obj["outputs"]):
            raise TestCaseError(
                f"{where}: {len(obj['inputs'])} inputs but {len(obj['outputs'])} outputs"
            )
        fn_name = obj.get("fn_name")
        if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
            raise TestCaseError(f"{where}.fn_name: expected an identifier string, got {fn_name!r}")
        return cls(tuple(obj["inputs"]), tuple(obj["outputs"]), fn_name or None)

    def to_dict(self) -> dict:
        """The JSON-ready form, as the service and job files carry it."""
        out: dict = {"inputs": list(self.inputs), "outputs": list(self.outputs)}
        if self.fn_name:
            out["fn_name"] = self.fn_name
        return out

    def subset(self, indices: Sequence[int]) -> "TestCases":
        """The tests at ``indices``, in that order."""
        return TestCases(
            tuple(self.inputs[i] for i in indices), tuple(self.outputs[i] for i in indices), self.fn_name
        )


@dataclass(frozen=True)
class ExecutionResult:
    """Result for one program: the paper's ``passing``/``feedback`` plus status and timings."""

    passing: tuple[bool, ...]
    feedback: tuple[str, ...]
    status: tuple[str, ...]
    wall_s: tuple[float, ...] = ()
    cpu_s: tuple[float, ...] = ()
    error: str | None = None
    """Set when the program could not be judged at all (sandbox failure, timeout of
    the whole call, bad input); ``passing`` is then all False."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        """Fraction of tests passed (0.0 for an empty test set)."""
        return sum(self.passing) / len(self.passing) if self.passing else 0.0

    @property
    def infrastructure_error(self) -> bool:
        """True when the sandbox, the service or the evaluator could not judge the program
        (a test with status ``sandbox_error``): not a score, the program must be run again."""
        return Status.SANDBOX_ERROR.value in self.status

    @property
    def all_passed(self) -> bool:
        """True when there is at least one test and all pass."""
        return bool(self.passing) and all(self.passing)

    def to_dict(self) -> dict:
        """JSON-ready dict with the paper's keys first."""
        out = {
            "passing": list(self.passing),
            "feedback": list(self.feedback),
            "status": list(self.status),
            "wall_s": [round(t, 6) for t in self.wall_s],
            "cpu_s": [round(t, 6) for t in self.cpu_s],
            "pass_rate": self.pass_rate,
        }
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExecutionResult":
        """Inverse of :meth:`to_dict`."""
        return cls(
            passing=tuple(bool(x) for x in d["passing"]),
            feedback=tuple(d["feedback"]),
            status=tuple(d.get("status") or ()),
            wall_s=tuple(d.get("wall_s") or ()),
            cpu_s=tuple(d.get("cpu_s") or ()),
            error=d.get("error"),
        )

    @classmethod
    def failure(cls, n_tests: int, reason: str, status: Status = Status.SANDBOX_ERROR) -> "ExecutionResult":
        """A result in which every test fails for ``reason`` (call failed, timed out, ...)."""
        n = max(int(n_tests), 0)
        return cls(
            passing=(False,) * n,
            feedback=(reason,) * n,
            status=(status.value,) * n,
            wall_s=(0.0,) * n,
            cpu_s=(0.0,) * n,
            error=reason,
        )


class Executor(Protocol):
    """Anything that runs a program against tests."""

    async def run(self, program: str, tests: TestCases, options: ExecOptions | None = None) -> ExecutionResult:
        """Run ``program`` on every test and return the per-test verdicts."""
        ...
