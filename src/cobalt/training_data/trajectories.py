"""Offline trajectories -> partial-trajectory bandit prompts (``cobalt build-prompts``).

Reads multi-turn inference records (one line per problem, see
:mod:`cobalt.data.records` and ``docs/TRAJECTORIES.md``) and writes the
contexts of Cobalt's online bandit learning (METHOD §4, corrected by §9):

1. Dynamic sampling: a problem whose first-turn samples are all fully correct
   on ALL its tests (public and hidden) is too easy and dropped
   (``--too-easy-by public`` judges the public tests only).
2. Per trajectory the improvement range ``d = max - min`` of its per-turn pass
   rates (public and hidden pass rates mixed by their test counts).
3. Training keeps trajectories with ``d > 0`` that are fully correct at some
   turn, down-sampled to at most ``m`` by :func:`max_variance_subset`;
   evaluation (``--is-test``) keeps ``d > 0`` and then only the trajectory
   with the smallest ``d``, cut to its first ``--history-turns`` turns.
4. Each kept trajectory gives prompts whose history ends with the feedback
   after turn ``t`` (``t`` = 1 .. ``--history-turns``). The early stop depends
   on ``--profile`` (``--stop-when``): ``paper`` stops (a) once the last two
   feedback texts are both the all-public-tests-passed message, and (b) at
   ``t = 1`` only, when the pass rate is 1.0 at turns 0 and 2 (the original's
   two rules, METHOD §9); ``cobalt`` stops once the program was fully correct
   in two consecutive turns. Both stop once a prompt is longer than
   ``--max-prompt-tokens`` under the policy's chat template. Every problem
   that is not too easy also gives one first-turn prompt.
5. Past answers in a history: :func:`cobalt.text.history_text`, i.e. with
   ``--enable-thinking`` the text after the last ``</think>``, stripped and cut
   to ``--history-max-chars``; without it (and for API models) the full response.
   Every feedback, the all-passed sentence included, is wrapped in the repair
   instruction.
6. Rows are shuffled with a fixed seed and written atomically (JSONL or
   parquet by the output's suffix), with a summary JSON beside them that
   records the configuration and the profile.

Every number of the method is a flag whose default is the paper's.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sys
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from cobalt.data.problems import ProblemRecord, tests_json
from cobalt.data.records import SampleRecord, TrajectoryRecord, TurnRecord
from cobalt.defaults import HISTORY_MAX_CHARS
from cobalt.io import counts_dict, good_records, iter_jsonl_keep_going
from cobalt.profile import Profile, add_profile_argument, profile_from_args, resolve_profile

FULLY_CORRECT = 1.0 - 1e-9
"""A turn whose pass rate reaches this is fully correct (pass rates are ratios of counts)."""
STOP_RULES = ("paper", "public", "correct")
"""Early-stop rules of partial-trajectory prompts (see :class:`BuildConfig`)."""
RANGE_DECIMALS = 12
"""Improvement ranges are rounded to this many decimals so that equal ranges reached
through different float sums (0.4 - 0.2 and 1.0 - 0.8) tie exactly."""

Messages = list[dict[str, str]]
TokenCount = Callable[[Messages], int]


@dataclass(frozen=True)
class BuildConfig:
    """Settings of the prompt builder; defaults are the paper's (METHOD §4)."""

    is_test: bool = False
    """Evaluation mode: one trajectory per problem (smallest d), history cut to ``history_turns``."""
    history_turns: int = 3
    """Largest number of model turns in a prompt's history (t = 1 .. this)."""
    max_trajectories: int = 4
    """m of max-variance down-sampling: trajectories kept per problem in training."""
    variance_pool: int = 16
    """n of max-variance down-sampling: how many of the lowest-d trajectories are considered."""
    max_prompt_tokens: int = 10_000
    """Stop a trajectory's prompts once one is longer than this (<= 0: no limit)."""
    history_max_chars: int = HISTORY_MAX_CHARS
    """With thinking enabled, each past answer is the text after the last ``</think>``, cut to
    this many characters (<= 0: no cut)."""
    enable_thinking: bool | None = None
    """The policy thinks: histories keep only the answer after ``</think>``. None: each record's
    own ``enable_thinking`` (the cut its rollout made, as the original's prompts reuse the
    rollout's conversations), False when the record does not say."""
    too_easy_by: str = "full"
    """'full': too easy when every first-turn sample passes all tests, public and hidden (the
    original, METHOD §9); 'public': when every first-turn sample passes the public tests."""
    stop_when: str | None = None
    """Early stop of a trajectory's prompts: 'paper' (the original's two rules, see the module
    docstring), 'public' (rule (a) alone: two consecutive all-public-passed feedbacks) or
    'correct' (two consecutive fully correct turns). None: the profile's ('paper' / 'correct')."""
    seed: int = 42
    """Seed of the final shuffle."""
    template_dir: str | None = None
    """Folder with prompt template overrides (see cobalt.prompts)."""
    profile: str = "paper"
    """'paper' or 'cobalt' (docs/FIDELITY.md); picks the default of ``stop_when``."""

    def __post_init__(self) -> None:
        profile = resolve_profile(self.profile)
        object.__setattr__(self, "profile", profile.value)
        if self.stop_when is None:
            object.__setattr__(self, "stop_when", "paper" if profile is Profile.PAPER else "correct")
        if self.history_turns < 1:
            raise ValueError(f"history_turns must be >= 1, got {self.history_turns}")
        if self.max_trajectories < 1 or self.variance_pool < self.max_trajectories:
            raise ValueError(
                f"need 1 <= max_trajectories <= variance_pool, got m={self.max_trajectories}, n={self.variance_pool}"
            )
        if self.too_easy_by not in ("public", "full"):
            raise ValueError(f"too_easy_by must be 'public' or 'full', got {self.too_easy_by!r}")
        if self.stop_when not in STOP_RULES:
            raise ValueError(f"stop_when must be one of {', '.join(STOP_RULES)}, got {self.stop_when!r}")


