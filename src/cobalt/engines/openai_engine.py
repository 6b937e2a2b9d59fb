"""The ``openai`` backend: any OpenAI-compatible chat endpoint through ``AsyncOpenAI``.

Works with ``vllm serve``, SGLang, OpenAI itself and anything else that
speaks ``POST /v1/chat/completions``. Per conversation it sends one request
asking for ``n`` choices (or several, with ``n_per_request``); thinking goes
to the server's chat template as ``chat_template_kwargs.enable_thinking`` in
the request body. Requests in flight are bounded by one semaphore per engine
(created inside the running loop), each attempt has a timeout (connect: 10 s,
``CONNECT_TIMEOUT_S``; read: ``timeout``, 600 s by default, since a long
generation takes minutes), and 429 and 5xx are retried with exponential backoff
(a ``Retry-After`` header wins) up to ``max_retries`` times, while timeouts and
refused or dropped connections get at most 3 attempts in all (a dead endpoint
is reported within about 30 s). 4xx errors other than 429 fail at once.

The API key comes from ``api_key=`` or ``$OPENAI_API_KEY``, the base URL from
``base_url=`` or ``$OPENAI_BASE_URL``; the key never appears in
:meth:`describe`, logs or error messages.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Sequence

from cobalt.engines._common import (
    CONNECT_TIMEOUT_S,
    call_with_retries,
    chat_completions_in_requests,
    conversation_seed,
    first_line,
    gather_or_cancel,
    public_url,
    redact,
    split_n,
)
from cobalt.engines.base import ChatMessage, Completion, Engine, EngineError, SamplingParams

log = logging.getLogger(__name__)

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
PLACEHOLDER_KEY = "EMPTY"
"""Sent to a self-hosted endpoint (``base_url`` given) when no key is configured."""


class OpenAIEngine(Engine):
    """Chat completions from an OpenAI-compatible HTTP endpoint."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_in_flight: int = 64,
        timeout: float = 600.0,
        max_retries: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        n_per_request: int | None = None,
        max_tokens_field: str = "max_tokens",
        send_seed: bool = True,
        extra_body: dict[str, Any] | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        """Build the engine (no connection is made until the first request).

        ``max_in_flight`` bounds concurrent HTTP requests, ``timeout`` is the
        limit of one attempt in seconds, ``max_retries`` the number of retries
        after the first attempt. ``n_per_request`` splits ``n`` over several
        requests (for servers that cap ``n``); ``max_tokens_field`` is
        ``max_tokens`` (vLLM, SGLang) or ``max_completion_tokens`` (OpenAI's
        reasoning models). ``extra_body`` is merged into every request body;
        ``reasoning_effort`` (``low``/``medium``/``high``) is sent with every request when set.
        """
        if not model:
            raise EngineError("openai engine: no model name given (--model)")
        if max_in_flight < 1:
            raise EngineError(f"openai engine: max_in_flight must be >= 1, got {max_in_flight}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise EngineError(f"openai engine: max_tokens_field must be max_tokens or max_completion_tokens, "
                              f"got {max_tokens_field!r}")
        self.model = model
        self.base_url = base_url or os.environ.get(ENV_BASE_URL) or None
        key = api_key or os.environ.get(ENV_API_KEY) or None
        if key is None and self.base_url is None:
            raise EngineError(f"openai engine: no API key; pass --api-key or set ${ENV_API_KEY} "
                              f"(or give --base-url of a self-hosted server)")
        self._api_key = key or PLACEHOLDER_KEY
        self.max_in_flight = int(max_in_flight)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.n_per_request = n_per_request
        self.max_tokens_field = max_tokens_field
        self.send_seed = send_seed
        self.extra_body = dict(extra_body or {})
        if reasoning_effort is not None:
            self.extra_body["reasoning_effort"] = str(reasoning_effort)
        self.reasoning_effort = reasoning_effort
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- plumbing -------------------------------------------------------------------------
    def describe(self) -> dict:
        """Engine, model and base URL (without credentials)."""
        return {"engine": self.name, "model": self.model, "base_url": public_url(self.base_url),
                "max_in_flight": self.max_in_flight, "timeout": self.timeout,
                "reasoning_effort": self.reasoning_effort}

    def _ensure_client(self) -> None:
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return
        import httpx
        from openai import AsyncOpenAI

        timeout = httpx.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT_S, self.timeout))
        self._client = AsyncOpenAI(api_key=self._api_key, base_url=self.base_url, timeout=timeout, max_retries=0)
        self._sem = asyncio.Semaphore(self.max_in_flight)
        self._loop = loop

    def _error(self, what: str) -> EngineError:
        where = public_url(self.base_url) or "api.openai.com"
        return EngineError(redact(f"openai engine ({where}, model {self.model}): {what}", [self._api_key]))

    def _describe_failure(self, exc: BaseException) -> str:
        import openai

        if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError)):
            return f"no answer within {self.timeout:g} s"
        if isinstance(exc, openai.AuthenticationError):
            return "the API key was refused (HTTP 401); check --api-key or $OPENAI_API_KEY"
        if isinstance(exc, openai.PermissionDeniedError):
            return "permission denied (HTTP 403)"
        if isinstance(exc, openai.NotFoundError):
            return f"not found (HTTP 404): {first_line(_server_message(exc))}"
        if isinstance(exc, openai.APIStatusError):
            return f"HTTP {exc.status_code}: {first_line(_server_message(exc))}"
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return f"cannot reach the endpoint ({first_line(str(cause)) or type(cause).__name__})"
        if not_json(exc):
            return f"the server did not answer JSON ({public_url(self.base_url) or 'api.openai.com'})"
        return first_line(f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _retryable(exc: BaseException) -> bool:
        import openai

        if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError, openai.APIConnectionError)):
            return True
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code == 429 or exc.status_code >= 500 or exc.status_code == 408
        return False

    async def _call(self, func, **kwargs: Any) -> Any:
        """One API call with the in-flight bound, per-attempt timeout and retries."""
        self._ensure_client()
        assert self._sem is not None
        return await call_with_retries(
            lambda: func(**kwargs), sem=self._sem, timeout=self.timeout, max_retries=self.max_retries,
            backoff=self.backoff, max_backoff=self.max_backoff, retryable=self._retryable,
            describe=self._describe_failure, retry_after=_retry_after, error=self._error, log=log,
            name="openai engine", redact_text=lambda text: redact(text, [self._api_key]))

    async def check(self) -> None:
        """List the endpoint's models once (no retries): unreachable endpoints and wrong keys fail here."""
        self._ensure_client()
        saved = self.max_retries
        self.max_retries = 0
        try:
            await self._call(self._client.models.list)
        finally:
            self.max_retries = saved

    # -- generation -------------------------------------------------------------------------
    def request_body(self, conversation: Sequence[ChatMessage], params: SamplingParams, n: int,
                     seed: int | None) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one request."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in conversation],
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            self.max_tokens_field: params.max_new_tokens,
        }
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if seed is not None and self.send_seed:
            kwargs["seed"] = seed
        extra = dict(self.extra_body)
        if params.enable_thinking is not None:
            ctk = dict(extra.get("chat_template_kwargs") or {})
            ctk["enable_thinking"] = bool(params.enable_thinking)
            extra["chat_template_kwargs"] = ctk
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def _one(self, conversation: Sequence[ChatMessage], params: SamplingParams, index: int) -> list[Completion]:
        return await chat_completions_in_requests(
            split_n(params.n, self.n_per_request), conversation_seed(params, index),
            lambda n, seed: self._call(self._client_create, **self.request_body(conversation, params, n, seed)),
            error=self._error)

    async def _client_create(self, **kwargs: Any) -> Any:
        return await self._client.chat.completions.create(**kwargs)

    async def generate(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions per conversation, requests sent concurrently up to ``max_in_flight``."""
        self._ensure_client()
        return await gather_or_cancel([self._one(c, params, i) for i, c in enumerate(conversations)])

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            try:
                await self._client.close()
            finally:
                self._client = None


def not_json(exc: BaseException) -> bool:
    """Whether ``exc`` is the openai client failing on a reply body that is not JSON.

    With a JSON content type it fails to decode; with another (an HTML error
    page of a proxy) it hands the text on and fails to set attributes on a str.
    """
    import json

    if isinstance(exc, json.JSONDecodeError):
        return True
    return isinstance(exc, AttributeError) and str(exc).startswith("'str' object has no attribute")


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", "") or exc)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def create(model: str, **options: Any) -> OpenAIEngine:
    """Factory registered as engine ``openai``."""
    return OpenAIEngine(model, **options)
