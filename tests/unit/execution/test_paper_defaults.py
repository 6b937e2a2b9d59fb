"""Every paper default pinned, per profile (METHOD §2 and §9), and the client's environment."""
from __future__ import annotations

import os

import pytest

from cobalt.execution.base import CALLER_TIMEOUT_S, HOST_GRACE_S, ExecOptions, Limits, TestCases
from cobalt.execution.client import EvaluatorClient, ShortTimeoutWarning
from cobalt.execution.local import LocalExecutor


def test_paper_limits():
    lim = Limits()
    assert lim.test_wall_s == 4.0
    assert lim.test_cpu_s == 4.0
    assert lim.memory_bytes == 1024 ** 3
    assert lim.program_wall_s == 27.0
    assert lim.test_parallelism == 4
    assert CALLER_TIMEOUT_S == 300.0
    assert ExecOptions().profile == "paper"
    assert ExecOptions().compare == "exact"


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
def test_caller_waits_longer_than_the_cap_in_both_profiles(profile):
    client = EvaluatorClient(options=ExecOptions(profile=profile))
    assert client.timeout_s == 300.0
    assert client.timeout_s > client.limits.program_wall_s + HOST_GRACE_S
    with pytest.warns(ShortTimeoutWarning, match="longer than the program cap"):
        EvaluatorClient(timeout_s=27.0, options=ExecOptions(profile=profile))


def test_tests_at_once_per_profile():
    ex = LocalExecutor()
    assert ex._parallel_tests(ExecOptions(profile="paper")) == 4
    cobalt = ex._parallel_tests(ExecOptions(profile="cobalt"))
    assert 1 <= cobalt <= min(4, os.cpu_count() or 1)
    assert ex._parallel_tests(ExecOptions(profile="paper", stop_on_first_failure=True)) == 1


def test_ten_tests_of_three_and_a_half_seconds_pass_under_the_paper_cap():
    # METHOD §9's example: run one after another they need 35 s, past the 27 s cap; four at
    # once they need about 11 s. Sleeping uses no CPU, so a loaded machine does not matter.
    ex = LocalExecutor()
    res = ex.run_sync("import time\ntime.sleep(3.5)\nprint(input())\n",
                      TestCases(tuple(str(i) for i in range(10)), tuple(str(i) for i in range(10))),
                      ExecOptions(profile="paper"))
    assert res.passing == (True,) * 10


def test_from_env_reads_the_evaluator_variables(monkeypatch):
    monkeypatch.setenv("COBALT_EVALUATOR", "ray")
    monkeypatch.setenv("COBALT_RAY_ADDRESS", "127.0.0.1:6399")
    monkeypatch.setenv("COBALT_EVAL_TIMEOUT", "45.5")
    monkeypatch.setenv("COBALT_EVAL_CONCURRENCY", "7")
    client = EvaluatorClient.from_env()
    assert (client.mode, client.ray_address, client.timeout_s, client.max_concurrency) == ("ray", "127.0.0.1:6399", 45.5, 7)
    assert EvaluatorClient.from_env(timeout_s=60.0).timeout_s == 60.0  # keyword arguments win
    monkeypatch.setenv("COBALT_EVAL_TIMEOUT", "10")
    with pytest.warns(ShortTimeoutWarning):
        assert EvaluatorClient.from_env().timeout_s == 10.0  # shorter than the cap: said loudly


async def test_from_env_ray_client_fails_cleanly_without_a_cluster(monkeypatch):
    # What the training workers use: a ray client; with no cluster at the address the
    # call returns a failing result with the reason, within its timeout.
    monkeypatch.setenv("COBALT_EVALUATOR", "ray")
    monkeypatch.setenv("COBALT_RAY_ADDRESS", "127.0.0.1:1")
    monkeypatch.setenv("COBALT_EVAL_TIMEOUT", "30")
    client = EvaluatorClient.from_env(limits=Limits(program_wall_s=5.0))
    res = await client.evaluate("print(1)", {"inputs": [""], "outputs": ["1"]})
    assert res.passing == (False,) and res.error