@dataclass
class BuildSummary:
    """What the builder read, dropped and wrote."""

    records_read: int = 0
    """Lines read (valid JSON or not)."""
    records_valid: int = 0
    bad_records: int = 0
    problems_too_easy: int = 0
    problems_considered: int = 0
    """Problems left after dynamic sampling (each gives a first-turn prompt)."""
    problems_kept: int = 0
    """Problems with at least one kept trajectory."""
    trajectories_kept: int = 0
    prompts: int = 0
    first_turn_prompts: int = 0
    partial_prompts: int = 0
    early_stops: int = 0
    """Trajectories whose prompts stopped by the early-stop rule (``stop_when``)."""
    prompts_cut_by_length: int = 0
    """Trajectories whose prompts stopped because a prompt exceeded the token limit."""
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready summary (the first 100 error messages)."""
        return counts_dict(self)

    def format(self) -> str:
        """Human-readable report."""
        lines = [
            f"records read:              {self.records_read} ({self.records_valid} valid)",
            f"bad records (skipped):     {self.bad_records}",
            f"problems too easy:         {self.problems_too_easy}",
            f"problems considered:       {self.problems_considered}",
            f"problems kept:             {self.problems_kept}",
            f"trajectories kept:         {self.trajectories_kept}",
            f"prompts:                   {self.prompts} "
            f"({self.first_turn_prompts} first-turn, {self.partial_prompts} partial)",
            f"early stops:               {self.early_stops}",
            f"prompts cut by length:     {self.prompts_cut_by_length}",
        ]
        lines += [f"  error: {e}" for e in self.errors[:5]]
        return "\n".join(lines)


@dataclass(frozen=True)
class PromptRow:
    """One bandit context: a chat history that asks the policy for its next program."""

    id: str
    """Unique row id: ``<problem>/t0`` or ``<problem>/s<sample>/t<turn>``."""
    problem_id: str
    sample_index: int | None
    """Index of the trajectory in the record's ``samples`` (None for first-turn prompts)."""
    turn: int
    """Model turns in the history (0: the first-turn prompt)."""
    messages: Messages
    prev_best_pass_rate: float
    test_cases: str
    """All tests (public, then hidden) as a JSON string: the reward's ground truth."""
    public_test_cases: str
    difficulty: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready row."""
        return asdict(self)


# ---------------------------------------------------------------- selection rules


def max_variance_subset(diffs: Sequence[float], m: int = 4, n: int = 16) -> list[int]:
    """Indices into ``diffs`` of at most ``m`` values with the largest variance, of a fixed form.

    Max-variance down-sampling (Xu et al. 2025) as METHOD §4 states it. With
    ``k = len(diffs)``:

    - ``k <= m``: every index, in input order.
    - otherwise the indices are sorted by ``d`` ascending (stable: equal values
      keep their input order) and the *pool* is the first ``min(n, k)`` of
      them, i.e. the ``n`` smallest. Among the sets "the ``j`` smallest plus
      the ``m - j`` largest of the pool", ``j = m, m-1, ..., 1``, the one with
      the largest population variance of ``d`` wins; ties go to the earlier
      (larger) ``j``. Variances are compared exactly (rational arithmetic),
      so ties are real ties. The result lists the chosen indices in pool order.

    >>> max_variance_subset([0.5, 0.1, 0.9, 0.3, 0.7], m=2)
    [1, 2]
    """
    if m < 1 or n < m:
        raise ValueError(f"need 1 <= m <= n, got m={m}, n={n}")
    if any(d != d for d in diffs):
        raise ValueError("diffs must not contain NaN")
    if len(diffs) <= m:
        return list(range(len(diffs)))
    order = sorted(range(len(diffs)), key=lambda i: diffs[i])
    pool = order[: min(n, len(order))]
    best: list[int] = []
    best_var: Fraction | None = None
    for j in range(m, 0, -1):
        candidate = pool[:j] + pool[len(pool) - (m - j):]
        var = _exact_variance([diffs[i] for i in candidate])
        if best_var is None or var > best_var:
            best, best_var = candidate, var
    return best


def _exact_variance(values: Sequence[float]) -> Fraction:
    exact = [Fraction(v) for v in values]
    mean = sum(exact, Fraction(0)) / len(exact)
    return sum(((v - mean) ** 2 for v in exact), Fraction(0)) / len(exact)


def improvement_range(rates: Sequence[float], *, exact: bool = False) -> float:
    """``d = max - min`` of a trajectory's per-turn pass rates (rounded, see :data:`RANGE_DECIMALS`;
    ``exact``: the raw float difference, as the original sorts it)."""
    if not rates:
        return 0.0
    d = max(rates) - min(rates)
    return d if exact else round(d, RANGE_DECIMALS)


def is_too_easy(record: TrajectoryRecord, by: str = "full") -> bool:
    """Dynamic sampling: True when every sample's first turn passes ('public' tests or 'full'y)."""
    if by == "public":
        return all(s.turns[0].public.all_passed for s in record.samples)
    return all(record.pass_rates(s)[0] >= FULLY_CORRECT for s in record.samples)


