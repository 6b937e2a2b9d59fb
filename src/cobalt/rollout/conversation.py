"""The multi-turn conversation, written once (METHOD §4, §9).

Every place that talks to a policy about a problem builds its messages here:
the rollout loop (:mod:`cobalt.rollout.loop`), the bandit-prompt builder
(:mod:`cobalt.training_data.trajectories`), the veRL datasets and the online agent loop
(:mod:`cobalt.verl_plugin.agent_loop`). A conversation is

    system, user (first turn), then (assistant, user) pairs

- the first turn: :func:`first_turn_messages`, the system prompt and the
  instruction of the problem's interface (a data set's own ``instruction`` when
  it fixes one; otherwise :func:`cobalt.prompts.problem_prompt`, which shows the
  starter code and the called name when the tests call a function);
- the assistant turn as the history keeps it: :func:`assistant_message`
  (:func:`cobalt.text.history_text`);
- the next user message: :func:`next_user_message`, the repair instruction
  around the turn's feedback (:func:`cobalt.rollout.turns.turn_feedback`);
- the environment step "response -> program -> public result":
  :func:`environment_step` (an evaluator that could not run the program raises
  :class:`~cobalt.health.InfrastructureError`: never a verdict, never feedback);
  :func:`extend` then appends the assistant turn and the next user message.

Nothing else in ``cobalt`` writes a chat message (a ``role``/``content`` dict);
a test checks it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cobalt.data.problems import ProblemRecord
from cobalt.defaults import HISTORY_MAX_CHARS
from cobalt.execution.base import ExecutionResult, TestCases
from cobalt.data.records import failing_public_result, public_field
from cobalt.health import FailureBreaker, InfrastructureError
from cobalt.rollout.turns import no_code_feedback, turn_feedback
from cobalt.text import extract_code, history_text

Messages = list[dict[str, str]]
"""A chat: ``{"role": ..., "content": ...}`` dicts, oldest first."""

STARTER_CODE_FIELD = "starter_code"
"""Problem-record field with the code a call-based problem's answer starts from."""


def message(role: str, content: str) -> dict[str, str]:
    """One chat message."""
    return {"role": role, "content": content}


def first_turn_instruction(problem: ProblemRecord, template_dir: str | os.PathLike | None = None) -> str:
    """The first user message of ``problem``: the data set's own instruction when it fixes one,
    else the instruction of the interface its tests call (standard input, or the function
    ``fn_name`` of the tests with the problem's starter code)."""
    from cobalt.prompts import problem_prompt

    if problem.instruction is not None:
        return problem.instruction
    starter = problem.extra.get(STARTER_CODE_FIELD)
    return problem_prompt(problem.question, template_dir, fn_name=problem.public.fn_name,
                          starter_code=starter if isinstance(starter, str) else "")


def first_turn_messages(problem: ProblemRecord, template_dir: str | os.PathLike | None = None) -> Messages:
    """System prompt and the first user message (:func:`first_turn_instruction`)."""
    from cobalt.prompts import system_prompt

    return [message("system", system_prompt(template_dir)),
            message("user", first_turn_instruction(problem, template_dir))]


def assistant_message(response: str, *, enable_thinking: bool, max_chars: int = HISTORY_MAX_CHARS) -> dict[str, str]:
    """An assistant turn as the next turn's history shows it (:func:`cobalt.text.history_text`)."""
    return message("assistant", history_text(response, enable_thinking=enable_thinking, max_chars=max_chars))


def repair_message(feedback: str | None, template_dir: str | os.PathLike | None = None, *,
                   fn_name: str | None = None) -> str:
    """The repair instruction around ``feedback``; None stands for the all-public-tests-passed
    text, which is wrapped the same way (METHOD §9). ``fn_name``: the problem is judged by
    calling it (the call-based repair instruction)."""
    from cobalt.prompts import feedback_all_public_passed, repair_prompt

    text = feedback_all_public_passed(template_dir) if feedback is None else feedback
    return repair_prompt(text, template_dir, fn_name=fn_name)


def next_user_message(result: Any, *, no_code: bool = False, error: BaseException | str | None = None,
                      template_dir: str | os.PathLike | None = None, fn_name: str | None = None,
                      profile: str = "cobalt") -> str:
    """The next turn's user message: the repair instruction wrapping this turn's feedback.

    ``result`` is the turn's public result (an ExecutionResult, a record's
    ``public`` field or :class:`cobalt.data.records.PublicResult`); the feedback
    is chosen by :func:`cobalt.rollout.turns.turn_feedback` (no code, caller-side
    error, first failing public test, or the all-public-tests-passed text; ``profile``
    picks the texts of the no-code and error cases). ``fn_name``: the function the
    tests call (None: a program on standard input).
    """
    from cobalt.prompts import repair_prompt

    text = turn_feedback(result, no_code=no_code, error=error, template_dir=template_dir, profile=profile)
    return repair_prompt(text, template_dir, fn_name=fn_name)


