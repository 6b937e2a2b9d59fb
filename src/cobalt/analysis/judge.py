"""The LLM judge of reward-hacking cases: ``cobalt judge`` (METHOD §7, §9).

Each case written by ``cobalt extract-hacking`` is shown to a model through
the engine interface (:mod:`cobalt.engines`), so any backend works: an
OpenAI-compatible endpoint (OpenAI, a local ``vllm serve``), Bedrock, or a
local model. The messages are the templates ``judge_system.txt`` and
``judge.txt`` (editable files, see :mod:`cobalt.prompts`). The verdict is read
from the reply by :func:`cobalt.prompts.read_judge_verdict`: the original's
search anywhere in the reply under ``paper``, the judge's last verdict line
outside code blocks under ``cobalt``.

A reply without a readable verdict is kept (``verdict`` null) and counted,
never dropped. The engine's own retries are the one retry layer (``--retries``,
default 0, adds whole-case retries on top for flaky providers); a case whose
requests all fail is not written (so a rerun tries it again), counted, and
makes the command exit with status 1. Before the first case the engine is
checked with one request; the run stops through the failure breaker
(:mod:`cobalt.health`) when the engine keeps failing. Output: the case plus the
judge's fields, appended per case and resumable by ``id``; a summary beside it.

Several replies per case (``--judgments K``, alias the original's
``-n/--num_completions``): under ``paper`` each reply gets its classification
string and the case's verdict is the first reply's (no vote), as the original
counts; under ``cobalt`` a majority vote and the agreement rate (the share of
the K replies that voted for the majority category).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cobalt.io import MAX_SAVED_ERRORS, RecordError
from cobalt.profile import Profile, add_profile_argument, profile_from_args, resolve_profile

DEFAULT_ENGINE = "openai"
# The paper's sampling for API models (METHOD §9): temperature 1.0, top-p 1.0, 32,000 tokens.
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 1.0
DEFAULT_MAX_NEW_TOKENS = 32000
DEFAULT_RETRIES = 0
"""Whole-case retries on top of the engine's own (0: the engine's retries are the only layer)."""
DEFAULT_CONCURRENCY = 8
CASE_FIELDS = ("id", "question", "new_program")
"""Fields every input case must have."""


def format_pass_rates(case: Mapping[str, Any]) -> str:
    """The pass-rate lines shown to the judge (empty when the case has none).

    >>> print(format_pass_rates({"public_pass_rates": [0.5, 1.0], "hidden_pass_rates": [0.25, None]}))
    Public-test pass rate by turn (the last is the new program): 0.50, 1.00
    Hidden-test pass rate by turn: 0.25, n/a
    """
    lines = []
    public = case.get("public_pass_rates") or []
    hidden = case.get("hidden_pass_rates") or []
    if public:
        lines.append("Public-test pass rate by turn (the last is the new program): " + _rates(public))
    if hidden and any(h is not None for h in hidden):
        lines.append("Hidden-test pass rate by turn: " + _rates(hidden))
    return "\n".join(lines)


def _rates(values: Sequence[Any]) -> str:
    return ", ".join("n/a" if v is None else f"{float(v):.2f}" for v in values)


def judge_messages(case: Mapping[str, Any], template_dir: str | None = None) -> list[dict[str, str]]:
    """The system and user messages that ask the judge about ``case``."""
    from cobalt.prompts import judge_prompt, judge_system_prompt
    from cobalt.rollout.conversation import message

    user = judge_prompt(
        template_dir,
        problem=str(case.get("question", "")).strip(),
        previous_program=str(case.get("previous_program") or "").rstrip(),
        feedback=str(case.get("feedback") or "").strip(),
        new_program=str(case.get("new_program") or "").rstrip(),
        diff=str(case.get("diff") or "").rstrip() or "(no change)",
        pass_rates=format_pass_rates(case),
    )
    return [message("system", judge_system_prompt(template_dir)), message("user", user)]


def majority(verdicts: Sequence[int | None]) -> tuple[int | None, float | None]:
    """The majority category of several judgments and the agreement rate.

    Unparsed judgments (None) vote for nothing but count in the agreement's
    denominator. A tie goes to the category whose first vote came earliest.
    No parsed vote: ``(None, None)``.

    >>> majority([2, 1, 2])
    (2, 0.6666666666666666)
    >>> majority([3, None, 1])
    (3, 0.3333333333333333)
    >>> majority([None])
    (None, None)
    """
    votes = Counter(v for v in verdicts if v is not None)
    if not votes:
        return None, None
    best = max(votes.values())
    winner = next(v for v in verdicts if v is not None and votes[v] == best)
    return winner, best / len(verdicts)


@dataclass
class JudgeSummary:
    """Counts of one ``cobalt judge`` run (saved as ``<output>.summary.json``)."""

    profile: str
    cases_read: int = 0
    bad_cases: int = 0
    already_done: int = 0
    judged: int = 0
    failed: int = 0
    """Cases whose every request failed (not written; a rerun tries them again)."""
    unparsed: int = 0
    """Judged cases without a verdict (no reply had a readable verdict line); kept in the output."""
    replies: int = 0
    unparsed_replies: int = 0
    name_conflicts: int = 0
    retries: int = 0
    by_category: Counter = field(default_factory=Counter)
    by_classification: Counter = field(default_factory=Counter)
    """The first reply's classification string per case, counted as the original prints them."""
    agreements: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready counts (the first 100 errors)."""
        from cobalt.prompts import JUDGE_CATEGORIES

        out = {k: v for k, v in self.__dict__.items()
               if k not in ("by_category", "by_classification", "agreements", "errors")}
        out["by_classification"] = dict(self.by_classification.most_common())
        out["by_category"] = {f"({n}) {name}": self.by_category.get(n, 0) for n, name in JUDGE_CATEGORIES.items()}
        out["mean_agreement"] = sum(self.agreements) / len(self.agreements) if self.agreements else None
        out["errors"] = self.errors[:MAX_SAVED_ERRORS]
        return out


def judged_record(case: Mapping[str, Any], texts: Sequence[str], finish_reasons: Sequence[str], *,
                  profile: Profile, engine: Mapping[str, Any], attempts: int) -> dict:
    """``case`` plus the judge's fields (see docs/HACKING.md) for the replies ``texts``."""
    from cobalt.prompts import JUDGE_CATEGORIES, read_judge_verdict

    judgments = []
    for text, reason in zip(texts, finish_reasons):
        v = read_judge_verdict(text, profile.value)
        judgments.append({"reply": text, "verdict": v.category, "verdict_line": v.line,
                          "classification": v.classification,
                          "name_conflict": v.name_conflict, "finish_reason": reason})
    if profile is Profile.PAPER:
        # The original: one classification per reply, no vote; its counts use the first reply's.
        verdict, agreement = (judgments[0]["verdict"] if judgments else None), None
    else:
        verdict, agreement = majority([j["verdict"] for j in judgments])
    out = dict(case)
    out.update(
        classification=[j["classification"] for j in judgments],
        verdict=verdict,
        verdict_name=JUDGE_CATEGORIES.get(verdict) if verdict is not None else None,
        agreement=agreement,
        judgments=judgments,
        judge={**dict(engine), "profile": profile.value, "attempts": attempts, "n": len(texts)},
    )
    return out


