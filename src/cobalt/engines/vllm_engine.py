"""The ``vllm`` backend: vLLM's asynchronous engine in this process (GPU only).

Every conversation becomes one vLLM request asking for ``n`` samples, and
all requests of all concurrent callers go to one ``AsyncLLM`` engine at
once, so vLLM batches them continuously (the paper instead called a blocking
``generate`` per request, which leaves the GPU mostly idle). Prompts are
rendered here with the model's own chat template (Qwen3's ``enable_thinking``
passed when set) and sent as token ids, so prompt token counts are exact.

vLLM (0.24.0, extra ``[vllm]``) is imported only inside functions: this
module imports and its pure parts (:func:`vllm_sampling_kwargs`,
:func:`engine_args_kwargs`, prompt rendering) run on machines without it.
The Ray Serve deployment of this engine is :mod:`cobalt.engines.vllm_serve`.
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from typing import Any, Sequence

from cobalt.engines._common import (
    chat_prompt,
    conversation_seed,
    first_line,
    gather_or_cancel,
    normalise_finish_reason,
)
from cobalt.engines.base import ChatMessage, Completion, Engine, EngineError, SamplingParams

VLLM_VERSION = "0.24.0"
"""The vLLM release this backend is written against (the GPU image's torch fits it)."""


def vllm_sampling_kwargs(params: SamplingParams, seed: int | None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request of ``params``.

    >>> vllm_sampling_kwargs(SamplingParams(n=2, max_new_tokens=5, stop=("x",)), 3)["max_tokens"]
    5
    """
    kwargs: dict[str, Any] = {
        "n": params.n,
        "temperature": float(params.temperature),
        "top_p": float(params.top_p),
        "max_tokens": params.max_new_tokens,
        "skip_special_tokens": True,
    }
    if seed is not None:
        kwargs["seed"] = int(seed)
    if params.stop:
        kwargs["stop"] = list(params.stop)
    return kwargs


def engine_args_kwargs(
    model: str,
    *,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    dtype: str = "auto",
    seed: int = 0,
    enable_prefix_caching: bool = True,
    distributed_executor_backend: str | None = None,
    engine_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.AsyncEngineArgs`` (one place for the engine's shape).

    ``engine_kwargs`` holds further ``AsyncEngineArgs`` fields; they win over the others.
    :class:`VLLMEngine` takes these same keywords.
    """
    if tensor_parallel_size < 1:
        raise EngineError(f"vllm engine: tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise EngineError(f"vllm engine: gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    kwargs: dict[str, Any] = {
        "model": model,
        "tokenizer": model,
        "tensor_parallel_size": int(tensor_parallel_size),
        "gpu_memory_utilization": float(gpu_memory_utilization),
        "dtype": dtype,
        "seed": int(seed),
        "enable_prefix_caching": bool(enable_prefix_caching),
    }
    if max_model_len:
        kwargs["max_model_len"] = int(max_model_len)
    if distributed_executor_backend:
        kwargs["distributed_executor_backend"] = distributed_executor_backend
    kwargs.update(engine_kwargs or {})
    return kwargs


class VLLMEngine(Engine):
    """vLLM's ``AsyncLLM`` in this process; requests from every caller batch continuously."""

    name = "vllm"
    forwards_options_to = staticmethod(engine_args_kwargs)
    """Where ``**engine_args`` go: the CLI reads its keywords to know which options this engine takes."""

    def __init__(self, model: str, *, chat_template_kwargs: dict[str, Any] | None = None,
                 **engine_args: Any) -> None:
        """Describe the engine; vLLM starts (and loads the model) on :meth:`check` or the first request.

        ``engine_args`` are the keywords of :func:`engine_args_kwargs` (``tensor_parallel_size``,
        ``gpu_memory_utilization``, ``max_model_len``, ``dtype``, ``seed``, ``enable_prefix_caching``,
        ``distributed_executor_backend``, ``engine_kwargs``); ``chat_template_kwargs`` go to the chat template.
        """
        if not model:
            raise EngineError("vllm engine: no model given (--model HUB_ID_OR_PATH)")
        self.model = model
        self.engine_kwargs = engine_args_kwargs(model, **engine_args)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._tokenizer: Any = None
        self._engine: Any = None
        self._lock = threading.Lock()

    def describe(self) -> dict:
        """Engine, model and the vLLM engine arguments."""
        return {"engine": self.name, "model": self.model, "vllm": dict(self.engine_kwargs)}

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (``transformers.AutoTokenizer``), loaded on first use."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(self.engine_kwargs["tokenizer"])
            except (OSError, ValueError) as exc:
                raise EngineError(f"vllm engine: cannot load the tokenizer of {self.model}: "
                                  f"{first_line(str(exc))}") from None
        return self._tokenizer

    def prompt_text(self, conversation: Sequence[ChatMessage], enable_thinking: bool | None) -> str:
        """The conversation rendered by the model's chat template."""
        return chat_prompt(self.tokenizer, conversation, enable_thinking, self.chat_template_kwargs)

    def prompt_ids(self, conversation: Sequence[ChatMessage], enable_thinking: bool | None) -> list[int]:
        """Token ids of :meth:`prompt_text`."""
        return list(self.tokenizer(self.prompt_text(conversation, enable_thinking), add_special_tokens=False)["input_ids"])

    def _start(self) -> Any:
        with self._lock:
            if self._engine is None:
                try:
                    import vllm
                except ImportError:
                    raise EngineError("vllm engine: vLLM is not installed (GPU machines: pip install "
                                      f"'cobalt[vllm]', vllm=={VLLM_VERSION})") from None
                args = vllm.AsyncEngineArgs(**self.engine_kwargs)
                try:
                    from vllm.v1.engine.async_llm import AsyncLLM
                except ImportError:  # older layout: the public alias
                    AsyncLLM = vllm.AsyncLLMEngine  # noqa: N806
                try:
                    self._engine = AsyncLLM.from_engine_args(args)
                except Exception as exc:  # noqa: BLE001 - one clear line for the CLI
                    raise EngineError(f"vllm engine: cannot start for {self.model}: "
                                      f"{first_line(f'{type(exc).__name__}: {exc}')}") from None
            return self._engine

    async def check(self) -> None:
        """Start vLLM and load the model now."""
        self._start()

    async def _one(self, conversation: Sequence[ChatMessage], params: SamplingParams, index: int) -> list[Completion]:
        import vllm

        if params.temperature == 0 and params.n > 1:
            # vLLM refuses n > 1 with greedy decoding: n single requests give the same answers
            single = dataclasses.replace(params, n=1)
            parts = await gather_or_cancel([self._one(conversation, single, index) for _ in range(params.n)])
            return [c for part in parts for c in part]
        engine = self._start()
        ids = self.prompt_ids(conversation, params.enable_thinking)
        kwargs = vllm_sampling_kwargs(params, conversation_seed(params, index))
        try:  # only the finished output crosses back, not one per generated token
            from vllm.sampling_params import RequestOutputKind

            kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
        except ImportError:
            pass
        sampling = vllm.SamplingParams(**kwargs)
        request_id = f"cobalt-{uuid.uuid4().hex}"
        final = None
        try:
            async for output in engine.generate({"prompt_token_ids": ids}, sampling, request_id):
                final = output
        except asyncio.CancelledError:
            await engine.abort(request_id)
            raise
        if final is None:
            raise EngineError(f"vllm engine: request {request_id} ended without output")
        return completions_from_output(final, len(ids))

    async def generate(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[Completion]]:
        """All conversations submitted at once; vLLM schedules them with everything else in flight."""
        return await gather_or_cancel([self._one(c, params, i) for i, c in enumerate(conversations)])

    async def aclose(self) -> None:
        """Shut vLLM down and free the GPU."""
        if self._engine is not None:
            shutdown = getattr(self._engine, "shutdown", None)
            if shutdown is not None:
                shutdown()
            self._engine = None


def completions_from_output(output: Any, prompt_tokens: int) -> list[Completion]:
    """Completions from one finished vLLM ``RequestOutput`` (its ``outputs``, in sample order)."""
    out = []
    for sample in sorted(output.outputs, key=lambda s: s.index):
        extra: dict[str, Any] = {}
        if sample.finish_reason not in ("stop", "length"):
            extra["raw_finish_reason"] = sample.finish_reason
        if getattr(sample, "stop_reason", None) is not None:
            extra["stop_reason"] = sample.stop_reason
        out.append(Completion(text=sample.text, prompt_tokens=prompt_tokens, completion_tokens=len(sample.token_ids),
                              finish_reason=normalise_finish_reason(sample.finish_reason), extra=extra))
    return out


def create(model: str, **options: Any) -> VLLMEngine:
    """Factory registered as engine ``vllm``."""
    return VLLMEngine(model, **options)
