"""Clean TACO-verified into problems with public and hidden tests (METHOD §4 and §9).

Rules, each a flag with the paper's number as default. Where the original code
and Cobalt differ, ``--profile`` picks the rule (``paper``, the default, is the
original's; docs/FIDELITY.md lists each difference):

1. at least ``--min-tests`` (8) tests;
2. ``inputs`` and ``outputs`` are lists of equal length whose entries are
   strings. ``paper``: a list entry becomes its elements, each converted with
   ``str()``, joined by spaces (``[True]`` -> ``"True"``, ``[[1, 2]]`` ->
   ``"[1, 2]"``). ``cobalt``: only lists of numbers and strings are joined
   (anything else drops the problem), and call-based problems (``fn_name``) get
   JSON arguments one per line (``--call-mode call``);
3. the statement mentions no image. ``paper``: "image" anywhere in the
   lower-cased statement, or a newline followed by ``![``. ``cobalt``: the
   words image/picture, an ``<img>`` tag, markdown image or image file name;
4. the statement has at least ``--min-alnum`` (100) alphanumeric characters
   (``paper``: Unicode ``str.isalnum``; ``cobalt``: ASCII letters and digits);
5. at most ``--max-tests`` (20) tests. ``paper``: sorted by input length, longest
   first (stable), kept: the last 5 then the first 15, in that order.
   ``cobalt``: the 5 shortest and 15 longest, ties broken by position, kept in
   their original order;
6. up to ``--max-solutions`` (16) reference solutions, shuffled with the seed,
   are run on the kept tests. ``paper`` computes this but keeps the problem
   either way (counted as ``unverified_kept``); ``cobalt`` drops it (``--unverified``);
7. ``--n-public`` (4) tests, drawn with the seed, become public; the rest hidden.

Call-based problems (``fn_name``): under ``paper`` (``--call-mode stdin``) the
output test sets carry no function name, since model programs are plain stdin
programs; the name only serves to verify the reference solutions, run with an
appended driver line. ``lossy`` keeps the name and judges with that driver line;
``call`` (the ``cobalt`` default) passes JSON arguments and compares values.

The output is appended one problem per line in input order and is resumable:
a rerun skips problems already written to the output or to the dropped file
(``<output>.dropped.jsonl``, one line per dropped problem with its rule). A
summary of the rules' counts, the configuration and the profile is printed and
written to ``<output>.summary.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping, Sequence

from cobalt.execution.base import TestCases
from cobalt.io import RecordError, require_field
from cobalt.profile import Profile, add_profile_argument, profile_from_args, resolve_profile
from cobalt.data.problems import (
    DropSummary,
    ProblemRecord,
    count_local_records,
    is_local_source,
    iter_local_records,
    problem_rng,
)

HUB_NAME = "likaixin/TACO-verified"
DEFAULT_OUTPUT = "data/taco/taco_clean.jsonl"

# Rule names, in the order they are checked (also the summary's order).
BAD_RECORD = "bad_record"
TOO_FEW_TESTS = "too_few_tests"
LENGTH_MISMATCH = "length_mismatch"
NON_STRING_ENTRIES = "non_string_entries"
MENTIONS_IMAGE = "mentions_image"
SHORT_STATEMENT = "short_statement"
NO_SOLUTIONS = "no_solutions"
UNVERIFIED = "unverified"
RULES = (BAD_RECORD, TOO_FEW_TESTS, LENGTH_MISMATCH, NON_STRING_ENTRIES, MENTIONS_IMAGE, SHORT_STATEMENT,
         NO_SOLUTIONS, UNVERIFIED)
CALL_MODES = ("stdin", "lossy", "call")
_IMAGE_RE = re.compile(r"<\s*img\b|!\[[^\]]*\]\(|\bimages?\b|\bpictures?\b|\.(?:png|jpe?g|gif|svg|bmp)\b", re.IGNORECASE)
PAPER_IMAGE_MARK = "\n!["
"""``paper``: the original's markdown-image test, a plain substring."""
_ALNUM_RE = re.compile(r"[A-Za-z0-9]")


