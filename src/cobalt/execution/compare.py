"""Judging a program's output against the expected output, on the host.

- :func:`outputs_match_exact`: the paper's rule, stripped stdout equals the
  stripped expected output. Profile ``paper`` strips as the original did, with
  Python's ``str.strip()`` (Unicode whitespace and the separators 0x1c-0x1f);
  profile ``cobalt`` strips ASCII whitespace only (space, \\t, \\n, \\r, \\v, \\f).
- :func:`outputs_match_tolerant`: trailing whitespace per line and trailing
  blank lines ignored, tokens that both parse as numbers compared: integers
  exactly, other numbers within a tolerance. Only ASCII number syntax is a
  number (no ``1_000``, no full-width digits, no ``nan``). An explicit option,
  off for paper runs.
- :func:`values_match`: call-based tests, the return value (JSON) compared
  with the expected value (JSON, or a Python literal) as a value: integers
  exactly, floats within a tolerance, a bool is never a number.

Every function here takes untrusted text and never raises on it: a value that
cannot be parsed (too many digits, nested too deeply) is a mismatch or a
:class:`LongInt`, never an exception that could reach the batch.
"""
from __future__ import annotations

import ast
import decimal
import json
import math
import re
from typing import Any

ASCII_WHITESPACE = " \t\n\r\x0b\x0c"
"""What profile ``cobalt`` strips: the ASCII whitespace characters only."""

_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_ASCII_SPLIT = re.compile(r"[ \t\r\x0b\x0c]+")


def strip_output(text: str, profile: str = "paper") -> str:
    """``text`` without leading/trailing whitespace, as the profile defines it.

    >>> strip_output("\\u3000 42\\x1c\\n", "paper")
    '42'
    >>> strip_output("\\u3000 42\\x1c\\n", "cobalt")
    '\\u3000 42\\x1c'
    """
    if profile == "cobalt":
        return text.strip(ASCII_WHITESPACE)
    return text.strip()


def outputs_match_exact(actual: str, expected: str, profile: str = "paper") -> bool:
    """The paper's comparison: equal after stripping both ends (see :func:`strip_output`).

    >>> outputs_match_exact("3\\n", " 3")
    True
    >>> outputs_match_exact("42\\u3000", "42", profile="cobalt")
    False
    """
    return strip_output(actual, profile) == strip_output(expected, profile)


def is_ascii_number(token: str) -> bool:
    """True when ``token`` is a decimal number written in ASCII (sign, digits, point, exponent).

    >>> [is_ascii_number(t) for t in ("-12", "3.5e-2", ".5", "1_000", "\\uff11", "nan", "0x10")]
    [True, True, True, False, False, False, False]
    """
    return _NUMBER.fullmatch(token) is not None


def numbers_match(a: str, b: str, tol: float) -> bool:
    """Two ASCII number tokens: exactly equal when either is an integer, else within ``tol``.

    >>> numbers_match("1000000000", "999999000.0", 1e-6)
    False
    >>> numbers_match("0.3333333", "0.33333333", 1e-6)
    True
    """
    if not (is_ascii_number(a) and is_ascii_number(b)):
        return False
    if _INTEGER.fullmatch(a) or _INTEGER.fullmatch(b):
        try:
            return decimal.Decimal(a) == decimal.Decimal(b)
        except (decimal.InvalidOperation, ValueError):  # pragma: no cover - the regex admits only valid text
            return False
    x, y = float(a), float(b)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def _ascii_lines(text: str) -> list[str]:
    lines = text.strip(ASCII_WHITESPACE).replace("\r\n", "\n").split("\n")
    return [ln.rstrip(ASCII_WHITESPACE) for ln in lines]


def outputs_match_tolerant(actual: str, expected: str, tol: float = 1e-6) -> bool:
    """Lenient comparison: per-line trailing spaces, blank trailing lines, number tokens
    compared as numbers (integers exactly). Only ASCII whitespace separates anything.

    >>> outputs_match_tolerant("0.3333333 \\n\\n", "0.33333333")
    True
    >>> outputs_match_tolerant("1_000_000_000", "1000000000")
    False
    """
    if outputs_match_exact(actual, expected, "cobalt"):
        return True
    a_lines, e_lines = _ascii_lines(actual), _ascii_lines(expected)
    if len(a_lines) != len(e_lines):
        return False
    for a_line, e_line in zip(a_lines, e_lines):
        if a_line == e_line:
            continue
        a_tok = [t for t in _ASCII_SPLIT.split(a_line) if t]
        e_tok = [t for t in _ASCII_SPLIT.split(e_line) if t]
        if len(a_tok) != len(e_tok):
            return False
        for a, e in zip(a_tok, e_tok):
            if a != e and not numbers_match(a, e, tol):
                return False
    return True


class LongInt(str):
    """An integer too long for ``int()`` under Python's digit limit, kept as its
    canonical decimal text; two of them are equal when their texts are."""

    __slots__ = ()


def _parse_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        sign = "-" if text.startswith("-") else ""
        digits = text.lstrip("+-").lstrip("0") or "0"
        return LongInt(sign + digits if digits != "0" else "0")


def parse_json(text: str) -> Any:
    """``json.loads`` for untrusted text, with integers of any length (as :class:`LongInt`
    beyond the digit limit). Raises ``ValueError`` (also for nesting too deep to parse).

    >>> parse_json("[1, 2.5]")
    [1, 2.5]
    >>> isinstance(parse_json("1" * 5000), LongInt)
    True
    """
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise ValueError("value nested too deeply to judge") from None


_LITERAL_NAMES = {"null": None, "true": True, "false": False, "None": None, "True": True, "False": False}


def parse_value(text: str) -> Any:
    """Parse an expected value: JSON first, then a Python literal (with null/true/false),
    else the stripped text itself as a string.

    >>> parse_value("[1, None, 'a']")
    [1, None, 'a']
    >>> parse_value("not a value")
    'not a value'
    """
    text = text.strip()
    try:
        return parse_json(text)
    except ValueError:
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
    """Deep equality of JSON-like values: integers exactly (an int never equals a float
    that is not exactly it), floats within ``tol``, and a bool is not a number.

    >>> values_match([1, 2.0000000001], [1.0, 2.0])
    True
    >>> values_match(True, 1)
    False
    >>> values_match(999999000.0, 1000000000)
    False
    """
    try:
        return _values_match(actual, expected, tol)
    except RecursionError:
        return False


def _values_match(actual: Any, expected: Any, tol: float) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, LongInt) or isinstance(expected, LongInt):
        return isinstance(actual, LongInt) and isinstance(expected, LongInt) and str(actual) == str(expected)
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        if isinstance(actual, int) or isinstance(expected, int):
            return actual == expected  # exact: Python compares int and float by value
        if math.isnan(actual) or math.isnan(expected):
            return math.isnan(actual) and math.isnan(expected)
        return math.isclose(actual, expected, rel_tol=tol, abs_tol=tol)
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(_values_match(a, e, tol) for a, e in zip(actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(_values_match(actual[k], expected[k], tol) for k in actual)
    return actual == expected
