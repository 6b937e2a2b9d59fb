"""The inference record: written and read here, and nowhere else.

One JSON object per line, one line per *problem*: the problem's fields (as in a
problems file, see :mod:`cobalt.data.problems`) plus ``samples``, the
trajectories the model produced for it. Per problem rather than per sample
because dynamic sampling and max-variance down-sampling look at all of a
problem's samples together. The full schema is in ``docs/TRAJECTORIES.md``
(its field tables are checked against :data:`RECORD_FIELDS` and
:data:`TURN_FIELDS` by a test).

Writers: :func:`public_field`, :func:`failing_public_result`, :func:`turn_dict`,
:func:`inference_record` (the rollout), :func:`with_hidden_rates` (the hidden
evaluation). Readers: :meth:`TrajectoryRecord.from_dict` (evaluated records,
typed), :func:`read_turns` (any record, its turns as written),
:func:`read_first_turns` (cached first turns), :func:`hidden_rates`.
A record carries :data:`SCHEMA_FIELD`; one without it reads as version 1.

Every check raises :class:`cobalt.io.RecordError` naming the file, the line
and the field path (for example ``samples[2].turns[1].hidden_pass_rate``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cobalt.data.problems import ProblemRecord, problem_from_dict
from cobalt.io import RecordError
from cobalt.profile import Profile
from cobalt.text import extract_code

SCHEMA_VERSION = 2
"""Version of the inference record this code writes (2: :data:`SCHEMA_FIELD` present)."""
SCHEMA_FIELD = "schema_version"

EVALUATOR_ERROR_FEEDBACK = "The evaluation of your previous program failed with an error: {message}"
"""Repair feedback of a ``cobalt`` rollout when the evaluator call raised (``message`` filled in);
rollouts now stop such a problem instead, and ``cobalt eval`` recognises the text in older records."""
EVALUATOR_FAILURE_PREFIXES = (
    EVALUATOR_ERROR_FEEDBACK.split("{")[0],
    "evaluator call failed:",
    "evaluation failed:",
    "sandbox error:",
    "could not judge the program:",
)
"""Starts of the public feedback texts that an evaluator failure left in a turn (never a verdict on a program)."""
"""Record field with the schema version; absent in version 1 files (read as 1)."""

RECORD_FIELDS: dict[str, str] = {
    "schema_version": "int: the record schema's version (absent: 1)",
    "id": "string or int: problem id (kept as a string)",
    "question": "string: the statement",
    "instruction": "string, optional: the data set's own first-turn user message",
    "difficulty": "any, optional",
    "source": "string, optional",
    "starter_code": "string, optional: the code a call-based answer starts from",
    "public_test_cases": "JSON string or object: the tests shown in feedback",
    "hidden_test_cases": "same, optional: the other tests",
    "test_cases": "same, optional: all tests with correct outputs (written, not read)",
    "enable_thinking": "bool, written: the rollout kept only the answer after </think> in histories",
    "samples": "non-empty list of {turns: [turn, ...]}",
    "hidden_eval": "object, written by cobalt eval: profile, enable_thinking, program_from",
}
"""Fields of an inference record (other problem fields pass through unchanged)."""

TURN_FIELDS: dict[str, str] = {
    "response": "string: the model's full output",
    "code": "string or null: the program extracted from response",
    "public": "{passing, feedback, error?}: the result on the public tests",
    "public_pass_rate": "number in [0, 1]",
    "hidden_pass_rate": "number in [0, 1] or null: from cobalt eval",
    "hidden_program_found": "bool, written by cobalt eval",
    "finish_reason": "string or null: the engine's",
    "completion_tokens": "int or null: the engine's",
    "cut": "string, optional: the response was cut to the token budget ('max_tokens' or 'bytes')",
    "cached": "bool: a first turn taken from an earlier run",
    "rejudged": "bool: a cached first turn judged again on this run's public tests",
    "shipped_answer": "bool: the demo's first turn from the data set's answer",
}
"""Fields of a turn."""


@dataclass(frozen=True)
class PublicResult:
    """Execution of one program on the public tests: a verdict and a feedback text per test."""

    passing: tuple[bool, ...]
    feedback: tuple[str, ...]

    @property
    def all_passed(self) -> bool:
        """True when there is at least one test and every one passed."""
        return bool(self.passing) and all(self.passing)

    @property
    def pass_rate(self) -> float:
        """Fraction of public tests passed."""
        return sum(self.passing) / len(self.passing) if self.passing else 0.0

    def first_failure_feedback(self) -> str | None:
        """Feedback of the first failing test, or None when all passed."""
        for ok, text in zip(self.passing, self.feedback):
            if not ok:
                return text
        return None


@dataclass(frozen=True)
class TurnRecord:
    """One turn of a trajectory: the model's response and how its program scored."""

    response: str
    """The full model output (reasoning included)."""
    code: str | None
    """The program extracted from ``response`` (None: no code block)."""
    public: PublicResult
    public_pass_rate: float
    hidden_pass_rate: float | None
    """None only when the problem has no hidden tests."""

    def pass_rate(self, n_public: int, n_hidden: int) -> float:
        """Pass rate of the turn: public and hidden rates weighted by their test counts (METHOD §4)."""
        if self.hidden_pass_rate is None or n_hidden == 0:
            return self.public_pass_rate
        return (self.public_pass_rate * n_public + self.hidden_pass_rate * n_hidden) / (n_public + n_hidden)