@dataclass(frozen=True)
class TacoConfig:
    """The cleaning rules' numbers (METHOD §4 defaults) and the profile that picks the rules."""

    min_tests: int = 8
    max_tests: int = 20
    n_shortest: int = 5
    n_longest: int = 15
    min_alnum: int = 100
    max_solutions: int = 16
    n_public: int = 4
    seed: int = 42
    profile: str = "paper"
    """'paper' (the original code's rules) or 'cobalt' (the corrected ones, docs/FIDELITY.md)."""
    call_mode: str | None = None
    """Call-based problems: 'stdin' (paper: no fn_name in the output, references verified with
    an appended driver line), 'lossy' (fn_name kept, judged with that driver line) or 'call'
    (cobalt: JSON arguments one per line). None: the profile's default."""
    keep_unverified: bool | None = None
    """Keep a problem that no reference solution passes (paper) or drop it (cobalt). None:
    the profile's default."""
    id_field: str = "id"
    """Field holding a problem id; records without it get ``taco-<row index>``."""

    def __post_init__(self) -> None:
        profile = resolve_profile(self.profile)
        object.__setattr__(self, "profile", profile.value)
        paper = profile is Profile.PAPER
        if self.call_mode is None:
            object.__setattr__(self, "call_mode", "stdin" if paper else "call")
        if self.keep_unverified is None:
            object.__setattr__(self, "keep_unverified", paper)
        if self.call_mode not in CALL_MODES:
            raise ValueError(f"call_mode must be one of {', '.join(CALL_MODES)}, got {self.call_mode!r}")
        if self.n_shortest + self.n_longest != self.max_tests:
            raise ValueError("n_shortest + n_longest must equal max_tests")
        if min(self.min_tests, self.max_tests, self.max_solutions) < 1 or self.n_public < 0:
            raise ValueError("test and solution counts must be positive")

    @property
    def is_paper(self) -> bool:
        """True under the paper profile."""
        return self.profile == Profile.PAPER.value

    @property
    def exec_call_mode(self) -> str:
        """The executor's call mode for tests that carry a function name."""
        return "call" if self.call_mode == "call" else "lossy"


@dataclass(frozen=True)
class TacoProblem:
    """A raw TACO record, type-checked (tests not yet converted)."""

    id: str
    question: str
    inputs: list
    outputs: list
    fn_name: str | None
    solutions: tuple[str, ...]
    difficulty: str | None = None
    source: str | None = None
    starter_code: str = ""


@dataclass(frozen=True)
class Outcome:
    """What happened to one input record."""

    id: str
    record: dict | None = None
    rule: str | None = None
    detail: str = ""


class Dropped(Exception):
    """A problem that fails a cleaning rule."""

    def __init__(self, rule: str, detail: str = ""):
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail


# -- parsing -------------------------------------------------------------------

def record_id(record: Any, index: int, id_field: str = "id") -> str:
    """The id of a raw record: its ``id_field`` if present, else ``taco-<index>`` (0-based row)."""
    if isinstance(record, Mapping) and isinstance(record.get(id_field), (str, int)):
        return str(record[id_field])
    return f"taco-{index}"


