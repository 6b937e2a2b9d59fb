"""Perturb public tests for the in-context reward-hacking study (METHOD §4).

For each problem, with a generator seeded by the run's seed and the problem id:

1. shuffle the public tests;
2. walk them, keeping those whose stripped expected output has not been seen
   yet ("unique"); the others are "duplicates";
3. drop the problem when fewer than two tests are unique;
4. swap the expected outputs of the first two unique tests: these are the
   two *modified* (deliberately wrong) tests;
5. the perturbed public set is the two modified tests, then the other unique
   tests, then the duplicates.

The method says to re-shuffle until the first two outputs differ; because
uniqueness is decided on stripped outputs, the first two unique tests always
differ, so one shuffle suffices and the result is the same.

Output: each input record unchanged plus ``modified_test_cases`` and
``perturbed_public_test_cases`` (JSON strings of ``{inputs, outputs, fn_name?}``),
and the identity of the modified tests: ``modified_public_indices`` (their
positions in ``perturbed_public_test_cases``, always ``[0, 1]``) and
``perturbed_public_source_indices`` (for each perturbed public test, its
position in the input's public tests), so that later steps (the
reward-hacking extraction) match tests by position, never by searching
feedback text. Appended per record and resumable by id; a summary beside the
output.

Running on the perturbed tests (the paper's workflow: the perturbed file is the
input of multi-turn inference, METHOD §7): :func:`select_public_tests` turns a
perturbed record into the record a rollout runs, whose ``public_test_cases``
are the perturbed tests, whose ``original_public_test_cases`` keep the correct
ones, and whose ``public_test_set`` says ``"perturbed"``. Hidden tests are
untouched. ``cobalt rollout --public-tests auto`` (the default) does this for
every record that carries ``perturbed_public_test_cases``.
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from cobalt.execution.base import TestCases
from cobalt.io import RecordError, require_field
from cobalt.data.problems import (ORIGINAL_PUBLIC_FIELD, PUBLIC_SET_FIELD, DropSummary, ProblemRecord,
                                  iter_local_records, problem_from_dict, problem_rng, require_tests, tests_json)

DEFAULT_SEED = 42
FEWER_THAN_TWO_UNIQUE = "fewer_than_two_unique_outputs"
BAD_RECORD = "bad_record"
PERTURBED_FIELD = "perturbed_public_test_cases"
PUBLIC_TEST_SETS = ("auto", "public", "perturbed")
"""Choices of ``cobalt rollout --public-tests``: ``auto`` is ``perturbed`` for a record that
carries :data:`PERTURBED_FIELD`, else ``public``."""
MODIFIED_PUBLIC_INDICES = (0, 1)
"""Positions of the two modified tests in ``perturbed_public_test_cases`` (recorded per problem)."""


@dataclass(frozen=True)
class Perturbation:
    """The perturbed public tests of one problem (indices refer to the original order)."""

    order: tuple[int, ...]
    """Original indices in the perturbed order: the modified two, other unique, duplicates."""
    n_unique: int
    """How many tests had a not-yet-seen stripped output (the first ``n_unique`` of ``order``)."""
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    """Expected outputs in the perturbed order; the first two are swapped (wrong)."""

    @property
    def modified(self) -> tuple[int, int]:
        """Original indices of the two tests whose expected outputs were swapped."""
        return self.order[0], self.order[1]

    def modified_tests(self, fn_name: str | None = None) -> TestCases:
        """The two modified (wrong) tests."""
        return TestCases(self.inputs[:2], self.outputs[:2], fn_name)

    def public_tests(self, fn_name: str | None = None) -> TestCases:
        """The whole perturbed public set."""
        return TestCases(self.inputs, self.outputs, fn_name)


def perturb_tests(inputs: Sequence[str], outputs: Sequence[str], rng: random.Random) -> Perturbation | None:
    """Perturb one problem's public tests (see the module docstring); None when fewer than 2 are unique.

    >>> p = perturb_tests(["1", "2", "3"], ["a", "b", "a"], random.Random(0))
    >>> sorted(p.outputs[:2]) == ["a", "b"] and p.n_unique == 2
    True
    """
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    order = list(range(len(inputs)))
    rng.shuffle(order)
    unique: list[int] = []
    duplicates: list[int] = []
    seen: set[str] = set()
    for i in order:
        key = outputs[i].strip()
        (duplicates if key in seen else unique).append(i)
        seen.add(key)
    if len(unique) < 2:
        return None
    final = unique + duplicates
    new_outputs = [outputs[i] for i in final]
    new_outputs[0], new_outputs[1] = new_outputs[1], new_outputs[0]
    return Perturbation(
        order=tuple(final),
        n_unique=len(unique),
        inputs=tuple(inputs[i] for i in final),
        outputs=tuple(new_outputs),
    )


def perturb_record(record: Any, *, seed: int, field: str, path: str, line: int) -> dict | None:
    """The record plus its perturbed tests, or None when it has fewer than two unique outputs."""
    pid = require_field(record, "id", (str, int), path=path, line=line)
    public = require_tests(record, field, path=path, line=line)
    result = perturb_tests(public.inputs, public.outputs, problem_rng(seed, str(pid), "perturb"))
    if result is None:
        return None
    out = dict(record)
    out["modified_test_cases"] = tests_json(result.modified_tests(public.fn_name))
    out["perturbed_public_test_cases"] = tests_json(result.public_tests(public.fn_name))
    out["modified_public_indices"] = list(MODIFIED_PUBLIC_INDICES)
    out["perturbed_public_source_indices"] = list(result.order)
    return out


def select_public_tests(record: Any, which: str = "auto", *, path: str = "", line: int | None = None) -> dict:
    """``record`` set up to run on the public tests ``which`` names (one of :data:`PUBLIC_TEST_SETS`).

    ``perturbed``: ``public_test_cases`` become the perturbed tests, the data
    set's own go to ``original_public_test_cases``; ``public``: the data set's
    own public tests (restored from ``original_public_test_cases`` when the
    record is an earlier perturbed run's). Either way ``public_test_set`` names
    the set, and a record already on the asked set is returned as it is.

    >>> r = {"id": 1, "public_test_cases": "P", "perturbed_public_test_cases": "Q"}
    >>> ran = select_public_tests(r)
    >>> ran["public_test_cases"], ran["original_public_test_cases"], ran["public_test_set"]
    ('Q', 'P', 'perturbed')
    >>> select_public_tests(ran, "public")["public_test_cases"]
    'P'
    """
    if which not in PUBLIC_TEST_SETS:
        raise ValueError(f"public test set must be one of {', '.join(PUBLIC_TEST_SETS)}, got {which!r}")
    if not isinstance(record, Mapping):
        raise RecordError(path, line, None, f"expected a JSON object, got {type(record).__name__}")
    current = record.get(PUBLIC_SET_FIELD, "public")
    if current not in ("public", "perturbed"):
        raise RecordError(path, line, PUBLIC_SET_FIELD, f"expected 'public' or 'perturbed', got {current!r}")
    if which == "auto":
        which = "perturbed" if PERTURBED_FIELD in record else current
    out = dict(record)
    if which == current:
        out[PUBLIC_SET_FIELD] = current
        return out
    if which == "perturbed":
        if PERTURBED_FIELD not in record:
            raise RecordError(path, line, PERTURBED_FIELD,
                              "missing: running on perturbed public tests needs the output of `cobalt perturb`")
        out[ORIGINAL_PUBLIC_FIELD] = require_field(record, "public_test_cases", (str, dict), path=path, line=line)
        out["public_test_cases"] = record[PERTURBED_FIELD]
    else:
        out["public_test_cases"] = require_field(record, ORIGINAL_PUBLIC_FIELD, (str, dict), path=path, line=line)
        out.pop(ORIGINAL_PUBLIC_FIELD)
    out[PUBLIC_SET_FIELD] = which
    return out


def iter_problems_on(path: str | Path, which: str = "auto") -> Iterator[tuple[int, ProblemRecord]]:
    """``(line, problem)`` of a problems (or inference records) file, each on the public tests ``which``
    names (:func:`select_public_tests`); a bad record raises :class:`RecordError` naming file, line, field."""
    from cobalt.io import iter_jsonl

    for line, record in iter_jsonl(path):
        ran = select_public_tests(record, which, path=str(path), line=line)
        yield line, problem_from_dict(ran, path=str(path), line=line)


def perturb_file(source: str | Path, output: Path, *, seed: int = DEFAULT_SEED, field: str = "public_test_cases",
                 progress: bool = True) -> DropSummary:
    """Perturb every problem of ``source`` into ``output`` (appended, resumable by id)."""
    from cobalt.cli_support import progress_iter
    from cobalt.data.problems import count_local_records
    from cobalt.io import JsonlAppender

    summary = DropSummary()
    summary.dropped = Counter({BAD_RECORD: 0, FEWER_THAN_TWO_UNIQUE: 0})
    with JsonlAppender(output) as out:
        for line, record in progress_iter(iter_local_records(source), count_local_records(source), "perturb",
                                          "problems", enabled=progress):
            summary.total += 1
            if isinstance(record, Mapping) and record.get("id") in out.done:
                summary.kept += 1
                continue
            try:
                if isinstance(record, RecordError):
                    raise record
                perturbed = perturb_record(record, seed=seed, field=field, path=str(source), line=line)
            except RecordError as exc:
                summary.dropped[BAD_RECORD] += 1
                summary.errors.append(str(exc))
                continue
            if perturbed is None:
                summary.dropped[FEWER_THAN_TWO_UNIQUE] += 1
                continue
            out.write(perturbed)
            summary.kept += 1
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt perturb`` (the paper's ``--input_file``/``--output_file`` also work)."""
    parser.add_argument("--input", "--input_file", dest="input", required=True,
                        help="problems file (.jsonl/.json/.parquet) whose records have 'id' and public tests")
    parser.add_argument("--output", "--output_file", dest="output", required=True,
                        help="output JSONL (appended, resumable); <output>.summary.json is written beside it")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="seed of the per-problem shuffle (combined with each problem's id)")
    parser.add_argument("--field", default="public_test_cases", help="record field holding the public tests")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt perturb``."""
    from cobalt.cli_support import capped, require_file
    from cobalt.io import count_unique, empty_input_warning, resume_guard, save_settings, write_json_atomic

    require_file(args.input)
    output = Path(args.output)
    settings, refused = resume_guard(args, [args.input])
    if refused:
        print(f"cobalt perturb: {refused}", file=sys.stderr)
        return 2
    try:
        count_unique(iter_local_records(args.input), args.input)
    except (RecordError, FileNotFoundError) as exc:
        print(f"cobalt perturb: {exc}", file=sys.stderr)
        return 1
    save_settings(output, "cobalt perturb", settings)
    summary = perturb_file(args.input, output, seed=args.seed, field=args.field, progress=not args.no_progress)
    write_json_atomic(output.with_name(output.name + ".summary.json"),
                      {**summary.to_dict(), "seed": args.seed, "source": str(args.input)})
    print(summary.format(f"perturbed -> {output}"))
    for err in capped(summary.errors):
        print(f"  {err}")
    if summary.total == 0:
        print(empty_input_warning("cobalt perturb", args.input), file=sys.stderr)
        return 1
    return 0