def select_trajectories(record: TrajectoryRecord, config: BuildConfig) -> list[int]:
    """Indices of the samples whose partial trajectories become prompts."""
    rates = [record.pass_rates(s) for s in record.samples]
    diffs = [improvement_range(r) for r in rates]
    if config.is_test:
        if config.profile == "paper":  # the original sorts the raw differences (no rounding)
            diffs = [improvement_range(r, exact=True) for r in rates]
        kept = [i for i, d in enumerate(diffs) if d > 0]
        return [min(kept, key=lambda i: diffs[i])] if kept else []
    kept = [i for i, d in enumerate(diffs) if d > 0 and max(rates[i]) >= FULLY_CORRECT]
    chosen = max_variance_subset([diffs[i] for i in kept], config.max_trajectories, config.variance_pool)
    return [kept[c] for c in chosen]


# ---------------------------------------------------------------- messages


def history_messages(problem: ProblemRecord, sample: SampleRecord, t: int, config: BuildConfig,
                     record_thinking: bool | None = None) -> Messages:
    """The chat up to and including the feedback after model turn ``t`` (1-based): the
    conversation of :mod:`cobalt.rollout.conversation` replayed over the sample's turns.

    The history cut follows ``config.enable_thinking`` when set, else ``record_thinking``
    (the record's own flag), else no cut."""
    from cobalt.rollout.conversation import replay

    thinking = config.enable_thinking if config.enable_thinking is not None else bool(record_thinking)
    max_chars = config.history_max_chars if config.history_max_chars > 0 else sys.maxsize
    return replay(problem, sample.turns[:t], enable_thinking=thinking, max_chars=max_chars,
                  template_dir=config.template_dir)


