"""What the ``openai`` and ``litellm`` engines share, each against a real OpenAI-compatible server on 127.0.0.1.

Both bound requests in flight, time out and retry each attempt, cap a server's
``Retry-After``, read their endpoint and key from the environment and fail in
``check()`` when nothing listens. Each test runs once per engine; what only one
engine does stays in ``test_engines_openai.py`` / ``test_engines_litellm.py``.
"""
from __future__ import annotations

import asyncio
import importlib.util

import pytest
from support.openai_server import CONV_B, OpenAIServer

from cobalt.engines import EngineError, SamplingParams, create_engine

PACKAGES = {"openai": "openai", "litellm": "litellm"}
"""Engine -> the package it needs (found, not imported: LiteLLM is imported by the engine, offline)."""


@pytest.fixture(params=sorted(PACKAGES))
def engine_name(request) -> str:
    """Each API engine whose package is installed."""
    if importlib.util.find_spec(PACKAGES[request.param]) is None:
        pytest.skip(f"{PACKAGES[request.param]} ([api] extra) not installed")
    return request.param


def _engine(name: str, server: OpenAIServer, **opts):
    opts.setdefault("backoff", 0.01)
    return create_engine(name, "test-model", base_url=server.base_url, api_key=opts.pop("api_key", "sk-test"), **opts)


async def test_retry_after_is_capped_and_honoured(engine_name, openai_server):
    # A long Retry-After with a tiny max_backoff: the wait is capped, the retry happens.
    openai_server.fail_next(429, retry_after=30)
    engine = _engine(engine_name, openai_server, max_retries=1, max_backoff=0.05)
    [[c]] = await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert c.finish_reason == "stop" and len(openai_server.chat_requests()) == 2


async def test_timeout_is_retried_then_fails_for_good(engine_name, openai_server):
    openai_server.slow_next(30)
    engine = _engine(engine_name, openai_server, timeout=0.5, max_retries=1)
    [[c]] = await engine.generate([CONV_B], SamplingParams())
    assert c.text.startswith("answer 0")
    openai_server.slow_next(30, times=2)
    with pytest.raises(EngineError, match=r"no answer within 0.5 s \(after 2 attempts\)"):
        await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert len(openai_server.chat_requests()) == 4


@pytest.mark.parametrize("bound", [1, 3])
async def test_in_flight_bound_across_concurrent_callers(engine_name, bound):
    with OpenAIServer(delay=0.3) as server:
        engine = _engine(engine_name, server, max_in_flight=bound)
        # 4 callers x 3 conversations each, all at once
        batches = [[[{"role": "user", "content": f"q {t} {i}"}] for i in range(3)] for t in range(4)]
        results = await asyncio.gather(*(engine.generate(b, SamplingParams()) for b in batches))
        await engine.aclose()
        assert server.peak_in_flight == bound
    assert [[s[0].text for s in r] for r in results] == [[f"answer 0 to: q {t} {i}" for i in range(3)] for t in range(4)]


async def test_unreachable_endpoint_fails_in_check(engine_name, closed_port):
    engine = create_engine(engine_name, "m", base_url=f"http://127.0.0.1:{closed_port}/v1", api_key="k-unused")
    with pytest.raises(EngineError, match="cannot reach the endpoint"):
        await engine.check()
    await engine.aclose()


async def test_key_and_base_url_from_environment(engine_name, openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-from-env-{engine_name}")
    engine = create_engine(engine_name, "test-model")
    await engine.check()
    await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert len(openai_server.chat_requests()) >= 1
    assert {r.headers["authorization"] for r in openai_server.requests} == {f"Bearer sk-from-env-{engine_name}"}
    assert engine.describe()["base_url"] == openai_server.base_url


@pytest.mark.parametrize("body, what", [
    ({"id": "x", "object": "chat.completion", "created": 0, "model": "test-model", "choices": []}, "no choices"),
    ({"id": "x", "object": "chat.completion", "created": 0, "model": "test-model"}, "no choices"),
    ({"id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
      "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}]},
     "content: null"),
])
async def test_malformed_reply_is_an_engine_error_naming_engine_and_url(engine_name, openai_server, body, what):
    # A 200 reply without text is the server failing, never an empty response.
    openai_server.reply_next(body)
    engine = _engine(engine_name, openai_server, max_retries=0)
    with pytest.raises(EngineError) as info:
        await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    message = str(info.value)
    # LiteLLM refuses a reply without a choices key itself; the engine still names itself and the URL
    assert what in message or (engine_name == "litellm" and "provider returned" in message.lower())
    assert f"{engine_name} engine" in message
    assert f"127.0.0.1:{openai_server.port}" in message
    # the next, well-formed reply is a completion again
    engine = _engine(engine_name, openai_server, max_retries=0)
    [[c]] = await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert c.text.startswith("answer 0")
