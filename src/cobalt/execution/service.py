"""The Ray Serve code-execution service: deployment ``Evaluator`` in app ``evaluator``.

Each replica runs the sandboxed :class:`~cobalt.execution.local.LocalExecutor`
and serves many requests at once, with as many sandboxes running in parallel
as the CPUs it reserves. Replicas are placed by Ray wherever the cluster has
CPUs, so the service scales past one machine.

Requests (deployment handle or HTTP POST on ``/evaluator``), typed by
:class:`RequestPolicy` (docs/EXECUTION.md, "Wire schema"):

- one program: ``{"code": str, "test_cases": {"inputs", "outputs", "fn_name"?},
  "options"?: {...}, "limits"?: {...}}`` -> ``{"passing", "feedback", "status", ...}``;
- a batch: ``{"programs": [<program>, ...]}`` -> ``{"results": [<result>, ...]}``.

The operator's configuration wins over every client: a request's ``options``
may only pick among the modes the operator approved or judge more strictly,
and its ``limits`` are clamped to the operator's. A request that breaks the
schema or its bounds is refused with ``{"error": <one line>, "status_code": 4xx}``
(over HTTP also as the response's status), before any program runs.

Nothing here runs at import time: :func:`build_app` builds the application
object, and Ray is contacted only when it is deployed.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from cobalt.execution.base import ExecOptions, ExecutionResult, Limits, TestCaseError, TestCases
from cobalt.profile import profile_name, resolve_profile

APP_NAME = "evaluator"
DEPLOYMENT_NAME = "Evaluator"
ROUTE_PREFIX = "/evaluator"

PROGRAM_KEYS = frozenset({"code", "test_cases", "options", "limits"})
"""Keys a program of a request may carry."""
CLIENT_OPTIONS = frozenset({"profile", "call_mode", "compare", "float_tol", "stop_on_first_failure", "allow_packages"})
"""Options a client may send (each checked against the operator's by :meth:`RequestPolicy.options`)."""
_EXECUTORS_KEPT = 8
"""Executors (one per distinct clamped limits) a replica keeps; the least recently used goes first."""
_PARSE_OFF_LOOP_BYTES = 1 << 20
"""HTTP bodies above this size are parsed in a thread, so the replica's event loop keeps serving."""


class RequestRejected(ValueError):
    """A request the service refuses before running anything: ``status`` (4xx) and a one-line ``reason``."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP {status}: {reason}")
        self.status = int(status)
        self.reason = " ".join(str(reason).split())  # one line, whatever the client sent

    def to_dict(self) -> dict:
        """The reply that carries the refusal."""
        return {"error": self.reason, "status_code": self.status}


def _modes(value: str, allowed: tuple[str, ...], name: str) -> tuple[str, ...]:
    chosen = tuple(m.strip() for m in str(value).split(",") if m.strip())
    bad = [m for m in chosen if m not in allowed]
    if not chosen or bad:
        raise ValueError(f"ServiceConfig.{name}: expected a comma-separated subset of {', '.join(allowed)}, got {value!r}")
    return chosen


@dataclass(frozen=True)
class ServiceConfig:
    """Shape and policy of the service. Environment variables ``COBALT_EVAL_<FIELD>`` override
    defaults; ``profile`` falls back to ``$COBALT_PROFILE``, then ``paper``."""

    num_replicas: int = 1
    """Replicas of the Evaluator deployment (the paper ran 80 replicas of 1 CPU)."""
    cpus_per_replica: float = 1.0
    """CPUs each replica reserves; it runs that many sandboxes at once."""
    memory_gb_per_replica: float = 4.0
    """Memory each replica reserves (the paper: 4 GiB per 1-CPU replica)."""
    max_ongoing_requests: int = 64
    """Requests a replica accepts at once (queued behind its sandboxes)."""
    sandbox: str = "bwrap"
    """'bwrap', or 'none' for trusted code only."""
    profile: str = "paper"
    """Profile of the requests that name none (``cobalt serve --profile``)."""
    profiles: str = "paper,cobalt"
    """Profiles a request may ask for (comma-separated)."""
    compare_modes: str = "exact,tolerant"
    """Compare modes a request may ask for (comma-separated); 'exact' is always allowed (strictest)."""
    call_modes: str = "call,lossy"
    """Call modes a request may ask for (comma-separated)."""
    max_request_bytes: int = 64 << 20
    """Largest request: HTTP body bytes, or characters of code and tests over a handle."""
    max_programs: int = 256
    """Programs in one batch request."""
    max_tests: int = 1024
    """Tests of one program."""
    max_code_bytes: int = 1 << 20
    """Characters of one program's code."""

    def __post_init__(self) -> None:
        profile_name(self.profile)
        _modes(self.profiles, ("paper", "cobalt"), "profiles")
        _modes(self.compare_modes, ("exact", "tolerant"), "compare_modes")
        _modes(self.call_modes, ("call", "lossy"), "call_modes")
        for name in ("max_request_bytes", "max_programs", "max_tests", "max_code_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"ServiceConfig.{name} must be a positive integer, got {getattr(self, name)!r}")

    @classmethod
    def from_env(cls, **overrides: Any) -> "ServiceConfig":
        """Defaults, then ``$COBALT_PROFILE`` for ``profile``, then ``COBALT_EVAL_*`` variables, then ``overrides``."""
        values: dict[str, Any] = {"profile": resolve_profile(None).value}
        for f in fields(cls):
            env = os.environ.get(f"COBALT_EVAL_{f.name.upper()}")
            if env is not None:
                values[f.name] = type(getattr(cls(), f.name))(env)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass(frozen=True)
class ProgramRequest:
    """One program of a validated request, with the options and limits it runs under."""

    code: str
    tests: TestCases
    options: ExecOptions
    limits: Limits


@dataclass(frozen=True)
class RequestPolicy:
    """The operator's side of the wire: bounds of a request, defaults and maxima of its options and limits."""

    config: ServiceConfig
    options: ExecOptions
    """The operator's options: defaults of a request (its profile is ``config.profile``)."""
    limits: Limits
    """The operator's limits: defaults and maxima of a request."""

    def request(self, payload: Any) -> tuple[bool, list[ProgramRequest]]:
        """``(is_batch, programs)`` of a decoded request; raises :class:`RequestRejected`."""
        if not isinstance(payload, Mapping):
            raise RequestRejected(400, f"request: expected a JSON object, got {_kind(payload)}")
        if "programs" not in payload:
            return False, [self.program(payload, "request")]
        extra = sorted(set(payload) - {"programs"})
        if extra:
            raise RequestRejected(400, f"request: unknown key {extra[0]!r} beside 'programs'")
        programs = payload["programs"]
        if not isinstance(programs, (list, tuple)):
            raise RequestRejected(400, f"request.programs: expected a list of programs, got {_kind(programs)}")
        if len(programs) > self.config.max_programs:
            raise RequestRejected(413, f"request.programs: {len(programs)} programs, more than the "
                                       f"{self.config.max_programs} this service takes at once")
        out = [self.program(p, f"request.programs[{i}]") for i, p in enumerate(programs)]
        size = sum(_chars(p) for p in out)
        if size > self.config.max_request_bytes:
            raise RequestRejected(413, f"request: {size} characters of code and tests, more than "
                                       f"{self.config.max_request_bytes}")
        return True, out

    def program(self, obj: Any, where: str) -> ProgramRequest:
        """One ``{"code", "test_cases", "options"?, "limits"?}`` object, typed and within bounds."""
        if not isinstance(obj, Mapping):
            raise RequestRejected(400, f"{where}: expected an object with 'code' and 'test_cases', got {_kind(obj)}")
        extra = sorted(set(obj) - PROGRAM_KEYS, key=str)
        if extra:
            raise RequestRejected(400, f"{where}: unknown key {extra[0]!r} (allowed: {', '.join(sorted(PROGRAM_KEYS))})")
        code = obj.get("code")
        if not isinstance(code, str):
            raise RequestRejected(400, f"{where}.code: expected a string, got {_kind(code)}")
        if len(code) > self.config.max_code_bytes:
            raise RequestRejected(413, f"{where}.code: {len(code)} characters, more than {self.config.max_code_bytes}")
        raw_tests = obj.get("test_cases")
        n_tests = len(raw_tests.get("inputs") or ()) if isinstance(raw_tests, Mapping) and isinstance(
            raw_tests.get("inputs"), (list, tuple)) else 0
        if n_tests > self.config.max_tests:
            raise RequestRejected(413, f"{where}.test_cases: {n_tests} tests, more than {self.config.max_tests}")
        try:
            tests = TestCases.from_obj(raw_tests, where=f"{where}.test_cases")
        except TestCaseError as exc:
            raise RequestRejected(400, str(exc)) from None
        if len(tests) > self.config.max_tests:  # test cases sent as a JSON string are counted here
            raise RequestRejected(413, f"{where}.test_cases: {len(tests)} tests, more than {self.config.max_tests}")
        size = len(code) + sum(map(len, tests.inputs)) + sum(map(len, tests.outputs))
        if size > self.config.max_request_bytes:
            raise RequestRejected(413, f"{where}: {size} characters of code and tests, more than "
                                       f"{self.config.max_request_bytes}")
        return ProgramRequest(code, tests, self.options_for(obj.get("options"), f"{where}.options"),
                              self.limits_for(obj.get("limits"), f"{where}.limits"))

    def options_for(self, sent: Any, where: str) -> ExecOptions:
        """The operator's options with what the client may change: a profile, call mode or compare
        mode the operator approved, a smaller ``float_tol``, ``stop_on_first_failure``, and
        ``allow_packages`` only as the operator has it (or off)."""
        if sent is None:
            return self.options
        if not isinstance(sent, Mapping):
            raise RequestRejected(400, f"{where}: expected an object, got {_kind(sent)}")
        unknown = sorted(set(sent) - CLIENT_OPTIONS, key=str)
        if unknown:
            raise RequestRejected(400, f"{where}: unknown option {unknown[0]!r} (allowed: {', '.join(sorted(CLIENT_OPTIONS))})")
        chosen: dict[str, Any] = {}
        for name, approved in (("profile", self.config.profiles), ("call_mode", self.config.call_modes),
                               ("compare", self.config.compare_modes + ",exact")):
            if name in sent:
                value = sent[name]
                if not isinstance(value, str) or value not in approved.split(","):
                    raise RequestRejected(400 if not isinstance(value, str) or value not in _ALL_MODES[name] else 403,
                                          f"{where}.{name}: {value!r} is not one of this service's "
                                          f"{', '.join(dict.fromkeys(approved.split(',')))}")
                chosen[name] = value
        if "float_tol" in sent:
            tol = sent["float_tol"]
            if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol < 0:
                raise RequestRejected(400, f"{where}.float_tol: expected a finite number >= 0, got {tol!r}")
            if tol > self.options.float_tol:
                raise RequestRejected(403, f"{where}.float_tol: {tol!r} is looser than this service's {self.options.float_tol!r}")
            chosen["float_tol"] = float(tol)
        for name in ("stop_on_first_failure", "allow_packages"):
            if name in sent and not isinstance(sent[name], bool):
                raise RequestRejected(400, f"{where}.{name}: expected true or false, got {sent[name]!r}")
        if "stop_on_first_failure" in sent:
            chosen["stop_on_first_failure"] = sent["stop_on_first_failure"]
        if sent.get("allow_packages") and not self.options.allow_packages:
            raise RequestRejected(403, f"{where}.allow_packages: this service does not expose the host's packages")
        if "allow_packages" in sent:
            chosen["allow_packages"] = sent["allow_packages"]
        return dataclasses.replace(self.options, **chosen)

    def limits_for(self, sent: Any, where: str) -> Limits:
        """The client's limits, each clamped to the operator's (which also fill in what is missing)."""
        if sent is None:
            return self.limits
        if not isinstance(sent, Mapping):
            raise RequestRejected(400, f"{where}: expected an object, got {_kind(sent)}")
        names = {f.name for f in fields(Limits)}
        unknown = sorted(set(sent) - names, key=str)
        if unknown:
            raise RequestRejected(400, f"{where}: unknown limit {unknown[0]!r}")
        clamped: dict[str, Any] = {}
        for name, value in sent.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise RequestRejected(400, f"{where}.{name}: expected a positive finite number, got {value!r}")
            ceiling = getattr(self.limits, name)
            value = min(value, ceiling)
            clamped[name] = max(1, int(value)) if isinstance(ceiling, int) else float(value)
        return dataclasses.replace(self.limits, **clamped)


_ALL_MODES = {"profile": ("paper", "cobalt"), "call_mode": ("call", "lossy"), "compare": ("exact", "tolerant")}


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _chars(program: ProgramRequest) -> int:
    return len(program.code) + sum(map(len, program.tests.inputs)) + sum(map(len, program.tests.outputs))


class EvaluatorReplica:
    """One replica: sandboxed executors (one per clamped limits), the request policy and a bound on
    parallel sandboxes."""

    def __init__(self, parallel: int, limits: Mapping | None = None, options: Mapping | None = None,
                 sandbox: str = "bwrap", config: Mapping | None = None):
        self.limits = Limits(**(limits or {}))
        self.config = ServiceConfig(**(config or {}))
        self.options = dataclasses.replace(ExecOptions(**(options or {})), profile=self.config.profile)
        self.policy = RequestPolicy(self.config, self.options, self.limits)
        self.parallel = max(1, int(parallel))
        self.sandbox = sandbox
        self._executors: collections.OrderedDict = collections.OrderedDict()
        self.executor = self._executor(self.limits)
        self._sem: asyncio.Semaphore | None = None

    def _executor(self, limits: Limits):
        """The executor for ``limits``, made on first use; a few distinct ones are kept."""
        from cobalt.execution.local import LocalExecutor

        if limits in self._executors:
            self._executors.move_to_end(limits)
            return self._executors[limits]
        executor = LocalExecutor(limits, self.options, sandbox=self.sandbox, max_workers=self.parallel)
        self._executors[limits] = executor
        while len(self._executors) > _EXECUTORS_KEPT:
            self._executors.popitem(last=False)  # its idle worker threads end with it
        return executor

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.parallel)
        return self._sem

    async def run_program(self, program: ProgramRequest) -> dict:
        """Judge one validated program (bounded by the replica's sandboxes)."""
        async with self._semaphore():
            try:
                result = await self._executor(program.limits).run(program.code, program.tests, program.options)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one program's failure never reaches the others
                result = ExecutionResult.failure(len(program.tests), f"evaluation failed: {type(exc).__name__}: {exc}")
        return result.to_dict()

    async def run_batch(self, programs: list[ProgramRequest]) -> list[dict]:
        """Judge a batch, at most ``parallel`` of its programs waiting for a sandbox at once, so
        that other requests queue between them (a batch gets its share, not the replica)."""
        own = asyncio.Semaphore(self.parallel)

        async def one(program: ProgramRequest) -> dict:
            async with own:
                return await self.run_program(program)

        out = await asyncio.gather(*(one(p) for p in programs), return_exceptions=True)
        return [
            r if not isinstance(r, BaseException)
            else ExecutionResult.failure(len(p.tests), f"evaluation failed: {type(r).__name__}: {r}").to_dict()
            for p, r in zip(programs, out)
        ]

    async def evaluate(self, payload: Any) -> dict:
        """Judge one ``{"code", "test_cases", "options"?, "limits"?}`` payload; a bad one is refused
        with ``{"error", "status_code"}``."""
        try:
            program = self.policy.program(payload, "request")
        except RequestRejected as exc:
            return exc.to_dict()
        return await self.run_program(program)

    async def handle(self, payload: Any) -> Any:
        """Dispatch a single or batch payload; a bad one is refused with ``{"error", "status_code"}``."""
        try:
            is_batch, programs = self.policy.request(payload)
        except RequestRejected as exc:
            return exc.to_dict()
        if is_batch:
            return {"results": await self.run_batch(programs)}
        return await self.run_program(programs[0])

    async def handle_http(self, request: Any) -> Any:
        """An HTTP request (starlette): its body read up to the size bound, then :meth:`handle`;
        a refusal is sent with its 4xx status."""
        from starlette.responses import JSONResponse

        try:
            payload = await _read_json(request, self.config.max_request_bytes)
        except RequestRejected as exc:
            return JSONResponse(exc.to_dict(), status_code=exc.status)
        reply = await self.handle(payload)
        if isinstance(reply, dict) and "status_code" in reply and "error" in reply and "passing" not in reply:
            return JSONResponse(reply, status_code=reply["status_code"])
        return reply


async def _read_json(request: Any, max_bytes: int) -> Any:
    """The JSON body of ``request``, refused (413) as soon as it is known to exceed ``max_bytes``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise RequestRejected(400, f"bad Content-Length header {declared!r}")
        if int(declared) > max_bytes:
            raise RequestRejected(413, f"request body of {int(declared)} bytes, more than {max_bytes}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise RequestRejected(413, f"request body larger than {max_bytes} bytes")
    try:
        if len(body) > _PARSE_OFF_LOOP_BYTES:
            return await asyncio.to_thread(json.loads, bytes(body))
        return json.loads(bytes(body))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestRejected(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestRejected(400, "request body is nested too deeply") from None


def build_app(config: ServiceConfig | None = None, limits: Limits | None = None, options: ExecOptions | None = None):
    """The Ray Serve application: deployment ``Evaluator``, ready for ``serve.run``.

    ``limits`` are the operator's (the defaults and maxima of every request), ``options``
    its judging options; the profile of requests that name none is ``config.profile``."""
    from ray import serve

    config = config or ServiceConfig.from_env()
    parallel = max(1, math.ceil(config.cpus_per_replica))

    @serve.deployment(
        name=DEPLOYMENT_NAME,
        num_replicas=config.num_replicas,
        max_ongoing_requests=config.max_ongoing_requests,
        ray_actor_options={
            "num_cpus": config.cpus_per_replica,
            "memory": int(config.memory_gb_per_replica * (1 << 30)),
        },
    )
    class Evaluator(EvaluatorReplica):
        async def __call__(self, request: Any) -> Any:
            if hasattr(request, "stream") and hasattr(request, "headers"):  # HTTP (starlette Request)
                return await self.handle_http(request)
            return await self.handle(request)

    return Evaluator.bind(
        parallel,
        asdict(limits or Limits()),
        asdict(options or ExecOptions()),
        config.sandbox,
        asdict(config),
    )


def deploy(address: str | None = None, config: ServiceConfig | None = None, *, blocking: bool = False, **ray_init: Any):
    """Connect to (or start) Ray and run the evaluator app under its name and route prefix."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, **ray_init)
    return serve.run(build_app(config), name=APP_NAME, route_prefix=ROUTE_PREFIX, blocking=blocking)
