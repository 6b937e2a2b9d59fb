"""The ``litellm`` engine against a real HTTP server on 127.0.0.1.

OpenAI-compatible chat requests go to the scriptable server's
``/v1/chat/completions``; Bedrock requests go to its ``/model/<id>/converse``
route through LiteLLM's ``aws_bedrock_runtime_endpoint`` (the same code path
as AWS, with the endpoint pointed at 127.0.0.1), and the SigV4 signature the
server receives is checked with botocore's signer. What it shares with the ``openai``
engine (bounds, timeouts, ``Retry-After``, environment) is tested for both in
``test_engines_api.py``.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote

import pytest

if importlib.util.find_spec("litellm") is None:  # not importorskip: importing must wait for the engine's offline setup
    pytest.skip("litellm ([api] extra) not installed", allow_module_level=True)

from support.openai_server import CONV_A, CONV_B, OpenAIServer, count_words  # noqa: E402

from cobalt.cli import main  # noqa: E402
from cobalt.engines import EngineError, SamplingParams, create_engine  # noqa: E402

FAKE_OPENAI_KEY = "sk-cobalt-canary-7f3e9a1c5d"
FAKE_AWS_KEY_ID = "AKIACOBALTCANARY7Q2Z"
FAKE_AWS_SECRET = "cobaltCanarySecret/9xY2+wV8uT5sR1qP0oN3mL"
CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
REPO = Path(__file__).resolve().parents[2]


def _engine(server: OpenAIServer, **opts):
    opts.setdefault("backoff", 0.01)
    return create_engine("litellm", opts.pop("model", "test-model"), base_url=server.base_url,
                         api_key=opts.pop("api_key", FAKE_OPENAI_KEY), **opts)


def _bedrock(server: OpenAIServer, model: str = CLAUDE, **opts):
    opts.setdefault("backoff", 0.01)
    opts.setdefault("aws_access_key_id", FAKE_AWS_KEY_ID)
    opts.setdefault("aws_secret_access_key", FAKE_AWS_SECRET)
    opts.setdefault("aws_region_name", "eu-central-1")
    return create_engine("litellm", model, base_url=f"http://127.0.0.1:{server.port}", **opts)


# -- OpenAI-compatible ------------------------------------------------------------------------

async def test_n_texts_token_counts_and_one_request_per_conversation(openai_server):
    engine = _engine(openai_server)
    outs = await engine.generate([CONV_A, CONV_B], SamplingParams(n=3, max_new_tokens=100))
    assert [len(o) for o in outs] == [3, 3]
    for conv, samples in zip((CONV_A, CONV_B), outs):
        expected = [f"answer {i} to: {conv[-1]['content']}" for i in range(3)]
        assert [c.text for c in samples] == expected
        assert {c.prompt_tokens for c in samples} == {sum(count_words(m["content"]) for m in conv)}
        assert sum(c.completion_tokens for c in samples) == sum(count_words(t) for t in expected)
        assert {c.finish_reason for c in samples} == {"stop"}
    assert sorted(r.body["n"] for r in openai_server.chat_requests()) == [3, 3]


async def test_length_stop_and_exact_single_counts(openai_server):
    engine = _engine(openai_server)
    [[cut]] = await engine.generate([CONV_B], SamplingParams(max_new_tokens=3))
    assert (cut.text, cut.finish_reason, cut.completion_tokens) == ("answer 0 to:", "length", 3)
    [[stopped]] = await engine.generate([CONV_B], SamplingParams(max_new_tokens=50, stop=("string",)))
    assert (stopped.text, stopped.finish_reason) == ("answer 0 to: reverse the ", "stop")


async def test_request_body_sampling_seed_thinking_and_key(openai_server):
    engine = _engine(openai_server)
    await engine.generate([CONV_A, CONV_B], SamplingParams(n=2, temperature=0.6, top_p=0.95, max_new_tokens=77,
                                                           seed=40, enable_thinking=False, stop=("zz",)))
    await engine.generate([CONV_A], SamplingParams(enable_thinking=True))
    await engine.generate([CONV_A], SamplingParams())
    reqs = openai_server.chat_requests()
    for k, req in enumerate(sorted(reqs[:2], key=lambda r: r.body["seed"])):
        body = req.body
        assert body["model"] == "test-model" and body["messages"] == [CONV_A, CONV_B][k]
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["n"]) == (0.6, 0.95, 77, 2)
        assert body["seed"] == 40 + k and body["stop"] == ["zz"]
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert req.headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"
    assert reqs[2].body["chat_template_kwargs"] == {"enable_thinking": True}
    assert "chat_template_kwargs" not in reqs[3].body and "seed" not in reqs[3].body


async def test_reasoning_effort_reaches_the_request(openai_server):
    # the original's litellm engine passes reasoning_effort to completion() on every request
    await _engine(openai_server, reasoning_effort="medium").generate([CONV_A], SamplingParams())
    await _engine(openai_server).generate([CONV_A], SamplingParams())
    first, second = openai_server.chat_requests()
    assert first.body["reasoning_effort"] == "medium" and "reasoning_effort" not in second.body


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retries_on_429_and_5xx_then_succeeds(openai_server, status):
    openai_server.fail_next(status, times=2)
    engine = _engine(openai_server, max_retries=3)
    [[c]] = await engine.generate([CONV_B], SamplingParams())
    assert c.text == "answer 0 to: reverse the string abc please"
    # exactly our retries: LiteLLM's and the OpenAI client's own retries are off
    assert len(openai_server.chat_requests()) == 3


async def test_gives_up_after_max_retries_and_4xx_is_not_retried(openai_server):
    openai_server.fail_next(500, times=10, message="upstream exploded")
    engine = _engine(openai_server, max_retries=2)
    with pytest.raises(EngineError, match=r"HTTP 500: .*upstream exploded \(after 3 attempts\)"):
        await engine.generate([CONV_B], SamplingParams())
    assert len(openai_server.chat_requests()) == 3
    openai_server._faults.clear()
    openai_server.fail_next(400, message="bad temperature")
    with pytest.raises(EngineError, match="HTTP 400: .*bad temperature"):
        await engine.generate([CONV_B], SamplingParams())
    assert len(openai_server.chat_requests()) == 4


async def test_wrong_key_is_one_clear_line_and_never_leaks(caplog, capfd):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer(api_key="sk-the-right-one") as server:
        engine = _engine(server, max_retries=3)
        with pytest.raises(EngineError) as err:
            await engine.check()
        with pytest.raises(EngineError) as err2:
            await engine.generate([CONV_B], SamplingParams())
        assert len(server.chat_requests()) == 2  # 401 is not retried
    for exc in (err.value, err2.value):
        assert "credentials were refused (Incorrect API key provided.)" in str(exc) and "\n" not in str(exc)
        assert exc.__cause__ is None and exc.__suppress_context__
    written = capfd.readouterr()
    everything = "\n".join([str(err.value), str(err2.value), repr(err.value.args), caplog.text, written.out,
                            written.err, json.dumps(engine.describe())])
    assert FAKE_OPENAI_KEY not in everything


def test_no_key_for_hosted_openai_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EngineError, match="no OpenAI API key"):
        create_engine("litellm", "gpt-4o-mini")


def test_cli_writes_no_credential_anywhere(tmp_path, openai_server, capfd):
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"question {i}"}]})
                               + "\n" for i in range(2)))
    argv = ["generate", "--input", str(prompts), "--output", str(out), "--engine", "litellm", "--model", "test-model",
            "--base-url", openai_server.base_url, "--openai_api_key", FAKE_OPENAI_KEY, "--n", "2"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(r["completions"]) for r in rows] == [2, 2]
    assert rows[0]["engine"]["engine"] == "litellm" and rows[0]["engine"]["provider"] == "openai"
    written = capfd.readouterr()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert FAKE_OPENAI_KEY not in path.read_text(errors="replace"), path
    assert FAKE_OPENAI_KEY not in written.out + written.err


def test_cli_wrong_key_is_one_line_and_writes_nothing(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p0", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with OpenAIServer(api_key="sk-right") as server:
        code = main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"), "--engine", "litellm",
                     "--model", "m", "--base-url", server.base_url, "--openai_api_key", FAKE_OPENAI_KEY])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code != 0 and len(err) == 1, err
    assert "credentials were refused" in err[0] and FAKE_OPENAI_KEY not in err[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_runs_offline_no_connection_but_the_endpoint(tmp_path):
    """In a fresh process where every socket to anything but 127.0.0.1 raises, LiteLLM imports and answers."""
    script = textwrap.dedent(f"""
        import asyncio, socket, sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        attempts = []
        real_connect, real_gai = socket.socket.connect, socket.getaddrinfo
        def connect(self, addr):
            if isinstance(addr, tuple) and addr[0] not in ("127.0.0.1", "::1"):
                attempts.append(addr); raise OSError("network disabled in this test")
            return real_connect(self, addr)
        def gai(host, *a, **k):
            if host not in ("127.0.0.1", "localhost", "::1", None):
                attempts.append(host); raise socket.gaierror("network disabled in this test")
            return real_gai(host, *a, **k)
        socket.socket.connect, socket.getaddrinfo = connect, gai
        from support.openai_server import OpenAIServer
        from cobalt.engines import SamplingParams, create_engine
        async def go():
            with OpenAIServer() as server:
                engine = create_engine("litellm", "test-model", base_url=server.base_url, api_key="sk-x")
                await engine.check()
                out = await engine.generate([[{{"role": "user", "content": "hi"}}]], SamplingParams(n=2))
                return [c.text for c in out[0]]
        print(asyncio.run(go()), attempts)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    env["PYTHONPATH"] = str(REPO / "src")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "['answer 0 to: hi', 'answer 1 to: hi'] []"


