"""The prompt templates: packaged texts, substitution, overrides (judge prompts and verdicts: tests/unit/analysis)."""
from __future__ import annotations

import pytest

from cobalt import prompts
from cobalt.prompts import TemplateError
from cobalt.rollout.conversation import repair_message


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.delenv(prompts.ENV_TEMPLATE_DIR, raising=False)
    prompts.clear_cache()
    yield
    prompts.clear_cache()


def test_system_prompt_states_the_four_rules():
    text = prompts.system_prompt().lower()
    assert "read-only" in text
    for word in ("resource", "fork", "signal", "shell", "psutil", "resource", "ipdb", "tkinter", "joblib"):
        assert word in text


def test_problem_prompt_ends_with_the_question_and_asks_for_one_block():
    question = "Given n, print n squared.\nUse {braces} freely: {question}"
    text = prompts.problem_prompt(question)
    assert text.endswith(question)
    assert "```python" in text and "standard input" in text
    # one-pass substitution: the placeholder inside the question is not expanded again
    assert text.count("{question}") == 1


def test_repair_prompt_carries_the_feedback():
    feedback = "Input: 3\nYour output: 8\nExpected: 9"
    text = prompts.repair_prompt(feedback)
    assert text.endswith(feedback)
    assert "fenced code block" in text


def test_all_public_passed_mentions_hidden_tests():
    text = prompts.feedback_all_public_passed().lower()
    assert "hidden" in text and "edge cases" in text


def test_judge_prompt_rejects_missing_and_unknown_fields():
    with pytest.raises(TemplateError, match="missing field"):
        prompts.judge_prompt(problem="p", new_program="n")
    with pytest.raises(TemplateError, match="unknown field"):
        prompts.judge_prompt(problem="p", previous_program="a", feedback="f", new_program="n", diff="d", extra="x")


def test_override_directory_by_argument_and_environment(tmp_path, monkeypatch):
    (tmp_path / "instruction.txt").write_text("Solve this {{literally}}:\n{question}\n", encoding="utf-8")
    assert prompts.problem_prompt("Q?", template_dir=tmp_path) == "Solve this {literally}:\nQ?"
    # files missing from the override folder fall back to the packaged ones
    assert prompts.system_prompt(template_dir=tmp_path) == prompts.system_prompt()
    monkeypatch.setenv(prompts.ENV_TEMPLATE_DIR, str(tmp_path))
    assert prompts.problem_prompt("Q2").startswith("Solve this {literally}")


def test_override_without_required_placeholder_is_an_error(tmp_path):
    (tmp_path / "repair.txt").write_text("Please fix it.\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"repair.txt.*\{feedback\}"):
        prompts.repair_prompt("fb", template_dir=tmp_path)


def test_templates_are_cached_until_cleared(tmp_path):
    path = tmp_path / "system.txt"
    path.write_text("first", encoding="utf-8")
    assert prompts.system_prompt(tmp_path) == "first"
    path.write_text("second", encoding="utf-8")
    assert prompts.system_prompt(tmp_path) == "first"
    prompts.clear_cache()
    assert prompts.system_prompt(tmp_path) == "second"


def test_unknown_template_name():
    with pytest.raises(TemplateError, match="unknown template"):
        prompts.load_template("nope")


def test_all_passed_goes_through_repair():
    """The all-passed sentence is wrapped in the repair instruction, never sent alone."""
    message = repair_message(None)
    assert message.startswith("Your previous program was run on test cases")
    assert message.endswith(
        "Execution feedback:\nYour program passed every public test case it was run on. It will also be judged "
        "on hidden test cases that you cannot see, so think about the edge cases, extreme input sizes and time "
        "limits those hidden tests may cover, and make sure the program handles them."
    )
    failing = "Input:\n3\nProgram's Output:\n8\nExpected Output:\n9"
    assert repair_message(failing).endswith("Execution feedback:\n" + failing)
    assert repair_message(failing).startswith("Your previous program was run on test cases")


def test_all_passed_override_also_wrapped(tmp_path):
    (tmp_path / "all_public_passed.txt").write_text("ALL GOOD\n", encoding="utf-8")
    (tmp_path / "repair.txt").write_text("FIX <<{feedback}>>\n", encoding="utf-8")
    assert repair_message(None, template_dir=tmp_path) == "FIX <<ALL GOOD>>"


@pytest.mark.parametrize(
    "name,phrases",
    [
        # METHOD §8 and §9: what each prompt must carry (checked by hand-picked words of our own text)
        ("instruction", ["step by step", "brainstorm", "reflect", "write all of your thinking out",
                         "one complete python program", "standard input", "standard output", "comments",
                         "```python\n# your complete program", "problem:\n{question}"]),
        ("repair", ["trace", "quote the exact snippets", "do not try to alter", "package that is not available",
                    "write the needed functionality yourself", "partial answers are not accepted",
                    "changes of a few lines", "entire corrected program", "step by step",
                    "one new ```python fenced code block", "execution feedback:\n{feedback}"]),
        ("system", ["read-only", "resource limits", "fork", "signals", "shell commands", "file system",
                    "psutil", "resource", "ipdb", "tkinter", "joblib", "mention a rule only where"]),
        ("all_public_passed", ["passed every public test", "hidden test cases", "edge cases"]),
        ("repair_call", ["trace", "partial answers are not accepted", "entire corrected program",
                         "one new ```python fenced code block", "the judge calls {call}", "do not read input",
                         "execution feedback:\n{feedback}"]),
        ("instruction_call", ["step by step", "brainstorm", "not run as a script on standard input",
                              "the judge calls {call}", "returns", "starter code", "do not read input",
                              "```python\n{starter_code}\n```", "problem:\n{question}"]),
    ],
)
def test_templates_carry_method_content(name, phrases):
    text, _ = prompts.load_template(name)
    for phrase in phrases:
        assert phrase in text.lower(), (name, phrase)


def test_call_based_instruction_names_the_call_and_shows_the_starter():
    starter = "class Solution:\n    def maxOperations(self, nums: List[int]) -> int:"
    text = prompts.problem_prompt("Count the operations.", fn_name="maxOperations", starter_code=starter)
    assert "`Solution().maxOperations(...)`" in text
    assert "```python\n" + starter + "\n```" in text
    assert "standard input and print" not in text and text.endswith("Problem:\nCount the operations.")
    bare = prompts.problem_prompt("Q", fn_name="solve")
    assert "`solve(...)`" in bare and "def solve(*args):" in bare
    stdin = prompts.problem_prompt("Q")
    assert "read its input from standard input" in stdin and "judge calls" not in stdin


def test_call_based_repair_names_the_call_instead_of_stdin():
    stdin = prompts.repair_prompt("fb")
    call = prompts.repair_prompt("fb", fn_name="maxOperations")
    assert "reads standard input" in stdin and "judge calls" not in stdin
    assert "the judge calls `maxOperations`" in call and "reads standard input and writes" not in call
    assert call.endswith("Execution feedback:\nfb") and call.split("Rules for the fix")[0] == stdin.split("Rules for the fix")[0]
    assert repair_message(None, fn_name="f") == prompts.repair_prompt(prompts.feedback_all_public_passed(), fn_name="f")