def parse_record(record: Any, *, pid: str, path: str, line: int) -> TacoProblem:
    """Type-check a raw TACO record; a bad field raises :class:`RecordError`."""
    question = require_field(record, "question", str, path=path, line=line)
    io_raw = require_field(record, "input_output", (str, dict), path=path, line=line)
    io = _json_field(io_raw, "input_output", path, line)
    if not isinstance(io, Mapping):
        raise RecordError(path, line, "input_output", f"expected a JSON object, got {type(io).__name__}")
    for key in ("inputs", "outputs"):
        if key not in io:
            raise RecordError(path, line, f"input_output.{key}", "missing")
        if not isinstance(io[key], list):
            raise RecordError(path, line, f"input_output.{key}", f"expected a list, got {type(io[key]).__name__}")
    fn_name = io.get("fn_name")
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        raise RecordError(path, line, "input_output.fn_name", f"expected an identifier, got {fn_name!r}")
    sols_raw = record.get("solutions", "[]")
    if sols_raw is None:
        sols_raw = "[]"
    if not isinstance(sols_raw, (str, list)):
        raise RecordError(path, line, "solutions", f"expected a JSON string or list, got {type(sols_raw).__name__}")
    sols = _json_field(sols_raw, "solutions", path, line)
    if not isinstance(sols, list):
        raise RecordError(path, line, "solutions", f"expected a list, got {type(sols).__name__}")
    starter = record.get("starter_code") or ""
    return TacoProblem(
        id=pid,
        question=question,
        inputs=io["inputs"],
        outputs=io["outputs"],
        fn_name=fn_name or None,
        solutions=tuple(s for s in sols if isinstance(s, str) and s.strip()),
        difficulty=None if record.get("difficulty") is None else str(record["difficulty"]),
        source=None if record.get("source") is None else str(record["source"]),
        starter_code=starter if isinstance(starter, str) else "",
    )


def _json_field(value: Any, name: str, path: str, line: int) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise RecordError(path, line, name, f"invalid JSON ({exc.msg} at char {exc.pos})") from None


# -- the rules ---------------------------------------------------------------------

