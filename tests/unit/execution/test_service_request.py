"""The service's side of the wire, without Ray: a real replica (real bubblewrap sandboxes)
checks every request against the operator's schema, allow-list and limits before it runs
anything, and the client puts its options, limits and profile on the wire."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from cobalt.execution.base import ExecOptions, Limits, TestCases
from cobalt.execution.client import EvaluatorClient
from cobalt.execution.service import CLIENT_OPTIONS, EvaluatorReplica, RequestRejected, ServiceConfig
from cobalt.profile import ENV_PROFILE

WRONG_FLOAT = {"code": "print(1.5)", "test_cases": {"inputs": [""], "outputs": ["2.0"]}}
ADD = {"code": "a, b = map(int, input().split())\nprint(a + b)\n",
       "test_cases": {"inputs": ["1 2", "5 5"], "outputs": ["3", "11"]}}


@pytest.fixture(scope="module")
def replica():
    """One replica with the default operator configuration (paper profile, the paper's limits)."""
    return EvaluatorReplica(2)


def _ask(replica, payload):
    return asyncio.run(replica.handle(payload))


def _refusal(reply) -> tuple[int, str]:
    assert set(reply) == {"error", "status_code"}, reply
    assert "\n" not in reply["error"]
    return reply["status_code"], reply["error"]


@pytest.mark.parametrize("payload, status, words", [
    ({"programs": 5}, 400, "request.programs: expected a list of programs, got int"),
    ({"programs": "x" * 50_000}, 400, "expected a list of programs, got str"),
    ({"programs": [ADD], "options": {}}, 400, "unknown key 'options' beside 'programs'"),
    ([ADD], 400, "request: expected a JSON object, got list"),
    ({"code": 42, "test_cases": ADD["test_cases"]}, 400, "request.code: expected a string, got int"),
    ({"code": "print(1)", "test_cases": {"inputs": ["1"], "outputs": []}}, 400, "1 inputs but 0 outputs"),
    ({**ADD, "stdin": "x"}, 400, "request: unknown key 'stdin'"),
    ({**WRONG_FLOAT, "options": {"compare": "tolerant", "float_tol": float("inf")}}, 400,
     "request.options.float_tol: expected a finite number >= 0, got inf"),
    ({**WRONG_FLOAT, "options": {"compare": "tolerant", "float_tol": 0.6}}, 403, "looser than this service's"),
    ({**ADD, "options": {"allow_packages": True}}, 403, "does not expose the host's packages"),
    ({**ADD, "options": {"profile": "PAPER"}}, 400, "request.options.profile: 'PAPER' is not one of"),
    ({**ADD, "options": {"profile": None}}, 400, "request.options.profile: None is not one of"),
    ({**ADD, "options": {"sandbox": "none"}}, 400, "unknown option 'sandbox'"),
    ({**ADD, "options": "strict"}, 400, "request.options: expected an object, got str"),
    ({**ADD, "limits": {"test_wall_s": -1}}, 400, "request.limits.test_wall_s: expected a positive finite number"),
    ({**ADD, "limits": {"test_wall_s": float("nan")}}, 400, "expected a positive finite number, got nan"),
    ({**ADD, "limits": {"cgroup": 1}}, 400, "unknown limit 'cgroup'"),
    ({"programs": [ADD, {**ADD, "options": {"stop_on_first_failure": "yes"}}]}, 400,
     "request.programs[1].options.stop_on_first_failure: expected true or false"),
])
def test_a_bad_request_is_refused_with_a_4xx_and_one_line(replica, payload, status, words):
    started = time.perf_counter()
    got_status, reason = _refusal(_ask(replica, payload))
    assert (got_status, words in reason) == (status, True), reason
    assert time.perf_counter() - started < 1.0  # refused before any sandbox starts


def test_float_tol_can_only_tighten_and_a_wrong_answer_still_fails(replica):
    tight = _ask(replica, {**WRONG_FLOAT, "options": {"compare": "tolerant", "float_tol": 1e-9}})
    assert tight["passing"] == [False] and tight["status"] == ["wrong_answer"]
    loose_service = EvaluatorReplica(1, options={"float_tol": 1.0})  # the operator's choice, not a client's
    assert _ask(loose_service, {**WRONG_FLOAT, "options": {"compare": "tolerant"}})["passing"] == [True]


def test_a_mode_the_operator_did_not_approve_is_a_403():
    strict = EvaluatorReplica(1, config={"compare_modes": "exact", "profiles": "cobalt"})
    assert _refusal(_ask(strict, {**WRONG_FLOAT, "options": {"compare": "tolerant"}}))[0] == 403
    assert _refusal(_ask(strict, {**ADD, "options": {"profile": "paper"}}))[0] == 403
    assert _ask(strict, {**ADD, "options": {"compare": "exact", "profile": "cobalt"}})["passing"] == [True, False]


def test_allow_packages_only_where_the_operator_allows_it():
    # under cobalt's prologue: paper's makes psutil, which ray imports, unimportable
    with_packages = EvaluatorReplica(1, options={"allow_packages": True}, config={"profile": "cobalt"})
    code = "import ray, sys\nprint('ok')\n"
    yes = _ask(with_packages, {"code": code, "test_cases": {"inputs": [""], "outputs": ["ok"]}})
    no = _ask(with_packages, {"code": code, "test_cases": {"inputs": [""], "outputs": ["ok"]},
                              "options": {"allow_packages": False}})
    assert (yes["passing"], no["passing"]) == ([True], [False])


def test_limits_are_clamped_to_the_operators(replica):
    fast = EvaluatorReplica(1, limits={"test_wall_s": 1.0, "test_cpu_s": 1.0})
    program = fast.policy.program({**ADD, "limits": {"test_wall_s": 100, "test_cpu_s": 0.5, "memory_bytes": 1 << 40}},
                                  "request")
    assert (program.limits.test_wall_s, program.limits.test_cpu_s, program.limits.memory_bytes) == (1.0, 0.5, 1 << 30)
    slow = {"code": "import time\ntime.sleep(3)\nprint(1)\n", "test_cases": {"inputs": [""], "outputs": ["1"]},
            "limits": {"test_wall_s": 100.0, "program_wall_s": 100.0}}
    assert _ask(fast, slow)["status"] == ["timeout"]


def test_bounds_on_programs_tests_code_and_size():
    small = EvaluatorReplica(1, config={"max_programs": 2, "max_tests": 3, "max_code_bytes": 100,
                                        "max_request_bytes": 1000})
    assert "3 programs, more than the 2" in _refusal(_ask(small, {"programs": [ADD] * 3}))[1]
    many = {"code": "print(1)", "test_cases": {"inputs": ["1"] * 4, "outputs": ["1"] * 4}}
    assert "4 tests, more than 3" in _refusal(_ask(small, many))[1]
    assert "4 tests, more than 3" in _refusal(_ask(small, {**many, "test_cases": json.dumps(many["test_cases"])}))[1]
    assert _refusal(_ask(small, {**ADD, "code": "#" * 101}))[0] == 413
    big = {"code": "print(1)", "test_cases": {"inputs": ["x" * 600], "outputs": ["y" * 600]}}
    assert _refusal(_ask(small, big))[0] == 413
    assert _refusal(_ask(small, {"programs": [{"code": "print(1)", "test_cases": {"inputs": ["x" * 495],
                                                                                   "outputs": ["1"]}}] * 2}))[0] == 413
    assert [r["passing"] for r in _ask(small, {"programs": [ADD] * 2})["results"]] == [[True, False]] * 2


def test_the_operators_profile_is_the_default_of_a_request_without_one():
    cobalt = EvaluatorReplica(1, config={"profile": "cobalt"})
    plain = _ask(cobalt, ADD)
    assert plain["feedback"][1] == "Input:\n5 5\nYour output:\n10\nExpected output:\n11"
    paper = _ask(cobalt, {**ADD, "options": {"profile": "paper"}})
    assert paper["feedback"][1] == "Input:\n5 5\nProgram's Output:\n10\nExpected Output:\n11"


def test_service_config_reads_the_profile_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_PROFILE, "cobalt")
    monkeypatch.delenv("COBALT_EVAL_PROFILE", raising=False)
    assert ServiceConfig.from_env().profile == "cobalt"
    monkeypatch.setenv("COBALT_EVAL_PROFILE", "paper")
    assert ServiceConfig.from_env().profile == "paper"
    assert ServiceConfig.from_env(profile="cobalt").profile == "cobalt"
    with pytest.raises(ValueError, match="profile must be 'paper' or 'cobalt'"):
        ServiceConfig(profile="fast")
    with pytest.raises(ValueError, match="compare_modes"):
        ServiceConfig(compare_modes="exact,fuzzy")