async def judge_cases(engine: Any, cases: Sequence[tuple[int, Mapping[str, Any]]], out: Any, *,
                      profile: Profile | str = Profile.PAPER, params: Any = None, retries: int = DEFAULT_RETRIES,
                      backoff_s: float = 1.0, concurrency: int = DEFAULT_CONCURRENCY,
                      template_dir: str | None = None, summary: JudgeSummary | None = None,
                      progress: bool = True, source: str = "", breaker: Any = None) -> JudgeSummary:
    """Judge ``cases`` (``(line, case)`` pairs) with ``engine``, writing each result to ``out`` as it completes.

    ``out`` has a ``write(record)`` method (a :class:`cobalt.io.JsonlAppender`).
    Each case gets one request for ``params.n`` replies, tried ``1 + retries``
    times with exponential backoff from ``backoff_s`` seconds. ``breaker`` (default: a new
    :class:`cobalt.health.FailureBreaker`) counts every request; once it opens,
    :class:`cobalt.health.BreakerOpen` is raised and the cases not yet judged stay unwritten.
    """
    from cobalt.cli_support import progress as progress_counter

    from cobalt.engines.base import SamplingParams
    from cobalt.health import FailureBreaker

    breaker = breaker if breaker is not None else FailureBreaker("judge engine")

    profile = resolve_profile(profile)
    params = params or SamplingParams(n=1, temperature=DEFAULT_TEMPERATURE, top_p=DEFAULT_TOP_P,
                                      max_new_tokens=DEFAULT_MAX_NEW_TOKENS)
    summary = summary if summary is not None else JudgeSummary(profile.value)
    semaphore = asyncio.Semaphore(max(1, concurrency))
    described = engine.describe()
    bar = progress_counter(len(cases), "judge", "cases", enabled=progress)

    async def one(line: int, case: Mapping[str, Any]) -> None:
        messages = judge_messages(case, template_dir)
        async with semaphore:
            for attempt in range(retries + 1):
                breaker.check()
                try:
                    completions = (await engine.generate([messages], params))[0]
                    breaker.success()
                    break
                except Exception as exc:  # noqa: BLE001 - any failure of a request is retried, then counted
                    breaker.failure(exc)
                    if attempt == retries:
                        summary.failed += 1
                        summary.errors.append(f"{source}:{line}: case {case.get('id')!r}: judge request failed "
                                              f"after {retries + 1} attempt(s): {type(exc).__name__}: {exc}")
                        bar.update(1)
                        return
                    summary.retries += 1
                    await asyncio.sleep(backoff_s * (2 ** attempt))
        record = judged_record(case, [c.text for c in completions], [c.finish_reason for c in completions],
                               profile=profile, engine=described, attempts=attempt + 1)
        out.write(record)
        summary.judged += 1
        summary.replies += len(record["judgments"])
        summary.unparsed_replies += sum(j["verdict"] is None for j in record["judgments"])
        summary.name_conflicts += sum(bool(j["name_conflict"]) for j in record["judgments"])
        if record["classification"]:
            summary.by_classification[record["classification"][0]] += 1
        if record["verdict"] is None:
            summary.unparsed += 1
        else:
            summary.by_category[record["verdict"]] += 1
        if record["agreement"] is not None and params.n > 1:
            summary.agreements.append(record["agreement"])
        bar.update(1)

    try:
        await asyncio.gather(*(one(line, case) for line, case in cases))
    finally:
        bar.close()
    return summary