@dataclass(frozen=True)
class SampleRecord:
    """One trajectory: turn 0 is the first-turn program, later turns are repairs."""

    turns: tuple[TurnRecord, ...]


@dataclass(frozen=True)
class TrajectoryRecord:
    """A problem with all of its sampled trajectories."""

    problem: ProblemRecord
    samples: tuple[SampleRecord, ...]
    enable_thinking: bool | None = None
    """Whether the rollout that wrote the record cut its histories as a thinking model's
    (the record's ``enable_thinking``); None when the record does not say."""

    @property
    def n_public(self) -> int:
        """Number of public tests (4 in TACO-Cobalt)."""
        return len(self.problem.public)

    @property
    def n_hidden(self) -> int:
        """Number of hidden tests."""
        return len(self.problem.hidden)

    @property
    def scored_public(self) -> tuple[int, ...]:
        """Positions of the public tests whose verdicts count in pass rates.

        Every public test, except on a run on perturbed public tests: there the
        modified tests (``modified_public_indices``), whose expected outputs are
        wrong, do not count, so that a correct program can be fully correct and
        a program that answers the wrong outputs gains nothing from them.
        """
        modified = self.problem.extra.get("modified_public_indices") if self.problem.perturbed else None
        if not isinstance(modified, list):
            return tuple(range(self.n_public))
        skip = {i for i in modified if isinstance(i, int)}
        return tuple(i for i in range(self.n_public) if i not in skip)

    def pass_rates(self, sample: SampleRecord) -> list[float]:
        """Per-turn pass rates of ``sample``: public and hidden rates mixed by test counts, the
        public rate over :attr:`scored_public` (all public tests but on a perturbed run)."""
        scored = self.scored_public
        if len(scored) == self.n_public:
            return [t.pass_rate(self.n_public, self.n_hidden) for t in sample.turns]
        out = []
        for t in sample.turns:
            passing = [bool(t.public.passing[i]) for i in scored if i < len(t.public.passing)]
            public_rate = sum(passing) / len(passing) if passing else 0.0
            rescored = TurnRecord(t.response, t.code, t.public, public_rate, t.hidden_pass_rate)
            out.append(rescored.pass_rate(len(scored), self.n_hidden))
        return out

    @classmethod
    def from_dict(cls, record: Any, *, path: str, line: int | None,
                  profile: "str | Profile | None" = None) -> "TrajectoryRecord":
        """Validate one inference record; errors name the file, line and field.

        A turn without a ``code`` field gets the program that
        :func:`cobalt.text.extract_code` finds under ``profile`` (default paper)."""
        problem = problem_from_dict(record, path=path, line=line)
        record_version(record, path=path, line=line)
        samples = record.get("samples")
        if not isinstance(samples, list) or not samples:
            raise RecordError(path, line, "samples", _expected("a non-empty list", samples))
        parsed = tuple(
            _sample_from(s, f"samples[{i}]", n_hidden=len(problem.hidden), path=path, line=line, profile=profile)
            for i, s in enumerate(samples)
        )
        thinking = record.get("enable_thinking")
        if thinking is not None and not isinstance(thinking, bool):
            raise RecordError(path, line, "enable_thinking", _expected("true, false or absent", thinking))
        return cls(problem=problem, samples=parsed, enable_thinking=thinking)


