"""Problem records shared by the data pipeline, and readers for raw sources.

A *problem record* is one JSON object per line of a problems file (the output
of ``cobalt preproc-taco`` and ``cobalt preproc-lcb``, the input of
``cobalt perturb`` and the inference steps). Its test sets are JSON strings of
``{"inputs": [...], "outputs": [...], "fn_name"?: str}`` so that the files
stay loadable by tools that do not know nested types (the paper's layout).

Raw sources (TACO, LiveCodeBench) come as JSONL, a JSON list, or parquet; the
readers here yield ``(line, record)`` with a 1-based line (row) number so that
every error can name the file, the line and the field.
"""
from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from cobalt.execution.base import TestCaseError, TestCases
from cobalt.io import MAX_SAVED_ERRORS, RecordError, iter_jsonl, iter_jsonl_keep_going, require_field

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".gz")
PUBLIC_SET_FIELD = "public_test_set"
"""Record field naming the public tests a run used: ``"public"`` (the data set's) or ``"perturbed"``."""
ORIGINAL_PUBLIC_FIELD = "original_public_test_cases"
"""On a run on perturbed public tests: the data set's own (correct) public tests."""


@dataclass(frozen=True)
class ProblemRecord:
    """One clean problem with its public (shown in feedback) and hidden tests."""

    id: str
    question: str
    public: TestCases
    hidden: TestCases
    difficulty: str | None = None
    source: str | None = None
    instruction: str | None = None
    """The full first-turn user message, when the data set fixes it (LiveCodeBench)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Other fields of the input record, passed through unchanged."""

    @property
    def perturbed(self) -> bool:
        """True when :attr:`public` are perturbed public tests (some expected outputs are wrong)."""
        return self.extra.get(PUBLIC_SET_FIELD) == "perturbed"

    @property
    def tests(self) -> TestCases:
        """All tests with correct expected outputs, public first, then hidden: the reward's ground truth.

        On a problem run on perturbed public tests, the original public tests
        (:data:`ORIGINAL_PUBLIC_FIELD`) stand in for the perturbed ones.
        """
        public = self.public
        if self.perturbed and ORIGINAL_PUBLIC_FIELD in self.extra:
            public = TestCases.from_obj(self.extra[ORIGINAL_PUBLIC_FIELD], where=ORIGINAL_PUBLIC_FIELD)
        return concat_tests(public, self.hidden)

    def to_dict(self) -> dict:
        """The JSON-ready record (test sets as JSON strings)."""
        out: dict[str, Any] = dict(
            id=self.id,
            difficulty=self.difficulty,
            question=self.question,
            test_cases=tests_json(self.tests),
            public_test_cases=tests_json(self.public),
            hidden_test_cases=tests_json(self.hidden),
            source=self.source,
        )
        if self.instruction is not None:
            out["instruction"] = self.instruction
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out


def tests_json(tests: TestCases) -> str:
    """A test set as the JSON string that records carry."""
    return json.dumps(tests.to_dict(), ensure_ascii=False)


def concat_tests(first: TestCases, second: TestCases) -> TestCases:
    """``first`` followed by ``second`` (they must agree on ``fn_name``)."""
    if first.fn_name != second.fn_name and len(first) and len(second):
        raise ValueError(f"cannot join tests of fn_name {first.fn_name!r} and {second.fn_name!r}")
    return TestCases(first.inputs + second.inputs, first.outputs + second.outputs, first.fn_name or second.fn_name)


def require_tests(record: Mapping, name: str, *, path: str, line: int | None) -> TestCases:
    """Field ``name`` of ``record`` parsed as a test set (JSON string or object)."""
    value = require_field(record, name, (str, dict), path=path, line=line)
    try:
        return TestCases.from_obj(value, where=name)
    except TestCaseError as exc:
        raise RecordError(path, line, name, str(exc)) from None


