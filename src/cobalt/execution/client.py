"""The one async client that every part of Cobalt uses to run programs.

Two modes behind one interface:

- ``embedded``: the sandboxed executor runs in this process (no Ray), with a
  bound on concurrent sandboxes. For the CLI, tests and single machines.
- ``ray``: calls the ``Evaluator`` deployment of the Ray Serve application
  ``evaluator`` through a deployment handle. The handle is created lazily on
  the first call, inside the running event loop, never at import time.

Whatever happens (the service is unreachable, a replica dies, the call times
out, the payload is malformed), :meth:`EvaluatorClient.evaluate` returns an
:class:`ExecutionResult`; a call that failed is a failing result whose
feedback says what happened. It never raises for a bad program.

Both modes run a program with the client's ``options`` (profile, call mode,
compare mode, ...) and ``limits``: in Ray mode every request carries them, and
the service clamps them to its operator's (docs/EXECUTION.md, "Wire schema").
The client always names its profile, so the service's default profile
(``cobalt serve --profile``) applies only to other callers' requests that name
none. A request the service refuses raises
:class:`~cobalt.execution.service.RequestRejected` (a configuration error, not
a program's result).

Typical use::

    client = EvaluatorClient.from_env()          # COBALT_EVALUATOR=embedded|ray, COBALT_PROFILE
    result = await client.evaluate(code, {"inputs": [...], "outputs": [...]})
    result.pass_rate, result.passing, result.feedback
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from cobalt.execution.base import (
    CALLER_TIMEOUT_S,
    HOST_GRACE_S,
    ExecOptions,
    ExecutionResult,
    Limits,
    Status,
    TestCaseError,
    TestCases,
)
from cobalt.execution.service import RequestRejected
from cobalt.profile import Profile, profile_name, resolve_profile

log = logging.getLogger(__name__)


class ShortTimeoutWarning(UserWarning):
    """A client timeout that does not outlast the program cap."""

DEFAULT_APP_NAME = "evaluator"
DEFAULT_DEPLOYMENT_NAME = "Evaluator"
DEFAULT_TIMEOUT_S = CALLER_TIMEOUT_S


@dataclass
class EvaluatorClient:
    """Async client for the code-execution service (embedded or Ray Serve)."""

    mode: str = "embedded"
    """'embedded' (in-process sandboxes) or 'ray' (the Serve deployment)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Per-program timeout of a call; past it the program scores as failing. Always longer
    than the program cap (``limits.program_wall_s``) plus the host's grace, so that the
    cap decides and a slow but finished program is never cut by its caller."""
    max_concurrency: int | None = None
    """Programs in flight at once from this client (default: CPUs for embedded, 256 for ray)."""
    limits: Limits = field(default_factory=Limits)
    options: ExecOptions = field(default_factory=ExecOptions)
    ray_address: str | None = None
    """Ray cluster address for mode 'ray' (None: the current/auto cluster)."""
    app_name: str = DEFAULT_APP_NAME
    deployment_name: str = DEFAULT_DEPLOYMENT_NAME
    retries: int = 1
    """Extra attempts after a failed (not timed-out) Ray call, e.g. a replica that died."""
    sandbox: str = "bwrap"
    """Embedded mode: 'bwrap' or 'none' (trusted code only; warns loudly)."""
    profile: str | None = None
    """'paper' or 'cobalt': the profile every program runs with, in both modes (it replaces
    ``options.profile``). None: ``options.profile`` (default paper); after construction this
    field always holds the profile in use."""

    def __post_init__(self) -> None:
        if self.mode not in ("embedded", "ray"):
            raise ValueError(f"mode must be 'embedded' or 'ray', got {self.mode!r}")
        if self.profile not in (None, ""):
            self.options = replace(self.options, profile=profile_name(self.profile))
        self.profile = self.options.profile
        floor = self.limits.program_wall_s + HOST_GRACE_S
        if not self.timeout_s > floor:
            # Allowed (fault tests use short timeouts), but then the caller, not the cap, decides.
            warnings.warn(
                f"timeout_s ({self.timeout_s:g} s) is not longer than the program cap plus the host's grace "
                f"({floor:g} s): a slow program is cut by the caller instead of the cap",
                ShortTimeoutWarning,
                stacklevel=3,
            )
        self._executor = None
        self._handle = None
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop = None
        self._connecting: asyncio.Future | None = None

    # -- construction -------------------------------------------------------
    @classmethod
    def embedded(cls, profile: "str | Profile | None" = None, **kwargs: Any) -> "EvaluatorClient":
        """A client running the sandboxed executor in this process, with ``profile`` (see the field)."""
        return cls(mode="embedded", profile=_name_or_none(profile), **kwargs)

    @classmethod
    def ray(cls, address: str | None = None, profile: "str | Profile | None" = None, **kwargs: Any) -> "EvaluatorClient":
        """A client of the Ray Serve ``Evaluator`` deployment, with ``profile`` (see the field)."""
        return cls(mode="ray", ray_address=address, profile=_name_or_none(profile), **kwargs)

    @classmethod
    def from_env(cls, profile: "str | Profile | None" = None, **kwargs: Any) -> "EvaluatorClient":
        """Build from ``COBALT_EVALUATOR`` (embedded|ray), ``COBALT_RAY_ADDRESS``,
        ``COBALT_EVAL_TIMEOUT`` and ``COBALT_EVAL_CONCURRENCY``; kwargs win. The profile is
        ``profile``, else the profile of ``options=`` when given, else ``$COBALT_PROFILE``,
        else ``paper``."""
        if profile in (None, "") and isinstance(kwargs.get("options"), ExecOptions):
            profile = kwargs["options"].profile  # the caller's own options win over the environment
        env = {
            "mode": os.environ.get("COBALT_EVALUATOR", "embedded"),
            "ray_address": os.environ.get("COBALT_RAY_ADDRESS") or None,
            "profile": resolve_profile(profile).value,
        }
        if os.environ.get("COBALT_EVAL_TIMEOUT"):
            env["timeout_s"] = float(os.environ["COBALT_EVAL_TIMEOUT"])
        if os.environ.get("COBALT_EVAL_CONCURRENCY"):
            env["max_concurrency"] = int(os.environ["COBALT_EVAL_CONCURRENCY"])
        env.update(kwargs)
        return cls(**env)

    # -- internals ------------------------------------------------------------
    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            default = (os.cpu_count() or 1) if self.mode == "embedded" else 256
            self._sem = asyncio.Semaphore(self.max_concurrency or default)
            self._sem_loop = loop
        return self._sem

    def _local_executor(self):
        if self._executor is None:
            from cobalt.execution.local import LocalExecutor

            self._executor = LocalExecutor(limits=self.limits, options=self.options, sandbox=self.sandbox)
        return self._executor

    def _ray_handle(self):
        if self._handle is None:
            import ray
            from ray import serve

            if not ray.is_initialized():
                ray.init(address=self.ray_address or "auto", ignore_reinit_error=True, log_to_driver=False)
            self._handle = serve.get_deployment_handle(self.deployment_name, app_name=self.app_name)
        return self._handle

    async def _ray_handle_within(self, timeout: float):
        """The handle, made in a daemon thread: ``ray.init`` on an address where no
        cluster answers blocks for minutes, and must cost a call no more than its timeout."""
        if self._handle is not None:
            return self._handle
        loop = asyncio.get_running_loop()
        pending = self._connecting
        if pending is None or pending.get_loop() is not loop or pending.done():
            pending = loop.create_future()

            def settle(fut: asyncio.Future, value: Any, exc: BaseException | None) -> None:
                if not fut.done():
                    fut.set_exception(exc) if exc is not None else fut.set_result(value)

            def connect() -> None:
                try:
                    value, exc = self._ray_handle(), None
                except BaseException as err:  # reported to the caller, never raised here
                    value, exc = None, err
                try:
                    loop.call_soon_threadsafe(settle, pending, value, exc)
                except RuntimeError:
                    pass  # that event loop is gone

            self._connecting = pending
            threading.Thread(target=connect, name="cobalt-ray-connect", daemon=True).start()
        try:
            return await asyncio.wait_for(asyncio.shield(pending), timeout)
        except asyncio.TimeoutError:
            raise ConnectionError(
                f"no answer from the Ray cluster at {self.ray_address or 'auto'} within {timeout:.3g} seconds"
            ) from None

    # -- public API -----------------------------------------------------------
    async def evaluate(self, code: str, test_cases: TestCases | Mapping | str) -> ExecutionResult:
        """Run ``code`` on ``test_cases``; always returns a result (failing on any error)."""
        try:
            tests = TestCases.from_obj(test_cases)
        except TestCaseError as exc:
            return ExecutionResult.failure(_guess_len(test_cases), f"invalid test cases: {exc}")
        if not isinstance(code, str):
            return ExecutionResult.failure(len(tests), f"invalid code: expected a string, got {type(code).__name__}")
        async with self._semaphore():
            if self.mode == "embedded":
                return await self._evaluate_embedded(code, tests)
            return await self._evaluate_ray(code, tests)

    async def evaluate_many(self, jobs: Iterable[tuple[str, TestCases | Mapping | str]]) -> list[ExecutionResult]:
        """Evaluate many ``(code, test_cases)`` pairs concurrently, results in input order."""
        return list(await asyncio.gather(*(self.evaluate(c, t) for c, t in jobs)))

    async def _evaluate_embedded(self, code: str, tests: TestCases) -> ExecutionResult:
        from cobalt.execution.sandbox import SandboxUnavailable

        executor = self._local_executor()
        try:
            return await asyncio.wait_for(executor.run(code, tests), timeout=self.timeout_s)
        except asyncio.TimeoutError:
            return ExecutionResult.failure(
                len(tests), f"evaluation timed out after {self.timeout_s:g} seconds", Status.TIMEOUT
            )
        except SandboxUnavailable:
            raise  # the machine cannot run any program: a setup error, not this program's
        except Exception as exc:  # one program's failure never reaches the caller's batch
            log.exception("evaluation failed")
            return ExecutionResult.failure(len(tests), f"evaluation failed: {type(exc).__name__}: {exc}")

    def request(self, code: str, tests: TestCases) -> dict:
        """The wire payload of one program: code, tests, and this client's options (its profile
        included) and limits, so that the service runs it as the embedded mode would."""
        return {"code": code, "test_cases": tests.to_dict(), "options": asdict(self.options),
                "limits": asdict(self.limits)}

    async def _evaluate_ray(self, code: str, tests: TestCases) -> ExecutionResult:
        payload = self.request(code, tests)
        deadline = time.monotonic() + self.timeout_s
        last_error = "unknown error"
        for attempt in range(self.retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                handle = await self._ray_handle_within(remaining)
                response = handle.remote(payload)
                remaining = max(deadline - time.monotonic(), 0.001)
                raw = await asyncio.wait_for(_await_response(response), timeout=remaining)
                return _reply(raw)
            except RequestRejected:
                raise
            except asyncio.TimeoutError:
                return ExecutionResult.failure(
                    len(tests), f"evaluation timed out after {self.timeout_s:g} seconds", Status.TIMEOUT
                )
            except Exception as exc:  # service down, replica died, bad reply: report, maybe retry
                last_error = f"{type(exc).__name__}: {exc}"
                log.warning("evaluator call failed (attempt %d): %s", attempt + 1, last_error)
                self._handle = None
                await asyncio.sleep(min(0.5 * (attempt + 1), max(deadline - time.monotonic(), 0)))
        return ExecutionResult.failure(len(tests), f"evaluator call failed: {last_error}")


def _reply(raw: Any) -> ExecutionResult:
    """The result in a service reply; a refusal (``{"error", "status_code"}``) raises."""
    if isinstance(raw, Mapping) and "passing" not in raw and "status_code" in raw:
        raise RequestRejected(int(raw["status_code"]), str(raw.get("error")))
    return ExecutionResult.from_dict(raw)


def _name_or_none(profile: Any) -> str | None:
    return None if profile in (None, "") else profile_name(profile)


async def _await_response(response: Any) -> Any:
    # A Serve DeploymentResponse is awaitable; a plain value (tests) is returned as is.
    if hasattr(response, "__await__"):
        return await response
    return response


def _guess_len(test_cases: Any) -> int:
    try:
        if isinstance(test_cases, str):
            import json

            test_cases = json.loads(test_cases)
        return len(test_cases.get("inputs", []))
    except Exception:
        return 1


__all__: Sequence[str] = ["EvaluatorClient", "DEFAULT_TIMEOUT_S"]
