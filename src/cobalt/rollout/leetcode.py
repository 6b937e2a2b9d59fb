"""LeetCode problems (the slice shipped in ``cobalt/fixtures``) as rollout inputs.

A LeetCodeDataset problem becomes a problem record with call-based tests
(``fn_name`` = the ``Solution`` method; arguments as JSON lines): the first
tests are public (4, or half of a problem's tests when it has fewer than 8),
the rest hidden. Its real model answer can serve as a cached first turn: the
data set stores that answer's code without a fence, so it is put in one
```` ```python ```` block, as a chat model would write it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from cobalt.data.leetcode import LeetCodeProblem
from cobalt.data.problems import tests_json

N_PUBLIC = 4
SAMPLE_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "leetcode_sample.jsonl.gz"
"""The 24 LeetCode problems shipped in the package."""


def public_count(n_tests: int, n_public: int = N_PUBLIC) -> int:
    """Public tests of a problem with ``n_tests`` tests: ``n_public``, at most half, at least 1.

    >>> public_count(40), public_count(3), public_count(2), public_count(1)
    (4, 1, 1, 1)
    """
    return max(1, min(n_public, n_tests // 2))


def problem_record(problem: LeetCodeProblem, n_public: int = N_PUBLIC) -> dict:
    """A problems-file record (``cobalt.data.problems``) for ``problem``, call-based tests, with
    the starter code that the first turn shows."""
    tests = problem.call_tests()
    k = public_count(len(tests), n_public)
    public, hidden = tests.subset(range(k)), tests.subset(range(k, len(tests)))
    record = {
        "id": problem.task_id,
        "question": problem.question,
        "difficulty": problem.difficulty or None,
        "source": "leetcode",
        "public_test_cases": tests_json(public),
        "hidden_test_cases": tests_json(hidden),
        "test_cases": tests_json(tests),
    }
    if problem.starter_code:
        record["starter_code"] = problem.starter_code
    return record


def fenced_answer(problem: LeetCodeProblem) -> str:
    """The data set's real model answer as a chat response: its code in one python block."""
    answer = problem.model_response.strip("\n")
    if "```" in answer:
        return answer
    return f"Here is my solution.\n\n```python\n{answer}\n```\n"


def problem_records(problems: Iterable[LeetCodeProblem], n_public: int = N_PUBLIC) -> list[dict[str, Any]]:
    """:func:`problem_record` of each problem."""
    return [problem_record(p, n_public) for p in problems]
