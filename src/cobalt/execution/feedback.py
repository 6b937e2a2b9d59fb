"""The execution feedback text shown to the model, per profile (METHOD §2 and §9).

Two layouts, chosen by the profile (:mod:`cobalt.profile`, docs/FIDELITY.md):

``paper`` (the original code's text, character for character where it can be)::

    Input:
    <input, stripped, cut>
    Program's Output:
    <stdout, stripped, cut>
    Expected Output:            <- or "Stderr:" with the stripped, cut stderr,
    <expected, stripped, cut>      only when the exit code is non-zero AND stderr is not empty

  A timed-out test shows only the input and ``TimeoutError: Program timed out
  after 4 seconds.``. A text longer than 400 characters keeps its first 200 and
  last 200 characters around the inline marker ``...(truncated) ...``. A test
  the sandbox could not run shows the input and ``Exception: <reason>``.

``cobalt`` (Cobalt's own layout, kept from before the profiles existed)::

    Input:
    <input, trailing whitespace removed, cut>
    Your output:
    <stdout>
    Expected output:            <- or "Error:" with the error text (a cleaned
    <expected>                     traceback, "Exit code 3", "Killed by signal SIGKILL", ...)

  What it adds over ``paper``: a non-zero exit with empty stderr still says
  what happened (the exit code or the signal) instead of looking like a wrong
  answer; a timed-out test also shows the output printed before the timeout;
  a test that was not run says why; the truncation marker stands on its own
  line, so it cannot be mistaken for program output; leading whitespace of the
  texts is kept, as it was printed.

Tracebacks reach this module already cleaned by the sandbox runner (they
start at the user's code, with the user's line numbers) in both profiles; the
original's cleaning never fired and showed a temporary file path with shifted
line numbers, which no reproduction can match (the path is random).
"""
from __future__ import annotations

from cobalt.profile import profile_name

TRUNCATE_AT = 400
"""Longest text shown whole (METHOD §2); longer ones keep their head and tail."""
TRUNCATE_MARKER = "\n...(truncated)...\n"
"""Marker between head and tail in the ``cobalt`` profile (on its own line)."""
PAPER_TRUNCATE_MARKER = "...(truncated) ..."
"""Marker between head and tail in the ``paper`` profile (inline, as the original)."""
PAPER_TRACEBACK_ANCHOR = 'File "<string>"'
"""What the original's traceback cleaning looks for (it cuts the text to start there)."""
PAPER_PROGRAM_BUDGET_S = 30
"""The budget the original's whole-program timeout message names (its real cap is 27 s)."""