def extend(messages: Sequence[Mapping[str, str]], response: str, public: Any, *, no_code: bool,
           enable_thinking: bool, max_chars: int = HISTORY_MAX_CHARS,
           template_dir: str | os.PathLike | None = None, fn_name: str | None = None,
           profile: str = "cobalt") -> Messages:
    """``messages`` followed by the assistant turn ``response`` and the user message its public
    result ``public`` calls for (a new list; ``messages`` is left as it is). ``fn_name``: the
    function the problem's tests call (``TestCases.fn_name``; None: stdin); ``profile``: the
    texts of :func:`next_user_message`."""
    return [dict(m) for m in messages] + [
        assistant_message(response, enable_thinking=enable_thinking, max_chars=max_chars),
        message("user", next_user_message(public, no_code=no_code, template_dir=template_dir, fn_name=fn_name,
                                          profile=profile)),
    ]


def replay(problem: ProblemRecord, turns: Sequence[Any], *, enable_thinking: bool,
           max_chars: int = HISTORY_MAX_CHARS, template_dir: str | os.PathLike | None = None) -> Messages:
    """The conversation after ``turns`` (objects or mappings with ``response``, ``code`` and
    ``public``): first turn, then :func:`extend` per turn. The feedback is the one each turn
    recorded (a turn without a program recorded its profile's no-code text as every test's
    feedback), so a replay shows what the rollout showed, whatever its profile."""
    messages = first_turn_messages(problem, template_dir)
    for turn in turns:
        get = turn.get if isinstance(turn, Mapping) else lambda key: getattr(turn, key)
        public = get("public")
        messages = extend(messages, get("response"), public, no_code=public is None and get("code") is None,
                          enable_thinking=enable_thinking, max_chars=max_chars, template_dir=template_dir,
                          fn_name=problem.public.fn_name)
    return messages


@dataclass
class Step:
    """What the environment made of one response."""

    program: str | None
    """The response's program (None: no code block, nothing ran)."""
    public: dict
    """The public result as an inference record's ``public`` field."""
    result: ExecutionResult | None = None
    """The evaluator's result (None when nothing ran)."""
    evaluator_error: bool = False
    """The evaluator reported an error in a result it could still judge (``result.error``)."""

    @property
    def no_code(self) -> bool:
        """True when the response held no program."""
        return self.program is None


async def judge_program(program: str | None, tests: TestCases, client: Any, *, profile: str = "paper",
                        breaker: FailureBreaker | None = None) -> Step:
    """Program -> public result: ``program`` run on ``tests`` through ``client``.

    No program (None): every test fails with the profile's no-code text
    (:func:`cobalt.rollout.turns.no_code_feedback`). The program's own results
    (its timeout, its exceptions, wrong answers) come from the executor. An
    evaluator call that raises, or a result marked as an infrastructure error
    (:attr:`ExecutionResult.infrastructure_error`), raises
    :class:`~cobalt.health.InfrastructureError` in both profiles: such a failure
    is never a score and never feedback to the model. Each call is counted by
    ``breaker`` when given.
    """
    n = len(tests)
    if program is None:
        return Step(None, failing_public_result(n, no_code_feedback(profile)))
    if breaker is not None:
        breaker.check()
    try:
        result: ExecutionResult = await client.evaluate(program, tests)
    except Exception as exc:
        if breaker is not None:
            breaker.failure(exc)
        raise InfrastructureError(f"the evaluator could not run a program: {type(exc).__name__}: {exc}") from None
    if result.infrastructure_error:
        if breaker is not None:
            breaker.failure(result.error or "sandbox error")
        raise InfrastructureError(f"the evaluator could not judge a program: {result.error or 'sandbox error'}")
    if breaker is not None:
        breaker.success()
    public = public_field(result.passing, result.feedback, result.error)
    if not public["passing"]:
        return Step(program, failing_public_result(n, result.error or "the evaluator returned no verdicts"), result, True)
    return Step(program, public, result, result.error is not None)


async def environment_step(response: str, tests: TestCases, client: Any, *, profile: str | None = None,
                           breaker: FailureBreaker | None = None) -> Step:
    """Response -> program -> public result: the program is the last block of the RAW response
    (thinking included) by ``profile``'s extraction rule, judged by :func:`judge_program`."""
    from cobalt.profile import profile_name

    name = profile_name(profile) if profile is not None else "paper"
    return await judge_program(extract_code(response, profile), tests, client, profile=name, breaker=breaker)