def test_serve_cli_profile_flag_sets_the_default(monkeypatch):
    import argparse

    from cobalt.execution import serve_cli

    parser = argparse.ArgumentParser()
    serve_cli.add_arguments(parser)
    monkeypatch.delenv("COBALT_EVAL_PROFILE", raising=False)
    monkeypatch.delenv(ENV_PROFILE, raising=False)
    args = parser.parse_args(["--profile", "cobalt"])
    assert ServiceConfig.from_env(profile=args.profile).profile == "cobalt"
    assert ServiceConfig.from_env(profile=parser.parse_args([]).profile).profile == "paper"


def test_a_batch_gets_its_share_not_the_replica():
    one = EvaluatorReplica(1)
    sleeper = {"code": "import time\ntime.sleep(0.6)\nprint(1)\n", "test_cases": {"inputs": [""], "outputs": ["1"]}}

    async def run():
        batch = asyncio.create_task(one.handle({"programs": [sleeper] * 8}))
        await asyncio.sleep(0.1)  # the batch holds the sandbox and has queued its next program
        started = time.perf_counter()
        single = await one.handle(ADD)
        single_s = time.perf_counter() - started
        return single, single_s, batch.done(), await batch

    single, single_s, batch_done, batch = asyncio.run(run())
    assert single["passing"] == [True, False] and not batch_done
    assert all(r["passing"] == [True] for r in batch["results"])
    assert single_s < 3.0, single_s  # behind one or two of the batch's programs (0.6 s each), not eight


