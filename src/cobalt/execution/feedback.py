"""The execution feedback text shown to the model (METHOD §2).

For each test: the input, the program's output and the expected output, each
cut to 400 characters (first 200, a marker, last 200). When the program exits
with an error, its cleaned traceback takes the place of the expected output;
when it runs out of time, a line says so.
"""
from __future__ import annotations

TRUNCATE_AT = 400
TRUNCATE_MARKER = "\n...(truncated)...\n"


def truncate_middle(text: str, limit: int = TRUNCATE_AT) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker.

    >>> truncate_middle("a" * 5 + "b" * 5, 4)
    'aa\\n...(truncated)...\\nbb'
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNCATE_MARKER + text[len(text) - half:]


def test_feedback(
    test_input: str,
    output: str,
    expected: str,
    *,
    error: str | None = None,
    timed_out_after: float | None = None,
    note: str | None = None,
) -> str:
    """Feedback for one test, in the paper's layout."""
    parts = [f"Input:\n{truncate_middle(test_input.rstrip())}"]
    if timed_out_after is not None:
        parts.append(f"Your program timed out after {timed_out_after:g} seconds.")
        if output.strip():
            parts.append(f"Output before the timeout:\n{truncate_middle(output.rstrip())}")
        return "\n".join(parts)
    parts.append(f"Your output:\n{truncate_middle(output.rstrip())}")
    if error is not None:
        parts.append(f"Error:\n{truncate_middle(error.rstrip())}")
    else:
        parts.append(f"Expected output:\n{truncate_middle(expected.rstrip())}")
    if note:
        parts.append(note)
    return "\n".join(parts)
