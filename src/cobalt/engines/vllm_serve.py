"""vLLM as a Ray Serve deployment (app ``vllm_actor``, route ``/vllm_actor``), and an engine that calls it.

Each replica holds one in-process engine (:class:`~cobalt.engines.vllm_engine.VLLMEngine`
by default) that batches every request it receives continuously. The shape
comes from :class:`VLLMServeConfig`: defaults, then ``COBALT_VLLM_<FIELD>``
environment variables (``COBALT_VLLM_MODEL`` names the model by hub id or
local path), then explicit arguments. ``serve run vllm_engine_actor:app``
from the repository root (the paper's command) builds the app from the
environment; ``cobalt serve-vllm`` style callers use :func:`deploy`.

A replica reserves ``tensor_parallel_size`` GPUs; vLLM spreads the model over
them with its multiprocessing executor. ``backend`` may name another engine
(``transformers``) so the deployment itself can be exercised on a CPU.

Payload (deployment handle ``generate`` or HTTP POST on ``/vllm_actor``)::

    {"conversations": [[{"role", "content"}, ...], ...], "params": {SamplingParams fields}}
    -> {"completions": [[{"text", "prompt_tokens", "completion_tokens", "finish_reason", "extra"}, ...], ...]}

Nothing here runs at import time; Ray is imported inside functions.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from cobalt.engines._common import gather_or_cancel
from cobalt.engines.base import ChatMessage, Completion, Engine, EngineError, SamplingParams, create_engine

APP_NAME = "vllm_actor"
ROUTE_PREFIX = "/vllm_actor"
DEPLOYMENT_NAME = "VLLMActor"
ENV_PREFIX = "COBALT_VLLM_"


@dataclass(frozen=True)
class VLLMServeConfig:
    """Shape of the deployment; ``COBALT_VLLM_<FIELD>`` variables override the defaults."""

    model: str = ""
    """Hub id or local path of the model (``COBALT_VLLM_MODEL``); required."""
    num_replicas: int = 1
    """Replicas, each with its own copy of the model."""
    tensor_parallel_size: int = 1
    """GPUs per replica (vLLM tensor parallelism)."""
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 0
    """0: the model's own limit."""
    dtype: str = "auto"
    cpus_per_replica: float = 4.0
    max_ongoing_requests: int = 1024
    """Requests a replica accepts at once (all go to its vLLM scheduler)."""
    backend: str = "vllm"
    """Engine each replica runs: ``vllm``, or ``transformers`` for CPU checks."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "VLLMServeConfig":
        """Defaults, then ``COBALT_VLLM_*`` variables, then non-None ``overrides``."""
        environ = os.environ if environ is None else environ
        defaults = cls()
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None and raw != "":
                try:
                    values[f.name] = type(getattr(defaults, f.name))(raw)
                except ValueError:
                    raise EngineError(f"${ENV_PREFIX}{f.name.upper()}: expected "
                                      f"{type(getattr(defaults, f.name)).__name__}, got {raw!r}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        """Raise :class:`EngineError` on a missing model or impossible numbers."""
        if not self.model:
            raise EngineError(f"vllm_actor: no model; set ${ENV_PREFIX}MODEL to a hub id or local path (or --model)")
        if self.num_replicas < 1 or self.tensor_parallel_size < 1:
            raise EngineError("vllm_actor: num_replicas and tensor_parallel_size must be >= 1")

    def engine_options(self) -> dict[str, Any]:
        """Keyword options of the replica's engine."""
        if self.backend == "vllm":
            return {"tensor_parallel_size": self.tensor_parallel_size,
                    "gpu_memory_utilization": self.gpu_memory_utilization,
                    "max_model_len": self.max_model_len or None, "dtype": self.dtype,
                    "distributed_executor_backend": "mp" if self.tensor_parallel_size > 1 else None}
        return {}

    def deployment_options(self) -> dict[str, Any]:
        """Arguments of ``serve.deployment`` for the replica class."""
        actor: dict[str, Any] = {"num_cpus": self.cpus_per_replica}
        if self.backend == "vllm":
            actor["num_gpus"] = self.tensor_parallel_size
        return {"name": DEPLOYMENT_NAME, "num_replicas": self.num_replicas,
                "max_ongoing_requests": self.max_ongoing_requests, "ray_actor_options": actor}


def completion_to_dict(c: Completion) -> dict[str, Any]:
    """A :class:`Completion` as plain JSON-ready data."""
    return {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
            "finish_reason": c.finish_reason, "extra": dict(c.extra)}


