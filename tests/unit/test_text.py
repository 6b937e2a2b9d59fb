"""cobalt.text on real model answers (../shared/data/leetcode) and on edge cases."""
from __future__ import annotations

import doctest
import gzip
import json
from pathlib import Path

import pytest

import cobalt.text
from cobalt.text import answer_for_history, extract_code, fenced_blocks, split_think

LEETCODE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "leetcode" / "leetcode_problems.jsonl.gz"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    with gzip.open(LEETCODE, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_doctests():
    result = doctest.testmod(cobalt.text)
    assert result.attempted >= 4 and result.failed == 0


def test_extract_code_from_real_answers(rows):
    fenced = [r for r in rows if "```python" in r["response"]]
    assert len(fenced) >= 80
    for row in fenced:
        response = row["response"]
        last_open = response.rindex("```python")
        body_start = response.index("\n", last_open) + 1
        expected = response[body_start:response.index("\n```", body_start)]
        assert extract_code(response) == expected.rstrip("\n"), row["task_id"]
        compile(extract_code(response), row["task_id"], "exec")  # the model's code is valid Python


def test_answers_without_fences_have_no_code(rows):
    plain = [r for r in rows if "```" not in r["response"]]
    assert plain and all(extract_code(r["response"]) is None for r in plain)


@pytest.mark.parametrize(
    "text,blocks",
    [
        ("```\na\n```", [("", "a")]),
        ("```Python\na\n```\n```cpp\nb\n```", [("python", "a"), ("cpp", "b")]),
        ("````python\nx = '```'\n````", [("python", "x = '```'")]),  # longer fence holds a shorter one
        ("```python\nunclosed", []),
        ("  ```python\n  indented\n  ```", [("python", "  indented")]),
        ("```python\n```", [("python", "")]),
    ],
)
def test_fenced_blocks(text, blocks):
    assert fenced_blocks(text) == blocks


def test_split_think_and_history():
    think, answer = split_think("<think>\nplan</think>\nanswer</think>tail")
    assert think == "\nplan" and answer == "\nanswer</think>tail"
    assert split_think("no tags") == (None, "no tags")
    long = "<think>x</think>" + "y" * 7000
    assert answer_for_history(long) == "y" * 6000
    assert answer_for_history("  plain answer  ") == "plain answer"
