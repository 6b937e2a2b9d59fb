"""Single-turn, Cobalt and multi-turn datasets as veRL parquet files (``cobalt make-verl-data``).

Three kinds of rows, one row schema out (METHOD §4, docs/TRAJECTORIES.md):

- ``single-turn``: a problems file (``cobalt preproc-taco`` / ``preproc-lcb``
  output); the prompt is the system prompt and the problem instruction.
- ``cobalt``: the prompt rows of ``cobalt build-prompts`` (training rows from a
  training run, validation rows from an ``--is-test`` run); the prompt is the
  partial trajectory;
- ``multiturn``: a problems file, as single-turn, for the online multi-turn
  baselines: each row also has ``agent_name`` (the agent loop of
  ``cobalt.verl_plugin.agent_loop``) and ``extra_info.public_test_cases``.

Each row: ``data_source``, ``prompt`` (chat messages), ``ability`` "code",
``reward_model`` {``style`` "rule", ``ground_truth``: all tests as a JSON
string}, ``extra_info`` {``split``, ``index``, ``prev_best_pass_rate``,
``is_val``, ``problem_id``, ``turn``}. ``<out-dir>/train.parquet`` and
``<out-dir>/val.parquet`` are written atomically; prompt lengths (tokens
under the policy's chat template, as veRL's length filter counts them) are
printed and saved with the counts in ``<out-dir>/make_verl_data.summary.json``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from cobalt.io import RecordError, counts_dict, good_records

KINDS = ("single-turn", "cobalt", "multiturn")
DEFAULT_DATA_SOURCE = "code_taco_verified"
MULTITURN_AGENT_NAME = "cobalt_multiturn"
"""``agent_name`` of multiturn rows: the agent loop that GRPO-MT / VeRPO-MT register under this name."""


@dataclass
class SplitReport:
    """Counts and prompt-length statistics of one written split."""

    split: str
    path: str = ""
    records_read: int = 0
    rows: int = 0
    bad_records: int = 0
    dropped_overlong: int = 0
    lengths: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready report (the first 100 errors)."""
        return counts_dict(self)

    def format(self) -> str:
        """One block of human-readable text."""
        s = self.lengths
        text = (f"{self.split}: {self.rows} rows -> {self.path} ({self.records_read} read, {self.bad_records} bad, "
                f"{self.dropped_overlong} dropped as too long)")
        if s.get("count"):
            text += (f"\n  prompt tokens: mean {s['mean']:.1f}  p50 {s['p50']}  p90 {s['p90']}  max {s['max']}"
                     f"  (min {s['min']})")
        return text


def length_stats(lengths: list[int]) -> dict:
    """count, mean, min, p50, p90 and max of ``lengths`` (nearest-rank percentiles)."""
    if not lengths:
        return {"count": 0}
    ordered = sorted(lengths)

    def rank(p: float) -> int:
        return ordered[max(math.ceil(p * len(ordered)) - 1, 0)]

    return {"count": len(ordered), "mean": sum(ordered) / len(ordered), "min": ordered[0],
            "p50": rank(0.5), "p90": rank(0.9), "max": ordered[-1]}


def verl_row(*, data_source: str, messages: list[dict], ground_truth: str, split: str, index: int,
             prev_best: float, problem_id: str, turn: int, public_tests: str | None = None) -> dict:
    """One row in veRL's schema (types fixed so that every row has the same parquet schema).

    With ``public_tests`` (multiturn rows) the row also names its agent loop
    (``agent_name``) and carries the public tests, shown in feedback, as
    ``extra_info.public_test_cases``; ``ground_truth`` stays all tests.
    """
    from cobalt.rollout.conversation import message

    row = {
        "data_source": data_source,
        "prompt": [message(str(m["role"]), str(m["content"])) for m in messages],
        "ability": "code",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {
            "split": split,
            "index": int(index),
            "prev_best_pass_rate": float(prev_best),
            "is_val": split == "val",
            "problem_id": str(problem_id),
            "turn": int(turn),
        },
    }
    if public_tests is not None:
        row["agent_name"] = MULTITURN_AGENT_NAME
        row["extra_info"]["public_test_cases"] = public_tests
    return row


