"""Feedback text per profile: a hand-written table, the 400-character cuts, and real sandbox runs.

Every expected string below is written out by hand from METHOD §9 (``paper``)
or docs/EXECUTION.md (``cobalt``); none is produced by the code under test.
"""
from __future__ import annotations

import doctest

import pytest

from cobalt.execution import feedback
from cobalt.execution.base import ExecOptions, Limits, TestCases
from cobalt.execution.feedback import program_timeout_feedback, truncate_middle
from cobalt.execution.local import LocalExecutor

PAPER = ExecOptions(profile="paper")
COBALT = ExecOptions(profile="cobalt")

# (case, kwargs, paper text, cobalt text)
TABLE = [
    (
        "wrong answer",
        dict(test_input="1 2\n", output="4\n", expected="3\n"),
        "Input:\n1 2\nProgram's Output:\n4\nExpected Output:\n3",
        "Input:\n1 2\nYour output:\n4\nExpected output:\n3",
    ),
    (
        "texts stripped on both ends (paper) or on the right (cobalt)",
        dict(test_input="  7 8 \n\n", output="\n 15\n", expected=" 15 \n"),
        "Input:\n7 8\nProgram's Output:\n15\nExpected Output:\n15",
        "Input:\n  7 8\nYour output:\n\n 15\nExpected output:\n 15",
    ),
    (
        "non-zero exit with stderr: stderr replaces the expected output",
        dict(test_input="0", output="", expected="1", error="Traceback:\nZeroDivisionError\n",
             stderr="Traceback:\nZeroDivisionError\n"),
        "Input:\n0\nProgram's Output:\n\nStderr:\nTraceback:\nZeroDivisionError",
        "Input:\n0\nYour output:\n\nError:\nTraceback:\nZeroDivisionError",
    ),
    (
        "non-zero exit, empty stderr: paper still shows the expected output",
        dict(test_input="5", output="partial\n", expected="5", error="Exit code 3", stderr=""),
        "Input:\n5\nProgram's Output:\npartial\nExpected Output:\n5",
        "Input:\n5\nYour output:\npartial\nError:\nExit code 3",
    ),
    (
        "stderr written by a program that exits 0 is never shown",
        dict(test_input="5", output="5", expected="6", stderr="debug line"),
        "Input:\n5\nProgram's Output:\n5\nExpected Output:\n6",
        "Input:\n5\nYour output:\n5\nExpected output:\n6",
    ),
    (
        "timeout: only the input and one line",
        dict(test_input="9\n", output="  half\n", expected="81", timed_out_after=4.0),
        "Input:\n9\nTimeoutError: Program timed out after 4 seconds.",
        "Input:\n9\nYour program timed out after 4 seconds.\nOutput before the timeout:\n  half",
    ),
    (
        "a test the sandbox never ran",
        dict(test_input="1", output="", expected="1", note="not run: the sandbox stopped"),
        "Input:\n1\nException: not run: the sandbox stopped",
        "Input:\n1\nYour output:\n\nExpected output:\n1\nnot run: the sandbox stopped",
    ),
    (
        "a traceback from exec'd text: the original cuts it at the <string> frame",
        dict(test_input="", output="", expected="x", error="e",
             stderr='Traceback (most recent call last):\n  File "<solution>", line 1\n  File "<string>", line 1\nNameError: y\n'),
        'Input:\n\nProgram\'s Output:\n\nStderr:\nTraceback (most recent call last):\n  File "<string>", line 1\nNameError: y',
        "Input:\n\nYour output:\n\nError:\ne",
    ),
    (
        "two <string> frames: the original cuts at the first",
        dict(test_input="", output="", expected="x", error="e",
             stderr='Traceback:\n  File "<string>", line 1\n  File "<string>", line 2\nE'),
        'Input:\n\nProgram\'s Output:\n\nStderr:\nTraceback (most recent call last):\n'
        '  File "<string>", line 1\n  File "<string>", line 2\nE',
        "Input:\n\nYour output:\n\nError:\ne",
    ),
    (
        "an error without a separate stderr: the error text stands for stderr",
        dict(test_input="2", output="", expected="4", error="Killed by signal SIGKILL"),
        "Input:\n2\nProgram's Output:\n\nStderr:\nKilled by signal SIGKILL",
        "Input:\n2\nYour output:\n\nError:\nKilled by signal SIGKILL",
    ),
]


@pytest.mark.parametrize("case,kwargs,paper,cobalt", TABLE, ids=[row[0] for row in TABLE])
def test_hand_made_table(case, kwargs, paper, cobalt):
    assert feedback.test_feedback(**kwargs, profile="paper") == paper
    assert feedback.test_feedback(**kwargs, profile="cobalt") == cobalt


def test_paper_is_the_default_profile():
    assert feedback.test_feedback("1", "2", "3") == "Input:\n1\nProgram's Output:\n2\nExpected Output:\n3"


