"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions wire format.

Tests start it in a thread on a free port and point real API clients at it
(the ``openai`` package, LiteLLM, ``cobalt generate``). It is scriptable so a
test knows every answer in advance:

- ``responder(messages)`` or ``responder(messages, index)`` returns the text of
  each choice (``index`` is the choice number, ``0 .. n-1``); the default
  answers ``"answer <index> to: <last user message>"``.
- Tokens are whitespace-separated words (:func:`count_words`): ``prompt_tokens``
  counts the words of every message's content, ``completion_tokens`` those of
  each reply. A reply longer than ``max_tokens`` (or ``max_completion_tokens``)
  is cut to that many words with ``finish_reason: "length"``; a reply that
  contains one of the request's ``stop`` strings is cut just before it.
- Faults on demand, consumed in arrival order: :meth:`OpenAIServer.fail_next`
  (an HTTP status such as 429 or 500, optionally with ``Retry-After``),
  :meth:`OpenAIServer.slow_next` (sleep before answering, for timeouts),
  :meth:`OpenAIServer.drop_next` (close the connection without an answer).
  ``delay`` slows every answer (to make requests overlap).
- ``api_key``: when set, a request without ``Authorization: Bearer <api_key>``
  gets 401. ``models``: when set, another model name gets 404.
- Every request is recorded (:attr:`OpenAIServer.requests`: path, headers,
  JSON body) and the peak number of requests in flight is kept
  (:attr:`OpenAIServer.peak_in_flight`).

Routes: ``POST /v1/chat/completions`` (and ``/chat/completions``),
``GET /v1/models``, and AWS Bedrock's ``POST /model/<model id>/converse``
(Converse wire format, one choice per request, the same responder, limits and
faults; the SigV4 ``Authorization`` header is recorded, not checked, so tests
verify it themselves). No streaming.
"""
from __future__ import annotations

import inspect
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Responder = Callable[..., str]


CONV_A = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "add two and three"}]
CONV_B = [{"role": "user", "content": "reverse the string abc please"}]
"""Two conversations the engine tests send (the default responder answers ``answer <i> to: <last message>``)."""


def count_words(text: str) -> int:
    """The server's token count: whitespace-separated words."""
    return len(text.split())


def default_responder(messages: list[dict], index: int) -> str:
    """``"answer <index> to: <last user message>"``."""
    last_user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"answer {index} to: {last_user}"


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


@dataclass
class _Fault:
    kind: str  # "status" | "slow" | "drop" | "body"
    status: int = 0
    body: Any = None
    seconds: float = 0.0
    retry_after: float | None = None
    message: str = ""


@dataclass
class OpenAIServer:
    """The scriptable server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    responder: Responder = default_responder
    api_key: str | None = None
    models: list[str] | None = None
    delay: float = 0.0
    host: str = "127.0.0.1"
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._in_flight = 0
        self.peak_in_flight = 0
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------------
    def start(self) -> "OpenAIServer":
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(_Handler):
            owner = server

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default backlog of 5 stalls bursts of concurrent connections

        self._httpd = Server((self.host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (slow answers still sleeping are woken and dropped)."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what an OpenAI client takes as its base URL."""
        return f"http://{self.host}:{self.port}/v1"

    # -- scripting --------------------------------------------------------------------
    def fail_next(self, status: int, times: int = 1, *, retry_after: float | None = None, message: str = "") -> None:
        """Answer the next ``times`` chat requests with HTTP ``status`` (e.g. 429, 500, 503)."""
        with self._lock:
            self._faults.extend(_Fault("status", status=status, retry_after=retry_after, message=message) for _ in range(times))

    def slow_next(self, seconds: float, times: int = 1) -> None:
        """Sleep ``seconds`` before answering each of the next ``times`` chat requests."""
        with self._lock:
            self._faults.extend(_Fault("slow", seconds=seconds) for _ in range(times))

    def drop_next(self, times: int = 1) -> None:
        """Close the connection of the next ``times`` chat requests without answering."""
        with self._lock:
            self._faults.extend(_Fault("drop") for _ in range(times))

    def reply_next(self, body: Any, times: int = 1) -> None:
        """Answer the next ``times`` chat requests with HTTP 200 and ``body`` as is (a malformed reply)."""
        with self._lock:
            self._faults.extend(_Fault("body", body=body) for _ in range(times))

    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded chat-completion requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- internals used by the handler -----------------------------------------------------
    def _next_fault(self) -> _Fault | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _reply_texts(self, messages: list[dict], n: int) -> list[str]:
        takes_index = len(inspect.signature(self.responder).parameters) >= 2
        return [self.responder(messages, i) if takes_index else self.responder(messages) for i in range(n)]


