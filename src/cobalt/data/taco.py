"""Clean TACO-verified into problems with public and hidden tests (METHOD §4).

Rules, each a flag with the paper's number as default:

1. at least ``--min-tests`` (8) tests;
2. ``inputs`` and ``outputs`` are lists of equal length whose entries are
   strings (a list entry is joined with spaces); call-based problems
   (``fn_name``) instead get JSON arguments one per line (``--call-mode call``)
   or the paper's space-joined strings (``--call-mode lossy``);
3. the statement mentions no image;
4. the statement has at least ``--min-alnum`` (100) ASCII letters and digits;
5. at most ``--max-tests`` (20) tests: the 5 shortest and 15 longest inputs;
6. one of up to ``--max-solutions`` (16) reference solutions, shuffled with the
   seed, passes every kept test in the sandbox; otherwise the problem is
   dropped (the paper's code computed this but kept the problem anyway);
7. ``--n-public`` (4) tests, drawn with the seed, become public; the rest hidden.

The output is appended one problem per line in input order and is resumable:
a rerun skips problems already written to the output or to the dropped file
(``<output>.dropped.jsonl``, one line per dropped problem with its rule). A
summary of the rules' counts is printed and written to ``<output>.summary.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping, Sequence

from cobalt.execution.base import TestCases
from cobalt.io import RecordError, require_field
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

_IMAGE_RE = re.compile(r"<\s*img\b|!\[[^\]]*\]\(|\bimages?\b|\bpictures?\b|\.(?:png|jpe?g|gif|svg|bmp)\b", re.IGNORECASE)
_ALNUM_RE = re.compile(r"[A-Za-z0-9]")


@dataclass(frozen=True)
class TacoConfig:
    """The cleaning rules' numbers (METHOD §4 defaults)."""

    min_tests: int = 8
    max_tests: int = 20
    n_shortest: int = 5
    n_longest: int = 15
    min_alnum: int = 100
    max_solutions: int = 16
    n_public: int = 4
    seed: int = 42
    call_mode: str = "call"
    """'call' (JSON arguments one per line) or 'lossy' (the paper: lists joined with spaces)."""
    id_field: str = "id"
    """Field holding a problem id; records without it get ``taco-<row index>``."""

    def __post_init__(self) -> None:
        if self.call_mode not in ("call", "lossy"):
            raise ValueError(f"call_mode must be 'call' or 'lossy', got {self.call_mode!r}")
        if self.n_shortest + self.n_longest != self.max_tests:
            raise ValueError("n_shortest + n_longest must equal max_tests")
        if min(self.min_tests, self.max_tests, self.max_solutions) < 1 or self.n_public < 0:
            raise ValueError("test and solution counts must be positive")


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

def convert_entry(value: Any, *, is_input: bool, fn_name: str | None, call_mode: str) -> str:
    """One test input or output as the string the executor takes.

    Stdin problems and lossy call-based ones: a string stays, a list of scalars
    is joined with spaces. Call-based problems in call mode: an input is a list
    of arguments written as JSON one per line; an output is the JSON of the
    return value (TACO wraps it in a one-element list, which is removed).
    Anything else raises :class:`Dropped` (rule ``non_string_entries``).
    """
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


def mentions_image(question: str) -> bool:
    """True when the statement refers to an image (markup, file name or the word)."""
    return bool(_IMAGE_RE.search(question))


def alnum_count(text: str) -> int:
    """Number of ASCII letters and digits in ``text``."""
    return len(_ALNUM_RE.findall(text))


def check_rules(problem: TacoProblem, cfg: TacoConfig) -> TestCases:
    """Apply rules 1-4 and return the converted tests; raise :class:`Dropped` on failure."""
    n_in, n_out = len(problem.inputs), len(problem.outputs)
    if min(n_in, n_out) < cfg.min_tests:
        raise Dropped(TOO_FEW_TESTS, f"{min(n_in, n_out)} tests < {cfg.min_tests}")
    if n_in != n_out:
        raise Dropped(LENGTH_MISMATCH, f"{n_in} inputs, {n_out} outputs")
    inputs = [convert_entry(v, is_input=True, fn_name=problem.fn_name, call_mode=cfg.call_mode) for v in problem.inputs]
    outputs = [convert_entry(v, is_input=False, fn_name=problem.fn_name, call_mode=cfg.call_mode) for v in problem.outputs]
    if mentions_image(problem.question):
        raise Dropped(MENTIONS_IMAGE, _IMAGE_RE.search(problem.question).group(0))
    n_alnum = alnum_count(problem.question)
    if n_alnum < cfg.min_alnum:
        raise Dropped(SHORT_STATEMENT, f"{n_alnum} alphanumeric characters < {cfg.min_alnum}")
    return TestCases(tuple(inputs), tuple(outputs), problem.fn_name)