def _expected(what: str, value: Any) -> str:
    return "missing" if value is None else f"expected {what}, got {type(value).__name__}"


def _sample_from(obj: Any, where: str, *, n_hidden: int, path: str, line: int | None,
                 profile: "str | Profile | None" = None) -> SampleRecord:
    if not isinstance(obj, Mapping):
        raise RecordError(path, line, where, _expected("an object with 'turns'", obj))
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise RecordError(path, line, f"{where}.turns", _expected("a non-empty list", turns))
    return SampleRecord(
        tuple(_turn_from(t, f"{where}.turns[{j}]", n_hidden=n_hidden, path=path, line=line, profile=profile)
              for j, t in enumerate(turns))
    )


def _turn_from(obj: Any, where: str, *, n_hidden: int, path: str, line: int | None,
               profile: "str | Profile | None" = None) -> TurnRecord:
    if not isinstance(obj, Mapping):
        raise RecordError(path, line, where, _expected("an object", obj))
    response = obj.get("response")
    if not isinstance(response, str):
        raise RecordError(path, line, f"{where}.response", _expected("a string", response))
    code = obj["code"] if "code" in obj else extract_code(response, profile)
    if code is not None and not isinstance(code, str):
        raise RecordError(path, line, f"{where}.code", _expected("a string or null", code))
    public = _public_from(obj.get("public"), f"{where}.public", path=path, line=line)
    public_rate = obj.get("public_pass_rate", public.pass_rate)
    public_rate = _rate(public_rate, f"{where}.public_pass_rate", path=path, line=line)
    hidden_rate = obj.get("hidden_pass_rate")
    if hidden_rate is None and n_hidden == 0:
        return TurnRecord(response, code, public, public_rate, None)
    hidden_rate = _rate(hidden_rate, f"{where}.hidden_pass_rate", path=path, line=line)
    return TurnRecord(response, code, public, public_rate, hidden_rate)


def _public_from(obj: Any, where: str, *, path: str, line: int | None) -> PublicResult:
    if not isinstance(obj, Mapping):
        raise RecordError(path, line, where, _expected("an object with 'passing' and 'feedback'", obj))
    passing, feedback = obj.get("passing"), obj.get("feedback")
    if not isinstance(passing, list) or not passing or not all(isinstance(p, bool) for p in passing):
        raise RecordError(path, line, f"{where}.passing", _expected("a non-empty list of booleans", passing))
    if not isinstance(feedback, list) or not all(isinstance(f, str) for f in feedback):
        raise RecordError(path, line, f"{where}.feedback", _expected("a list of strings", feedback))
    if len(feedback) != len(passing):
        raise RecordError(path, line, f"{where}.feedback", f"{len(feedback)} entries but {len(passing)} verdicts")
    return PublicResult(tuple(passing), tuple(feedback))


