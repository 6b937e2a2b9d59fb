"""Typed records of multi-turn inference results (the input of ``cobalt build-prompts``).

One JSON object per line, one line per *problem*: the problem's fields (as in a
problems file, see :mod:`cobalt.data.problems`) plus ``samples``, the
trajectories the reference model produced for it. Per problem rather than per
sample because dynamic sampling and max-variance down-sampling look at all of
a problem's samples together. The full schema is in ``docs/TRAJECTORIES.md``.

Every check raises :class:`cobalt.io.RecordError` naming the file, the line
and the field path (for example ``samples[2].turns[1].hidden_pass_rate``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from cobalt.data.problems import ProblemRecord, problem_from_dict
from cobalt.io import RecordError
from cobalt.profile import Profile
from cobalt.text import extract_code


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