class ChatTokenCounter:
    """Prompt length in tokens under a tokenizer's chat template, with the generation prompt.

    Counts what veRL's length filter counts: ``apply_chat_template(messages,
    tokenize=True, add_generation_prompt=True)``. (transformers 5 returns a
    mapping there, whose ``len`` is its number of keys, not of tokens.)
    """

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict | None = None):
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})

    @classmethod
    def from_pretrained(cls, name_or_path: str, chat_template_kwargs: dict | None = None) -> "ChatTokenCounter":
        """Load the tokenizer of a model (hub name or local folder); loaded once per process."""
        return cls(_load_tokenizer(str(name_or_path)), chat_template_kwargs)

    def __call__(self, messages: Messages) -> int:
        out = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, **self.kwargs)
        if hasattr(out, "keys"):
            out = out["input_ids"]
        if out and isinstance(out[0], list):
            out = out[0]
        return len(out)


@functools.lru_cache(maxsize=4)
def _load_tokenizer(name_or_path: str) -> Any:
    from cobalt.hub import load_tokenizer

    return load_tokenizer(name_or_path, flag="--tokenizer")


# ---------------------------------------------------------------- prompts


def stops_before(t: int, turns: Sequence[TurnRecord], rates: Sequence[float], rule: str) -> bool:
    """True when the prompt after model turn ``t`` (1-based) and every later one are not emitted.

    ``paper``: (a) the feedbacks after turns ``t-2`` and ``t-1`` (0-based) are both the
    all-public-passed message, or (b) ``t == 1`` and the pass rate is 1.0 at turns 0 and 2
    (the original's two rules, METHOD §9). ``public``: rule (a) alone. ``correct``: turns
    ``t-2`` and ``t-1`` are both fully correct.
    """
    if rule == "correct":
        return t >= 2 and all(rates[i] >= FULLY_CORRECT for i in (t - 2, t - 1))
    if t >= 2 and all(turns[i].public.all_passed for i in (t - 2, t - 1)):
        return True
    return rule == "paper" and t == 1 and len(rates) > 2 and rates[0] >= FULLY_CORRECT and rates[2] >= FULLY_CORRECT


def partial_prompts(
    record: TrajectoryRecord,
    sample_index: int,
    config: BuildConfig,
    count_tokens: TokenCount | None,
    summary: BuildSummary,
) -> list[PromptRow]:
    """Prompts of one kept trajectory: history through turn t's feedback, t = 1 .. history_turns."""
    sample = record.samples[sample_index]
    rates = record.pass_rates(sample)
    problem = record.problem
    rows: list[PromptRow] = []
    for t in range(1, min(config.history_turns, len(sample.turns)) + 1):
        if stops_before(t, sample.turns, rates, config.stop_when):
            summary.early_stops += 1
            break
        messages = history_messages(problem, sample, t, config, record.enable_thinking)
        if config.max_prompt_tokens > 0 and count_tokens is not None and count_tokens(messages) > config.max_prompt_tokens:
            summary.prompts_cut_by_length += 1
            break
        rows.append(_row(problem, sample_index, t, messages, max(rates[:t])))
    return rows


def _row(problem: ProblemRecord, sample_index: int | None, turn: int, messages: Messages, prev_best: float) -> PromptRow:
    rid = f"{problem.id}/t0" if sample_index is None else f"{problem.id}/s{sample_index}/t{turn}"
    return PromptRow(
        id=rid,
        problem_id=problem.id,
        sample_index=sample_index,
        turn=turn,
        messages=messages,
        prev_best_pass_rate=float(prev_best),
        test_cases=tests_json(problem.tests),
        public_test_cases=tests_json(problem.public),
        difficulty=problem.difficulty,
    )


