"""Choosing the public tests a run uses (``cobalt rollout --public-tests``), on a real perturbed problem."""
from __future__ import annotations

import pytest

from cobalt.data.perturbation import perturb_record, select_public_tests
from cobalt.data.problems import concat_tests, problem_from_dict, tests_json as json_of
from cobalt.data.records import TrajectoryRecord
from cobalt.execution.base import TestCases
from cobalt.io import RecordError


@pytest.fixture(scope="module")
def perturbed(leetcode_problems):
    tests = leetcode_problems[0].call_tests()
    record = {"id": "p", "question": "q", "public_test_cases": json_of(tests.subset(range(4))),
              "hidden_test_cases": json_of(tests.subset(range(4, 8)))}
    out = perturb_record(record, seed=42, field="public_test_cases", path="ptb.jsonl", line=1)
    assert out is not None
    return out


def test_auto_runs_a_perturbed_record_on_its_perturbed_tests(perturbed):
    ran = select_public_tests(perturbed)
    assert ran["public_test_set"] == "perturbed"
    assert ran["public_test_cases"] == perturbed["perturbed_public_test_cases"]
    assert ran["original_public_test_cases"] == perturbed["public_test_cases"]
    assert ran["hidden_test_cases"] == perturbed["hidden_test_cases"]
    assert select_public_tests(ran) == ran  # already on the perturbed set: unchanged
    back = select_public_tests(ran, "public")
    assert back["public_test_cases"] == perturbed["public_test_cases"] and back["public_test_set"] == "public"
    assert "original_public_test_cases" not in back


def test_public_keeps_the_data_sets_tests_and_perturbed_needs_them(perturbed):
    plain = {k: v for k, v in perturbed.items() if not k.startswith(("perturbed_", "modified_"))}
    assert select_public_tests(plain)["public_test_cases"] == plain["public_test_cases"]
    assert select_public_tests(perturbed, "public")["public_test_cases"] == perturbed["public_test_cases"]
    with pytest.raises(RecordError, match="ptb.jsonl:3: field 'perturbed_public_test_cases'"):
        select_public_tests(plain, "perturbed", path="ptb.jsonl", line=3)


def test_ground_truth_and_pass_rates_of_a_perturbed_run(perturbed):
    ran = select_public_tests(perturbed)
    problem = problem_from_dict(ran, path="x", line=1)
    original = TestCases.from_obj(perturbed["public_test_cases"])
    hidden = TestCases.from_obj(perturbed["hidden_test_cases"])
    assert problem.perturbed and problem.public == TestCases.from_obj(perturbed["perturbed_public_test_cases"])
    assert problem.tests == concat_tests(original, hidden)  # correct outputs, not the swapped ones
    assert problem_from_dict(ran, path="x", line=1).to_dict()["test_cases"] == json_of(concat_tests(original, hidden))
    # a correct program fails exactly the two modified tests: fully correct once they are left out
    passing = [i not in perturbed["modified_public_indices"] for i in range(4)]
    turn = {"response": "r", "code": "c", "public": {"passing": passing, "feedback": ["f"] * 4},
            "hidden_pass_rate": 1.0}
    traj = TrajectoryRecord.from_dict({**ran, "samples": [{"turns": [turn]}]}, path="x", line=1)
    assert traj.scored_public == (2, 3) and traj.pass_rates(traj.samples[0]) == [1.0]
    plain = TrajectoryRecord.from_dict({**perturbed, "public_test_cases": ran["public_test_cases"],
                                        "samples": [{"turns": [turn]}]}, path="x", line=1)
    assert plain.pass_rates(plain.samples[0]) == [(2 + 4) / 8]  # not marked perturbed: every test counts
