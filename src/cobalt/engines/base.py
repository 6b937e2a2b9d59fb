"""The engine interface: a batch of chat conversations in, ``n`` completions each out.

Every model call in Cobalt (rollouts, the LLM judge, the online baselines)
goes through an :class:`Engine`. This module holds only the interface, the
records and the registry; each backend lives in its own module and is
imported when :func:`create_engine` chooses it, so that importing
``cobalt.engines`` pulls in neither vLLM, torch nor an HTTP client.
"""
from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from cobalt.defaults import MAX_NEW_TOKENS, TEMPERATURE, TOP_P

ChatMessage = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


class EngineError(RuntimeError):
    """An engine that cannot be built or a request that failed for good (after retries)."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. Defaults are the paper's evaluation settings for vLLM (METHOD §6, §9)."""

    n: int = 1
    """Completions per conversation."""
    temperature: float = TEMPERATURE
    top_p: float = TOP_P
    max_new_tokens: int = MAX_NEW_TOKENS
    seed: int | None = None
    """Base seed; backends that support per-request seeds derive one per conversation."""
    stop: tuple[str, ...] = ()
    enable_thinking: bool | None = None
    """Qwen3's ``enable_thinking`` chat-template flag; None leaves the template's default."""

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"SamplingParams.n must be a positive integer, got {self.n!r}")
        if not (0.0 <= float(self.temperature)):
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature!r}")
        if not (0.0 < float(self.top_p) <= 1.0):
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))


@dataclass(frozen=True)
class Completion:
    """One sampled completion."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    """'stop' (end of sequence or a stop string) or 'length' (hit ``max_new_tokens``)."""
    extra: Mapping[str, Any] = field(default_factory=dict)


class Engine(abc.ABC):
    """A model that completes chat conversations."""

    name: str = "engine"
    model: str = ""

    @abc.abstractmethod
    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[list[Completion]]:
        """For each conversation, ``params.n`` completions (outer list in input order).

        Safe to call concurrently from many tasks: backends batch or bound
        requests themselves. Raises :class:`EngineError` when a request fails
        for good.
        """

    def describe(self) -> dict:
        """A JSON-ready description for run configs (never contains credentials)."""
        return {"engine": self.name, "model": self.model}

    async def check(self) -> None:
        """Fail fast, before any output is written, when the engine cannot serve.

        Backends override this to reach their endpoint or load their model and
        raise :class:`EngineError` with one clear line (unreachable endpoint,
        wrong key, missing model). The default does nothing.
        """

    async def aclose(self) -> None:
        """Release connections, GPU memory, ... (a no-op by default)."""


# name -> "module:attribute" of a factory ``(model: str, **options) -> Engine``.
ENGINES: dict[str, str] = {}


def register_engine(name: str, target: str) -> None:
    """Register backend ``name``, built by ``target`` (``"package.module:factory"``), imported lazily."""
    ENGINES[name] = target


def engine_factory(name: str) -> Any:
    """The factory registered as ``name`` (its module imported now): the one resolver of the
    registry. Raises :class:`EngineError` (one line) for an unknown name or a missing package."""
    if name not in ENGINES:
        raise EngineError(f"unknown engine {name!r}; choose from: {', '.join(sorted(ENGINES)) or '(none registered)'}")
    module_name, _, attr = ENGINES[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EngineError(
            f"engine {name!r} needs a package that is not installed ({exc.name or exc}); "
            "see README's install notes for its extra"
        ) from None
    return getattr(module, attr)


def create_engine(name: str, model: str, **options: Any) -> Engine:
    """Build the engine registered as ``name`` for ``model`` (hub id, local path or API model name)."""
    return engine_factory(name)(model, **options)
