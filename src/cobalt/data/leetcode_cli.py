"""`cobalt preproc-leetcode`: LeetCode or CodeContests JSONL into a problems file.

Reads LeetCodeDataset lines (``task_id``, ``entry_point``, ``input_output``,
``meta.lang_code``: call-based problems, one ``Solution`` method) or
CodeContests problems (``problem``, ``tests`` = ``{inputs, outputs}``, as a
mapping or as its Python-literal text: stdin/stdout problems), as JSONL
(``.gz`` ok) or one JSON list, and writes one problem record per line
(``cobalt rollout``'s input): the first ``--n-public`` tests public (at most
half of a problem's tests), the rest hidden. A LeetCode record also carries
``starter_code`` (the ``class Solution`` stub) and ``fn_name`` (the method the
tests call). Records are appended and flushed one by one; a rerun with the
same ``--output`` skips the ids already written. A problem with fewer than two
tests has nothing to hide and is left out (counted).
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any, Mapping

from cobalt.cli_support import CommandError, capped, non_negative_int, positive_int
from cobalt.execution.base import TestCaseError, TestCases
from cobalt.io import RecordError

N_PUBLIC = 4
MIN_TESTS = 2
FORMATS = ("auto", "leetcode", "codecontests")


def public_count(n_tests: int, n_public: int = N_PUBLIC) -> int:
    """Public tests of a problem with ``n_tests`` tests: ``n_public``, at most half, at least 1.

    >>> public_count(40), public_count(3), public_count(2), public_count(1)
    (4, 1, 1, 1)
    """
    return max(1, min(n_public, n_tests // 2))


def split_record(pid: str, question: str, tests: TestCases, *, n_public: int, source: str,
                 difficulty: str | None = None) -> dict:
    """A problems-file record: the first :func:`public_count` tests public, the rest hidden."""
    from cobalt.data.problems import tests_json

    k = public_count(len(tests), n_public)
    return {
        "id": pid,
        "question": question,
        "difficulty": difficulty or None,
        "source": source,
        "public_test_cases": tests_json(tests.subset(range(k))),
        "hidden_test_cases": tests_json(tests.subset(range(k, len(tests)))),
        "test_cases": tests_json(tests),
    }


def detect_format(record: Any) -> str:
    """``leetcode`` or ``codecontests``, from the fields of one raw record."""
    if isinstance(record, Mapping):
        if "entry_point" in record and "input_output" in record:
            return "leetcode"
        if "problem" in record and "tests" in record:
            return "codecontests"
    return "unknown"


def leetcode_record(raw: Mapping, *, n_public: int, path: str, line: int) -> dict:
    """The problem record of one LeetCodeDataset line, with ``starter_code`` and ``fn_name``."""
    from cobalt.data.leetcode import LeetCodeFormatError, LeetCodeProblem

    for name in ("task_id", "entry_point", "completion", "input_output"):
        if name not in raw:
            raise RecordError(path, line, name, "missing (not a LeetCodeDataset record)")
    try:
        problem = LeetCodeProblem.from_record(dict(raw))
        tests = problem.call_tests()
    except (LeetCodeFormatError, KeyError, TypeError) as exc:
        raise RecordError(path, line, "input_output", f"cannot read the tests: {exc}") from None
    record = split_record(problem.task_id, problem.question, tests, n_public=n_public, source="leetcode",
                          difficulty=problem.difficulty)
    record["starter_code"] = problem.starter_code
    record["fn_name"] = problem.fn_name
    return record


def codecontests_record(raw: Mapping, *, n_public: int, path: str, line: int) -> dict:
    """The problem record of one CodeContests problem (stdin/stdout tests)."""
    question = raw.get("problem")
    if not isinstance(question, str) or not question.strip():
        raise RecordError(path, line, "problem", "expected the statement text")
    tests_obj = raw.get("tests")
    if isinstance(tests_obj, str):
        try:
            tests_obj = ast.literal_eval(tests_obj)
        except (ValueError, SyntaxError) as exc:
            raise RecordError(path, line, "tests", f"not a Python literal: {exc}") from None
    try:
        tests = TestCases.from_obj(tests_obj, where="tests")
    except TestCaseError as exc:
        raise RecordError(path, line, "tests", str(exc)) from None
    pid = str(raw.get("id") or raw.get("name") or f"codecontests/{line}")
    return split_record(pid, question.strip(), tests, n_public=n_public, source="codecontests",
                        difficulty=raw.get("difficulty"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt preproc-leetcode``."""
    parser.add_argument("--input", required=True,
                        help="LeetCodeDataset JSONL (.gz ok) or CodeContests JSON list / JSONL")
    parser.add_argument("--output", required=True, help="problems JSONL, appended; a rerun skips ids already written")
    parser.add_argument("--n-public", type=positive_int, default=N_PUBLIC,
                        help="public tests per problem (at most half of its tests); the rest are hidden")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="input format; auto: from each record's fields")
    parser.add_argument("--limit", type=non_negative_int, default=None,
                        help="only the first N problems of --input (0: none)")


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt preproc-leetcode``."""
    from cobalt.data.problems import iter_local_records
    from cobalt.io import JsonlAppender

    source = Path(args.input)
    if not source.is_file():
        raise CommandError(f"--input {source}: no such file", status=2)
    errors: list[str] = []
    counts = {"read": 0, "written": 0, "resumed": 0, "too_few_tests": 0, "bad": 0}
    with JsonlAppender(Path(args.output)) as out:
        for line, raw in iter_local_records(source):
            if args.limit is not None and counts["read"] >= args.limit:
                break
            counts["read"] += 1
            kind = args.format if args.format != "auto" else detect_format(raw)
            try:
                if kind == "leetcode":
                    record = leetcode_record(raw, n_public=args.n_public, path=str(source), line=line)
                elif kind == "codecontests":
                    record = codecontests_record(raw, n_public=args.n_public, path=str(source), line=line)
                else:
                    raise RecordError(source, line, None, "neither a LeetCodeDataset nor a CodeContests record")
            except RecordError as exc:
                counts["bad"] += 1
                errors.append(str(exc))
                continue
            if _n_tests(record) < MIN_TESTS:
                counts["too_few_tests"] += 1
                continue
            if record["id"] in out.done:
                counts["resumed"] += 1
                continue
            out.write(record)
            counts["written"] += 1
    print(f"preproc-leetcode: {counts['read']} read, {counts['written']} written to {args.output}, "
          f"{counts['resumed']} of {counts['read']} already done, {counts['too_few_tests']} with fewer than "
          f"{MIN_TESTS} tests left out, {counts['bad']} bad", file=sys.stderr)
    for message in capped(errors):
        print(f"cobalt preproc-leetcode: skipped: {message}", file=sys.stderr)
    if counts["read"] and counts["bad"] == counts["read"]:
        return 1
    return 0


def _n_tests(record: Mapping) -> int:
    import json

    return len(json.loads(record["test_cases"])["inputs"])