def process_record(
    record: TrajectoryRecord, config: BuildConfig, count_tokens: TokenCount | None, summary: BuildSummary
) -> list[PromptRow]:
    """All prompt rows of one problem (none when it is too easy)."""
    if is_too_easy(record, config.too_easy_by):
        summary.problems_too_easy += 1
        return []
    summary.problems_considered += 1
    from cobalt.rollout.conversation import first_turn_messages

    rows = [_row(record.problem, None, 0, first_turn_messages(record.problem, config.template_dir), 0.0)]
    chosen = select_trajectories(record, config)
    if chosen:
        summary.problems_kept += 1
        summary.trajectories_kept += len(chosen)
    for index in chosen:
        rows.extend(partial_prompts(record, index, config, count_tokens, summary))
    summary.first_turn_prompts += 1
    summary.partial_prompts += len(rows) - 1
    summary.prompts += len(rows)
    return rows


def iter_records(path: str | os.PathLike, summary: BuildSummary,
                 profile: "str | Profile | None" = None) -> Iterator[TrajectoryRecord]:
    """Valid records of an inference file; bad ones are counted, reported on stderr and skipped.
    ``profile`` picks the code-extraction rule for turns without a ``code`` field."""
    def parse(obj: Any, line: int) -> TrajectoryRecord:
        return TrajectoryRecord.from_dict(obj, path=str(path), line=line, profile=profile)

    for _, record in good_records(iter_jsonl_keep_going(path), parse, summary, echo=True):
        summary.records_valid += 1
        yield record


def build_prompts(
    input_path: str | os.PathLike,
    config: BuildConfig,
    count_tokens: TokenCount | None,
    *,
    progress: bool = False,
) -> tuple[list[PromptRow], BuildSummary]:
    """Read an inference file and return the shuffled prompt rows and the summary."""
    summary = BuildSummary()
    rows: list[PromptRow] = []
    records: Iterator[TrajectoryRecord] = iter_records(input_path, summary, config.profile)
    if progress:
        from cobalt.cli_support import progress_iter
        from cobalt.data.problems import count_local_records

        records = progress_iter(records, count_local_records(input_path), "build-prompts", "problems")
    for record in records:
        rows.extend(process_record(record, config, count_tokens, summary))
    random.Random(config.seed).shuffle(rows)
    return rows, summary


# ---------------------------------------------------------------- output


