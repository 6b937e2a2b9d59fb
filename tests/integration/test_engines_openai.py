"""The ``openai`` engine against a real OpenAI-compatible HTTP server on 127.0.0.1.

What it shares with the ``litellm`` engine (bounds, timeouts, ``Retry-After``, environment) is
tested for both in ``test_engines_api.py``.
"""
from __future__ import annotations

import logging

import pytest

pytest.importorskip("openai")

from support.openai_server import CONV_A, CONV_B, OpenAIServer, count_words  # noqa: E402

from cobalt.engines import EngineError, SamplingParams, create_engine  # noqa: E402


def _engine(server: OpenAIServer, **opts):
    opts.setdefault("backoff", 0.01)
    return create_engine("openai", "test-model", base_url=server.base_url, api_key=opts.pop("api_key", "sk-test"), **opts)


async def test_n_texts_token_counts_and_order(openai_server):
    engine = _engine(openai_server)
    outs = await engine.generate([CONV_A, CONV_B], SamplingParams(n=3, max_new_tokens=100))
    await engine.aclose()
    assert [len(o) for o in outs] == [3, 3]
    for conv, samples in zip((CONV_A, CONV_B), outs):
        expected = [f"answer {i} to: {conv[-1]['content']}" for i in range(3)]
        assert [c.text for c in samples] == expected
        prompt_words = sum(count_words(m["content"]) for m in conv)
        assert {c.prompt_tokens for c in samples} == {prompt_words}
        # n > 1: the server reports only a total; the engine splits it and says so.
        assert sum(c.completion_tokens for c in samples) == sum(count_words(t) for t in expected)
        assert all(c.extra.get("completion_tokens_estimated") for c in samples)
        assert {c.finish_reason for c in samples} == {"stop"}
    # one request per conversation, n passed through
    assert sorted(r.body["n"] for r in openai_server.chat_requests()) == [3, 3]


async def test_single_sample_counts_are_exact_and_length_and_stop_map(openai_server):
    engine = _engine(openai_server)
    [[cut]], = [await engine.generate([CONV_B], SamplingParams(max_new_tokens=3))]
    assert cut.text == "answer 0 to:" and cut.finish_reason == "length" and cut.completion_tokens == 3
    assert "completion_tokens_estimated" not in cut.extra
    [[stopped]] = await engine.generate([CONV_B], SamplingParams(max_new_tokens=50, stop=("string",)))
    assert stopped.text == "answer 0 to: reverse the " and stopped.finish_reason == "stop"
    assert openai_server.chat_requests()[-1].body["stop"] == ["string"]
    await engine.aclose()


async def test_request_body_carries_sampling_seed_thinking_and_key(openai_server):
    engine = _engine(openai_server, api_key="sk-body-check")
    params = SamplingParams(n=2, temperature=0.6, top_p=0.95, max_new_tokens=77, seed=40, enable_thinking=False)
    await engine.generate([CONV_A, CONV_B], params)
    await engine.generate([CONV_A], SamplingParams(enable_thinking=True))
    await engine.generate([CONV_A], SamplingParams())
    await engine.aclose()
    reqs = openai_server.chat_requests()
    first_two = sorted(reqs[:2], key=lambda r: r.body["seed"])
    for k, req in enumerate(first_two):
        body = req.body
        assert body["model"] == "test-model"
        assert body["messages"] == [CONV_A, CONV_B][k]
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["n"]) == (0.6, 0.95, 77, 2)
        assert body["seed"] == 40 + k  # seed + conversation index
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert req.headers["authorization"] == "Bearer sk-body-check"
    assert reqs[2].body["chat_template_kwargs"] == {"enable_thinking": True}
    assert "chat_template_kwargs" not in reqs[3].body and "seed" not in reqs[3].body


async def test_n_per_request_splits_samples(openai_server):
    engine = _engine(openai_server, n_per_request=2)
    [samples] = await engine.generate([CONV_B], SamplingParams(n=5, seed=3))
    await engine.aclose()
    assert len(samples) == 5
    assert sorted(r.body["n"] for r in openai_server.chat_requests()) == [1, 2, 2]
    assert len({r.body["seed"] for r in openai_server.chat_requests()}) == 3


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retries_on_429_and_5xx_then_succeeds(openai_server, status):
    openai_server.fail_next(status, times=2)
    engine = _engine(openai_server, max_retries=3)
    [[c]] = await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert c.text == "answer 0 to: reverse the string abc please"
    assert len(openai_server.chat_requests()) == 3


async def test_gives_up_after_max_retries(openai_server):
    openai_server.fail_next(500, times=10, message="upstream exploded")
    engine = _engine(openai_server, max_retries=2)
    with pytest.raises(EngineError, match=r"HTTP 500: upstream exploded \(after 3 attempts\)"):
        await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert len(openai_server.chat_requests()) == 3


async def test_client_errors_are_not_retried(openai_server):
    openai_server.fail_next(400, message="bad temperature")
    engine = _engine(openai_server, max_retries=5)
    with pytest.raises(EngineError, match="HTTP 400: bad temperature"):
        await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
    assert len(openai_server.chat_requests()) == 1


async def test_dropped_connection_is_retried(openai_server):
    openai_server.drop_next()
    engine = _engine(openai_server, max_retries=2)
    [[c]] = await engine.generate([CONV_A], SamplingParams())
    await engine.aclose()
    assert c.text == "answer 0 to: add two and three"
    assert len(openai_server.chat_requests()) == 2


async def test_unbounded_enough_requests_overlap():
    with OpenAIServer(delay=1.0) as server:
        engine = _engine(server, max_in_flight=64)
        await engine.generate([[{"role": "user", "content": str(i)}] for i in range(8)], SamplingParams())
        await engine.aclose()
        assert server.peak_in_flight == 8


async def test_wrong_key_fails_without_leaking_it(caplog):
    secret = "sk-very-secret-0123456789"
    with OpenAIServer(api_key="sk-the-right-one") as server:
        engine = _engine(server, api_key=secret, max_retries=3)
        caplog.set_level(logging.DEBUG)
        with pytest.raises(EngineError) as err:
            await engine.check()
        with pytest.raises(EngineError) as err2:
            await engine.generate([CONV_B], SamplingParams())
        await engine.aclose()
        assert len(server.chat_requests()) == 1  # 401 is not retried
    for message in (str(err.value), str(err2.value)):
        assert "API key was refused" in message and "\n" not in message
        assert secret not in message
    assert secret not in caplog.text
    assert secret not in repr(engine.describe())


def test_no_key_and_no_base_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EngineError, match="no API key"):
        create_engine("openai", "gpt-x")


async def test_model_not_found_is_one_line(openai_server):
    openai_server.models = ["served-model"]
    engine = _engine(openai_server)
    with pytest.raises(EngineError, match=r"not found \(HTTP 404\): The model `test-model` does not exist"):
        await engine.generate([CONV_B], SamplingParams())
    await engine.aclose()
