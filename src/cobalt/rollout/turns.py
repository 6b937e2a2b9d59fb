"""The feedback of a turn, chosen from a program's public-test result.

METHOD §9: every feedback, the all-public-tests-passed sentence included, is
wrapped in the repair instruction (by ``cobalt.rollout.conversation``). What goes
inside is, in this order of precedence:

1. a response without a program: :data:`NO_CODE_FEEDBACK`;
2. a caller-side error (the evaluator call raised or exceeded the caller's
   timeout): :func:`error_feedback` of that error;
3. otherwise the public result: the feedback of the first failing test (an
   evaluator timeout or failure already carries its reason as every test's
   feedback), or, when no test failed, ``cobalt.prompts.feedback_all_public_passed``.

The texts of cases 1 and 2 are written here, once, per profile: ``paper`` shows
the original inference script's sentences, ``cobalt`` its own (which say that
nothing ran, or name the caller's real wait). The public-test feedback itself
comes from the executor (``cobalt.execution.feedback``). ``cobalt rollout``
never builds case 2 for an evaluator that could not run the program, in either
profile: that is an infrastructure error, not feedback (docs/ROLLOUTS.md);
:data:`EVALUATOR_ERROR_FEEDBACK` is also how ``cobalt eval`` recognises outputs
of older versions that did.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from cobalt.data.records import EVALUATOR_ERROR_FEEDBACK  # noqa: F401  (public name)
from cobalt.defaults import COBALT_CALLER_WAIT_S, PAPER_CALLER_WAIT_S, caller_wait_s  # noqa: F401  (public names)

NO_CODE_FEEDBACK = (
    "No program could be extracted from your previous response: it contained no fenced code block. "
    "Nothing was run."
)
"""Feedback for a response in which ``extract_code`` finds no program."""

EVALUATOR_TIMEOUT_FEEDBACK = "The evaluation of your previous program timed out after {seconds:g} seconds."
"""Feedback when the evaluator call exceeds the caller's timeout (``seconds`` filled in)."""



PAPER_NO_CODE_FEEDBACK = (
    "Failed to extract code from model response. Please ensure the model's response contains a valid code block."
)
"""``paper``: the original's feedback for a response without a code block (exact text)."""

PAPER_CALLER_TIMEOUT_FEEDBACK = "Timeout: Program fails to execute all test cases within 30 seconds."
"""``paper``: the original's feedback when the caller's wait runs out (exact text; it names 30 s
although that wait is 300 s)."""



def no_code_feedback(profile: str = "paper") -> str:
    """The feedback for a response without a program.

    >>> no_code_feedback()[:40], no_code_feedback("cobalt") == NO_CODE_FEEDBACK
    ('Failed to extract code from model respon', True)
    """
    from cobalt.profile import profile_name

    return PAPER_NO_CODE_FEEDBACK if profile_name(profile) == "paper" else NO_CODE_FEEDBACK


def error_feedback(error: BaseException | str, *, timeout_s: float | None = None, profile: str = "cobalt") -> str:
    """The feedback text for an evaluator call that timed out or raised.

    ``error`` is the exception (a :class:`TimeoutError`/``asyncio.TimeoutError``
    gives the timeout text when ``timeout_s`` is known) or a message string.
    ``paper`` gives the original's texts: its fixed timeout sentence, or
    ``Exception: <type>: <message>``.

    >>> error_feedback("connection refused")
    'The evaluation of your previous program failed with an error: connection refused'
    >>> error_feedback(TimeoutError(), timeout_s=30)
    'The evaluation of your previous program timed out after 30 seconds.'
    >>> error_feedback(ConnectionError("refused"), profile="paper")
    'Exception: ConnectionError: refused'
    """
    from cobalt.profile import profile_name

    if profile_name(profile) == "paper":
        if isinstance(error, TimeoutError):
            return PAPER_CALLER_TIMEOUT_FEEDBACK
        if isinstance(error, BaseException):
            return f"Exception: {type(error).__name__}: {error}"
        return f"Exception: {error}"
    if isinstance(error, TimeoutError):
        seconds = timeout_s if timeout_s is not None else getattr(error, "timeout_s", None)
        if seconds is not None:
            return EVALUATOR_TIMEOUT_FEEDBACK.format(seconds=float(seconds))
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    else:
        text = str(error)
    return EVALUATOR_ERROR_FEEDBACK.format(message=text.strip())


def _passing_and_feedback(result: Any) -> tuple[Sequence[bool], Sequence[str]]:
    """``(passing, feedback)`` of an ExecutionResult, a PublicResult or a mapping."""
    if isinstance(result, Mapping):
        return tuple(result.get("passing") or ()), tuple(result.get("feedback") or ())
    return tuple(getattr(result, "passing", ())), tuple(getattr(result, "feedback", ()))


def turn_feedback(result: Any, *, no_code: bool = False, error: BaseException | str | None = None,
                  template_dir: str | os.PathLike | None = None, profile: str = "cobalt") -> str:
    """The feedback text of a turn, before it is wrapped in the repair instruction.

    ``result`` is the public-test result (:class:`cobalt.execution.base.ExecutionResult`,
    :class:`cobalt.data.records.PublicResult` or a ``{"passing", "feedback"}`` mapping);
    it may be None when ``no_code`` or ``error`` is given; ``profile`` picks the texts
    of those two cases.
    """
    from cobalt.prompts import feedback_all_public_passed

    if no_code:
        return no_code_feedback(profile)
    if error is not None:
        return error_feedback(error, profile=profile)
    if result is None:
        raise ValueError("turn_feedback needs a public result unless no_code or error is given")
    passing, feedback = _passing_and_feedback(result)
    if len(feedback) != len(passing):
        raise ValueError(f"public result has {len(passing)} verdicts but {len(feedback)} feedback texts")
    for ok, text in zip(passing, feedback):
        if not ok:
            return text
    return feedback_all_public_passed(template_dir)
