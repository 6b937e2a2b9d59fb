"""The ``litellm`` backend: OpenAI and AWS Bedrock models (and OpenAI-compatible servers) through LiteLLM.

The paper ran Claude through Bedrock with LiteLLM; this backend keeps that
path behind the common :class:`~cobalt.engines.base.Engine` interface.
``--model`` is a LiteLLM model string (``bedrock/<model id>``,
``openai/<name>``, ``hosted_vllm/<name>``, ...); a name without a provider
prefix is mapped by :func:`litellm_model_name` (a Bedrock model id such as
``anthropic.claude-...`` or ``us.anthropic.claude-...`` goes to Bedrock,
anything else to OpenAI).

Requests go through ``litellm.acompletion``, one per conversation with ``n``
choices where the provider takes ``n`` (OpenAI-compatible), else ``n``
requests of one (Bedrock). Only the sampling parameters a provider supports
are sent (Bedrock takes no ``seed``). Thinking goes to self-hosted
OpenAI-compatible servers as ``chat_template_kwargs.enable_thinking``; other
providers ignore it (one warning). LiteLLM's own retries are off: this engine
retries 429, 408 and 5xx with exponential backoff (``Retry-After`` wins), and
timeouts and dropped connections at most 3 attempts in all (the one retry
layer, :func:`cobalt.engines._common.call_with_retries`), times out each attempt, and bounds requests in
flight with one semaphore.

Credentials: the OpenAI key from ``api_key=`` (flags ``--api-key`` /
``--openai_api_key``) or ``$OPENAI_API_KEY``; AWS keys and region from
``aws_access_key_id=``, ``aws_secret_access_key=``, ``aws_region_name=`` (the
paper's flags) or ``$AWS_ACCESS_KEY_ID``, ``$AWS_SECRET_ACCESS_KEY``,
``$AWS_SESSION_TOKEN``, ``$AWS_REGION_NAME`` / ``$AWS_REGION`` /
``$AWS_DEFAULT_REGION`` (without keys, boto3's default chain: profile, role).
They live only in the engine object: :meth:`LiteLLMEngine.describe`, error
messages and log records (ours and LiteLLM's) never carry them.

LiteLLM is made to run offline: before it is first imported the bundled model
cost map, Anthropic beta headers and blog posts are selected
(``LITELLM_LOCAL_*``), and callbacks, debug banners and Hugging Face
tokenizer downloads are switched off. Importing this module does none of
that; building an engine does.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, Iterable, Sequence

from cobalt.engines._common import (
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

ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
ENV_OPENAI_BASE_URL = "OPENAI_BASE_URL"
ENV_AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"
ENV_AWS_REGION = ("AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION")
PLACEHOLDER_KEY = "EMPTY"
"""Sent to a self-hosted OpenAI-compatible endpoint when no key is configured."""

OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
}
"""Set (unless already set) before LiteLLM is imported: its bundled copies instead of network fetches."""

OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "openai_like", "custom_openai"})
"""Providers that speak OpenAI's chat wire format (``n``, ``seed``, extra body fields)."""

BEDROCK_VENDORS = ("anthropic.", "amazon.", "meta.", "mistral.", "cohere.", "ai21.", "deepseek.", "qwen.",
                   "openai.", "writer.", "twelvelabs.")
"""Prefixes of Bedrock model ids (``anthropic.claude-...``)."""
BEDROCK_PROFILES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")
"""Prefixes of Bedrock cross-region inference profiles (``us.anthropic.claude-...``)."""

_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def litellm_model_name(model: str, providers: Iterable[str]) -> tuple[str, str]:
    """``(LiteLLM model string, provider)`` for ``--model``.

    A known provider prefix is kept; an AWS ARN or a Bedrock model id (with or
    without an inference-profile prefix) goes to ``bedrock``; anything else to
    ``openai``.

    >>> providers = {"openai", "bedrock", "hosted_vllm"}
    >>> litellm_model_name("us.anthropic.claude-3-7-sonnet-20250219-v1:0", providers)
    ('bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0', 'bedrock')
    >>> litellm_model_name("gpt-4o-mini", providers), litellm_model_name("Qwen/Qwen3-8B", providers)
    (('openai/gpt-4o-mini', 'openai'), ('openai/Qwen/Qwen3-8B', 'openai'))
    """
    head, sep, _ = model.partition("/")
    if sep and head in set(providers):
        return model, head
    if model.startswith("arn:aws:bedrock:"):
        return f"bedrock/{model}", "bedrock"
    bare = model
    for profile in BEDROCK_PROFILES:
        if bare.startswith(profile):
            bare = bare[len(profile):]
            break
    if "/" not in model and bare.startswith(BEDROCK_VENDORS):
        return f"bedrock/{model}", "bedrock"
    return f"openai/{model}", "openai"


