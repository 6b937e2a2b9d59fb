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