def test_client_puts_options_limits_and_profile_on_the_wire(monkeypatch):
    monkeypatch.delenv(ENV_PROFILE, raising=False)
    client = EvaluatorClient.ray(profile="cobalt", options=ExecOptions(call_mode="lossy", compare="tolerant"),
                                 limits=Limits(test_wall_s=2.0))
    wire = client.request("print(1)", TestCases(("",), ("1",)))
    assert set(wire["options"]) == CLIENT_OPTIONS
    assert (wire["options"]["profile"], wire["options"]["call_mode"], wire["options"]["compare"]) == \
        ("cobalt", "lossy", "tolerant")
    assert wire["limits"]["test_wall_s"] == 2.0
    program = EvaluatorReplica(1).policy.program(wire, "request")  # what the service makes of it
    assert program.options == client.options and program.limits == client.limits


def test_every_constructor_takes_the_profile(monkeypatch):
    monkeypatch.delenv(ENV_PROFILE, raising=False)
    assert EvaluatorClient.embedded(profile="cobalt").options.profile == "cobalt"
    assert EvaluatorClient.ray(profile="cobalt").options.profile == "cobalt"
    assert EvaluatorClient(profile="cobalt").options.profile == "cobalt"
    assert EvaluatorClient.from_env(profile="cobalt").options.profile == "cobalt"
    assert EvaluatorClient.from_env().options.profile == "paper"
    monkeypatch.setenv(ENV_PROFILE, "cobalt")
    assert EvaluatorClient.from_env().options.profile == "cobalt"
    assert EvaluatorClient.from_env(profile="paper").options.profile == "paper"
    assert EvaluatorClient.from_env(options=ExecOptions(call_mode="lossy")).options.profile == "paper"
    with pytest.raises(ValueError, match="profile must be"):
        EvaluatorClient.embedded(profile="fast")


def test_a_refusal_raises_in_the_client_instead_of_scoring(replica):
    client = EvaluatorClient.ray(options=ExecOptions(allow_packages=True), timeout_s=60)

    class Handle:  # the replica behind a stand-in for Serve's handle: the wire is the real payload
        def remote(self, payload):
            return replica.handle(payload)

    client._handle = Handle()
    with pytest.raises(RequestRejected, match="HTTP 403: .*host's packages"):
        asyncio.run(client.evaluate("print(1)", {"inputs": [""], "outputs": ["1"]}))
    client = EvaluatorClient.ray(timeout_s=60)
    client._handle = Handle()
    assert asyncio.run(client.evaluate(ADD["code"], ADD["test_cases"])).passing == (True, False)


@pytest.mark.parametrize("profile, call_mode", [("paper", "lossy"), ("cobalt", "call")])
def test_taco_preprocessing_in_ray_mode_sends_its_call_mode_and_profile(monkeypatch, profile, call_mode):
    from cobalt.data.taco import TacoConfig, evaluator_client

    monkeypatch.setenv("COBALT_EVALUATOR", "ray")
    monkeypatch.setenv(ENV_PROFILE, "cobalt" if profile == "paper" else "paper")  # the config wins
    client = evaluator_client(TacoConfig(profile=profile), concurrency=3)
    assert (client.mode, client.max_concurrency) == ("ray", 3)
    wire = client.request("def f(a):\n    return a\n", TestCases(("1",), ("1",), "f"))
    program = EvaluatorReplica(1).policy.program(wire, "request")
    assert (program.options.call_mode, program.options.profile) == (call_mode, profile)
