"""The Ray Serve code-execution service: deployment ``Evaluator`` in app ``evaluator``.

Each replica runs the sandboxed :class:`~cobalt.execution.local.LocalExecutor`
and serves many requests at once, with as many sandboxes running in parallel
as the CPUs it reserves. Replicas are placed by Ray wherever the cluster has
CPUs, so the service scales past one machine.

Payloads (deployment handle or HTTP POST on ``/evaluator``):

- one program, the paper's form: ``{"code": str, "test_cases": {"inputs", "outputs", "fn_name"?}}``
  -> ``{"passing", "feedback", "status", ...}``;
- a batch: ``{"programs": [<payload>, ...]}`` -> ``{"results": [<result>, ...]}``.

Nothing here runs at import time: :func:`build_app` builds the application
object, and Ray is contacted only when it is deployed.
"""
from __future__ import annotations

import asyncio
import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from cobalt.execution.base import ExecOptions, ExecutionResult, Limits, TestCaseError, TestCases

APP_NAME = "evaluator"
DEPLOYMENT_NAME = "Evaluator"
ROUTE_PREFIX = "/evaluator"


@dataclass(frozen=True)
class ServiceConfig:
    """Shape of the service. Environment variables ``COBALT_EVAL_<FIELD>`` override defaults."""

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

    @classmethod
    def from_env(cls, **overrides: Any) -> "ServiceConfig":
        """Defaults, then ``COBALT_EVAL_*`` variables, then ``overrides``."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            env = os.environ.get(f"COBALT_EVAL_{f.name.upper()}")
            if env is not None:
                values[f.name] = type(getattr(cls(), f.name))(env)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


class EvaluatorReplica:
    """One replica: a sandboxed executor plus a bound on parallel sandboxes."""

    def __init__(self, parallel: int, limits: Mapping | None = None, options: Mapping | None = None, sandbox: str = "bwrap"):
        from cobalt.execution.local import LocalExecutor

        self.limits = Limits(**(limits or {}))
        self.options = ExecOptions(**(options or {}))
        self.parallel = max(1, int(parallel))
        self.executor = LocalExecutor(self.limits, self.options, sandbox=sandbox, max_workers=self.parallel)
        self._sem: asyncio.Semaphore | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.parallel)
        return self._sem

    async def evaluate(self, payload: Mapping[str, Any]) -> dict:
        """Judge one ``{"code", "test_cases"}`` payload; bad payloads give a failing result."""
        if not isinstance(payload, Mapping):
            return ExecutionResult.failure(1, f"invalid payload: expected an object, got {type(payload).__name__}").to_dict()
        try:
            tests = TestCases.from_obj(payload.get("test_cases"), where="test_cases")
        except TestCaseError as exc:
            return ExecutionResult.failure(1, f"invalid test cases: {exc}").to_dict()
        code = payload.get("code")
        if not isinstance(code, str):
            return ExecutionResult.failure(len(tests), "invalid payload: 'code' must be a string").to_dict()
        options = self.options
        if isinstance(payload.get("options"), Mapping):
            options = ExecOptions(**{**asdict(self.options), **payload["options"]})
        async with self._semaphore():
            try:
                result = await self.executor.run(code, tests, options)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one program's failure never reaches the others
                result = ExecutionResult.failure(len(tests), f"evaluation failed: {type(exc).__name__}: {exc}")
        return result.to_dict()

    async def evaluate_batch(self, payloads: list) -> list[dict]:
        """Judge many payloads concurrently (bounded by the replica's sandboxes); a payload
        whose evaluation raises gets a failing result, the others are unaffected."""
        out = await asyncio.gather(*(self.evaluate(p) for p in payloads), return_exceptions=True)
        return [
            r if not isinstance(r, BaseException)
            else ExecutionResult.failure(_n_tests(p), f"evaluation failed: {type(r).__name__}: {r}").to_dict()
            for p, r in zip(payloads, out)
        ]

    async def handle(self, payload: Any) -> Any:
        """Dispatch a single or batch payload."""
        if isinstance(payload, Mapping) and "programs" in payload:
            return {"results": await self.evaluate_batch(list(payload["programs"]))}
        return await self.evaluate(payload)


def _n_tests(payload: Any) -> int:
    try:
        return max(1, len(payload["test_cases"]["inputs"]))
    except Exception:
        return 1


def build_app(config: ServiceConfig | None = None, limits: Limits | None = None, options: ExecOptions | None = None):
    """The Ray Serve application: deployment ``Evaluator``, ready for ``serve.run``."""
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
            if hasattr(request, "json") and callable(request.json):  # HTTP (starlette Request)
                try:
                    request = await request.json()
                except Exception as exc:
                    return ExecutionResult.failure(1, f"invalid JSON body: {exc}").to_dict()
            return await self.handle(request)

    return Evaluator.bind(
        parallel,
        asdict(limits or Limits()),
        asdict(options or ExecOptions()),
        config.sandbox,
    )


def deploy(address: str | None = None, config: ServiceConfig | None = None, *, blocking: bool = False, **ray_init: Any):
    """Connect to (or start) Ray and run the evaluator app under its name and route prefix."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, **ray_init)
    return serve.run(build_app(config), name=APP_NAME, route_prefix=ROUTE_PREFIX, blocking=blocking)
