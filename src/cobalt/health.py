"""Infrastructure health: pre-flight checks and the failure breaker.

The rule (docs/FIDELITY.md): a program that the sandbox judged is a result,
whatever its verdict; a sandbox, evaluator, service or model server that could
not do its job is an *infrastructure error*, never a score.

Two tools serve that rule, one for before a run and one for during it:

- the **pre-flight checks** (:func:`check_sandbox_ready`,
  :func:`check_ray_reachable`, :func:`check_http_reachable`,
  :func:`check_evaluator`, :func:`check_engine` (:func:`acheck_engine` inside
  an event loop), and :func:`preflight` that
  runs those a command needs). Each returns a short description of what it
  found or raises :class:`PreflightError` whose message is one line naming what
  is missing and the fix. Commands run them before the first problem, so that
  nothing is written when the machine cannot do the job.
- the **failure breaker** (:class:`FailureBreaker`): every call to an evaluator,
  an engine or the judge reports success or an infrastructure failure; after
  :data:`BREAKER_CONSECUTIVE` failures in a row, or more than
  :data:`BREAKER_SHARE` of the last :data:`BREAKER_WINDOW` calls, it raises
  :class:`BreakerOpen` (one line) and the run stops with exit status 1.
"""
from __future__ import annotations

import asyncio
import collections
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

PREFLIGHT_TIMEOUT_S = 30.0
"""Longest a pre-flight check of a sandbox, an HTTP service or an engine may take."""
RAY_PREFLIGHT_TIMEOUT_S = 60.0
"""Longest the check of a Ray address may take (connecting to a cluster is slow)."""
HTTP_CHECK_TIMEOUT_S = 10.0
"""Timeout of the one HTTP request a pre-flight check sends."""

BREAKER_CONSECUTIVE = 20
"""Infrastructure failures in a row that stop a run."""
BREAKER_WINDOW = 100
"""Calls the failure share is measured over."""
BREAKER_SHARE = 0.5
"""A run stops when more than this share of the last :data:`BREAKER_WINDOW` calls failed."""

RAY_DEFAULT_PORT = 6379


class PreflightError(RuntimeError):
    """A component a command needs cannot work; the message is one line: what, and the fix."""


class InfrastructureError(RuntimeError):
    """An evaluator, sandbox, service or model server could not do its job during a run.

    Never a score: the problem that met it is not written and is redone on the next run.
    """


class BreakerOpen(InfrastructureError):
    """Too many infrastructure failures: the run stops (one-line message)."""


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters.

    >>> one_line("a\\n  b")
    'a b'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# -- the breaker --------------------------------------------------------------------------------
class FailureBreaker:
    """Counts the calls of a run and stops it when infrastructure keeps failing.

    ``record(ok)`` after every call to an evaluator, engine or judge (``ok``
    False for an infrastructure failure only; a program that failed its tests
    is a success of the evaluator). It raises :class:`BreakerOpen` once
    ``consecutive`` failures happened in a row, or once the last ``window``
    calls are all known and more than ``share`` of them failed; from then on
    every ``record`` raises again. Thread-safe.
    """

    def __init__(self, what: str = "infrastructure", *, consecutive: int = BREAKER_CONSECUTIVE,
                 window: int = BREAKER_WINDOW, share: float = BREAKER_SHARE) -> None:
        """``what`` names the component in the message (e.g. ``"evaluator"``)."""
        if consecutive < 1 or window < 1 or not 0 < share < 1:
            raise ValueError("FailureBreaker: consecutive and window must be >= 1 and share in (0, 1)")
        self.what = what
        self.consecutive = consecutive
        self.window = window
        self.share = share
        self._recent: collections.deque[bool] = collections.deque(maxlen=window)
        self._run = 0
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.last_error: str | None = None
        self.tripped: str | None = None
        """The one-line reason once the breaker has opened, else None."""

    def record(self, ok: bool, error: str | None = None) -> None:
        """Count one call; raise :class:`BreakerOpen` when the limits are passed."""
        with self._lock:
            self.calls += 1
            self._recent.append(bool(ok))
            if ok:
                self._run = 0
            else:
                self.failures += 1
                self._run += 1
                if error:
                    self.last_error = one_line(error, 300)
            if self.tripped is None:
                failed = len(self._recent) - sum(self._recent)
                if self._run >= self.consecutive:
                    self.tripped = f"{self._run} {self.what} failures in a row"
                elif len(self._recent) == self.window and failed > self.share * self.window:
                    self.tripped = f"{failed} of the last {self.window} {self.what} calls failed"
            if self.tripped is not None:
                raise BreakerOpen(self.message())

    def success(self) -> None:
        """Count one call that worked."""
        self.record(True)

    def failure(self, error: str | BaseException | None = None) -> None:
        """Count one infrastructure failure (``error`` is kept for the message)."""
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        self.record(False, error)

    def check(self) -> None:
        """Raise :class:`BreakerOpen` when the breaker has already opened."""
        if self.tripped is not None:
            raise BreakerOpen(self.message())

    def message(self) -> str:
        """The one line a stopped run prints."""
        last = f"; last error: {self.last_error}" if self.last_error else ""
        return one_line(f"stopped: {self.tripped}{last}. Fix the {self.what} and rerun the same command "
                        "to resume", 600)

    def to_dict(self) -> dict:
        """Counts for a run's summary."""
        return {"calls": self.calls, "infrastructure_failures": self.failures, "tripped": self.tripped}