def select_tests(inputs: Sequence[str], n_shortest: int = 5, n_longest: int = 15) -> list[int]:
    """Indices of the tests to keep: the ``n_shortest`` shortest and ``n_longest`` longest inputs.

    Ties in length keep the original order; the result is in original order.

    >>> select_tests(["aaa", "a", "aa", "aaaa"], 1, 2)
    [0, 1, 3]
    """
    if len(inputs) <= n_shortest + n_longest:
        return list(range(len(inputs)))
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


async def find_passing_solution(client, solutions: Sequence[str], tests: TestCases) -> int | None:
    """Index (into ``solutions``) of the first one passing every test, or None."""
    for index, code in enumerate(solutions):
        result = await client.evaluate(code, tests)
        if result.all_passed:
            return index
    return None


async def clean_problem(problem: TacoProblem, cfg: TacoConfig, client) -> dict:
    """Apply every rule to one problem and return its output record (or raise :class:`Dropped`)."""
    tests = check_rules(problem, cfg)
    tests = tests.subset(select_tests(tests.inputs, cfg.n_shortest, cfg.n_longest))
    if not problem.solutions:
        raise Dropped(NO_SOLUTIONS, "no reference solution")
    candidates = solutions_to_try(problem.solutions, cfg.max_solutions, problem_rng(cfg.seed, problem.id, "solutions"))
    if await find_passing_solution(client, candidates, tests) is None:
        raise Dropped(UNVERIFIED, f"none of {len(candidates)} reference solutions passes all {len(tests)} tests")
    public, hidden = split_public_hidden(len(tests), cfg.n_public, problem_rng(cfg.seed, problem.id, "split"))
    extra = {"starter_code": problem.starter_code} if problem.starter_code.strip() else {}
    record = ProblemRecord(
        id=problem.id,
        question=problem.question,
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
    if output.exists():
        summary.kept = sum(1 for _ in iter_jsonl(output))
    if dropped_path.exists():
        for _, rec in iter_jsonl(dropped_path):
            summary.dropped[rec["rule"]] += 1
            if rec["rule"] == BAD_RECORD:
                summary.errors.append(rec["detail"])
    summary.total = summary.kept + sum(summary.dropped.values())
    return summary


async def clean_file(source: str, output: Path, cfg: TacoConfig, client, *, split: str = "train",
                     limit: int | None = None, window: int = 64, progress: bool = True) -> DropSummary:
    """Clean every record of ``source`` into ``output`` (resumable); return the summary."""
    from tqdm.auto import tqdm

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

        bar = tqdm(total=total, initial=len(done), desc="taco", unit="problem", disable=not progress)
        async for outcome in run_ordered(todo, worker, window):
            if outcome.record is not None:
                out.write(outcome.record)
            else:
                drops.write({"id": outcome.id, "rule": outcome.rule, "detail": outcome.detail})
            bar.update(1)
        bar.close()
    summary = summarize(output, dropped_path)
    from cobalt.io import write_json_atomic

    write_json_atomic(summary_path, {**summary.to_dict(), "config": cfg.__dict__, "source": str(source)})
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
                        help="drop statements with fewer ASCII letters and digits")
    parser.add_argument("--max-solutions", type=int, default=d.max_solutions,
                        help="reference solutions tried when verifying a problem")
    parser.add_argument("--n-public", type=int, default=d.n_public, help="tests made public (the rest hidden)")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the solution shuffle and public draw")
    parser.add_argument("--call-mode", choices=("call", "lossy"), default=d.call_mode,
                        help="call-based problems: JSON arguments one per line ('call') or the paper's "
                             "space-joined strings run by an appended driver line ('lossy')")
    parser.add_argument("--id-field", default=d.id_field,
                        help="record field used as the problem id (missing: taco-<row index>)")
    parser.add_argument("--limit", type=int, default=None, help="process only the first N records")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="programs run at once by the evaluator (default: CPUs, or $COBALT_EVAL_CONCURRENCY)")
    parser.add_argument("--window", type=int, default=64, help="problems verified at once")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def config_from_args(args: argparse.Namespace) -> TacoConfig:
    """The :class:`TacoConfig` that the flags describe."""
    return TacoConfig(
        min_tests=args.min_tests, max_tests=args.max_tests, n_shortest=args.n_shortest,
        n_longest=args.max_tests - args.n_shortest, min_alnum=args.min_alnum, max_solutions=args.max_solutions,
        n_public=args.n_public, seed=args.seed, call_mode=args.call_mode, id_field=args.id_field,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt preproc-taco``."""
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient

    cfg = config_from_args(args)
    kwargs: dict = {"options": ExecOptions(call_mode=cfg.call_mode)}
    if args.concurrency:
        kwargs["max_concurrency"] = args.concurrency
    client = EvaluatorClient.from_env(**kwargs)
    output = Path(args.output)
    summary = asyncio.run(clean_file(args.input, output, cfg, client, split=args.split, limit=args.limit,
                                     window=args.window, progress=not args.no_progress))
    print(summary.format(f"TACO -> {output}"))
    print(f"summary written to {sidecar_paths(output)[1]}")
    return 0