def convert_entry(value: Any, *, is_input: bool, fn_name: str | None, call_mode: str,
                  profile: "str | Profile" = "paper") -> str:
    """One test input or output as the string the executor takes.

    ``paper``: a string stays; a list becomes its elements, each converted
    with ``str()``, joined by spaces, whatever they are (the original code).
    ``cobalt``: a string stays, a list of numbers and strings is joined with
    spaces; call-based problems in call mode instead get their arguments as
    JSON one per line and the JSON of the return value (TACO's one-element
    output list removed). Anything else raises :class:`Dropped` (rule
    ``non_string_entries``).

    >>> convert_entry([True, [1, 2], "a"], is_input=False, fn_name="f", call_mode="stdin")
    'True [1, 2] a'
    >>> convert_entry([[1, 2], "ab"], is_input=True, fn_name="f", call_mode="call", profile="cobalt")
    '[1, 2]\\n"ab"'
    """
    if resolve_profile(profile) is Profile.PAPER:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return " ".join(str(v) for v in value)
        raise Dropped(NON_STRING_ENTRIES, f"entry of type {type(value).__name__}")
    if fn_name and call_mode == "call":
        try:
            if is_input:
                args = value if isinstance(value, list) else [value]
                return "\n".join(json.dumps(a, ensure_ascii=False) for a in args)
            ret = value[0] if isinstance(value, list) and len(value) == 1 else value
            return json.dumps(ret, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise Dropped(NON_STRING_ENTRIES, f"value not JSON-serialisable: {exc}") from None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return " ".join(str(v) for v in value)
    raise Dropped(NON_STRING_ENTRIES, f"entry of type {type(value).__name__}")


def image_mention(question: str, profile: "str | Profile" = "paper") -> str | None:
    """The text that makes the statement refer to an image, or None.

    ``paper``: "image" anywhere in the lower-cased statement ("imagery" too),
    or the two characters ``![`` right after a newline (the original's plain
    substring test: a statement that starts with ``![`` does not count). ``cobalt``: an ``<img>`` tag, a
    markdown image anywhere, an image file name, or the whole words
    image(s)/picture(s).

    >>> image_mention("Use the imagery."), image_mention("Use the imagery.", "cobalt")
    ('image', None)
    """
    if resolve_profile(profile) is Profile.PAPER:
        if "image" in question.lower():
            return "image"
        return PAPER_IMAGE_MARK if PAPER_IMAGE_MARK in question else None
    m = _IMAGE_RE.search(question)
    return m.group(0) if m else None


def mentions_image(question: str, profile: "str | Profile" = "paper") -> bool:
    """True when the statement refers to an image (see :func:`image_mention`)."""
    return image_mention(question, profile) is not None


def alnum_count(text: str, profile: "str | Profile" = "paper") -> int:
    """Alphanumeric characters of ``text``: Unicode ``str.isalnum`` (paper) or ASCII only (cobalt).

    >>> alnum_count("día 7!"), alnum_count("día 7!", "cobalt")
    (4, 3)
    """
    if resolve_profile(profile) is Profile.PAPER:
        return sum(1 for c in text if c.isalnum())
    return len(_ALNUM_RE.findall(text))


def check_rules(problem: TacoProblem, cfg: TacoConfig) -> TestCases:
    """Apply rules 1-4 and return the converted tests; raise :class:`Dropped` on failure.

    The tests carry the function name unless the call mode is ``stdin`` (paper)."""
    n_in, n_out = len(problem.inputs), len(problem.outputs)
    if min(n_in, n_out) < cfg.min_tests:
        raise Dropped(TOO_FEW_TESTS, f"{min(n_in, n_out)} tests < {cfg.min_tests}")
    if n_in != n_out:
        raise Dropped(LENGTH_MISMATCH, f"{n_in} inputs, {n_out} outputs")
    conv = dict(fn_name=problem.fn_name, call_mode=cfg.call_mode, profile=cfg.profile)
    inputs = [convert_entry(v, is_input=True, **conv) for v in problem.inputs]
    outputs = [convert_entry(v, is_input=False, **conv) for v in problem.outputs]
    image = image_mention(problem.question, cfg.profile)
    if image is not None:
        raise Dropped(MENTIONS_IMAGE, image)
    n_alnum = alnum_count(problem.question, cfg.profile)
    if n_alnum < cfg.min_alnum:
        raise Dropped(SHORT_STATEMENT, f"{n_alnum} alphanumeric characters < {cfg.min_alnum}")
    return TestCases(tuple(inputs), tuple(outputs), problem.fn_name)


def select_tests(inputs: Sequence[str], n_shortest: int = 5, n_longest: int = 15,
                 profile: "str | Profile" = "paper") -> list[int]:
    """Indices of the tests to keep, in the order they are kept; all of them, in order, when
    there are at most ``n_shortest + n_longest``.

    ``paper`` (the original): sort by input length, longest first, stable (equal
    lengths keep their order); keep the last ``n_shortest`` then the first
    ``n_longest``, in that order. ``cobalt``: the ``n_shortest`` shortest and
    ``n_longest`` longest, ties going to the earlier test, in original order.

    >>> select_tests(["aaa", "a", "aa", "aaaa"], 1, 2)
    [1, 3, 0]
    >>> select_tests(["aaa", "a", "aa", "aaaa"], 1, 2, "cobalt")
    [0, 1, 3]
    """
    if len(inputs) <= n_shortest + n_longest:
        return list(range(len(inputs)))
    if resolve_profile(profile) is Profile.PAPER:
        longest_first = sorted(range(len(inputs)), key=lambda i: len(inputs[i]), reverse=True)
        return longest_first[len(inputs) - n_shortest:] + longest_first[:n_longest]
    by_len = sorted(range(len(inputs)), key=lambda i: (len(inputs[i]), i))
    chosen = by_len[:n_shortest] + (by_len[-n_longest:] if n_longest else [])
    return sorted(chosen)


def split_public_hidden(n: int, n_public: int, rng) -> tuple[list[int], list[int]]:
    """Draw ``n_public`` of ``n`` test indices as public; both parts in original order."""
    public = sorted(rng.sample(range(n), min(n_public, n)))
    chosen = set(public)
    return public, [i for i in range(n) if i not in chosen]


def solutions_to_try(solutions: Sequence[str], max_solutions: int, rng) -> list[str]:
    """The reference solutions to verify with: shuffled with ``rng``, at most ``max_solutions``."""
    order = list(solutions)
    rng.shuffle(order)
    return order[:max_solutions]


async def find_passing_solution(client, solutions: Sequence[str], tests: TestCases, call_mode: str = "call") -> int | None:
    """Index (into ``solutions``) of the first one passing every test, or None.

    With a function name and ``call_mode`` 'stdin' or 'lossy', each solution runs
    as a stdin program with the appended driver line (the original's check), so
    the client's own call mode does not matter. An evaluator that could not run a
    solution raises :class:`cobalt.health.InfrastructureError`."""
    if tests.fn_name and call_mode != "call":
        from cobalt.execution.local import lossy_program

        fn_name = tests.fn_name
        tests = TestCases(tests.inputs, tests.outputs, None)
        solutions = [lossy_program(code, fn_name) for code in solutions]
    from cobalt.health import InfrastructureError

    for index, code in enumerate(solutions):
        result = await client.evaluate(code, tests)
        if result.infrastructure_error:  # not a verdict on the reference: never drop the problem for it
            raise InfrastructureError(f"the evaluator could not run a reference solution: {result.error}")
        if result.all_passed:
            return index
    return None


async def clean_problem(problem: TacoProblem, cfg: TacoConfig, client) -> dict:
    """Apply every rule to one problem and return its output record (or raise :class:`Dropped`).

    A problem kept without a passing reference solution (paper) gets ``"verified": false``."""
    tests = check_rules(problem, cfg)
    tests = tests.subset(select_tests(tests.inputs, cfg.n_shortest, cfg.n_longest, cfg.profile))
    verified = False
    if not problem.solutions:
        if not cfg.keep_unverified:
            raise Dropped(NO_SOLUTIONS, "no reference solution")
    else:
        candidates = solutions_to_try(problem.solutions, cfg.max_solutions,
                                      problem_rng(cfg.seed, problem.id, "solutions"))
        verified = await find_passing_solution(client, candidates, tests, cfg.call_mode) is not None
        if not verified and not cfg.keep_unverified:
            raise Dropped(UNVERIFIED, f"none of {len(candidates)} reference solutions passes all {len(tests)} tests")
    if cfg.call_mode == "stdin":
        # model programs are plain stdin programs: the name only served to verify the references
        tests = TestCases(tests.inputs, tests.outputs, None)
    public, hidden = split_public_hidden(len(tests), cfg.n_public, problem_rng(cfg.seed, problem.id, "split"))
    extra: dict = {"starter_code": problem.starter_code} if problem.starter_code.strip() else {}
    if not verified:
        extra["verified"] = False
    record = ProblemRecord(
        id=problem.id,
        question=problem.question.strip(),  # the original stores the stripped statement
        public=tests.subset(public),
        hidden=tests.subset(hidden),
        difficulty=problem.difficulty,
        source=problem.source,
        extra=extra,
    )
    return record.to_dict()


async def process_record(line: int, record: Any, *, path: str, cfg: TacoConfig, client) -> Outcome:
    """Parse and clean one raw record; never raises for bad data."""
    pid = record_id(record, line - 1, cfg.id_field)
    if isinstance(record, RecordError):
        return Outcome(pid, rule=BAD_RECORD, detail=str(record))
    try:
        problem = parse_record(record, pid=pid, path=path, line=line)
        return Outcome(pid, record=await clean_problem(problem, cfg, client))
    except RecordError as exc:
        return Outcome(pid, rule=BAD_RECORD, detail=str(exc))
    except Dropped as exc:
        return Outcome(pid, rule=exc.rule, detail=exc.detail)


# -- driving a whole file ---------------------------------------------------------------

async def run_ordered(items: Iterable[tuple[int, Any]], worker, window: int) -> AsyncIterator[Outcome]:
    """Run ``worker(line, record)`` on up to ``window`` items at once, yielding results in input order."""
    pending: deque = deque()
    for line, record in items:
        pending.append(asyncio.ensure_future(worker(line, record)))
        while len(pending) >= window:
            yield await pending.popleft()
    while pending:
        yield await pending.popleft()


def iter_source(source: str, split: str = "train") -> tuple[Iterator[tuple[int, Any]], int | None]:
    """Records of a local file or of a hub data set, with a count when cheap."""
    if is_local_source(source):
        return iter_local_records(source), count_local_records(source)
    from cobalt.hub import require_hub

    require_hub(source, what="data set", flag="--input")
    try:
        import datasets  # heavy; only for hub loading
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(
            f"loading {source!r} from the hub needs the 'datasets' package ({exc}); "
            "or download the data set and pass the local file"
        ) from None
    ds = datasets.load_dataset(source, split=split)
    return ((i, dict(row)) for i, row in enumerate(ds, 1)), len(ds)


def sidecar_paths(output: Path) -> tuple[Path, Path]:
    """The dropped-problems file and the summary file written beside ``output``."""
    return output.with_name(output.name + ".dropped.jsonl"), output.with_name(output.name + ".summary.json")


def summarize(output: Path, dropped_path: Path) -> DropSummary:
    """Counts over everything written so far (this run and earlier resumed ones)."""
    from cobalt.io import iter_jsonl

    summary = DropSummary()
    summary.dropped = Counter({rule: 0 for rule in RULES})
    unverified_kept = 0
    if output.exists():
        for _, rec in iter_jsonl(output):
            summary.kept += 1
            unverified_kept += rec.get("verified") is False
    if dropped_path.exists():
        for _, rec in iter_jsonl(dropped_path):
            summary.dropped[rec["rule"]] += 1
            if rec["rule"] == BAD_RECORD:
                summary.errors.append(rec["detail"])
    summary.total = summary.kept + sum(summary.dropped.values())
    summary.unverified_kept = unverified_kept
    return summary


async def clean_file(source: str, output: Path, cfg: TacoConfig, client, *, split: str = "train",
                     limit: int | None = None, window: int = 64, progress: bool = True) -> DropSummary:
    """Clean every record of ``source`` into ``output`` (resumable); return the summary."""
    from cobalt.cli_support import progress as progress_counter

    from cobalt.io import JsonlAppender

    dropped_path, summary_path = sidecar_paths(output)
    items, total = iter_source(source, split)
    if limit is not None:
        items = _take(items, limit)
        total = min(total, limit) if total is not None else limit
    with JsonlAppender(output) as out, JsonlAppender(dropped_path) as drops:
        done = out.done | drops.done
        todo = ((line, rec) for line, rec in items if record_id(rec, line - 1, cfg.id_field) not in done)

        async def worker(line, rec):
            return await process_record(line, rec, path=str(source), cfg=cfg, client=client)

        bar = progress_counter(total, "taco", "problems", enabled=progress, initial=len(done))
        async for outcome in run_ordered(todo, worker, window):
            if outcome.record is not None:
                out.write(outcome.record)
            else:
                drops.write({"id": outcome.id, "rule": outcome.rule, "detail": outcome.detail})
            bar.update(1)
        bar.close()
    summary = summarize(output, dropped_path)
    from cobalt.io import write_json_atomic

    write_json_atomic(summary_path, {**summary.to_dict(), "profile": cfg.profile, "config": cfg.__dict__, "source": str(source)})
    return summary


def _take(items: Iterator, limit: int) -> Iterator:
    for n, item in enumerate(items):
        if n >= limit:
            return
        yield item


# -- CLI -----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt preproc-taco``."""
    d = TacoConfig()
    parser.add_argument("--input", default=HUB_NAME,
                        help="hub data set name or a local .jsonl/.jsonl.gz/.json/.parquet file of TACO records")
    parser.add_argument("--split", default="train", help="split to load from the hub")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="output JSONL (appended, resumable); <output>.dropped.jsonl and "
                             "<output>.summary.json are written beside it")
    parser.add_argument("--min-tests", type=int, default=d.min_tests, help="drop problems with fewer tests")
    parser.add_argument("--max-tests", type=int, default=d.max_tests, help="keep at most this many tests")
    parser.add_argument("--n-shortest", type=int, default=d.n_shortest,
                        help="of the kept tests, this many with the shortest inputs (the rest are the longest)")
    parser.add_argument("--min-alnum", type=int, default=d.min_alnum,
                        help="drop statements with fewer alphanumeric characters (paper: Unicode str.isalnum; "
                             "cobalt: ASCII letters and digits)")
    parser.add_argument("--max-solutions", type=int, default=d.max_solutions,
                        help="reference solutions tried when verifying a problem")
    parser.add_argument("--n-public", type=int, default=d.n_public, help="tests made public (the rest hidden)")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the solution shuffle and public draw")
    parser.add_argument("--call-mode", choices=CALL_MODES, default=None,
                        help="call-based problems: 'stdin' (paper default: space-joined strings, no fn_name in the "
                             "output, reference solutions verified with an appended driver line), 'lossy' (fn_name "
                             "kept, judged with that driver line) or 'call' (cobalt default: JSON arguments one per "
                             "line, values compared)")
    parser.add_argument("--unverified", choices=("keep", "drop"), default=None,
                        help="a problem that no reference solution passes: 'keep' (paper default: the original "
                             "computes the check but keeps the problem; counted in the summary and marked "
                             "\"verified\": false) or 'drop' (cobalt default)")
    parser.add_argument("--id-field", default=d.id_field,
                        help="record field used as the problem id (missing: taco-<row index>)")
    from cobalt.cli_support import add_alias, non_negative_int, positive_int

    parser.add_argument("--limit", type=non_negative_int, default=None, help="process only the first N records (0: none)")
    parser.add_argument("--max-programs", dest="concurrency", type=positive_int, default=None,
                        help="programs run at once by the evaluator (default: CPUs, or $COBALT_EVAL_CONCURRENCY)")
    add_alias(parser, "--concurrency", dest="concurrency", type=positive_int)
    parser.add_argument("--max-problems", dest="window", type=positive_int, default=64,
                        help="problems verified at once")
    add_alias(parser, "--window", dest="window", type=positive_int)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_profile_argument(parser)


