"""``execution/compare.py`` on hand-made cases: each row states the verdict a human expects."""
from __future__ import annotations

import doctest

import pytest

from cobalt.execution import compare
from cobalt.execution.compare import (
    LongInt,
    outputs_match_exact,
    outputs_match_tolerant,
    parse_json,
    parse_value,
    values_match,
)


def test_module_doctests_pass():
    failures, tried = doctest.testmod(compare)
    assert tried > 10 and failures == 0


# (actual, expected, paper verdict, cobalt verdict)
EXACT = [
    ("42\n", "42", True, True),
    ("  42  ", "42\n\n", True, True),
    ("\t42\r\n", "42", True, True),
    ("42\x0b\x0c", "42", True, True),
    ("\u3000\x1f42\x85\x1c", "42", True, False),   # str.strip() removes these; ASCII stripping does not
    ("42\u00a0", "42", True, False),
    ("42\u2028", "42", True, False),
    ("4 2", "42", False, False),
    ("42", "43", False, False),
    ("", "", True, True),
    ("a\n b", "a\nb", False, False),
]


@pytest.mark.parametrize("actual,expected,paper,cobalt", EXACT)
def test_exact_rule_per_profile(actual, expected, paper, cobalt):
    assert outputs_match_exact(actual, expected, "paper") is paper
    assert outputs_match_exact(actual, expected, "cobalt") is cobalt


def test_exact_rule_defaults_to_the_paper():
    assert outputs_match_exact("\u300042", "42")


TOLERANT = [
    ("0.3333333 \n\n", "0.33333333", True),
    ("1 2 3", "1  2\t3", True),
    ("1000000000", "1000000000", True),
    ("999999000.0", "1000000000", False),              # an integer compares exactly
    ("1e18", "1000000000000000007", False),
    ("1000000000000000007", "1000000000000000007.0", True),  # equal as exact values
    ("3.0", "3", True),
    ("1_000_000_000", "1000000000", False),           # not ASCII number syntax
    ("\uff11\uff12", "12", False),                     # full-width digits are not digits
    ("nan", "nan", True),                              # equal as text
    ("nan", "0.0", False),
    ("inf", "1e400", False),
    ("1.0000001", "1.0", True),
    ("1.01", "1.0", False),
    ("-0", "0", True),
    ("+5", "5", True),
    ("a b", "a  c", False),
    ("1\n2", "1 2", False),
    ("12\u3000", "12", False),                         # Unicode spaces are not separators
]


@pytest.mark.parametrize("actual,expected,verdict", TOLERANT)
def test_tolerant_rule(actual, expected, verdict):
    assert outputs_match_tolerant(actual, expected, 1e-6) is verdict


VALUES = [
    (True, 1, False),                 # a bool is not a number
    (1, True, False),
    (False, 0, False),
    (0.0, False, False),
    (True, True, True),
    ([True], [1], False),
    (999999000.0, 1000000000, False),
    (1e18, 1000000000000000007, False),
    (2.0, 2, True),
    (2, 2.0, True),
    (2, 3, False),
    (0.1 + 0.2, 0.3, True),
    (1.0000001, 1.0, True),
    (1.1, 1.0, False),
    (float("nan"), float("nan"), True),
    ([1, [2, 3]], [1, [2, 3]], True),
    ([1, 2], [1, 2, 3], False),
    ({"a": 1}, {"a": 1}, True),
    ({"a": 1}, {"b": 1}, False),
    ("1", 1, False),
    (None, None, True),
    (None, 0, False),
]


@pytest.mark.parametrize("actual,expected,verdict", VALUES)
def test_values_match(actual, expected, verdict):
    assert values_match(actual, expected) is verdict


def test_long_integers_compare_by_their_digits():
    a = parse_json("1" * 5000)
    assert isinstance(a, LongInt)
    assert values_match(a, parse_value("1" * 5000))
    assert not values_match(a, parse_value("1" * 4999 + "2"))
    assert not values_match(a, 1)
    assert values_match(parse_json("-" + "9" * 4400), parse_json("-" + "9" * 4400))


def test_parse_json_refuses_deep_nesting_with_a_value_error():
    with pytest.raises(ValueError):
        parse_json("[" * 100000 + "]" * 100000)


def test_values_match_never_raises_on_deep_values():
    a: list = []
    for _ in range(100000):
        a = [a]
    assert values_match(a, [a]) is False


def test_parse_value_reads_python_literals_and_falls_back_to_text():
    assert parse_value("[None, True, 'x']") == [None, True, "x"]
    assert parse_value("{1: (2, 3)}") == {"1": [2, 3]}
    assert parse_value("{3, 1}") == [1, 3]
    assert parse_value("  hello world ") == "hello world"
