"""Helpers shared by the backends: finish reasons, seeds, backoff and retries, secrets, cancellation.

Nothing here imports a backend's package; every function is plain Python.
"""
from __future__ import annotations

import asyncio
import logging
import random
import re
from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar
from urllib.parse import urlsplit, urlunsplit

from cobalt.engines.base import Completion, EngineError, SamplingParams

T = TypeVar("T")

_STOP_REASONS = {"stop", "eos", "stop_sequence", "end_turn", "abort_stop", "tool_calls", "function_call"}
_LENGTH_REASONS = {"length", "max_tokens", "max_completion_tokens", "model_length"}


def normalise_finish_reason(raw: Any) -> str:
    """Map a backend's finish reason onto the interface's ``'stop'`` or ``'length'``.

    >>> normalise_finish_reason("max_tokens"), normalise_finish_reason("end_turn")
    ('length', 'stop')
    """
    value = str(raw or "").lower()
    if value in _LENGTH_REASONS:
        return "length"
    return "stop"


def conversation_seed(params: SamplingParams, index: int) -> int | None:
    """The seed of conversation ``index`` of a batch: ``params.seed + index`` (None stays None).

    >>> conversation_seed(SamplingParams(seed=7), 2), conversation_seed(SamplingParams(), 2)
    (9, None)
    """
    return None if params.seed is None else int(params.seed) + int(index)


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based): exponential with jitter.

    A server's ``Retry-After`` wins when given, capped at ``cap``.
    """
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), cap)
    return min(cap, base * (2 ** attempt)) * (0.5 + random.random() / 2)


CONNECT_TIMEOUT_S = 10.0
"""Connect timeout of the server engines: an endpoint that does not accept a connection
within it counts as unreachable. The read timeout (``--timeout``, 600 s by default) stays
long, since one long generation may take minutes."""
UNREACHABLE_ATTEMPTS = 3
"""Attempts of a request that met an unreachable endpoint (connection refused or reset,
no connection within :data:`CONNECT_TIMEOUT_S`, no answer within the read timeout), whatever
``max_retries`` allows; between them the backoff is at most :data:`UNREACHABLE_BACKOFF_CAP_S`."""
UNREACHABLE_BACKOFF_CAP_S = 2.0

_UNREACHABLE_NAMES = frozenset({
    "APIConnectionError", "APITimeoutError", "Timeout", "TimeoutError", "ConnectError", "ConnectTimeout",
    "ReadTimeout", "PoolTimeout", "ClientConnectorError", "ClientConnectionError", "ServerDisconnectedError",
    "RemoteProtocolError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "EndpointConnectionError",
})


def is_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it wraps) says the endpoint could not be reached or did not answer.

    >>> is_unreachable(ConnectionRefusedError()), is_unreachable(asyncio.TimeoutError()), is_unreachable(KeyError())
    (True, True, False)
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (asyncio.TimeoutError, ConnectionError)):
            return True
        if any(cls.__name__ in _UNREACHABLE_NAMES for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


async def call_with_retries(
    make_call: Callable[[], Awaitable[T]],
    *,
    sem: asyncio.Semaphore,
    timeout: float,
    max_retries: int,
    backoff: float,
    max_backoff: float,
    retryable: Callable[[BaseException], bool],
    describe: Callable[[BaseException], str],
    retry_after: Callable[[BaseException], float | None],
    error: Callable[[str], BaseException],
    log: logging.Logger,
    name: str,
    redact_text: Callable[[str], str],
) -> T:
    """Await ``make_call()`` inside ``sem``, each attempt limited to ``timeout`` seconds, with retries.

    A failure that ``retryable`` accepts is retried up to ``max_retries`` times
    after :func:`backoff_delay` (``retry_after(exc)`` wins when not None), an
    unreachable endpoint (:func:`is_unreachable`) at most :data:`UNREACHABLE_ATTEMPTS`
    attempts in all, so that a dead endpoint is reported within about 30 s; each
    retry is one warning on ``log``, ``"<name>: <describe(exc)>; retry i/max in s"``
    passed through ``redact_text``. The last failure, or one that is not
    retryable, raises ``error(describe(exc))`` (with the number of attempts
    when there were several) without the original traceback. Cancellation is
    never retried. The semaphore is released while waiting between attempts.
    """
    attempt = 0
    while True:
        async with sem:
            try:
                return await asyncio.wait_for(make_call(), timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                failure = exc
        unreachable = is_unreachable(failure)
        limit = min(max_retries, UNREACHABLE_ATTEMPTS - 1) if unreachable else max_retries
        if not retryable(failure) or attempt >= limit:
            tries = f" (after {attempt + 1} attempts)" if attempt else ""
            raise error(describe(failure) + tries) from None
        delay = backoff_delay(attempt, backoff, max_backoff, retry_after(failure))
        if unreachable:
            delay = min(delay, UNREACHABLE_BACKOFF_CAP_S)
        log.warning(f"{name}: %s; retry %d/%d in %.2f s", redact_text(describe(failure)), attempt + 1,
                    max_retries, delay)
        attempt += 1
        await asyncio.sleep(delay)


REQUEST_SEED_STRIDE = 1_000_003
"""Request ``k`` of one conversation's split requests gets ``seed + k * REQUEST_SEED_STRIDE``: far from the others."""


