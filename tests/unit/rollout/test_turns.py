"""The repair-turn user message (METHOD §9) from real sandbox results on a real LeetCode problem."""
from __future__ import annotations

import asyncio

import pytest

from cobalt.execution.client import EvaluatorClient
from cobalt.prompts import feedback_all_public_passed, repair_prompt
from cobalt.rollout.conversation import next_user_message
from cobalt.data.records import failing_public_result
from cobalt.rollout.turns import NO_CODE_FEEDBACK, error_feedback, turn_feedback


@pytest.fixture(scope="module")
def problem(leetcode_problems):
    return leetcode_problems[0]


@pytest.fixture(scope="module")
def results(problem):
    """Public results of the reference program (all pass) and of one that is wrong on every test."""
    tests = problem.stdin_tests().subset(range(4))
    wrong = "import sys\nsys.stdin.read()\nprint('definitely not the answer')\n"
    client = EvaluatorClient.embedded(max_concurrency=2)

    async def both():
        return await client.evaluate_many([(problem.stdin_program(), tests), (wrong, tests)])

    good, bad = asyncio.run(both())
    return good, bad


def test_all_passed_is_wrapped_in_the_repair_instruction(results):
    good, _ = results
    assert good.all_passed
    message = next_user_message(good)
    assert message == repair_prompt(feedback_all_public_passed())
    assert feedback_all_public_passed() in message


def test_first_failing_test_feedback_is_chosen(results):
    _, bad = results
    assert not any(bad.passing)
    assert turn_feedback(bad) == bad.feedback[0]
    assert next_user_message(bad) == repair_prompt(bad.feedback[0])
    assert "definitely not the answer" in next_user_message(bad)


def test_first_failure_after_passing_tests_is_chosen():
    result = {"passing": [True, True, False, False], "feedback": ["ok1", "ok2", "third", "fourth"]}
    assert turn_feedback(result) == "third"
    assert next_user_message(result).count("third") == 1
    assert "fourth" not in next_user_message(result)


def test_records_public_result_and_dataclass_give_the_same_message(results):
    from cobalt.data.records import PublicResult

    _, bad = results
    as_record = PublicResult(tuple(bad.passing), tuple(bad.feedback))
    assert next_user_message(as_record) == next_user_message(bad) == next_user_message(bad.to_dict())


def test_no_code_and_errors_say_so_inside_the_repair_instruction():
    no_code = next_user_message(None, no_code=True)
    assert no_code == repair_prompt(NO_CODE_FEEDBACK)
    assert "no fenced code block" in no_code
    timeout = TimeoutError()
    timeout.timeout_s = 30
    assert "timed out after 30 seconds" in next_user_message(None, error=timeout)
    raised = next_user_message(None, error=ConnectionError("no evaluator"))
    assert "ConnectionError: no evaluator" in raised
    assert raised.startswith(repair_prompt("X").split("X")[0][:40])
    assert error_feedback("boom").endswith("boom")


def test_evaluator_timeout_result_feedback_names_the_timeout():
    from cobalt.execution.base import ExecutionResult, Status

    timed_out = ExecutionResult.failure(4, "evaluation timed out after 30 seconds", Status.TIMEOUT)
    assert "evaluation timed out after 30 seconds" in next_user_message(timed_out)


def test_no_code_wins_over_a_result_and_missing_result_is_an_error():
    assert turn_feedback({"passing": [True], "feedback": ["x"]}, no_code=True) == NO_CODE_FEEDBACK
    with pytest.raises(ValueError):
        turn_feedback(None)
    with pytest.raises(ValueError):
        turn_feedback({"passing": [True, False], "feedback": ["x"]})


def test_failing_public_result_shape_is_a_valid_record_public_field():
    from cobalt.data.records import _public_from

    public = _public_from(failing_public_result(4, NO_CODE_FEEDBACK), "public", path="x", line=1)
    assert public.passing == (False,) * 4 and public.pass_rate == 0.0


def test_paper_texts_are_the_original_inference_script_s():
    # run_multi_turn_vllm.py, eval_completion: no code -> this sentence; asyncio.TimeoutError of
    # its 300 s wait -> the fixed "within 30 seconds" sentence; any other exception ->
    # f"Exception: {type(e).__name__}: {e}". All with passing [False].
    from cobalt.rollout.turns import caller_wait_s, no_code_feedback

    assert no_code_feedback("paper") == ("Failed to extract code from model response. Please ensure the model's "
                                         "response contains a valid code block.")
    assert error_feedback(TimeoutError(), timeout_s=300, profile="paper") == (
        "Timeout: Program fails to execute all test cases within 30 seconds.")
    assert error_feedback(ConnectionError("refused"), profile="paper") == "Exception: ConnectionError: refused"
    assert turn_feedback(None, no_code=True, profile="paper") == no_code_feedback("paper")
    assert (caller_wait_s("paper"), caller_wait_s("cobalt")) == (300.0, 30.0)
    # cobalt keeps its own texts
    assert no_code_feedback("cobalt") == NO_CODE_FEEDBACK
    assert error_feedback(TimeoutError(), timeout_s=30, profile="cobalt").endswith("timed out after 30 seconds.")


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
def test_cached_first_turns_are_executed_again_under_paper(profile):
    # run_multi_turn_vllm.py, process_one_example: the cached responses (example["responses"]) go
    # through get_results_and_feedback on this run's public tests; the record keeps that result.
    # Here the cached result says "passed" for a program that prints the wrong answer: paper
    # re-executes it (0 of 2 pass), cobalt keeps the cached verdicts (judged on the same tests).
    from cobalt.data.problems import ProblemRecord
    from cobalt.engines.base import SamplingParams
    from cobalt.execution.base import TestCases
    from cobalt.rollout.loop import RolloutConfig, rollout_problem

    public = TestCases(("1\n", "2\n"), ("2", "4"))
    problem = ProblemRecord("double", "Print twice n.", public, TestCases((), ()))
    response = "<think>x</think>\n```python\nprint(int(input()) * 3)\n```"
    cached = [{"response": response, "code": "print(int(input()) * 2)",
               "public": {"passing": [True, True], "feedback": ["ok", "ok"]}}]
    config = RolloutConfig(samples=1, repair_turns=0, profile=profile)
    client = EvaluatorClient.embedded(max_concurrency=2)
    record = asyncio.run(rollout_problem(problem, None, client, SamplingParams(), config, cached=cached,
                                         cached_public=public))
    first = record["samples"][0]["turns"][0]
    if profile == "paper":
        assert first["code"] == "print(int(input()) * 3)" and first["public"]["passing"] == [False, False]
        assert first["public_pass_rate"] == 0.0 and first["rejudged"]
    else:
        assert first["public"]["passing"] == [True, True] and "rejudged" not in first