class VLLMReplica:
    """One replica: an engine built from the config, serving payloads."""

    def __init__(self, config: Mapping[str, Any]):
        self.config = VLLMServeConfig(**config)
        self.engine: Engine = create_engine(self.config.backend, self.config.model, **self.config.engine_options())

    async def generate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Complete ``payload["conversations"]`` with ``payload["params"]``."""
        params = SamplingParams(**dict(payload.get("params") or {}))
        outs = await self.engine.generate(payload["conversations"], params)
        return {"completions": [[completion_to_dict(c) for c in samples] for samples in outs]}

    async def check_health(self) -> None:
        """Ray Serve's health probe: the engine must be up."""
        await self.engine.check()


def build_app(config: VLLMServeConfig | None = None):
    """The Ray Serve application (deployment ``VLLMActor``), ready for ``serve.run``."""
    from ray import serve

    config = config or VLLMServeConfig.from_env()

    @serve.deployment(**config.deployment_options())
    class VLLMActor(VLLMReplica):
        async def __call__(self, request: Any) -> Any:
            if hasattr(request, "json") and callable(request.json):  # HTTP (starlette Request)
                request = await request.json()
            return await self.generate(request)

    return VLLMActor.bind(asdict(config))


def deploy(config: VLLMServeConfig, *, address: str | None = None, blocking: bool = False, **ray_init: Any):
    """Connect to (or start) Ray and run the app under its name and route prefix."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, **ray_init)
    return serve.run(build_app(config), name=APP_NAME, route_prefix=ROUTE_PREFIX, blocking=blocking)


class RayServeEngine(Engine):
    """Engine ``vllm-serve``: sends each conversation to the ``vllm_actor`` app through a Ray handle."""

    name = "vllm-serve"

    def __init__(self, model: str = "", *, app_name: str = APP_NAME, address: str | None = None,
                 max_in_flight: int = 4096) -> None:
        """``model`` is informational (the deployment decides); ``address``: Ray address (default: auto)."""
        self.model = model
        self.app_name = app_name
        self.address = address
        self.max_in_flight = int(max_in_flight)
        self._handle: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> dict:
        """Engine, model and app name."""
        return {"engine": self.name, "model": self.model, "app": self.app_name}

    def _ensure(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._handle is None or self._loop is not loop:
            import ray
            from ray import serve

            if not ray.is_initialized():
                try:
                    ray.init(address=self.address or "auto", ignore_reinit_error=True, log_to_driver=False)
                except Exception as exc:  # noqa: BLE001
                    raise EngineError(f"vllm-serve engine: no Ray cluster at {self.address or 'auto'}: "
                                      f"{type(exc).__name__}") from None
            try:
                self._handle = serve.get_app_handle(self.app_name)
            except Exception:  # noqa: BLE001 - plain `serve run vllm_engine_actor:app` names the app "default"
                try:
                    self._handle = serve.get_deployment_handle(DEPLOYMENT_NAME, app_name="default")
                except Exception as exc:  # noqa: BLE001
                    raise EngineError(f"vllm-serve engine: no Ray Serve app {self.app_name!r} "
                                      f"(start it with: serve run vllm_engine_actor:app): {type(exc).__name__}") from None
            self._sem = asyncio.Semaphore(self.max_in_flight)
            self._loop = loop
        return self._handle

    async def check(self) -> None:
        """Find the app (fails with one line when it is not running)."""
        self._ensure()

    async def _one(self, conversation: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        handle = self._ensure()
        assert self._sem is not None
        async with self._sem:
            result = await handle.generate.remote({"conversations": [list(map(dict, conversation))],
                                                   "params": asdict(params)})
        [samples] = result["completions"]
        return [Completion(**s) for s in samples]

    async def generate(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[Completion]]:
        """One deployment call per conversation, so replicas share the load."""
        self._ensure()
        if params.seed is not None:
            # each conversation its own seed, as the in-process engines do
            from dataclasses import replace

            calls = [self._one(c, replace(params, seed=params.seed + i)) for i, c in enumerate(conversations)]
        else:
            calls = [self._one(c, params) for c in conversations]
        return await gather_or_cancel(calls)


def create_serve_engine(model: str = "", **options: Any) -> RayServeEngine:
    """Factory registered as engine ``vllm-serve``."""
    return RayServeEngine(model, **options)