async def chat_completions_in_requests(sizes: Sequence[int], seed: int | None,
                                       send: Callable[[int, int | None], Awaitable[Any]],
                                       error: Callable[[str], Exception] | None = None) -> list[Completion]:
    """One conversation's samples from one chat request per entry of ``sizes`` (see :func:`split_n`).

    ``send(n, seed)`` returns the awaitable of one OpenAI-format chat response
    with ``n`` choices; request ``k`` gets seed ``seed + k * REQUEST_SEED_STRIDE``
    (None stays None). The requests run concurrently (the first failure cancels
    the others); the completions come back in request order. ``error`` makes
    the engine's error (naming the engine and its URL) for a malformed reply.
    """
    calls = [send(size, None if seed is None else seed + k * REQUEST_SEED_STRIDE) for k, size in enumerate(sizes)]
    out: list[Completion] = []
    for resp in await gather_or_cancel(calls):
        out.extend(completions_from_chat_response(resp, error=error))
    return out


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret replaced by ``***``.

    >>> redact("key sk-abc failed", ["sk-abc", None])
    'key *** failed'
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def public_url(url: str | None) -> str | None:
    """``url`` without a user name or password in its authority (for logs and configs).

    >>> public_url("http://user:pw@host:8000/v1")
    'http://host:8000/v1'
    """
    if not url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, parts.fragment))


def first_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of ``text``, at most ``limit`` characters (for one-line errors)."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= limit else line[: limit - 3] + "..."


async def gather_or_cancel(aws: Sequence[Awaitable[Any]]) -> list[Any]:
    """Like ``asyncio.gather`` but the first failure cancels the others before it is raised."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def split_n(n: int, per_request: int | None) -> list[int]:
    """Split ``n`` samples into request sizes of at most ``per_request`` (None: one request).

    >>> split_n(5, 2), split_n(5, None)
    ([2, 2, 1], [5])
    """
    if not per_request or per_request >= n:
        return [n]
    sizes = [per_request] * (n // per_request)
    if n % per_request:
        sizes.append(n % per_request)
    return sizes


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split integer ``total`` in proportion to ``weights`` so that the parts add up to ``total``.

    >>> apportion(10, [1, 1, 2])
    [3, 2, 5]
    """
    if not weights:
        return []
    wsum = sum(weights)
    if wsum <= 0:
        base = [total // len(weights)] * len(weights)
        for i in range(total - sum(base)):
            base[i] += 1
        return base
    raw = [total * w / wsum for w in weights]
    parts = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - parts[i], reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def chat_prompt(tokenizer: Any, conversation: Sequence[Any], enable_thinking: bool | None,
                template_kwargs: dict[str, Any] | None = None) -> str:
    """``conversation`` rendered by ``tokenizer``'s chat template, ending with the assistant's opener.

    ``enable_thinking`` is passed to the template (Qwen3) only when not None.
    """
    kwargs = dict(template_kwargs or {})
    if enable_thinking is not None:
        kwargs["enable_thinking"] = bool(enable_thinking)
    return tokenizer.apply_chat_template([dict(m) for m in conversation], tokenize=False,
                                         add_generation_prompt=True, **kwargs)


def completions_from_chat_response(resp: Any, *, error: Callable[[str], Exception] | None = None) -> list[Completion]:
    """The completions of one OpenAI-format chat response (``openai`` or LiteLLM objects).

    Per-choice token counts come from logprobs when given; otherwise, with several
    choices, the response's total is apportioned by text length and marked
    ``extra.completion_tokens_estimated``. A reply without choices, or with a
    choice whose message content is null, raises ``error(what)`` (default
    :class:`EngineError`): the server did not do its job, so it is never an
    empty response.
    """
    choices = malformed_reply_check(resp, error or EngineError)
    usage = getattr(resp, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    total = int(getattr(usage, "completion_tokens", 0) or 0)
    texts = [c.message.content for c in choices]
    exact = [len(c.logprobs.content) if getattr(c, "logprobs", None) is not None and c.logprobs.content is not None
             else None for c in choices]
    estimated = len(choices) > 1 and any(e is None for e in exact)
    counts = apportion(total, [len(t) for t in texts]) if estimated else (
        [total] if len(choices) == 1 and exact[0] is None else [int(e or 0) for e in exact])
    out = []
    for choice, text, count in zip(choices, texts, counts):
        extra: dict[str, Any] = {}
        raw_reason = choice.finish_reason
        if raw_reason not in ("stop", "length"):
            extra["raw_finish_reason"] = raw_reason
        reasoning = getattr(choice.message, "reasoning_content", None) or getattr(choice.message, "reasoning", None)
        if reasoning:
            extra["reasoning_content"] = reasoning
        if estimated:
            extra["completion_tokens_estimated"] = True
        out.append(Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=count,
                              finish_reason=normalise_finish_reason(raw_reason), extra=extra))
    return out


def malformed_reply_check(resp: Any, error: Callable[[str], Exception]) -> list[Any]:
    """The choices of chat response ``resp`` sorted by index; ``error(what)`` is raised when it has none
    or when a choice's message content is null."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise error("the reply has no choices: no 'choices' list, or an empty one (a malformed answer of the "
                    f"server: {first_line(repr(resp), 200)})")
    choices = sorted(choices, key=lambda c: getattr(c, "index", 0) or 0)
    for k, choice in enumerate(choices):
        message = getattr(choice, "message", None)
        if message is None or getattr(message, "content", None) is None:
            reason = getattr(choice, "finish_reason", None)
            raise error(f"choice {k} of the reply has content: null (finish_reason {reason!r}); "
                        "the server produced no text")
    return choices
