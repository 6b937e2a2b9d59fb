"""The failure breaker and the pre-flight checks of cobalt.health, against real components:
a real HTTP server on 127.0.0.1, a port where nothing listens, the real bubblewrap sandbox."""
from __future__ import annotations

import asyncio
import time

import pytest

from cobalt.health import (
    BreakerOpen,
    FailureBreaker,
    PreflightError,
    check_engine,
    check_evaluator,
    check_http_reachable,
    check_ray_reachable,
)




def test_breaker_opens_after_20_failures_in_a_row():
    breaker = FailureBreaker("evaluator")
    for _ in range(5):
        breaker.success()
    for _ in range(19):
        breaker.failure("sandbox error: cannot start")
    with pytest.raises(BreakerOpen) as caught:
        breaker.failure(ConnectionError("refused"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("stopped: 20 evaluator failures in a row; last error: ConnectionError: refused")
    assert "rerun the same command" in message
    with pytest.raises(BreakerOpen):  # stays open
        breaker.success()
    assert breaker.to_dict() == {"calls": 26, "infrastructure_failures": 20,
                                 "tripped": "20 evaluator failures in a row"}


def test_breaker_opens_above_half_of_the_last_100_calls():
    breaker = FailureBreaker("engine")
    # alternate 2 failures and 1 success: never 20 in a row, 2/3 of the calls fail
    calls = 0
    with pytest.raises(BreakerOpen) as caught:
        while True:
            for ok in (False, False, True):
                calls += 1
                breaker.record(ok, "HTTP 500")
    assert calls == 100  # the window must be full first
    assert "of the last 100 engine calls failed" in str(caught.value)


def test_breaker_stays_closed_at_half_or_less():
    breaker = FailureBreaker()
    for _ in range(300):
        breaker.record(False)
        breaker.record(True)
    assert breaker.tripped is None and breaker.failures == 300


def test_sandbox_check_names_the_missing_bwrap_and_the_fix(monkeypatch, tmp_path):
    assert check_evaluator("embedded").startswith("embedded sandbox (bubblewrap")
    from cobalt.execution import sandbox

    sandbox.check_sandbox.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(PreflightError) as caught:
            check_evaluator("embedded")
    finally:
        sandbox.check_sandbox.cache_clear()
    message = str(caught.value)
    assert "\n" not in message and "bubblewrap (bwrap) is not installed" in message and "apt-get" in message
    assert check_evaluator("embedded", sandbox="none") == "embedded, no sandbox"


def test_ray_address_where_nothing_listens_fails_at_once(closed_port):
    start = time.monotonic()
    with pytest.raises(PreflightError) as caught:
        check_ray_reachable(f"127.0.0.1:{closed_port}")
    assert time.monotonic() - start < 15
    assert f"no Ray cluster answers at 127.0.0.1:{closed_port}" in str(caught.value)
    assert "--evaluator embedded" in str(caught.value)


def test_http_check(openai_server, closed_port, broken_server):
    assert check_http_reachable(openai_server.base_url + "/models") == 200
    with pytest.raises(PreflightError, match=rf"nothing answers at http://127.0.0.1:{closed_port}/"):
        check_http_reachable(f"http://127.0.0.1:{closed_port}/health")
    with pytest.raises(PreflightError, match="answers HTTP 500"):
        check_http_reachable(broken_server + "/models")


def test_engine_check_against_real_servers(openai_server, closed_port, broken_server):
    from cobalt.engines import create_engine

    good = create_engine("openai", "test-model", base_url=openai_server.base_url)
    assert check_engine(good) == "openai (test-model)"
    start = time.monotonic()
    for url in (f"http://127.0.0.1:{closed_port}/v1", broken_server):
        engine = create_engine("openai", "test-model", base_url=url)
        with pytest.raises(PreflightError) as caught:
            check_engine(engine)
        assert "\n" not in str(caught.value) and "openai engine" in str(caught.value)
    assert time.monotonic() - start < 30


def test_dead_endpoint_is_reported_within_30_s_after_3_attempts(closed_port):
    """One retry layer: connection errors get at most 3 attempts whatever max_retries says."""
    from cobalt.engines import EngineError, SamplingParams, create_engine

    engine = create_engine("openai", "test-model", base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=6)
    start = time.monotonic()
    with pytest.raises(EngineError, match=r"cannot reach the endpoint .*\(after 3 attempts\)"):
        asyncio.run(engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_new_tokens=4)))
    assert time.monotonic() - start < 30


def test_server_errors_still_use_max_retries(openai_server):
    from cobalt.engines import SamplingParams, create_engine

    openai_server.fail_next(500, times=4)
    engine = create_engine("openai", "test-model", base_url=openai_server.base_url, max_retries=4, backoff=0.01)
    out = asyncio.run(engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_new_tokens=4)))
    assert out[0][0].text.startswith("answer 0 to: hi")
    assert len(openai_server.chat_requests()) == 5
