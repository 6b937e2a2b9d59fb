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
from cobalt.data.leetcode_cli import N_PUBLIC, public_count, split_record  # noqa: F401  (public names)

SAMPLE_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "leetcode_sample.jsonl.gz"
"""The 24 LeetCode problems shipped in the package."""


def problem_record(problem: LeetCodeProblem, n_public: int = N_PUBLIC) -> dict:
    """A problems-file record (``cobalt.data.problems``) for ``problem``, call-based tests, with
    the starter code that the first turn shows."""
    record = split_record(problem.task_id, problem.question, problem.call_tests(), n_public=n_public,
                          source="leetcode", difficulty=problem.difficulty)
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