def _records(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line, record)`` of a JSONL (``.gz``), JSON-list or parquet file; an unparsable line comes as its error."""
    from cobalt.data.problems import iter_local_records
    from cobalt.io import iter_jsonl_keep_going

    name = str(path).lower()
    if name.endswith((".parquet", ".json")):
        return iter_local_records(path)
    return iter_jsonl_keep_going(path)


def single_turn_messages(record: Any, *, path: str, line: int, template_dir: str | None) -> tuple[str, list[dict], str]:
    """``(problem_id, messages, ground_truth)`` of a problems-file record."""
    from cobalt.data.problems import problem_from_dict, tests_json
    from cobalt.rollout.conversation import first_turn_messages

    problem = problem_from_dict(record, path=path, line=line)
    return problem.id, first_turn_messages(problem, template_dir), tests_json(problem.tests)


def public_tests_json(record: Any, *, path: str, line: int) -> str:
    """The public tests of a problems-file record as JSON (a problem without any is a bad record)."""
    from cobalt.data.problems import problem_from_dict, tests_json

    problem = problem_from_dict(record, path=path, line=line)
    if len(problem.public) == 0:
        raise RecordError(path, line, "public_test_cases", "no public tests: the multi-turn feedback needs them")
    return tests_json(problem.public)


def cobalt_prompt_fields(record: Any, *, path: str, line: int) -> tuple[str, list[dict], str, float, int]:
    """``(problem_id, messages, ground_truth, prev_best, turn)`` of a build-prompts row, validated."""
    from cobalt.execution.base import TestCaseError, TestCases
    from cobalt.io import require_field

    pid = require_field(record, "problem_id", (str, int), path=path, line=line)
    messages = require_field(record, "messages", (list, tuple), path=path, line=line)
    for i, m in enumerate(messages):
        if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise RecordError(path, line, f"messages[{i}]", "expected an object with string 'role' and 'content'")
    if not messages:
        raise RecordError(path, line, "messages", "empty")
    tests = require_field(record, "test_cases", str, path=path, line=line)
    try:
        TestCases.from_obj(tests, where="test_cases")
    except TestCaseError as exc:
        raise RecordError(path, line, "test_cases", str(exc)) from None
    prev = require_field(record, "prev_best_pass_rate", (int, float), path=path, line=line)
    if isinstance(prev, bool) or not 0.0 <= prev <= 1.0:
        raise RecordError(path, line, "prev_best_pass_rate", f"expected a number in [0, 1], got {prev!r}")
    turn = require_field(record, "turn", int, path=path, line=line)
    return str(pid), list(messages), tests, float(prev), turn


def build_split(kind: str, path: str | os.PathLike, split: str, *, data_source: str,
                count_tokens: Callable[[list[dict]], int], max_prompt_tokens: int = 0,
                template_dir: str | None = None, progress: bool = False) -> tuple[list[dict], SplitReport]:
    """Rows of one split and its report; bad records are reported and skipped."""
    report = SplitReport(split=split)
    rows: list[dict] = []
    lengths: list[int] = []
    items: Iterator = _records(path)
    if progress:
        from cobalt.cli_support import progress_iter
        from cobalt.data.problems import count_local_records

        items = progress_iter(items, count_local_records(path), split, "records")

    def parse(record: Any, line: int) -> tuple:
        public = None
        if kind in ("single-turn", "multiturn"):
            pid, messages, truth = single_turn_messages(record, path=str(path), line=line, template_dir=template_dir)
            prev, turn = 0.0, 0
            if kind == "multiturn":
                public = public_tests_json(record, path=str(path), line=line)
        else:
            pid, messages, truth, prev, turn = cobalt_prompt_fields(record, path=str(path), line=line)
        return pid, messages, truth, prev, turn, public

    for _, (pid, messages, truth, prev, turn, public) in good_records(items, parse, report, echo=True):
        n_tokens = count_tokens(messages)
        if max_prompt_tokens > 0 and n_tokens > max_prompt_tokens:
            report.dropped_overlong += 1
            continue
        lengths.append(n_tokens)
        rows.append(verl_row(data_source=data_source, messages=messages, ground_truth=truth, split=split,
                             index=len(rows), prev_best=prev, problem_id=pid, turn=turn, public_tests=public))
    report.rows = len(rows)
    report.lengths = length_stats(lengths)
    return rows, report


def make_verl_data(kind: str, out_dir: str | os.PathLike, *, train: str | None, val: str | None,
                   count_tokens: Callable[[list[dict]], int], data_source: str = DEFAULT_DATA_SOURCE,
                   max_prompt_tokens: int = 0, template_dir: str | None = None,
                   progress: bool = False) -> list[SplitReport]:
    """Write ``train.parquet`` / ``val.parquet`` under ``out_dir``; return one report per split."""
    from cobalt.training_data.trajectories import write_rows

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    reports = []
    for split, path in (("train", train), ("val", val)):
        if path is None:
            continue
        rows, report = build_split(kind, path, split, data_source=data_source, count_tokens=count_tokens,
                                   max_prompt_tokens=max_prompt_tokens, template_dir=template_dir, progress=progress)
        report.path = str(Path(out_dir) / f"{split}.parquet")
        if rows:
            write_rows(rows, report.path)
        reports.append(report)
    return reports


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt make-verl-data``."""
    from cobalt.cli_support import add_alias

    parser.add_argument("--kind", choices=KINDS, required=True,
                        help="single-turn: rows from a problems file (system + instruction); "
                        "cobalt: rows from `cobalt build-prompts` output (partial trajectories); "
                        "multiturn: single-turn rows plus agent_name and extra_info.public_test_cases, "
                        "for the online multi-turn baselines (GRPO-MT, VeRPO-MT)")
    parser.add_argument("--train", default=None,
                        help="training input (problems file, or build-prompts rows; JSONL, JSON or parquet)")
    parser.add_argument("--val", default=None,
                        help="validation input, same format; its rows get extra_info.is_val = true")
    parser.add_argument("--output-dir", dest="out_dir", required=True,
                        help="folder for train.parquet, val.parquet and make_verl_data.summary.json")
    add_alias(parser, "--out-dir", dest="out_dir")
    add_alias(parser, "--local_dir", dest="out_dir")
    parser.add_argument("--tokenizer", "--model-name", "--model_name", dest="tokenizer", default="Qwen/Qwen3-8B",
                        help="policy model (hub name or local folder) whose chat template measures prompt lengths")
    parser.add_argument("--chat-template-kwargs", default="{}",
                        help="extra arguments of apply_chat_template as JSON (as veRL's data.apply_chat_template_kwargs)")
    parser.add_argument("--data-source", default=DEFAULT_DATA_SOURCE,
                        help="data_source value of every row (the reward function may dispatch on it)")
    parser.add_argument("--max-prompt-tokens", type=int, default=0,
                        help="drop (and count) rows whose prompt is longer than this many tokens; 0 keeps all "
                        "(veRL's filter_overlong_prompts would drop them at load time; the paper's limits are "
                        "2048 single-turn and 10240 Cobalt)")
    parser.add_argument("--template-dir", default=None,
                        help="folder with prompt template overrides (single-turn prompts)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Write the parquet files and the summary; 1 if a split produced no rows, 2 on bad flags."""
    from cobalt.training_data.trajectories import ChatTokenCounter
    from cobalt.io import write_json_atomic

    if args.train is None and args.val is None:
        print("error: give --train and/or --val", file=sys.stderr)
        return 2
    try:
        chat_kwargs = json.loads(args.chat_template_kwargs)
    except json.JSONDecodeError as exc:
        print(f"error: --chat-template-kwargs is not JSON: {exc}", file=sys.stderr)
        return 2
    counter = ChatTokenCounter.from_pretrained(args.tokenizer, chat_kwargs)
    reports = make_verl_data(args.kind, args.out_dir, train=args.train, val=args.val, count_tokens=counter,
                             data_source=args.data_source, max_prompt_tokens=args.max_prompt_tokens,
                             template_dir=args.template_dir, progress=not args.no_progress)
    for report in reports:
        print(report.format())
    summary = {"kind": args.kind, "tokenizer": args.tokenizer, "chat_template_kwargs": chat_kwargs,
               "data_source": args.data_source, "max_prompt_tokens": args.max_prompt_tokens,
               "inputs": {"train": args.train, "val": args.val}, "splits": [r.to_dict() for r in reports]}
    write_json_atomic(Path(args.out_dir) / "make_verl_data.summary.json", summary)
    return 1 if any(r.rows == 0 for r in reports) else 0
