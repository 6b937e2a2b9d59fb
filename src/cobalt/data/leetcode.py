"""LeetCodeDataset problems (newfacade/LeetCodeDataset) as Cobalt test cases.

A LeetCode test input is a keyword-argument list written in Python/JSON syntax
(``nums = [2,7,11,15], target = 9``; trees and linked lists as lists with
``null``). This module turns such a problem into:

- call-based tests: one JSON value per argument per line, ``fn_name`` = the
  method of ``Solution``; the reference program is ``prompt`` + ``completion``;
- stdin/stdout tests: the same argument lines on stdin, and a program made of
  the reference solution plus a small driver that reads them and prints the
  result as JSON (so the expected output is the JSON of the expected value).
"""
from __future__ import annotations

import ast
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from cobalt.execution.base import TestCases

_CONSTANTS = {"null": None, "true": True, "false": False, "None": None, "True": True, "False": False}


class LeetCodeFormatError(ValueError):
    """A test input or output that cannot be turned into JSON values."""


class _Names(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _CONSTANTS:
            return ast.copy_location(ast.Constant(_CONSTANTS[node.id]), node)
        raise LeetCodeFormatError(f"unknown name {node.id!r}")


def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(_Names().visit(node))


def parse_arguments(text: str) -> list[Any]:
    """``'nums = [1,2], k = 3'`` -> ``[[1, 2], 3]`` (values in the order written).

    >>> parse_arguments('s = "ab", k = null')
    ['ab', None]
    """
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as exc:
        raise LeetCodeFormatError(f"cannot parse arguments {text[:80]!r}: {exc.msg}") from None
    if not isinstance(call, ast.Call):
        raise LeetCodeFormatError(f"cannot parse arguments {text[:80]!r}")
    try:
        return [_literal(a) for a in call.args] + [_literal(k.value) for k in call.keywords]
    except (ValueError, TypeError, SyntaxError) as exc:
        raise LeetCodeFormatError(f"non-literal argument in {text[:80]!r}: {exc}") from None


def parse_expected(text: str) -> Any:
    """The expected output as a value; unquoted words (a quirk of the dataset) stay strings.

    >>> parse_expected('[1,null]'), parse_expected('isosceles')
    ([1, None], 'isosceles')
    """
    try:
        return _literal(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, LeetCodeFormatError):
        return text.strip()


def return_annotation(source: str, fn_name: str) -> str | None:
    """The return annotation of method ``fn_name`` in ``source``, as text (None if absent)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn_name and node.returns:
            return ast.unparse(node.returns)
    return None


def method_name(entry_point: str) -> str:
    """``'Solution().twoSum'`` -> ``'twoSum'``."""
    return entry_point.rsplit(".", 1)[-1].strip()


_CODE_BLOCK_RE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def starter_code(rec: dict) -> str:
    """The starter code of a LeetCodeDataset record: its ``meta.lang_code`` (the ``class Solution``
    stub), else its ``starter_code`` field, else the last python block of its ``query`` (the
    prompt ends with the code to complete; '' if none).

    >>> starter_code({"query": "Use the starter code.\\n```python\\nclass Solution:\\n    def f(self):\\n```\\n"})
    'class Solution:\\n    def f(self):'
    """
    for given in ((rec.get("meta") or {}).get("lang_code"), rec.get("starter_code")):
        if isinstance(given, str) and given.strip():
            return given.rstrip()
    blocks = _CODE_BLOCK_RE.findall(rec.get("query") or "")
    return blocks[-1].rstrip() if blocks else ""


def arguments_as_lines(args: list[Any]) -> str:
    """One JSON value per line, the call-based input format."""
    return "\n".join(json.dumps(a) for a in args) + "\n"


@dataclass(frozen=True)
class LeetCodeProblem:
    """One LeetCode problem with a correct reference solution and a real model answer."""

    task_id: str
    question: str
    difficulty: str
    fn_name: str
    reference: str
    """``prompt`` (imports, helper classes) + ``completion`` (class Solution)."""
    model_response: str
    test_inputs: tuple[str, ...]
    test_outputs: tuple[str, ...]
    starter_code: str = ""
    """The ``class Solution`` stub the answer starts from (the data set's ``meta.lang_code``)."""

    @classmethod
    def from_record(cls, rec: dict) -> "LeetCodeProblem":
        """Build from one line of ``leetcode_problems.jsonl.gz``."""
        meta = rec.get("meta") or {}
        return cls(
            task_id=rec["task_id"],
            question=rec.get("problem_description") or meta.get("question_title") or "",
            difficulty=str(meta.get("difficulty", "")),
            fn_name=method_name(rec["entry_point"]),
            reference=rec.get("prompt", "") + rec["completion"],
            model_response=rec.get("response", ""),
            test_inputs=tuple(t["input"] for t in rec["input_output"]),
            test_outputs=tuple(t["output"] for t in rec["input_output"]),
            starter_code=starter_code(rec),
        )

    def expected_value(self, text: str) -> Any:
        """The expected value of one test. The dataset drops the quotes of string
        answers that look like numbers ('-1'), so a ``-> str`` method keeps the text."""
        value = parse_expected(text)
        if isinstance(value, (int, float)) and return_annotation(self.reference, self.fn_name) == "str":
            return text.strip()
        return value

    def call_tests(self) -> TestCases:
        """Call-based tests: JSON argument lines, expected values as JSON."""
        inputs = tuple(arguments_as_lines(parse_arguments(t)) for t in self.test_inputs)
        outputs = tuple(json.dumps(self.expected_value(o)) for o in self.test_outputs)
        return TestCases(inputs, outputs, self.fn_name)

    def stdin_tests(self) -> TestCases:
        """Stdin/stdout tests for :meth:`stdin_program`: the same lines, JSON expected output."""
        tests = self.call_tests()
        return TestCases(tests.inputs, tests.outputs, None)

    def stdin_program(self, solution: str | None = None) -> str:
        """``solution`` (default: the reference) plus a driver reading JSON argument
        lines from stdin and printing the JSON of the result."""
        return (solution if solution is not None else self.reference) + STDIN_DRIVER.format(fn=self.fn_name)


# Converts lists to ListNode/TreeNode when the parameter is annotated so, and back.
STDIN_DRIVER = '''

def _cobalt_driver():
    import json, sys, inspect
    lines = [ln for ln in sys.stdin.read().split("\\n") if ln.strip()]
    fn = getattr(Solution(), "{fn}")
    params = list(inspect.signature(fn).parameters.values())
    args = []
    for i, ln in enumerate(lines):
        value = json.loads(ln)
        ann = str(params[i].annotation) if i < len(params) else ""
        if isinstance(value, list) and "ListNode" in ann:
            head = None
            for v in reversed(value):
                head = ListNode(v, head)
            value = head
        elif isinstance(value, list) and "TreeNode" in ann:
            nodes = [None if v is None else TreeNode(v) for v in value]
            kids = iter(nodes[1:])
            for node in nodes:
                if node is not None:
                    node.left = next(kids, None)
                    node.right = next(kids, None)
            value = nodes[0] if nodes else None
        args.append(value)
    result = fn(*args)
    if type(result).__name__ == "ListNode":
        out = []
        while result is not None:
            out.append(result.val)
            result = result.next
        result = out
    elif type(result).__name__ == "TreeNode":
        out, queue = [], [result]
        while queue:
            node = queue.pop(0)
            out.append(None if node is None else node.val)
            if node is not None:
                queue += [node.left, node.right]
        while out and out[-1] is None:
            out.pop()
        result = out
    print(json.dumps(result))


_cobalt_driver()
'''


def load_leetcode(path: str | Path) -> list[LeetCodeProblem]:
    """Read ``leetcode_problems.jsonl(.gz)`` into problems."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [LeetCodeProblem.from_record(json.loads(line)) for line in fh if line.strip()]


def problems_by_id(problems: Iterable[LeetCodeProblem]) -> dict[str, LeetCodeProblem]:
    """Index problems by task id."""
    return {p.task_id: p for p in problems}