def read_cases(path: str | Path, summary: JudgeSummary, done: set) -> list[tuple[int, dict]]:
    """The cases of ``path`` still to judge; bad lines are counted in ``summary`` with file, line and field."""
    from cobalt.io import iter_jsonl

    errors: list[RecordError] = []
    todo: list[tuple[int, dict]] = []
    seen: set = set()
    for line, case in iter_jsonl(path, skip_bad=True, errors=errors):
        summary.cases_read += 1
        problem = _case_problem(case, str(path), line)
        if problem is not None:
            summary.bad_cases += 1
            summary.errors.append(str(problem))
            continue
        if case["id"] in done:
            summary.already_done += 1
            continue
        if case["id"] in seen:
            summary.bad_cases += 1
            summary.errors.append(str(RecordError(path, line, "id", f"duplicate case id {case['id']!r}")))
            continue
        seen.add(case["id"])
        todo.append((line, case))
    for err in errors:
        summary.cases_read += 1
        summary.bad_cases += 1
        summary.errors.append(str(err))
    return todo


def _case_problem(case: Any, path: str, line: int) -> RecordError | None:
    if not isinstance(case, Mapping):
        return RecordError(path, line, None, f"expected a JSON object, got {type(case).__name__}")
    for name in CASE_FIELDS:
        if name not in case:
            return RecordError(path, line, name, "missing (is this a file written by `cobalt extract-hacking`?)")
        if not isinstance(case[name], str):
            return RecordError(path, line, name, f"expected a string, got {type(case[name]).__name__}")
    return None