def _error_body(status: int, message: str) -> dict:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             429: "rate_limit_error"}
    return {"error": {"message": message, "type": kinds.get(status, "server_error"), "param": None,
                      "code": str(status)}}


def _apply_limits(text: str, stop: list[str], max_tokens: int | None) -> tuple[str, str]:
    finish = "stop"
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut >= 0:
        text = text[:cut]
    words = text.split()
    if max_tokens is not None and len(words) > max_tokens:
        text, finish = " ".join(words[:max_tokens]), "length"
    return text, finish


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _record(self, body: Any, raw: bytes) -> None:
        rec = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
        with self.owner._lock:
            self.owner.requests.append(rec)

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        key = self.owner.api_key
        if key is None or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send_json(401, _error_body(401, "Incorrect API key provided."))
        return False

    def do_GET(self) -> None:  # noqa: N802
        self._record(None, b"")
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/models"):
            names = self.owner.models or ["test-model"]
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in names]})
        else:
            self._send_json(404, _error_body(404, f"no route {self.path}"))

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = None
        self._record(body, raw)
        converse = self.path.startswith("/model/") and self.path.rstrip("/").endswith("/converse")
        if not converse and not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error_body(404, f"no route {self.path}"))
            return
        self.owner._enter()
        try:
            self._converse(body) if converse else self._chat(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer
        finally:
            self.owner._leave()

    def _scripted_fault(self) -> bool:
        """Apply the server-wide delay and the next scripted fault; True when the request is answered."""
        owner = self.owner
        if owner.delay:
            owner._stopping.wait(owner.delay)
        fault = owner._next_fault()
        if fault is not None and fault.kind == "slow":
            if owner._stopping.wait(fault.seconds):
                return True
        if fault is not None and fault.kind == "drop":
            self.close_connection = True
            self.connection.close()
            return True
        if fault is not None and fault.kind == "body":
            self._send_json(200, fault.body)
            return True
        if fault is not None and fault.kind == "status":
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            self._send_json(fault.status, _error_body(fault.status, fault.message or f"scripted error {fault.status}"),
                            headers)
            return True
        return False

    def _converse(self, body: Any) -> None:
        """Bedrock Converse: ``{"messages": [{"role", "content": [{"text"}]}], "system", "inferenceConfig"}``."""
        if self._scripted_fault():
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(400, {"message": "body must be a JSON object with 'messages'"})
            return
        messages = [{"role": "system", "content": " ".join(b.get("text", "") for b in body.get("system") or [])}
                    ] if body.get("system") else []
        for m in body["messages"]:
            messages.append({"role": m.get("role"), "content": "".join(b.get("text", "") for b in m.get("content") or [])})
        config = body.get("inferenceConfig") or {}
        text, finish = _apply_limits(self.owner._reply_texts(messages, 1)[0], list(config.get("stopSequences") or []),
                                     config.get("maxTokens"))
        prompt_tokens = sum(count_words(m["content"]) for m in messages)
        out_tokens = count_words(text)
        self._send_json(200, {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "max_tokens" if finish == "length" else "end_turn",
            "usage": {"inputTokens": prompt_tokens, "outputTokens": out_tokens, "totalTokens": prompt_tokens + out_tokens},
            "metrics": {"latencyMs": 1},
        })

    def _chat(self, body: Any) -> None:
        owner = self.owner
        if self._scripted_fault():
            return
        if not self._authorised():
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            self._send_json(400, _error_body(400, "body must be a JSON object with 'model' and 'messages'"))
            return
        if body.get("stream"):
            self._send_json(400, _error_body(400, "streaming is not supported by the test server"))
            return
        model = body["model"]
        if owner.models is not None and model not in owner.models:
            self._send_json(404, _error_body(404, f"The model `{model}` does not exist."))
            return
        messages = body["messages"]
        n = int(body.get("n") or 1)
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        choices, completion_total = [], 0
        for i, text in enumerate(owner._reply_texts(messages, n)):
            text, finish = _apply_limits(text, stop, max_tokens)
            completion_total += count_words(text)
            choices.append({"index": i, "message": {"role": "assistant", "content": text},
                            "finish_reason": finish, "logprobs": None})
        prompt_tokens = sum(count_words(str(m.get("content", ""))) for m in messages)
        self._send_json(200, {
            "id": f"chatcmpl-{next(owner._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_total,
                      "total_tokens": prompt_tokens + completion_total},
        })