def test_profile_enum_is_accepted():
    from cobalt.profile import Profile

    assert feedback.test_feedback("1", "2", "3", profile=Profile.COBALT) == "Input:\n1\nYour output:\n2\nExpected output:\n3"
    assert truncate_middle("x" * 401, profile=Profile.PAPER) == "x" * 200 + "...(truncated) ..." + "x" * 200


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="profile"):
        feedback.test_feedback("1", "2", "3", profile="papers")


LONG = "".join(chr(ord("a") + i % 26) for i in range(1000))  # abc...z repeated, 1,000 characters
HEAD, TAIL = LONG[:200], LONG[800:]


def test_truncation_by_hand():
    assert HEAD.startswith("abcdefghijklmnopqrstuvwxyzabc") and TAIL.endswith("stuvwxyzabcdefghijkl")
    assert truncate_middle("x" * 400, profile="paper") == "x" * 400
    assert truncate_middle("x" * 401, profile="paper") == "x" * 200 + "...(truncated) ..." + "x" * 200
    assert truncate_middle("x" * 401, profile="cobalt") == "x" * 200 + "\n...(truncated)...\n" + "x" * 200
    assert truncate_middle("abcdefg", 5, profile="paper") == "ab...(truncated) ...efg"  # odd limit: the tail gets the extra one


@pytest.mark.parametrize("field", ["test_input", "output", "expected", "stderr"])
def test_every_text_is_cut_to_400(field):
    kwargs = dict(test_input="in", output="out", expected="exp", error=None)
    if field == "stderr":
        kwargs.update(error="boom", stderr=LONG)
    else:
        kwargs[field] = LONG
    cut = HEAD + "...(truncated) ..." + TAIL
    paper = feedback.test_feedback(**kwargs, profile="paper")
    assert cut in paper and LONG not in paper and len(paper) < 520
    assert paper.count("...(truncated) ...") == 1


@pytest.mark.parametrize("field", ["test_input", "output", "expected", "error"])
def test_every_text_is_cut_to_400_cobalt(field):
    kwargs = dict(test_input="in", output="out", expected="exp", error=None)
    kwargs[field] = LONG
    cobalt = feedback.test_feedback(**kwargs, profile="cobalt")
    assert HEAD + "\n...(truncated)...\n" + TAIL in cobalt and LONG not in cobalt
    assert len(cobalt) < 520


def test_paper_cuts_after_stripping():
    # 398 characters of content with padding around it: stripped first, so it fits whole
    text = "   " + "y" * 398 + "   \n"
    assert feedback.test_feedback(text, "", "") == "Input:\n" + "y" * 398 + "\nProgram's Output:\n\nExpected Output:\n"


def test_program_timeout_sentence():
    assert program_timeout_feedback(27.0).endswith("within 30 seconds.")
    assert "27-second" in program_timeout_feedback(27.0, profile="cobalt")


def test_module_doctests():
    failed, attempted = doctest.testmod(feedback, optionflags=doctest.ELLIPSIS)
    assert attempted >= 8 and failed == 0


# --- the same rules on real programs in the real sandbox -------------------------------


@pytest.fixture(scope="module")
def fast() -> LocalExecutor:
    return LocalExecutor(Limits(test_wall_s=1.0, test_cpu_s=1.0))


def test_sandbox_exit_code_without_stderr(executor):
    """Regression: main showed "Exit code 3"; the original shows the expected output."""
    prog = "import sys\nprint('so far')\nsys.exit(3)\n"
    tests = TestCases(("4\n",), ("16",))
    assert executor.run_sync(prog, tests, PAPER).feedback == (
        "Input:\n4\nProgram's Output:\nso far\nExpected Output:\n16",
    )
    assert executor.run_sync(prog, tests, COBALT).feedback == ("Input:\n4\nYour output:\nso far\nError:\nExit code 3",)


def test_sandbox_runtime_error_shows_stderr(executor):
    prog = "n = int(input())\nprint(n)\nprint(1 // (n - n))\n"
    res = executor.run_sync(prog, TestCases(("6\n",), ("6",)), PAPER)
    fb = res.feedback[0]
    assert fb.startswith("Input:\n6\nProgram's Output:\n6\nStderr:\nTraceback (most recent call last):\n")
    assert fb.endswith("ZeroDivisionError: integer division or modulo by zero") and "Expected Output" not in fb


def test_sandbox_wrong_answer_and_truncation(executor):
    prog = "print('a' * 300 + 'b' * 300)\n"
    res = executor.run_sync(prog, TestCases(("  x  \n",), ("c",)), PAPER)
    assert res.feedback == (
        "Input:\nx\nProgram's Output:\n" + "a" * 200 + "...(truncated) ..." + "b" * 200 + "\nExpected Output:\nc",
    )


def test_sandbox_timeout(fast):
    res = fast.run_sync("print('started')\nwhile True:\n    pass\n", TestCases(("7",), ("7",)), PAPER)
    assert res.feedback == ("Input:\n7\nTimeoutError: Program timed out after 1 seconds.",)
    res = fast.run_sync("print('started')\nwhile True:\n    pass\n", TestCases(("7",), ("7",)), COBALT)
    assert res.feedback[0].startswith("Input:\n7\nYour program timed out after 1 seconds.")