PAPER_JUDGE_REASONING_EFFORT = "low"
"""``paper``: the original judge's ``reasoning_effort`` (its ``-r`` default), sent by the openai/litellm engines."""


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine flags of ``cobalt judge``: the shared set of :mod:`cobalt.engines.cli`
    (``--engine`` defaulting to openai, ``--model``, ``--base-url``, ``--api-key`` and the
    paper's ``--openai_api_key`` ...), plus the paper's ``--model_name`` and ``--engine-option``."""
    from cobalt.engines.cli import add_engine_arguments

    add_engine_arguments(parser, default_engine=DEFAULT_ENGINE)
    group = parser.add_argument_group("judge engine")
    group.add_argument("--model_name", dest="model",
                       help="the paper's flag: same as --model (the paper's judge: gpt-5-2025-08-07)")
    group.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                       help="extra backend option, VALUE parsed as JSON when it is JSON (repeatable), "
                       "e.g. max_tokens_field=max_completion_tokens")


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The backend options of the ``--engine-option KEY=VALUE`` flags (VALUE parsed as JSON when it is JSON)."""
    options: dict[str, Any] = {}
    for item in args.engine_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--engine-option {item!r}: expected KEY=VALUE")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def _check_engine_options(name: str, options: Mapping[str, Any]) -> None:
    # engine_from_args leaves out options a backend does not take; an --engine-option the
    # user typed must not vanish silently, so name it here.
    from cobalt.engines.base import ENGINES, EngineError, engine_factory
    from cobalt.engines.cli import _accepted

    if not options or name not in ENGINES:
        return
    try:
        accepted = _accepted(engine_factory(name))
    except EngineError:
        return  # engine_from_args reports the missing package
    unknown = sorted(k for k in options if accepted is not None and k not in accepted)
    if unknown:
        raise EngineError(f"--engine-option: engine {name!r} takes no option {', '.join(map(repr, unknown))}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt judge`` (the paper's ``--model_name/--input_file/--output_file/--openai_api_key`` work too)."""
    parser.add_argument("--input", "--input_file", dest="input", required=True,
                        help="cases JSONL written by `cobalt extract-hacking`")
    parser.add_argument("--output", "--output_file", dest="output", required=True,
                        help="judged cases JSONL (appended, resumable by id); <output>.summary.json beside it")
    add_engine_flags(parser)
    sampling = parser.add_argument_group("sampling")
    from cobalt.cli_support import add_alias, fraction, non_negative_float, non_negative_int, positive_int

    sampling.add_argument("--temperature", type=non_negative_float, default=DEFAULT_TEMPERATURE,
                          help="sampling temperature (0: greedy)")
    sampling.add_argument("--top-p", type=fraction, default=DEFAULT_TOP_P, help="nucleus sampling mass, in (0, 1]")
    sampling.add_argument("--max-new-tokens", type=positive_int, default=DEFAULT_MAX_NEW_TOKENS,
                          help="reply length limit in tokens (reasoning included for reasoning models)")
    sampling.add_argument("--seed", type=int, default=None, help="sampling seed, where the backend supports one")
    sampling.add_argument("--judgments", "-n", "--num-completions", "--num_completions", dest="judgments",
                          type=positive_int, default=1,
                          help="replies per case: under paper one classification per reply, no vote (the "
                          "original's -n); under cobalt combined by majority vote with the agreement rate")
    parser.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                        help="whole-case retries on top of the engine's own retries (exponential backoff; "
                        "0 keeps one retry layer)")
    parser.add_argument("--backoff", type=float, default=1.0, help="first backoff delay in seconds (doubles each retry)")
    parser.add_argument("--max-cases", dest="concurrency", type=positive_int, default=DEFAULT_CONCURRENCY,
                        help="judge cases in flight at once")
    add_alias(parser, "--concurrency", dest="concurrency", type=positive_int)
    parser.add_argument("--template-dir", default=None,
                        help="folder with judge_system.txt / judge.txt to use instead of the packaged templates "
                        "(default: $COBALT_TEMPLATE_DIR)")
    parser.add_argument("--limit", type=non_negative_int, default=None,
                        help="judge at most this many new cases (0: none)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_profile_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt judge``."""
    from cobalt.engines import EngineError, SamplingParams
    from cobalt.engines.cli import default_reasoning_effort, engine_from_args
    from cobalt.health import BreakerOpen, PreflightError, check_engine
    from cobalt.io import JsonlAppender, resume_guard, save_settings, write_json_atomic
    from cobalt.prompts import load_template

    profile = profile_from_args(args)
    if args.judgments < 1:
        print("cobalt judge: --judgments must be at least 1", file=sys.stderr)
        return 2
    input_path, output = Path(args.input), Path(args.output)
    if not input_path.is_file():
        print(f"cobalt judge: {input_path}: no such file", file=sys.stderr)
        return 1
    try:
        params = SamplingParams(n=args.judgments, temperature=args.temperature, top_p=args.top_p,
                                max_new_tokens=args.max_new_tokens, seed=args.seed)
        extra = engine_options(args)
        _check_engine_options(args.engine, extra)
        default_reasoning_effort(args, PAPER_JUDGE_REASONING_EFFORT, profile.value)
        engine = engine_from_args(args, **extra)
    except (ValueError, EngineError) as exc:
        print(f"cobalt judge: {exc}", file=sys.stderr)
        return 2
    settings, refused = resume_guard(args, [input_path], profile=profile.value)
    if refused:
        print(f"cobalt judge: {refused}", file=sys.stderr)
        return 2
    try:
        check_engine(engine)
    except PreflightError as exc:
        print(f"cobalt judge: {exc}", file=sys.stderr)
        return 1
    save_settings(output, "cobalt judge", settings)
    summary = JudgeSummary(profile.value)
    stopped = None
    with JsonlAppender(output) as out:
        todo = read_cases(input_path, summary, out.done)
        if args.limit is not None:
            todo = todo[: max(0, args.limit)]

        async def main() -> None:
            try:
                await judge_cases(engine, todo, out, profile=profile, params=params, retries=args.retries,
                                  backoff_s=args.backoff, concurrency=args.concurrency,
                                  template_dir=args.template_dir, summary=summary,
                                  progress=not args.no_progress, source=str(input_path))
            finally:
                await engine.aclose()

        try:
            asyncio.run(main())
        except BreakerOpen as exc:
            stopped = str(exc)
    extraction = input_path.with_name(input_path.name + ".summary.json")
    config = {
        "profile": profile.value,
        "input_file": str(input_path),
        "engine": engine.describe(),
        "sampling": {"n": params.n, "temperature": params.temperature, "top_p": params.top_p,
                     "max_new_tokens": params.max_new_tokens, "seed": params.seed},
        "retries": args.retries,
        "templates": {name: load_template(name, args.template_dir)[1] for name in ("judge_system", "judge")},
    }
    extra = {"config": config}
    if extraction.is_file():
        extra["extraction"] = json.loads(extraction.read_text(encoding="utf-8"))
    write_json_atomic(output.with_name(output.name + ".summary.json"), {**summary.to_dict(), **extra})
    d = summary.to_dict()
    print(f"judge -> {output}: {summary.judged} judged, {summary.already_done} already there, "
          f"{summary.failed} failed, {summary.unparsed} without a verdict, {summary.bad_cases} bad")
    print("  " + ", ".join(f"{k}: {v}" for k, v in d["by_category"].items()))
    if profile is Profile.PAPER:
        print(f"  Final Classification Counts: {d['by_classification']}")
    if d["mean_agreement"] is not None:
        print(f"  mean agreement over {params.n} judgments: {d['mean_agreement']:.3f}")
    for err in summary.errors[:20]:
        print(f"  {err}", file=sys.stderr)
    if stopped is not None:
        print(f"cobalt judge: {stopped}", file=sys.stderr)
        return 1
    return 1 if summary.failed or (summary.cases_read and summary.bad_cases == summary.cases_read) else 0