def truncate_middle(text: str, limit: int = TRUNCATE_AT, *, profile: str) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker.

    ``paper``: the first ``limit // 2`` and the last ``limit - limit // 2``
    characters around the inline ``...(truncated) ...``; ``cobalt``: the same
    head and tail around a marker on its own line.

    >>> truncate_middle("a" * 5 + "b" * 5, 4, profile="paper")
    'aa...(truncated) ...bb'
    >>> truncate_middle("a" * 5 + "b" * 5, 4, profile="cobalt")
    'aa\\n...(truncated)...\\nbb'
    >>> truncate_middle("short", 4 + 1, profile="paper")
    'short'
    """
    marker = PAPER_TRUNCATE_MARKER if profile_name(profile) == "paper" else TRUNCATE_MARKER
    if len(text) <= limit:
        return text
    head = limit // 2
    return text[:head] + marker + text[len(text) - (limit - head):]


def paper_clean_traceback(stderr: str) -> str:
    """The original's traceback cleaning: cut to the first ``File "<string>"`` frame, if any.

    It only fires for code run from a string (``exec`` inside the program);
    for a program run from a file it leaves the text as it is.

    >>> paper_clean_traceback('Traceback (most recent call last):\\n  File "/tmp/x.py", line 3\\nValueError')
    'Traceback (most recent call last):\\n  File "/tmp/x.py", line 3\\nValueError'
    >>> paper_clean_traceback('Traceback (most recent call last):\\n  File "a.py"\\n  File "<string>", line 1\\nE')
    'Traceback (most recent call last):\\n  File "<string>", line 1\\nE'
    """
    at = stderr.find(PAPER_TRACEBACK_ANCHOR)
    if at == -1:
        return stderr
    return "Traceback (most recent call last):\n  " + stderr[at:]


def test_feedback(
    test_input: str,
    output: str,
    expected: str,
    *,
    error: str | None = None,
    stderr: str | None = None,
    timed_out_after: float | None = None,
    note: str | None = None,
    profile: str = "paper",
) -> str:
    """Feedback for one test in the layout of ``profile`` (see the module docstring).

    ``output`` is what the program printed, ``expected`` the test's expected
    output. ``error`` is set when the program failed without a verdict on its
    output (non-zero exit, killed, output limit): Cobalt's text for it.
    ``stderr`` is the program's raw standard error (defaults to ``error``);
    ``paper`` shows it in place of the expected output only when ``error`` is
    set (a non-zero exit) and ``stderr`` is not empty. ``timed_out_after``
    marks a timed-out test (the per-test limit in seconds); ``note`` a test
    that was not run and why.

    >>> print(test_feedback("1 2\\n", "4\\n", "3\\n"))
    Input:
    1 2
    Program's Output:
    4
    Expected Output:
    3
    >>> print(test_feedback("5", "", "5", error="Exit code 3", stderr=""))
    Input:
    5
    Program's Output:
    <BLANKLINE>
    Expected Output:
    5
    >>> print(test_feedback("5", "", "5", timed_out_after=4.0))
    Input:
    5
    TimeoutError: Program timed out after 4 seconds.
    """
    if profile_name(profile) == "paper":
        return _paper_feedback(test_input, output, expected, error, stderr, timed_out_after, note)
    return _cobalt_feedback(test_input, output, expected, error, timed_out_after, note)


# A pytest collection guard: the name starts with "test_" but this is library code.
test_feedback.__test__ = False  # type: ignore[attr-defined]


def _paper_feedback(
    test_input: str,
    output: str,
    expected: str,
    error: str | None,
    stderr: str | None,
    timed_out_after: float | None,
    note: str | None,
) -> str:
    def cut(text: str) -> str:
        return truncate_middle(text, profile="paper")

    head = f"Input:\n{cut(test_input.strip())}"
    if timed_out_after is not None:
        return f"{head}\nTimeoutError: Program timed out after {timed_out_after:g} seconds."
    if note is not None and error is None:
        return f"{head}\nException: {cut(note)}"
    shown = f"{head}\nProgram's Output:\n{cut(output.strip())}"
    raw_err = error if stderr is None else stderr
    if error is not None and raw_err:
        return f"{shown}\nStderr:\n{cut(paper_clean_traceback(raw_err.strip()))}"
    return f"{shown}\nExpected Output:\n{cut(expected.strip())}"


def _cobalt_feedback(
    test_input: str,
    output: str,
    expected: str,
    error: str | None,
    timed_out_after: float | None,
    note: str | None,
) -> str:
    def cut(text: str) -> str:
        return truncate_middle(text, profile="cobalt")

    parts = [f"Input:\n{cut(test_input.rstrip())}"]
    if timed_out_after is not None:
        parts.append(f"Your program timed out after {timed_out_after:g} seconds.")
        if output.strip():
            parts.append(f"Output before the timeout:\n{cut(output.rstrip())}")
        return "\n".join(parts)
    parts.append(f"Your output:\n{cut(output.rstrip())}")
    if error is not None:
        parts.append(f"Error:\n{cut(error.rstrip())}")
    else:
        parts.append(f"Expected output:\n{cut(expected.rstrip())}")
    if note:
        parts.append(note)
    return "\n".join(parts)


def program_timeout_feedback(budget_s: float, *, profile: str = "paper") -> str:
    """The single feedback entry of a program that ran past its whole-program budget.

    ``paper`` repeats the original's sentence, which names 30 seconds whatever
    the real cap (27 s); ``cobalt`` names ``budget_s``.

    >>> program_timeout_feedback(27)
    'TimeoutError: Program timed out because it did not finish running all test cases within 30 seconds.'
    >>> program_timeout_feedback(27, profile="cobalt")
    'TimeoutError: the program did not finish all its test cases within its 27-second budget.'
    """
    if profile_name(profile) == "paper":
        return (
            "TimeoutError: Program timed out because it did not finish running all test cases "
            f"within {PAPER_PROGRAM_BUDGET_S} seconds."
        )
    return f"TimeoutError: the program did not finish all its test cases within its {budget_s:g}-second budget."
