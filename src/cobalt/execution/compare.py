"""Judging a program's output against the expected output, on the host.

- :func:`outputs_match_exact`: the paper's rule, stripped stdout equals the
  stripped expected output.
- :func:`outputs_match_tolerant`: trailing whitespace per line and trailing
  blank lines ignored, tokens that both parse as numbers compared within a
  tolerance. An explicit option, off for paper runs.
- :func:`values_match`: call-based tests, the return value (JSON) compared
  with the expected value (JSON, or a Python literal) as a value.
"""
from __future__ import annotations

import ast
import json
import math
from typing import Any


def outputs_match_exact(actual: str, expected: str) -> bool:
    """The paper's comparison: equal after stripping leading/trailing whitespace.

    >>> outputs_match_exact("3\\n", " 3")
    True
    """
    return actual.strip() == expected.strip()


def _numbers_close(a: str, b: str, tol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def outputs_match_tolerant(actual: str, expected: str, tol: float = 1e-6) -> bool:
    """Lenient comparison: per-line trailing spaces, blank trailing lines, float tolerance.

    >>> outputs_match_tolerant("0.3333333 \\n\\n", "0.33333333")
    True
    """
    if outputs_match_exact(actual, expected):
        return True
    a_lines = [ln.rstrip() for ln in actual.strip().splitlines()]
    e_lines = [ln.rstrip() for ln in expected.strip().splitlines()]
    if len(a_lines) != len(e_lines):
        return False
    for a_line, e_line in zip(a_lines, e_lines):
        if a_line == e_line:
            continue
        a_tok, e_tok = a_line.split(), e_line.split()
        if len(a_tok) != len(e_tok):
            return False
        for a, e in zip(a_tok, e_tok):
            if a != e and not _numbers_close(a, e, tol):
                return False
    return True


_LITERAL_NAMES = {"null": None, "true": True, "false": False, "None": None, "True": True, "False": False}


def parse_value(text: str) -> Any:
    """Parse an expected value: JSON first, then a Python literal (with null/true/false),
    else the stripped text itself as a string."""
    text = text.strip()
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        pass
    try:
        tree = ast.parse(text, mode="eval")
        tree = _NameToConst().visit(tree)
        return _normalise(ast.literal_eval(tree))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return text


class _NameToConst(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _LITERAL_NAMES:
            return ast.copy_location(ast.Constant(_LITERAL_NAMES[node.id]), node)
        return node


def _normalise(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_normalise(v) for v in value), key=repr)
    return value


def values_match(actual: Any, expected: Any, tol: float = 1e-6) -> bool:
    """Deep equality of JSON-like values; floats within ``tol``; bools are not numbers.

    >>> values_match([1, 2.0000000001], [1, 2])
    True
    >>> values_match(True, 1)
    False
    """
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        if isinstance(actual, int) and isinstance(expected, int):
            return actual == expected
        return math.isclose(actual, expected, rel_tol=tol, abs_tol=tol)
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(values_match(a, e, tol) for a, e in zip(actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(values_match(actual[k], expected[k], tol) for k in actual)
    return actual == expected