def _rate(value: Any, where: str, *, path: str, line: int | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(path, line, where, _expected("a number in [0, 1]", value))
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise RecordError(path, line, where, f"expected a number in [0, 1], got {value!r}")
    return float(value)


# ---------------------------------------------------------------- writers


def public_field(passing: Sequence[bool], feedback: Sequence[str], error: str | None = None) -> dict:
    """A turn's ``public`` field.

    >>> public_field([True], ["ok"], "boom")
    {'passing': [True], 'feedback': ['ok'], 'error': 'boom'}
    """
    out: dict[str, Any] = {"passing": list(passing), "feedback": list(feedback)}
    if error is not None:
        out["error"] = error
    return out


def failing_public_result(n_tests: int, feedback: str) -> dict:
    """A ``public`` field in which all ``n_tests`` tests fail with ``feedback`` (no code, call error).

    >>> failing_public_result(2, "x")
    {'passing': [False, False], 'feedback': ['x', 'x']}
    """
    n = max(int(n_tests), 1)
    return public_field([False] * n, [feedback] * n)


def turn_dict(response: str, code: str | None, public: Mapping[str, Any], *,
              finish_reason: str | None = None, completion_tokens: int | None = None,
              engine: bool = False, cut: Any = None) -> dict:
    """A turn as the rollout writes it; ``engine``: the turn came from an engine call
    (its ``finish_reason`` and ``completion_tokens`` are written); ``cut``: how the
    response was cut to the token budget (written when given)."""
    passing = public["passing"]
    turn: dict[str, Any] = {
        "response": response,
        "code": code,
        "public": dict(public),
        "public_pass_rate": sum(passing) / len(passing) if passing else 0.0,
    }
    if engine:
        turn["finish_reason"] = finish_reason
        turn["completion_tokens"] = completion_tokens
    if cut is not None:
        turn["cut"] = cut
    return turn


def inference_record(problem: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], *,
                     enable_thinking: bool, dropped: Sequence[str] = ("samples", "hidden_eval")) -> dict:
    """An inference record: the problem's fields (less ``dropped``), the schema version,
    ``enable_thinking`` and ``samples`` (each ``{"turns": [...]}``)."""
    record = {k: v for k, v in problem.items() if k not in dropped and k != SCHEMA_FIELD}
    record[SCHEMA_FIELD] = SCHEMA_VERSION
    record["enable_thinking"] = enable_thinking
    record["samples"] = [dict(s) for s in samples]
    return record


def with_hidden_rates(record: Mapping[str, Any], rates: Sequence[Sequence[float | None]],
                      found: Sequence[Sequence[bool]], hidden_eval: Mapping[str, Any]) -> dict:
    """A copy of ``record`` with each turn's ``hidden_pass_rate`` and ``hidden_program_found``
    (``rates[i][j]``, ``found[i][j]`` for turn ``j`` of sample ``i``) and ``hidden_eval``."""
    out = dict(record)
    out["samples"] = [
        {**sample, "turns": [{**turn, "hidden_pass_rate": rate, "hidden_program_found": ok}
                             for turn, rate, ok in zip(sample["turns"], sample_rates, sample_found)]}
        for sample, sample_rates, sample_found in zip(record["samples"], rates, found)
    ]
    out["hidden_eval"] = dict(hidden_eval)
    return out


# ---------------------------------------------------------------- lenient readers


def evaluator_failure(record: Mapping[str, Any]) -> str | None:
    """Where a record's public feedback holds an evaluator-failure text instead of a verdict, else None.

    Such a record comes from a rollout that fed an infrastructure failure to the
    model as repair feedback; its later turns answer that text, so it cannot
    be scored: rerun its rollout.

    >>> turn = {"public": {"passing": [False], "feedback": ["evaluator call failed: ConnectionError"]}}
    >>> evaluator_failure({"samples": [{"turns": [turn]}]})
    'samples[0].turns[0]: evaluator call failed: ConnectionError'
    """
    for i, sample in enumerate(record.get("samples") or []):
        if not isinstance(sample, Mapping):
            continue
        for j, turn in enumerate(sample.get("turns") or []):
            public = turn.get("public") if isinstance(turn, Mapping) else None
            if not isinstance(public, Mapping):
                continue
            for text in public.get("feedback") or []:
                if isinstance(text, str) and text.lstrip().startswith(EVALUATOR_FAILURE_PREFIXES):
                    return f"samples[{i}].turns[{j}]: {' '.join(text.split())[:200]}"
    return None


