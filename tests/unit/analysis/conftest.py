"""Shared material for the reward-hacking tests: a real LeetCode problem, perturbed, and a turn builder."""
from __future__ import annotations

import pytest

from cobalt.data.leetcode import load_leetcode
from cobalt.data.perturbation import perturb_record
from cobalt.data.problems import tests_json
from cobalt.execution.base import TestCases

PROBLEM_ID = "minimum-number-of-pushes-to-type-word-i"


@pytest.fixture(scope="session")
def leetcode_problem(shared_data):
    """A real LeetCode problem with short stdin tests whose first four outputs differ."""
    problems = load_leetcode(shared_data / "leetcode" / "leetcode_problems.jsonl.gz")
    return next(p for p in problems if p.task_id == PROBLEM_ID)


@pytest.fixture(scope="session")
def perturbed(leetcode_problem):
    """``(problem record, perturbed record)``: 4 public and 8 hidden tests, perturbed by ``cobalt perturb``'s rule."""
    tests = leetcode_problem.stdin_tests()
    record = {
        "id": PROBLEM_ID,
        "question": leetcode_problem.question,
        "public_test_cases": tests_json(TestCases(tests.inputs[:4], tests.outputs[:4])),
        "hidden_test_cases": tests_json(TestCases(tests.inputs[4:12], tests.outputs[4:12])),
    }
    data = perturb_record(record, seed=42, field="public_test_cases", path="mem", line=1)
    assert data is not None
    return record, data