def config_from_args(args: argparse.Namespace) -> TacoConfig:
    """The :class:`TacoConfig` that the flags describe."""
    return TacoConfig(
        min_tests=args.min_tests, max_tests=args.max_tests, n_shortest=args.n_shortest,
        n_longest=args.max_tests - args.n_shortest, min_alnum=args.min_alnum, max_solutions=args.max_solutions,
        n_public=args.n_public, seed=args.seed, call_mode=args.call_mode, id_field=args.id_field,
        profile=profile_from_args(args).value,
        keep_unverified=None if args.unverified is None else args.unverified == "keep",
    )


def evaluator_client(cfg: TacoConfig, concurrency: int | None = None):
    """The evaluator client of the preprocessing (``COBALT_EVALUATOR`` etc.), running with the
    config's call mode and profile; in Ray mode each request carries them to the service."""
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient

    kwargs: dict = {"options": ExecOptions(call_mode=cfg.exec_call_mode, profile=cfg.profile)}
    if concurrency:
        kwargs["max_concurrency"] = concurrency
    return EvaluatorClient.from_env(profile=cfg.profile, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt preproc-taco``: the evaluator is checked first, and one that fails is one line, exit 1."""
    from cobalt.health import InfrastructureError, PreflightError, preflight
    from cobalt.io import resume_guard, save_settings

    cfg = config_from_args(args)
    settings, refused = resume_guard(args, [args.input], profile=str(cfg.profile))
    if refused:
        print(f"cobalt preproc-taco: {refused}", file=sys.stderr)
        return 2
    client = evaluator_client(cfg, args.concurrency)
    output = Path(args.output)
    try:
        preflight(evaluator=client.mode, ray_address=client.ray_address)
        save_settings(args.output, "cobalt preproc-taco", settings)
        summary = asyncio.run(clean_file(args.input, output, cfg, client, split=args.split, limit=args.limit,
                                         window=args.window, progress=not args.no_progress))
    except (PreflightError, InfrastructureError) as exc:
        print(f"cobalt preproc-taco: {exc}", file=sys.stderr)
        return 1
    print(summary.format(f"TACO ({cfg.profile} profile) -> {output}"))
    print(f"summary written to {sidecar_paths(output)[1]}")
    return 0