# -- Bedrock (Converse wire format, endpoint pointed at 127.0.0.1) ------------------------------

def _verify_sigv4(req, key_id: str, secret: str, region: str, port: int) -> None:
    """Recompute the request's SigV4 signature with botocore from ``secret``: equal only if it was signed with it."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth_header = req.headers["authorization"]
    assert auth_header.startswith(f"AWS4-HMAC-SHA256 Credential={key_id}/")
    scope = auth_header.split("Credential=", 1)[1].split(",", 1)[0]
    _, day, scope_region, service, _ = scope.split("/")
    assert (scope_region, service) == (region, "bedrock")
    signed = auth_header.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    aws_req = AWSRequest(method="POST", url=f"http://127.0.0.1:{port}{req.path}", data=req.raw,
                         headers={h: req.headers[h] for h in signed})
    amz_date = req.headers["x-amz-date"]
    assert amz_date.startswith(day)
    aws_req.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key_id, secret), "bedrock", region)
    expected = signer.signature(signer.string_to_sign(aws_req, signer.canonical_request(aws_req)), aws_req)
    assert auth_header.rsplit("Signature=", 1)[1] == expected


async def test_bedrock_request_model_id_region_and_signed_credentials(openai_server):
    engine = _bedrock(openai_server)
    assert engine.describe()["provider"] == "bedrock" and engine.describe()["litellm_model"] == f"bedrock/{CLAUDE}"
    outs = await engine.generate([CONV_A, CONV_B], SamplingParams(n=2, temperature=0.3, top_p=0.9, max_new_tokens=50,
                                                                  stop=("string",), seed=5))
    reqs = [r for r in openai_server.requests if r.path.endswith("/converse")]
    assert len(reqs) == 4  # Converse has no n: one request per sample
    for req in reqs:
        assert unquote(req.path) == f"/model/{CLAUDE}/converse"
        assert req.body["inferenceConfig"] == {"temperature": 0.3, "topP": 0.9, "maxTokens": 50,
                                               "stopSequences": ["string"]}
        assert "seed" not in json.dumps(req.body)
        _verify_sigv4(req, FAKE_AWS_KEY_ID, FAKE_AWS_SECRET, "eu-central-1", openai_server.port)
        assert FAKE_AWS_SECRET.encode() not in req.raw and FAKE_AWS_SECRET not in json.dumps(req.headers)
    with_system = [r for r in reqs if r.body.get("system")]
    assert len(with_system) == 2 and with_system[0].body["system"] == [{"text": "You are terse."}]
    assert with_system[0].body["messages"] == [{"role": "user", "content": [{"text": "add two and three"}]}]
    # answers parsed from the Converse format: text, stop reason, token counts
    assert [c.text for c in outs[0]] == ["answer 0 to: add two and three"] * 2
    assert [c.text for c in outs[1]] == ["answer 0 to: reverse the "] * 2
    assert {c.prompt_tokens for c in outs[0]} == {sum(count_words(m["content"]) for m in CONV_A)}
    assert [c.completion_tokens for c in outs[0]] == [count_words("answer 0 to: add two and three")] * 2
    assert {c.finish_reason for row in outs for c in row} == {"stop"}
    [[cut]] = await engine.generate([CONV_B], SamplingParams(max_new_tokens=2))
    assert (cut.text, cut.finish_reason, cut.completion_tokens) == ("answer 0", "length", 2)


async def test_bedrock_inference_profile_and_env_credentials(openai_server, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_AWS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_AWS_SECRET)
    monkeypatch.setenv("AWS_REGION_NAME", "ap-southeast-2")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    model = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
    engine = create_engine("litellm", model, base_url=f"http://127.0.0.1:{openai_server.port}", backoff=0.01)
    openai_server.fail_next(429)
    [[c]] = await engine.generate([CONV_B], SamplingParams(enable_thinking=False))
    assert c.text == "answer 0 to: reverse the string abc please"
    reqs = [r for r in openai_server.requests if r.path.endswith("/converse")]
    assert len(reqs) == 2 and {unquote(r.path) for r in reqs} == {f"/model/{model}/converse"}
    _verify_sigv4(reqs[-1], FAKE_AWS_KEY_ID, FAKE_AWS_SECRET, "ap-southeast-2", openai_server.port)
    assert engine.describe()["region"] == "ap-southeast-2"
    assert FAKE_AWS_SECRET not in caplog.text + json.dumps(engine.describe())
    assert FAKE_AWS_KEY_ID not in caplog.text + json.dumps(engine.describe())


async def test_bedrock_errors_are_one_line_without_secrets(openai_server, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    engine = _bedrock(openai_server, max_retries=0)
    openai_server.fail_next(403, message="The security token included in the request is invalid")
    with pytest.raises(EngineError) as err:
        await engine.check()
    assert "credentials were refused (The security token included in the request is invalid)" in str(err.value)
    assert "\n" not in str(err.value)
    written = capfd.readouterr()
    text = str(err.value) + caplog.text + written.out + written.err + json.dumps(engine.describe())
    assert FAKE_AWS_SECRET not in text and FAKE_AWS_KEY_ID not in text


def test_bedrock_needs_a_region_and_both_keys(monkeypatch):
    for var in ("AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(EngineError, match="Bedrock needs a region"):
        create_engine("litellm", CLAUDE)
    with pytest.raises(EngineError, match="give both") as err:
        create_engine("litellm", CLAUDE, aws_region_name="us-east-1", aws_access_key_id=FAKE_AWS_KEY_ID)
    assert FAKE_AWS_KEY_ID not in str(err.value)
