"""The first-turn prompt names the interface the tests call (every shipped problem).

A problem judged by a call (``fn_name`` in its tests) must get the call
instruction: it names the call and shows starter code that defines exactly that
name (the ``Solution`` method when it says ``Solution()``); a problem judged on
stdin must get the stdin instruction. Problems: the LeetCode slice shipped in
the package and the full LeetCode test file of ../shared/data, and the TACO and
LiveCodeBench fixtures preprocessed under both profiles (TACO also with
``--call-mode call``).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from cobalt.cli import main as cli_main
from cobalt.data.leetcode import load_leetcode
from cobalt.data.problems import iter_problems, problem_from_dict
from cobalt.rollout.conversation import first_turn_messages
from cobalt.rollout.leetcode import SAMPLE_FILE, problem_record

REPO = Path(__file__).resolve().parents[3]
TACO = REPO / "tests" / "fixtures" / "taco" / "taco_verified_sample.jsonl"
LCB = REPO / "tests" / "fixtures" / "livecodebench" / "test6_sample.jsonl"
SHARED_LEETCODE = REPO.parent / "shared" / "data" / "leetcode" / "leetcode_problems.jsonl.gz"
CALL_RE = re.compile(r"the judge calls `(?:(Solution)\(\)\.)?([A-Za-z_]\w*)\(\.\.\.\)`")
STARTER_RE = re.compile(r"```python\n(.*?)\n```", re.DOTALL)


def named_interface(prompt: str) -> tuple[str | None, str | None]:
    """``(class, function)`` the prompt says the judge calls; ``(None, None)`` for stdin."""
    call = CALL_RE.search(prompt)
    if call is None:
        assert "read its input from standard input" in prompt
        return None, None
    assert "standard input and print" not in prompt
    return call.group(1), call.group(2)


def defined(starter: str, cls: str | None) -> set[str]:
    """Functions the starter code defines (methods of ``cls`` when given), read with ``ast``
    after closing every empty body with ``...``."""
    lines = [line for line in starter.splitlines() if not line.lstrip().startswith("#")]
    closed = []
    for i, line in enumerate(lines):
        closed.append(line)
        nxt = next((n for n in lines[i + 1:] if n.strip()), None)
        indent = len(line) - len(line.lstrip())
        if line.rstrip().endswith(":") and (nxt is None or len(nxt) - len(nxt.lstrip()) <= indent):
            closed.append(" " * (indent + 4) + "...")
    tree = ast.parse("\n".join(closed))
    scope = tree.body
    if cls is not None:
        scope = next(n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {n.name for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def check(problem) -> str:
    """Assert that ``problem``'s first-turn prompt names the interface its tests call; return the mode."""
    (system, user) = first_turn_messages(problem)
    assert system["role"] == "system" and user["role"] == "user"
    cls, fn = named_interface(user["content"])
    assert fn == problem.public.fn_name == (problem.hidden.fn_name or problem.public.fn_name), problem.id
    if fn is None:
        return "stdin"
    blocks = STARTER_RE.findall(user["content"])
    assert fn in defined(blocks[0], cls), (problem.id, blocks[0])
    return "call"


def test_shipped_leetcode_problems_name_the_solution_method():
    problems = load_leetcode(SAMPLE_FILE)
    assert len(problems) == 24
    for p in problems:
        record = problem_from_dict(problem_record(p), path="sample", line=None)
        assert check(record) == "call"
        assert f"`Solution().{p.fn_name}(...)`" in first_turn_messages(record)[1]["content"]


@pytest.mark.skipif(not SHARED_LEETCODE.exists(), reason="../shared/data is not here")
def test_every_leetcode_problem_of_the_shared_data():
    problems = load_leetcode(SHARED_LEETCODE)
    assert len(problems) == 286
    assert {check(problem_from_dict(problem_record(p), path="shared", line=None)) for p in problems} == {"call"}


def _preprocessed(tmp_path, command: str, source: Path, *flags: str) -> list:
    out = tmp_path / (command + "-".join(flags) + ".jsonl")
    assert cli_main([command, "--input", str(source), "--output", str(out), "--no-progress", *flags]) == 0
    return [p for _, p in iter_problems(out)]


@pytest.mark.parametrize("flags,modes", [
    (("--profile", "paper"), {"stdin"}),
    (("--profile", "cobalt"), {"stdin", "call"}),
])
def test_livecodebench_fixture(tmp_path, flags, modes):
    problems = _preprocessed(tmp_path, "preproc-lcb", LCB, *flags)
    assert problems and {check(p) for p in problems} == modes


@pytest.mark.parametrize("flags,modes", [
    (("--profile", "paper"), {"stdin"}),
    (("--profile", "paper", "--call-mode", "call"), {"stdin", "call"}),
    (("--profile", "cobalt"), {"stdin", "call"}),
])
def test_taco_fixture(tmp_path, flags, modes):
    problems = _preprocessed(tmp_path, "preproc-taco", TACO, *flags)
    assert problems and {check(p) for p in problems} == modes
    for p in problems:
        if p.public.fn_name:
            assert json.dumps(p.extra.get("starter_code", "")) != '""', p.id