def write_rows(rows: Sequence[dict], path: str | os.PathLike) -> None:
    """Write dict rows to ``path`` atomically: parquet for ``.parquet``, JSONL otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(list(rows)), tmp)
    else:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def summary_path(output: str | os.PathLike) -> Path:
    """Where the summary of ``output`` goes: ``<output>.summary.json``."""
    output = Path(output)
    return output.with_name(output.name + ".summary.json")


# ---------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt build-prompts`` (the paper's underscore spellings are accepted too)."""
    d = BuildConfig()
    parser.add_argument("--input", "--input-file", "--input_file", "-i", dest="input", required=True,
                        help="multi-turn inference records, one JSON line per problem (docs/TRAJECTORIES.md)")
    parser.add_argument("--output", "--output-file", "--output_file", "-o", dest="output", required=True,
                        help="prompt rows to write: .parquet for parquet, anything else for JSONL; "
                        "the summary goes to <output>.summary.json")
    parser.add_argument("--model-name", "--model_name", "--tokenizer", dest="model_name", default="Qwen/Qwen3-8B",
                        help="policy model (hub name or local folder) whose tokenizer and chat template "
                        "measure prompt lengths")
    parser.add_argument("--chat-template-kwargs", default="{}",
                        help='extra arguments of apply_chat_template as JSON, e.g. \'{"enable_thinking": false}\'')
    parser.add_argument("--is-test", "--is_test", dest="is_test", action="store_true",
                        help="evaluation mode: keep one trajectory per problem (smallest improvement range), "
                        "history cut to --history-turns turns")
    parser.add_argument("--history-turns", type=int, default=d.history_turns,
                        help="most model turns in a prompt's history: prompts after turn t = 1..this")
    parser.add_argument("--max-trajectories", "-m", type=int, default=d.max_trajectories,
                        help="m of max-variance down-sampling: trajectories kept per problem (training)")
    parser.add_argument("--variance-pool", "-n", type=int, default=d.variance_pool,
                        help="n of max-variance down-sampling: only the n lowest-d trajectories are considered")
    parser.add_argument("--max-prompt-tokens", type=int, default=d.max_prompt_tokens,
                        help="stop a trajectory's prompts once one is longer than this many tokens (<=0: no limit, "
                        "no tokenizer loaded)")
    parser.add_argument("--history-max-chars", type=int, default=d.history_max_chars,
                        help="with --thinking on, past answers keep only the text after the last </think>, cut "
                        "to this many characters (<=0: no cut)")
    from cobalt.cli_support import add_alias, on_off

    parser.add_argument("--thinking", dest="enable_thinking", type=on_off, default=None, metavar="{on,off}",
                        help="on: the policy is a thinking model, histories keep the answer after the last "
                        "</think>, stripped and cut to --history-max-chars (the original's --enable_thinking); "
                        "off: the full response is kept; default: each record's own enable_thinking (the "
                        "rollout's cut), else full responses")
    add_alias(parser, "--enable-thinking", dest="enable_thinking", action="store_const", const=True)
    add_alias(parser, "--enable_thinking", dest="enable_thinking", action="store_const", const=True)
    add_alias(parser, "--no-enable-thinking", dest="enable_thinking", action="store_const", const=False)
    parser.add_argument("--too-easy-by", choices=("full", "public"), default=d.too_easy_by,
                        help="dynamic sampling drops a problem whose first-turn samples all pass every test, public "
                        "and hidden (full, the original) or all pass the public tests (public)")
    parser.add_argument("--stop-when", choices=STOP_RULES, default=None,
                        help="early stop of a trajectory's prompts: 'paper' (profile paper's default: two consecutive "
                        "all-public-passed feedbacks, or at t=1 a pass rate of 1.0 at turns 0 and 2), 'public' (the "
                        "first rule alone) or 'correct' (profile cobalt's default: two consecutive fully correct turns)")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the final shuffle")
    parser.add_argument("--template-dir", default=None,
                        help="folder with prompt template overrides (default: $COBALT_TEMPLATE_DIR or the packaged ones)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_profile_argument(parser)


def config_from_args(args: argparse.Namespace) -> BuildConfig:
    """The :class:`BuildConfig` that the parsed flags describe."""
    return BuildConfig(
        is_test=args.is_test,
        history_turns=args.history_turns,
        max_trajectories=args.max_trajectories,
        variance_pool=args.variance_pool,
        max_prompt_tokens=args.max_prompt_tokens,
        history_max_chars=args.history_max_chars,
        enable_thinking=args.enable_thinking,
        too_easy_by=args.too_easy_by,
        stop_when=args.stop_when,
        seed=args.seed,
        template_dir=args.template_dir,
        profile=profile_from_args(args).value,
    )


def run(args: argparse.Namespace) -> int:
    """Build the prompts, write them and the summary; 1 when every record was bad, 2 on bad flags."""
    from cobalt.io import write_json_atomic

    try:
        config = config_from_args(args)
        chat_kwargs = json.loads(args.chat_template_kwargs)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    count = ChatTokenCounter.from_pretrained(args.model_name, chat_kwargs) if config.max_prompt_tokens > 0 else None
    rows, summary = build_prompts(args.input, config, count, progress=not args.no_progress)
    write_rows([r.to_dict() for r in rows], args.output)
    report = {"summary": summary.to_dict(), "profile": config.profile, "config": asdict(config), "input": str(args.input),
              "output": str(args.output), "model_name": args.model_name, "chat_template_kwargs": chat_kwargs}
    write_json_atomic(summary_path(args.output), report)
    print(summary.format())
    print(f"wrote {len(rows)} prompts to {args.output} (summary: {summary_path(args.output)})")
    return 1 if summary.records_valid == 0 and summary.bad_records else 0