class _RedactingFilter(logging.Filter):
    """Replaces every registered secret in a log record's message by ``***``."""

    def __init__(self) -> None:
        super().__init__("cobalt-redact")
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken record is logged as it is
                return True
            cleaned = redact(message, self.secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, ()
            if record.exc_info and record.exc_info[1] is not None:
                text = redact(str(record.exc_info[1]), self.secrets)
                if text != str(record.exc_info[1]):
                    record.exc_info, record.exc_text = None, None
                    record.msg = f"{record.msg} ({text})"
        return True


_REDACTOR = _RedactingFilter()


def _import_litellm(secrets: Iterable[str | None]) -> Any:
    """Import LiteLLM offline and quiet, with the redacting filter on its loggers."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    try:
        import litellm
    except ImportError:
        raise EngineError("litellm engine needs the [api] extra: pip install -e '.[api]' "
                          "(litellm==1.106.2, boto3==1.44.5)") from None
    litellm.suppress_debug_info = True
    litellm.disable_hf_tokenizer_download = True
    litellm.turn_off_message_logging = True
    for name in ("callbacks", "success_callback", "failure_callback", "input_callback", "service_callback",
                 "_async_success_callback", "_async_failure_callback"):
        if hasattr(litellm, name):
            setattr(litellm, name, [])
    _REDACTOR.secrets.update(s for s in secrets if s and len(s) >= 4)
    for name in (*_LITELLM_LOGGERS, __name__):
        logger = logging.getLogger(name)
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)
        for handler in logger.handlers:
            if _REDACTOR not in handler.filters:
                handler.addFilter(_REDACTOR)
    return litellm


def _env_region() -> str | None:
    return next((os.environ[k] for k in ENV_AWS_REGION if os.environ.get(k)), None)


class LiteLLMEngine(Engine):
    """Chat completions through ``litellm.acompletion`` (OpenAI, Bedrock, OpenAI-compatible servers)."""

    name = "litellm"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_region_name: str | None = None,
        max_in_flight: int = 64,
        timeout: float = 600.0,
        max_retries: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        n_per_request: int | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        """Build the engine (LiteLLM is imported here; no request is sent until :meth:`check` or a batch).

        ``base_url`` is the OpenAI-compatible endpoint (default ``$OPENAI_BASE_URL``)
        or, for Bedrock, the runtime endpoint (default: AWS's for the region).
        ``max_in_flight`` bounds concurrent requests, ``timeout`` is the limit
        of one attempt in seconds, ``max_retries`` the retries after the first
        attempt; ``n_per_request`` splits ``n`` over several requests;
        ``reasoning_effort`` is passed to every ``acompletion`` when set (the original's judge and API runs).
        """
        if not model:
            raise EngineError("litellm engine: no model name given (--model)")
        if max_in_flight < 1:
            raise EngineError(f"litellm engine: max_in_flight must be >= 1, got {max_in_flight}")
        secrets = [api_key, aws_access_key_id, aws_secret_access_key, os.environ.get(ENV_OPENAI_API_KEY),
                   os.environ.get(ENV_AWS_ACCESS_KEY_ID), os.environ.get(ENV_AWS_SECRET_ACCESS_KEY),
                   os.environ.get(ENV_AWS_SESSION_TOKEN)]
        self._litellm = _import_litellm(secrets)
        self.model = model
        self.litellm_model, self.provider = litellm_model_name(model, [str(getattr(p, "value", p))
                                                                       for p in self._litellm.provider_list])
        self.max_in_flight = int(max_in_flight)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.n_per_request = n_per_request
        self.reasoning_effort = reasoning_effort
        self._credentials: dict[str, Any] = {}
        self._secrets: list[str] = [s for s in secrets if s]
        if self.provider == "bedrock":
            self.base_url = base_url or None
            self.region = aws_region_name or _env_region()
            if not self.region:
                raise EngineError("litellm engine: Bedrock needs a region; pass --aws_region_name or set "
                                  "$AWS_REGION_NAME")
            key_id = aws_access_key_id or os.environ.get(ENV_AWS_ACCESS_KEY_ID) or None
            secret = aws_secret_access_key or os.environ.get(ENV_AWS_SECRET_ACCESS_KEY) or None
            if (key_id is None) != (secret is None):
                raise EngineError("litellm engine: give both --aws_access_key_id and --aws_secret_access_key "
                                  "(or $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY), or neither for boto3's "
                                  "default credentials")
            self._credentials["aws_region_name"] = self.region
            if key_id is not None:
                self._credentials.update(aws_access_key_id=key_id, aws_secret_access_key=secret)
                token = os.environ.get(ENV_AWS_SESSION_TOKEN) if not aws_access_key_id else None
                if token:
                    self._credentials["aws_session_token"] = token
            if self.base_url:
                self._credentials["aws_bedrock_runtime_endpoint"] = self.base_url
        else:
            self.region = None
            self.base_url = base_url or (os.environ.get(ENV_OPENAI_BASE_URL) if self.provider in OPENAI_COMPATIBLE
                                         else None) or None
            key = api_key or (os.environ.get(ENV_OPENAI_API_KEY) if self.provider in OPENAI_COMPATIBLE else None)
            if not key and self.provider in OPENAI_COMPATIBLE:
                if self.base_url is None:
                    raise EngineError(f"litellm engine: no OpenAI API key; pass --openai_api_key (or --api-key) "
                                      f"or set ${ENV_OPENAI_API_KEY}, or give --base-url of a self-hosted server")
                key = PLACEHOLDER_KEY
            if key:
                self._credentials["api_key"] = key
            if self.base_url:
                self._credentials["api_base"] = self.base_url
        supported = self._litellm.get_supported_openai_params(model=self.litellm_model.split("/", 1)[1],
                                                              custom_llm_provider=self.provider) or []
        self.supported = frozenset(supported)
        self.thinking_via_template = self.provider in OPENAI_COMPATIBLE and self.base_url is not None
        self._warned_thinking = False
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- plumbing -------------------------------------------------------------------------
    def describe(self) -> dict:
        """Engine, model, provider, endpoint and region (never a credential)."""
        return {"engine": self.name, "model": self.model, "litellm_model": self.litellm_model,
                "provider": self.provider, "base_url": public_url(self.base_url), "region": self.region,
                "max_in_flight": self.max_in_flight, "timeout": self.timeout,
                "reasoning_effort": self.reasoning_effort}

    def _ensure_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._loop is not loop:
            self._sem = asyncio.Semaphore(self.max_in_flight)
            self._loop = loop

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def _error(self, what: str) -> EngineError:
        where = public_url(self.base_url) or (f"AWS {self.region}" if self.provider == "bedrock" else self.provider)
        return EngineError(self._redact(f"litellm engine ({self.litellm_model} at {where}): {what}"))

    def _describe_failure(self, exc: BaseException) -> str:
        litellm = self._litellm
        if isinstance(exc, (asyncio.TimeoutError, litellm.Timeout)):
            return f"no answer within {self.timeout:g} s"
        if isinstance(exc, litellm.AuthenticationError):
            hint = ("check --aws_access_key_id/--aws_secret_access_key or $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY"
                    if self.provider == "bedrock" else "check --openai_api_key (--api-key) or $OPENAI_API_KEY")
            return f"the credentials were refused ({_server_text(exc)}); {hint}"
        if isinstance(exc, litellm.PermissionDeniedError):
            return f"permission denied (HTTP 403): {_server_text(exc)}"
        if isinstance(exc, litellm.NotFoundError):
            return f"not found (HTTP 404): {_server_text(exc)}"
        if _connection_failure(exc):
            return f"cannot reach the endpoint ({_server_text(exc)})"
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            return f"HTTP {status}: {_server_text(exc)}"
        return first_line(f"{type(exc).__name__}: {exc}")

    def _retryable(self, exc: BaseException) -> bool:
        litellm = self._litellm
        if isinstance(exc, (asyncio.TimeoutError, litellm.Timeout, litellm.APIConnectionError)):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status in (408, 429) or status >= 500)

    async def _call(self, kwargs: dict[str, Any], max_retries: int | None = None) -> Any:
        """One ``acompletion`` with the in-flight bound, per-attempt timeout and retries."""
        self._ensure_loop()
        assert self._sem is not None
        return await call_with_retries(
            lambda: self._litellm.acompletion(**kwargs, **self._credentials), sem=self._sem, timeout=self.timeout,
            max_retries=self.max_retries if max_retries is None else max_retries, backoff=self.backoff,
            max_backoff=self.max_backoff, retryable=self._retryable, describe=self._describe_failure,
            retry_after=_retry_after, error=self._error, log=log, name="litellm engine", redact_text=self._redact)

    async def check(self) -> None:
        """One request for a single token, no retries: a wrong key, model or endpoint fails here."""
        params = SamplingParams(n=1, temperature=0.0, max_new_tokens=1)
        await self._call(self.request_kwargs([{"role": "user", "content": "ping"}], params, 1, None), max_retries=0)

    # -- generation -------------------------------------------------------------------------
    def request_kwargs(self, conversation: Sequence[ChatMessage], params: SamplingParams, n: int,
                       seed: int | None) -> dict[str, Any]:
        """The keyword arguments of ``litellm.acompletion`` for one request (credentials are added at send time)."""
        kwargs: dict[str, Any] = {
            "model": self.litellm_model,
            "messages": [dict(m) for m in conversation],
            "temperature": params.temperature,
            "max_tokens": params.max_new_tokens,
            "timeout": self.timeout,
            "max_retries": 0,
        }
        if "top_p" in self.supported:
            kwargs["top_p"] = params.top_p
        if n > 1:
            kwargs["n"] = n
        if params.stop and "stop" in self.supported:
            kwargs["stop"] = list(params.stop)
        if seed is not None and "seed" in self.supported:
            kwargs["seed"] = seed
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
        if params.enable_thinking is not None:
            if self.thinking_via_template:
                kwargs["extra_body"] = {"chat_template_kwargs": {"enable_thinking": bool(params.enable_thinking)}}
            elif not self._warned_thinking:
                self._warned_thinking = True
                log.warning("litellm engine: enable_thinking is a chat-template flag of self-hosted models; "
                            "ignored for %s", self.litellm_model)
        return kwargs

    def _request_sizes(self, n: int) -> list[int]:
        if "n" not in self.supported:
            return [1] * n
        return split_n(n, self.n_per_request)

    async def _one(self, conversation: Sequence[ChatMessage], params: SamplingParams, index: int) -> list[Completion]:
        return await chat_completions_in_requests(
            self._request_sizes(params.n), conversation_seed(params, index),
            lambda n, seed: self._call(self.request_kwargs(conversation, params, n, seed)),
            error=self._error)

    async def generate(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions per conversation, requests sent concurrently up to ``max_in_flight``."""
        self._ensure_loop()
        return await gather_or_cancel([self._one(c, params, i) for i, c in enumerate(conversations)])


def _server_text(exc: BaseException) -> str:
    """The provider's own message inside a LiteLLM exception, on one line."""
    text = str(getattr(exc, "message", None) or exc)
    brace = text.find("{")
    try:
        body = json.loads(text[brace:]) if brace >= 0 else None
    except (ValueError, TypeError):
        body = None
    if body is None:
        if " - " in text:  # "litellm.RateLimitError: RateLimitError: OpenAIException - <the server's message>"
            text = text.split(" - ", 1)[1]
        return first_line(text)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            text = str(err.get("message") or err.get("Message") or err)
        else:
            text = str(err)
    return first_line(text)


_CONNECTION_ERRORS = frozenset({"APIConnectionError", "ConnectError", "ConnectTimeout", "ClientConnectorError",
                                "ClientConnectionError", "ServerDisconnectedError", "RemoteProtocolError",
                                "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
                                "EndpointConnectionError"})


def _connection_failure(exc: BaseException) -> bool:
    """True when ``exc`` or an exception it wraps is a failure to connect (LiteLLM reports those as HTTP 500)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _CONNECTION_ERRORS:
            return True
        current = current.__cause__ or current.__context__
    return False


def _retry_after(exc: Any) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def create(model: str, **options: Any) -> LiteLLMEngine:
    """Factory registered as engine ``litellm``."""
    return LiteLLMEngine(model, **options)
