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


# --- rows added after mutation testing (docs/TESTING.md, "Mutation testing") ---


@pytest.mark.parametrize("actual,expected,paper,cobalt", [
    ("42", "42\u3000", True, False),    # the profile strips the expected output too, not only the program's
    ("42", "\x1c42", True, False),
    ("Cobalt", "cobalt", False, False),  # case matters, in either direction
    ("cobalt", "Cobalt", False, False),
])
def test_exact_rule_strips_both_sides_by_the_profile(actual, expected, paper, cobalt):
    assert outputs_match_exact(actual, expected, "paper") is paper
    assert outputs_match_exact(actual, expected, "cobalt") is cobalt


@pytest.mark.parametrize("actual,expected,verdict", [
    ("Cobalt", "cobalt", False),                  # case matters, in either direction
    ("cobalt", "Cobalt", False),
    ("1\r\n2", "1\n2", True),                     # CRLF line ends are line ends
    ("1 \n2", "1\n2\t", True),                    # trailing spaces of every line, not only the last
    ("1\n2", "1\n3", False),                      # a wrong line after a matching one
    ("1\n2 3", "1\n2 4", False),
    ("1 2", "1 2 3", False),                      # a missing token on a line
    ("1 2 3", "1 2", False),
    ("1000000.5", "1000000.6", True),             # relative tolerance: 1e-7 apart relative to the size
    ("1000000.5", "1000010.5", False),            # 1e-5 apart: too far
    ("0.0000001", "0.0", True),                   # absolute tolerance near zero
    ("-0.0000005", "0.0000004", True),
    ("0.00001", "0.0", False),
    ("1e400", "1E400", True),                     # both overflow to infinity
    ("1e400", "5.0", False),                      # an overflowing number is not a finite one
    ("5.0", "-1e400", False),
])
def test_tolerant_rule_more_rows(actual, expected, verdict):
    assert outputs_match_tolerant(actual, expected, 1e-6) is verdict


def test_tolerant_rule_default_tolerance_is_one_millionth():
    assert outputs_match_tolerant("2.0000015", "2.0")          # 7.5e-7 relative
    assert not outputs_match_tolerant("2.00002", "2.0")        # 1e-5 relative
    assert not outputs_match_tolerant("1.5", "1.0")


def test_numbers_match_with_infinities():
    assert compare.numbers_match("1e400", "1e999", 1e-6)        # both +inf
    assert not compare.numbers_match("1e400", "-1e400", 1e-6)
    assert not compare.numbers_match("1e400", "1.5", 1e-6)
    assert not compare.numbers_match("2.5", "1e400", 1e-6)


@pytest.mark.parametrize("actual,expected,verdict", [
    (float("nan"), 1.0, False),                   # NaN equals only NaN
    (1.0, float("nan"), False),
    (1000000.5, 1000000.6, True),                 # relative tolerance
    (1000000.5, 1000010.5, False),
    (1e-7, 0.0, True),                            # absolute tolerance near zero
    (1e-5, 0.0, False),
    (1.5, "1.5", False),                          # a float is not its text
    (1.5, None, False),
    ("1.5", 1.5, False),
    (["a"], "a", False),                          # a list of one item is not the item
    ([1], 1, False),
    ("a", ["a"], False),
    ({"a": 1}, [["a", 1]], False),                # a dict is not a list of pairs
    ([["a", 1]], {"a": 1}, False),
    ({"a": 1}, None, False),
    ({"x": 1.0000001}, {"x": 1.0}, True),         # floats inside a dict use the tolerance
    ({"x": [2.0000001]}, {"x": [2.0]}, True),
])
def test_values_match_more_rows(actual, expected, verdict):
    assert values_match(actual, expected) is verdict


def test_values_match_passes_the_tolerance_down():
    assert values_match({"x": 1.05}, {"x": 1.0}, tol=0.1)
    assert not values_match({"x": 1.05}, {"x": 1.0}, tol=0.01)
    assert values_match([[1.05]], [[1.0]], tol=0.1)


def test_long_integers_keep_their_sign_and_digits():
    nines = "9" * 5000
    power = "1" + "0" * 5000                      # 10**5000
    assert str(parse_json(nines)) == nines
    assert str(parse_json("-" + nines)) == "-" + nines
    assert str(parse_json(power)) == power
    assert str(parse_json("[-" + power + "]")[0]) == "-" + power
    assert not values_match(parse_json("-" + nines), parse_json(nines))
    assert not values_match(parse_json(power), parse_json("1" + "0" * 4999))
    # a long integer is not the string of its digits, either way round
    assert not values_match(parse_json(nines), nines)
    assert not values_match(nines, parse_json(nines))


def test_parse_json_deep_nesting_message_says_why():
    with pytest.raises(ValueError, match="^value nested too deeply to judge$"):
        parse_json("[" * 100000 + "]" * 100000)


def test_parse_value_reads_json_names_inside_python_literals():
    # single quotes make these Python, not JSON; null/true/false still read as values
    assert parse_value("{'a': true, 'b': null, 'c': false}") == {"a": True, "b": None, "c": False}
    assert parse_value("[true, 'x']") == [True, "x"]
    assert parse_value("(null,)") == [None]
    assert parse_value("[x, 'y']") == "[x, 'y']"  # any other name is not a value: the text itself


def test_parse_value_sorts_a_set_of_mixed_types_by_repr():
    # repr("a") == "'a'" sorts before repr(1) == "1" (quote 0x27 < digit 0x31)
    assert parse_value("{1, 'a'}") == ["a", 1]
    # the sort key is the repr of the normalised item: (2,) becomes [2], and "[" 0x5b sorts after "1"
    assert parse_value("{(2,), 1}") == [1, [2]]