def record_version(record: Mapping[str, Any], *, path: str, line: int | None) -> int:
    """The schema version of a record: its :data:`SCHEMA_FIELD`, 1 when absent."""
    version = record.get(SCHEMA_FIELD, 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise RecordError(path, line, SCHEMA_FIELD,
                          f"expected a version from 1 to {SCHEMA_VERSION}, got {version!r}")
    return version


def read_turns(record: Any, *, path: str, line: int | None,
               responses: bool = True) -> list[list[Mapping[str, Any]]]:
    """The turns of every sample of an inference record, as written (mappings), after checking
    the record's version, that ``samples`` is a non-empty list of ``{"turns": [...]}`` and that
    every turn is an object (with a string ``response`` unless ``responses`` is False: the
    pass-rate readers need the rates only)."""
    if not isinstance(record, Mapping):
        raise RecordError(path, line, None, _expected("an object", record))
    record_version(record, path=path, line=line)
    samples = record.get("samples")
    if not isinstance(samples, list) or not samples:
        raise RecordError(path, line, "samples", _expected("a non-empty list", samples))
    out = []
    for i, sample in enumerate(samples):
        turns = sample.get("turns") if isinstance(sample, Mapping) else None
        if not isinstance(turns, list):
            raise RecordError(path, line, f"samples[{i}].turns", _expected("a list", turns))
        for j, turn in enumerate(turns):
            if not isinstance(turn, Mapping):
                raise RecordError(path, line, f"samples[{i}].turns[{j}]", _expected("an object", turn))
            if responses and not isinstance(turn.get("response"), str):
                raise RecordError(path, line, f"samples[{i}].turns[{j}].response", "expected a string")
        out.append(list(turns))
    return out


def read_first_turns(record: Any, *, path: str, line: int | None) -> list[dict]:
    """The first turn of every sample (cached first turns of a later run), each checked to
    carry a string ``response`` and a ``public`` result with as many feedbacks as verdicts."""
    turns = read_turns(record, path=path, line=line)
    out = []
    for i, sample in enumerate(turns):
        if not sample:
            raise RecordError(path, line, f"samples[{i}].turns", "expected a non-empty list")
        turn = sample[0]
        _public_from(turn.get("public"), f"samples[{i}].turns[0].public", path=path, line=line)
        out.append(dict(turn))
    return out


def public_rates(record: Any, *, path: str = "<record>", line: int | None = None) -> list[list[float]]:
    """Per sample, the per-turn ``public_pass_rate`` of an inference record (computed from
    ``public.passing`` where the field is absent)."""
    rows = []
    for i, sample in enumerate(read_turns(record, path=path, line=line, responses=False)):
        row = []
        for j, turn in enumerate(sample):
            where = f"samples[{i}].turns[{j}]"
            rate = turn.get("public_pass_rate")
            if rate is None:
                rate = _public_from(turn.get("public"), f"{where}.public", path=path, line=line).pass_rate
            row.append(_rate(rate, f"{where}.public_pass_rate", path=path, line=line))
        rows.append(row)
    return rows


def hidden_rates(record: Any, *, path: str = "<record>", line: int | None = None,
                 require: bool = False) -> list[list[Any]]:
    """Per sample, the per-turn ``hidden_pass_rate`` of an inference record (None where absent;
    ``require``: a turn without the field is an error that says to run ``cobalt eval`` first)."""
    rows = []
    for i, sample in enumerate(read_turns(record, path=path, line=line, responses=False)):
        row = []
        for j, turn in enumerate(sample):
            if require and "hidden_pass_rate" not in turn:
                raise RecordError(path, line, f"samples[{i}].turns[{j}].hidden_pass_rate",
                                  "missing: run cobalt eval on this file first")
            row.append(turn.get("hidden_pass_rate"))
        rows.append(row)
    return rows