# -- pre-flight checks ------------------------------------------------------------------------
def check_sandbox_ready() -> str:
    """The embedded evaluator: bubblewrap is on PATH and a trivial program runs in its sandbox.

    Returns bubblewrap's version; raises :class:`PreflightError` (one line with the fix).
    """
    from cobalt.execution.sandbox import SandboxUnavailable, check_sandbox

    try:
        return check_sandbox()
    except SandboxUnavailable as exc:
        raise PreflightError(one_line(f"sandbox: {exc}", 600)) from None


def ray_host_port(address: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address, or None for ``auto``/empty (a cluster found locally).

    >>> ray_host_port("ray://10.0.0.2:10001")
    ('10.0.0.2', 10001)
    >>> ray_host_port("127.0.0.1")
    ('127.0.0.1', 6379)
    >>> ray_host_port("auto") is None
    True
    """
    if not address or address == "auto" or address.startswith("local"):
        return None
    if "://" not in address:
        address = "ray://" + address
    parsed = urllib.parse.urlsplit(address)
    if not parsed.hostname:
        raise PreflightError(f"ray: cannot read the address {address!r}; give HOST:PORT (--ray-address)")
    return parsed.hostname, parsed.port or RAY_DEFAULT_PORT


def _tcp_reachable(host: str, port: int, timeout_s: float) -> str | None:
    """None when ``host:port`` accepts a TCP connection within ``timeout_s``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def check_ray_reachable(address: str | None, *, timeout_s: float = RAY_PREFLIGHT_TIMEOUT_S) -> str:
    """The Ray evaluator: the cluster at ``address`` answers within ``timeout_s`` and ``ray.init`` connects.

    ``address`` None or ``auto``: ``$RAY_ADDRESS``, else a cluster started on this
    machine. Returns the address used; raises :class:`PreflightError` (one line).
    """
    deadline = time.monotonic() + timeout_s
    address = address or os.environ.get("RAY_ADDRESS") or None
    target = ray_host_port(address)
    fix = ("start one with 'ray start --head' and 'cobalt serve', or use --evaluator embedded")
    if target is not None:
        host, port = target
        why = _tcp_reachable(host, port, min(HTTP_CHECK_TIMEOUT_S, timeout_s))
        if why is not None:
            raise PreflightError(f"ray: no Ray cluster answers at {host}:{port} ({why}); {fix}")
    error: list[BaseException] = []
    connected = threading.Event()

    def connect() -> None:
        try:
            import ray

            if not ray.is_initialized():
                ray.init(address=address or "auto", ignore_reinit_error=True, log_to_driver=False)
        except BaseException as exc:  # reported by the caller
            error.append(exc)
        finally:
            connected.set()

    # ray.init on an address where no cluster answers blocks for minutes: bound it.
    threading.Thread(target=connect, name="cobalt-ray-preflight", daemon=True).start()
    if not connected.wait(max(deadline - time.monotonic(), 0.1)):
        raise PreflightError(f"ray: no Ray cluster at {address or 'auto'} within {timeout_s:g} s; {fix}")
    if error:
        exc = error[0]
        raise PreflightError(one_line(f"ray: cannot connect to {address or 'auto'} "
                                      f"({type(exc).__name__}: {exc}); {fix}"))
    return address or "auto"


def check_http_reachable(url: str, *, timeout_s: float = HTTP_CHECK_TIMEOUT_S, what: str = "service") -> int:
    """One GET of ``url`` within ``timeout_s``: any answer below 500 counts as reachable.

    Returns the HTTP status; raises :class:`PreflightError` (one line naming the URL)
    when nothing answers or the server answers 5xx.
    """
    request = urllib.request.Request(url, method="GET", headers={"User-Agent": "cobalt-preflight"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 - the user's URL
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            return int(exc.code)
        raise PreflightError(f"{what}: {url} answers HTTP {exc.code}; check the server's log and restart it") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PreflightError(one_line(f"{what}: nothing answers at {url} ({reason}); start the server or fix "
                                      "the URL")) from None


def check_evaluator(mode: str = "embedded", *, ray_address: str | None = None, sandbox: str = "bwrap") -> str:
    """The evaluator a command will use: ``embedded`` (bubblewrap works, unless ``sandbox``
    is ``"none"``) or ``ray`` (the cluster answers). Returns what was found."""
    if mode == "embedded":
        if sandbox == "none":
            return "embedded, no sandbox"
        return f"embedded sandbox ({check_sandbox_ready()})"
    if mode == "ray":
        return f"ray ({check_ray_reachable(ray_address)})"
    raise PreflightError(f"evaluator: unknown mode {mode!r}; use embedded or ray")


REMOTE_ENGINES = ("openai", "litellm")
"""Engines that talk to a server: their pre-flight sends one request."""


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~"))


def check_engine(engine: Any, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str:
    """The engine a command will use can serve (sync form of :func:`acheck_engine`).

    Call it where no event loop runs; inside one, await :func:`acheck_engine`.
    """
    return asyncio.run(acheck_engine(engine, timeout_s=timeout_s))


async def acheck_engine(engine: Any, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str:
    """The engine a command will use can serve.

    A server engine (openai, litellm) gets one request without retries
    (``engine.check()``), bounded by ``timeout_s``, and its connections are closed
    again (``engine.aclose()``); a local engine's model must
    exist when it is given as a path (loading it is left to the run). Returns a
    description; raises :class:`PreflightError` (one line naming the engine and the fix).
    """
    from cobalt.engines.base import EngineError

    name = getattr(engine, "name", type(engine).__name__)
    model = str(getattr(engine, "model", "") or "")
    if name not in REMOTE_ENGINES:
        if model and _looks_like_path(model) and not os.path.exists(os.path.expanduser(model)):
            raise PreflightError(f"engine {name}: the model path {model} does not exist; fix --model")
        return f"{name} ({model})"
    try:
        try:
            await asyncio.wait_for(engine.check(), timeout_s)
        finally:
            # connections made here belong to this event loop: the run's loop opens its own
            await engine.aclose()
    except asyncio.TimeoutError:
        raise PreflightError(f"engine {name}: no answer within {timeout_s:g} s; start the server or fix "
                             "--base-url") from None
    except EngineError as exc:
        raise PreflightError(one_line(f"{exc}; start the server or fix --base-url/--model/--api-key")) from None
    except Exception as exc:  # noqa: BLE001 - any failure of the probe is a setup error
        raise PreflightError(one_line(f"engine {name}: {type(exc).__name__}: {exc}")) from None
    return f"{name} ({model})"


def preflight(*, evaluator: str | None = None, ray_address: str | None = None, engine: Any = None,
              sandbox: str = "bwrap") -> list[str]:
    """Run the checks a command needs (evaluator first, then engine); return what each found.

    Raises the first :class:`PreflightError`.
    """
    found = []
    if evaluator is not None:
        found.append(check_evaluator(evaluator, ray_address=ray_address, sandbox=sandbox))
    if engine is not None:
        found.append(check_engine(engine))
    return found


__all__ = [
    "BREAKER_CONSECUTIVE", "BREAKER_SHARE", "BREAKER_WINDOW", "BreakerOpen", "FailureBreaker", "InfrastructureError",
    "PreflightError", "acheck_engine", "check_engine", "check_evaluator", "check_http_reachable", "check_ray_reachable",
    "check_sandbox_ready", "preflight",
]