def problem_from_dict(record: Any, *, path: str, line: int | None) -> ProblemRecord:
    """Validate one problems-file record; errors name the file, line and field."""
    pid = require_field(record, "id", (str, int), path=path, line=line)
    public = require_tests(record, "public_test_cases", path=path, line=line)
    hidden = (
        require_tests(record, "hidden_test_cases", path=path, line=line)
        if "hidden_test_cases" in record
        else TestCases((), (), public.fn_name)
    )
    if record.get(PUBLIC_SET_FIELD) == "perturbed":
        require_tests(record, ORIGINAL_PUBLIC_FIELD, path=path, line=line)
    question = record.get("question")
    instruction = record.get("instruction")
    if not isinstance(question, str) and not isinstance(instruction, str):
        raise RecordError(path, line, "question", "missing (need 'question' or 'instruction' as a string)")
    known = {"id", "question", "instruction", "difficulty", "source", "test_cases", "public_test_cases", "hidden_test_cases"}
    return ProblemRecord(
        id=str(pid),
        question=question if isinstance(question, str) else "",
        public=public,
        hidden=hidden,
        difficulty=_opt_str(record.get("difficulty")),
        source=_opt_str(record.get("source")),
        instruction=instruction if isinstance(instruction, str) else None,
        extra={k: v for k, v in record.items() if k not in known},
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def iter_problems(path: str | os.PathLike, errors: list[RecordError] | None = None) -> Iterator[tuple[int, ProblemRecord]]:
    """Yield ``(line, problem)`` from a problems JSONL file.

    Bad records are appended to ``errors`` (and skipped) when a list is given,
    otherwise they raise :class:`RecordError`.
    """
    for line, record in iter_jsonl(path, skip_bad=errors is not None, errors=errors):
        try:
            yield line, problem_from_dict(record, path=str(path), line=line)
        except RecordError as exc:
            if errors is None:
                raise
            errors.append(exc)


def is_local_source(source: str | os.PathLike) -> bool:
    """True when ``source`` names a local file rather than a hub data set."""
    path = Path(source)
    return path.exists() or path.suffix in LOCAL_SUFFIXES


def iter_local_records(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, record)`` from a local JSONL (``.gz`` ok), JSON list or parquet file.

    For a JSON list or parquet file the "line" is the 1-based element/row number.
    A JSONL line that is not valid JSON is yielded as ``(line, RecordError)``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _iter_parquet(path)
    elif name.endswith(".json"):
        yield from _iter_json_list(path)
    else:
        yield from iter_jsonl_keep_going(path)


def _iter_json_list(path: Path) -> Iterator[tuple[int, Any]]:
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise RecordError(path, exc.lineno, None, f"invalid JSON ({exc.msg})") from None
    if isinstance(data, Mapping):
        data = [data]
    if not isinstance(data, list):
        raise RecordError(path, None, None, f"expected a JSON list of records, got {type(data).__name__}")
    yield from enumerate(data, 1)


def _iter_parquet(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    row = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
        for record in batch.to_pylist():
            row += 1
            yield row, record


def count_local_records(path: str | os.PathLike) -> int | None:
    """Number of records of a local source, cheaply where possible (for progress bars)."""
    path = Path(path)
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        if name.endswith((".jsonl", ".jsonl.gz")):
            import gzip

            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as fh:
                return sum(1 for line in fh if line.strip())
    except OSError:
        return None
    return None


def problem_rng(seed: int, problem_id: str, purpose: str = "") -> random.Random:
    """A random generator that depends only on ``seed``, the problem and the purpose.

    Results then do not depend on the order in which problems are processed,
    nor on which of them a resumed run still had to do.
    """
    return random.Random(f"{seed}|{purpose}|{problem_id}")


@dataclass
class DropSummary:
    """Counts of what a preprocessing step kept, dropped (per rule) and rejected as bad input."""

    total: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    """Messages of bad input records (file, line and field)."""
    unverified_kept: int = 0
    """Kept problems that no reference solution passed (TACO under the paper profile)."""

    def to_dict(self) -> dict:
        """JSON-ready summary (rules in the order they were counted)."""
        return {
            "total": self.total,
            "kept": self.kept,
            "dropped": dict(self.dropped),
            "dropped_total": sum(self.dropped.values()),
            "bad_records": len(self.errors),
            "unverified_kept": self.unverified_kept,
            "errors": self.errors[:MAX_SAVED_ERRORS],
        }

    def format(self, title: str) -> str:
        """A short human-readable report."""
        lines = [f"{title}: {self.kept} kept of {self.total}"]
        if self.unverified_kept:
            lines.append(f"  kept although no reference solution passes: {self.unverified_kept}")
        for rule, n in self.dropped.items():
            lines.append(f"  dropped by {rule}: {n}")
        if self.errors:
            lines.append(f"  bad records: {len(self.errors)} (first: {self.errors[0]})")
        return "\n".join(lines)
