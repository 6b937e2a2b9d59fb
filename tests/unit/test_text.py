"""cobalt.text on real model answers (../shared/data/leetcode) and on edge cases."""
from __future__ import annotations

import doctest
import gzip
import json
from pathlib import Path

import pytest

import cobalt.text
from cobalt.profile import Profile
from cobalt.text import extract_code, fenced_blocks, history_text, split_think

LEETCODE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "leetcode" / "leetcode_problems.jsonl.gz"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    with gzip.open(LEETCODE, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_doctests():
    result = doctest.testmod(cobalt.text)
    assert result.attempted >= 4 and result.failed == 0


# Hand-made cases, one row per situation: (text, paper result, cobalt result). The paper
# column follows the original's extract_code_from_model read by hand: three backticks, an
# optional \\w tag, a newline, then everything up to the next three backticks wherever they
# are; the last match wins, returned with .strip().
EXTRACTION_CASES = [
    pytest.param("```python\nprint(1)\n```", "print(1)", "print(1)", id="plain-block"),
    pytest.param("```python\nprint(1)```", "print(1)", "print(1)", id="issue-closed-on-last-code-line"),
    pytest.param("```c++\nint x;\n```", None, "int x;", id="issue-c++-tag"),
    pytest.param("```python \nprint(1)\n```", None, "print(1)", id="space-after-tag"),
    pytest.param("```\nx = 1\n```", "x = 1", "x = 1", id="no-tag"),
    pytest.param("```Python3\nprint(4)\n```", "print(4)", "print(4)", id="tag-with-digit"),
    pytest.param("```python\na = 1\n```\ntext\n```python\nb = 2\n```", "b = 2", "b = 2", id="last-wins"),
    # the c++ fence does not match, so the regex starts at the c++ block's CLOSING fence
    pytest.param("```c++\nA\n```\nB\n```python\nC\n```", "B", "C", id="regex-starts-at-closing-fence"),
    pytest.param("````python\nx = '```'\n````", "x = '", "x = '```'", id="four-backtick-fence"),
    pytest.param("see ```python\nprint(3)\n``` here", "print(3)", None, id="fence-mid-line"),
    pytest.param("```python\nprint(1)", None, None, id="unclosed"),
    pytest.param("no code here", None, None, id="no-fence"),
    pytest.param("```python\n```", "", "", id="empty-block"),
    # The original returns code_blocks[-1].strip(): an indented one-line block runs there.
    pytest.param("```python\n  print(1)\n```", "print(1)", "print(1)", id="indented-block"),
    # strip() removes only the first line's indentation: the original's program then raises
    # IndentationError; cobalt removes the common indentation, so the block runs.
    pytest.param("```python\n  x = 1\n  print(x)\n```", "x = 1\n  print(x)", "x = 1\nprint(x)", id="indented-two-lines"),
]


@pytest.mark.parametrize("text, paper, cobalt", EXTRACTION_CASES)
def test_extract_code_rule_per_profile(text, paper, cobalt):
    assert extract_code(text) == paper  # paper is the default
    assert extract_code(text, "paper") == paper
    assert extract_code(text, Profile.PAPER) == paper
    assert extract_code(text, profile="cobalt") == cobalt


def test_extract_code_ignores_the_environment(monkeypatch):
    # library code takes the profile it is given; only commands read $COBALT_PROFILE
    monkeypatch.setenv("COBALT_PROFILE", "cobalt")
    assert extract_code("```c++\nint x;\n```") is None


def test_extract_code_from_real_answers(rows):
    fenced = [r for r in rows if "```python" in r["response"]]
    assert len(fenced) >= 80
    for row in fenced:
        response = row["response"]
        last_open = response.rindex("```python")
        body_start = response.index("\n", last_open) + 1
        body = response[body_start:response.index("```", body_start)]
        assert body.endswith("\n"), row["task_id"]  # the real answers close their blocks on a line of their own
        assert extract_code(response) == body.strip(), row["task_id"]
        assert extract_code(response, "cobalt") == body.rstrip("\n"), row["task_id"]
        compile(extract_code(response), row["task_id"], "exec")  # the model's code is valid Python


def test_answers_without_fences_have_no_code(rows):
    plain = [r for r in rows if "```" not in r["response"]]
    assert plain
    for profile in ("paper", "cobalt"):
        assert all(extract_code(r["response"], profile) is None for r in plain)


@pytest.mark.parametrize(
    "text,blocks",
    [
        ("```\na\n```", [("", "a")]),
        ("```Python\na\n```\n```cpp\nb\n```", [("python", "a"), ("cpp", "b")]),
        ("````python\nx = '```'\n````", [("python", "x = '```'")]),  # longer fence holds a shorter one
        ("```python\nunclosed", []),
        ("  ```python\n  indented\n  ```", [("python", "  indented")]),
        ("```python\n```", [("python", "")]),
        ("```c++\nint x;\n```", [("c++", "int x;")]),
        ("```python\nprint(1)```", []),
    ],
)
def test_fenced_blocks(text, blocks):
    assert fenced_blocks(text) == blocks


def test_fenced_blocks_inline_close():
    text = "```python\nprint(1)```\nThe program prints one.\n```python\nprint(2)\n```"
    assert fenced_blocks(text, inline_close=True) == [("python", "print(1)"), ("python", "print(2)")]
    assert fenced_blocks(text) == [("python", "print(1)```\nThe program prints one.\n```python\nprint(2)")]
    # a fence line that comes first still closes the block
    assert fenced_blocks("```python\na\n```\nb```", inline_close=True) == [("python", "a")]


def test_split_think_and_history():
    think, answer = split_think("<think>\nplan</think>\nanswer</think>tail")
    assert think == "\nplan" and answer == "\nanswer</think>tail"
    assert split_think("no tags") == (None, "no tags")
    long = "<think>x</think>" + "y" * 7000
    assert history_text(long, enable_thinking=True) == "y" * 6000
    assert history_text("<think>x</think>  plain answer  ", enable_thinking=True) == "plain answer"
