"""The 286 LeetCode reference solutions pass in the real sandbox, call-based and as stdin programs.

No share of failures is tolerated: every reference solution that does not pass is
named below with the reason, and the test checks that it fails for exactly that
reason (and that no other does). Every failure is printed (run with -s to see).

The wall-clock limit per test is raised here: this suite checks judging, not speed,
and on a loaded shared machine a solution that needs 0.4 s of CPU can wait 4 s for a
core (minimum-cost-to-equalize-array, find-the-minimum-cost-array-permutation did).
The CPU limit stays the paper's 4 s, so a solution that really is too slow still fails.
"""
from __future__ import annotations

import ast
import asyncio

import pytest

from cobalt.execution.base import ExecOptions, Limits
from cobalt.execution.client import EvaluatorClient

# The LeetCode judge has sortedcontainers installed; one reference solution uses it.
OPTIONS = ExecOptions(allow_packages=True)
# Wall time is load-dependent; CPU time (RLIMIT_CPU) is not: keep the paper's CPU limit.
LOAD_PROOF = dict(test_wall_s=60.0, program_wall_s=900.0)
CLIENT_TIMEOUT_S = 1000.0

# Reference solutions that legitimately fail, by mode, with the reason.
ALLOWED_FAILURES = {
    "call": {},
    "stdin": {
        # Both print a debug line (the indices of the second pattern) before the answer.
        # Call mode ignores prints; a stdin judge compares all of stdout, so they fail.
        "find-beautiful-indices-in-the-given-array-i": "prints a debug line before the answer",
        "find-beautiful-indices-in-the-given-array-ii": "prints a debug line before the answer",
    },
}


def _judge_all(pairs, limits=None):
    client = EvaluatorClient.embedded(options=OPTIONS, limits=limits or Limits(**LOAD_PROOF),
                                      timeout_s=CLIENT_TIMEOUT_S)
    return asyncio.run(client.evaluate_many(pairs))


def _failures(name, problems, results):
    """task_id -> (status, stdout shown, expected) of the first failing test of each program."""
    failures = {}
    for p, r in zip(problems, results):
        if not r.all_passed:
            i = r.passing.index(False)
            failures[p.task_id] = (r.status[i], r.feedback[i], p.stdin_tests().outputs[i])
    print(f"\n{name}: {len(problems) - len(failures)}/{len(problems)} reference solutions pass")
    for task_id, (status, fb, _) in failures.items():
        print(f"  FAIL {task_id}: {status}: {fb.replace(chr(10), ' | ')[-240:]}")
    return failures


def _shown_output(fb: str) -> str:
    """The program's output block of one test's feedback, in either profile's layout
    ("Program's Output:" then "Expected Output:" in paper, "Your output:" then
    "Expected output:" in cobalt)."""
    for label, end in (("Program's Output:\n", "\nExpected Output:"), ("Your output:\n", "\nExpected output:")):
        if label in fb:
            return fb.split(label, 1)[1].split(end, 1)[0]
    raise AssertionError(f"no output block in feedback: {fb[:200]!r}")


def _node_problems(problems):
    """Problems whose method takes a ListNode or TreeNode, found from the reference's own
    source (its annotations), independently of the runner."""
    out = []
    for p in problems:
        for node in ast.walk(ast.parse(p.reference)):
            if isinstance(node, ast.FunctionDef) and node.name == p.fn_name:
                anns = " ".join(ast.unparse(a.annotation) for a in node.args.args if a.annotation)
                if "ListNode" in anns or "TreeNode" in anns:
                    out.append(p)
    return out


def test_reference_solutions_pass_call_based(leetcode_problems):
    results = _judge_all([(p.reference, p.call_tests()) for p in leetcode_problems])
    failures = _failures("call-based", leetcode_problems, results)
    assert set(failures) == set(ALLOWED_FAILURES["call"]), failures


def test_reference_solutions_pass_as_stdin_programs(leetcode_problems):
    # One problem's expected output alone is over 1 MiB: allow 8 MiB here as its judge must.
    limits = Limits(output_bytes=8 << 20, **LOAD_PROOF)
    results = _judge_all([(p.stdin_program(), p.stdin_tests()) for p in leetcode_problems], limits)
    failures = _failures("stdin", leetcode_problems, results)
    assert set(failures) == set(ALLOWED_FAILURES["stdin"]), failures
    for task_id, (status, fb, expected) in failures.items():
        # The reason named above, and no other: a wrong answer whose output is one extra
        # line followed by exactly the expected answer.
        lines = _shown_output(fb).strip().split("\n")
        assert status == "wrong_answer", (task_id, fb)
        assert len(lines) == 2 and lines[-1].strip() == expected.strip(), (task_id, fb)


def test_linked_list_and_tree_problems_go_through_the_node_conversion(leetcode_problems):
    """The runner builds ListNode/TreeNode arguments from lists (and turns returned nodes
    back into lists): with the conversion off, these reference solutions get plain lists
    and fail. The control shows the tests really need it: the same solutions with the
    annotations removed (so nothing is converted) fail on every problem."""
    problems = _node_problems(leetcode_problems)
    ids = {p.task_id for p in problems}
    # Two linked-list problems (one returns a list too) and one tree problem in the data set.
    assert {"winner-of-the-linked-list-game", "linked-list-frequency", "find-the-level-of-tree-with-minimum-sum"} <= ids
    results = _judge_all([(p.reference, p.call_tests()) for p in problems])
    for p, r in zip(problems, results):
        assert r.all_passed, (p.task_id, r.status, r.feedback[:1])

    unconverted = [p.reference.replace("Optional[ListNode]", "list").replace("Optional[TreeNode]", "list")
                   for p in problems]
    assert all(u != p.reference for u, p in zip(unconverted, problems))
    controls = _judge_all([(u, p.call_tests()) for u, p in zip(unconverted, problems)])
    for p, r in zip(problems, controls):
        assert not r.all_passed, p.task_id
        assert "runtime_error" in r.status, (p.task_id, r.status)


def test_a_solution_fails_another_problems_tests(leetcode_problems):
    by_id = {p.task_id: p for p in leetcode_problems}
    a = by_id["maximum-area-of-longest-diagonal-rectangle"]
    others = [p for p in leetcode_problems if p.task_id != a.task_id][:20]
    pairs = [(a.stdin_program(), p.stdin_tests()) for p in others]
    pairs += [(a.reference.replace(a.fn_name, p.fn_name), p.call_tests()) for p in others]
    for r in _judge_all(pairs):
        assert not r.all_passed


@pytest.mark.parametrize("index", [0, 50, 100])
def test_real_model_answers_are_judged(leetcode_problems, index):
    from cobalt.text import extract_code

    p = leetcode_problems[index]
    code = extract_code(p.model_response) or p.model_response
    [r] = _judge_all([(p.stdin_program(code), p.stdin_tests())])
    assert len(r.passing) == len(p.test_inputs)
    assert set(r.status) <= {"passed", "wrong_answer", "runtime_error", "timeout"}
