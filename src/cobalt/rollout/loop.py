"""The rollout loop: single- and multi-turn inference in one place (METHOD §4, §6, §9).

Single-turn inference is the loop with zero repair turns. Per problem:

1. turn 0: ``samples`` responses to system + problem instruction (one engine
   request with ``n = samples``), or the cached first turns of an earlier run
   (``first_turns``: the paper's workflow, where every multi-turn run with a
   model starts from the same first turns);
2. then ``repair_turns`` repair turns per sample, every one of them (no early
   stop, even after all public tests pass). The conversation is system, user,
   then (assistant, user) pairs, built by :mod:`cobalt.rollout.conversation`:
   the assistant message is :func:`cobalt.text.history_text` of the response (the
   text after the last ``</think>`` cut to 6,000 characters with ``enable_thinking``,
   else the whole response), the user message the repair instruction around the
   turn's feedback.

Every turn's program is the last block of the RAW response (thinking included),
run on the public tests only through :class:`cobalt.execution.client.EvaluatorClient`.

Saturation: each sample of each problem is its own task; while one waits for
the model, another's program is in the sandbox. ``max_problems`` bounds the
problems in flight, ``max_requests`` the engine requests in flight, and the
evaluator client's ``max_concurrency`` the programs in flight.

Output: one inference record per problem (docs/TRAJECTORIES.md), appended and
flushed as soon as the problem is done; a rerun skips the problems already in
the output (resume, also after ``kill -9``).
"""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from cobalt.data.problems import ProblemRecord
from cobalt.data.records import inference_record, public_field, turn_dict
from cobalt.defaults import HISTORY_MAX_CHARS
from cobalt.engines.base import Completion, Engine, SamplingParams
from cobalt.execution.base import TestCases
from cobalt.health import BreakerOpen, FailureBreaker, InfrastructureError
from cobalt.io import counts_dict
from cobalt.rollout.bounds import bound_completion
from cobalt.rollout.conversation import Step, environment_step, extend, first_turn_messages, judge_program
from cobalt.text import extract_code

RECORD_FIELDS_DROPPED = ("samples", "hidden_eval")
"""Fields of an input record that a rollout replaces (an inference record given as input)."""


@dataclass(frozen=True)
class RolloutConfig:
    """What a rollout does beyond sampling. Defaults: the paper's evaluation run."""

    samples: int = 16
    """Trajectories per problem (first-turn samples)."""
    repair_turns: int = 8
    """Repair turns after the first (8 for evaluation, 2 for training data; 0: single-turn)."""
    enable_thinking: bool = False
    """Keep only the text after the last ``</think>`` (cut to ``history_max_chars``) in the history."""
    history_max_chars: int = HISTORY_MAX_CHARS
    max_problems: int = 16
    """Problems in flight at once."""
    max_requests: int = 64
    """Engine requests in flight at once (each request is one conversation)."""
    profile: str = "paper"
    template_dir: str | None = None
    seed: int | None = None
    """Base seed: each request gets a seed derived from it, the problem, the sample and the turn."""

    def __post_init__(self) -> None:
        for name in ("samples", "max_problems", "max_requests", "history_max_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"RolloutConfig.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.repair_turns, int) or self.repair_turns < 0:
            raise ValueError(f"RolloutConfig.repair_turns must be a non-negative integer, got {self.repair_turns!r}")

    def to_dict(self) -> dict:
        """JSON-ready form for the run configuration."""
        return dataclasses.asdict(self)


@dataclass
class RolloutStats:
    """Counters of one rollout run (printed and saved in the run configuration)."""

    problems_total: int = 0
    problems_resumed: int = 0
    """Already in the output from an earlier run, skipped."""
    problems_done: int = 0
    problems_failed: int = 0
    requests: int = 0
    responses: int = 0
    cached_first_turns: int = 0
    rejudged_first_turns: int = 0
    """Cached first turns judged again (every one under paper; under cobalt those judged on other public tests)."""
    programs_run: int = 0
    no_code: int = 0
    evaluator_errors: int = 0
    """Evaluator calls that could not judge a program (infrastructure errors; never fed to the model)."""
    engine_errors: int = 0
    completion_tokens: int = 0
    responses_cut: int = 0
    """Responses beyond max_new_tokens or 1 MiB, cut before storing (cobalt.rollout.bounds)."""
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form (first 100 errors)."""
        return counts_dict(self)


def request_seed(base: int | None, problem_id: str, sample: int, turn: int) -> int | None:
    """A per-request seed derived from ``base`` (None stays None), stable across runs and resumes."""
    if base is None:
        return None
    digest = hashlib.sha256(f"{base}/{problem_id}/{sample}/{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _base_seed(params: SamplingParams, config: RolloutConfig) -> int | None:
    return params.seed if config.seed is None else config.seed


class Limiter:
    """Bounds engine requests in flight (built inside the running loop)."""

    def __init__(self, max_requests: int):
        self.sem = asyncio.Semaphore(max_requests)


async def _generate(engine: Engine, messages: Sequence[Mapping[str, str]], params: SamplingParams,
                    limiter: Limiter, stats: RolloutStats, breaker: FailureBreaker | None = None) -> list[Completion]:
    async with limiter.sem:
        if breaker is not None:
            breaker.check()
        stats.requests += 1
        try:
            out = await engine.generate([list(messages)], params)
        except Exception as exc:
            stats.engine_errors += 1
            if breaker is not None:
                breaker.failure(exc)
            raise
        if breaker is not None:
            breaker.success()
    completions = [bound_completion(c, params.max_new_tokens) for c in out[0]]
    stats.responses_cut += sum("cut" in c.extra for c in completions)
    if len(completions) != params.n:
        raise RuntimeError(f"engine returned {len(completions)} completions, expected {params.n}")
    stats.responses += len(completions)
    stats.completion_tokens += sum(int(c.completion_tokens or 0) for c in completions)
    return completions


async def judge_public(program: str | None, problem: ProblemRecord, client: Any, stats: RolloutStats,
                       breaker: FailureBreaker | None = None, *, profile: str = "paper") -> dict:
    """The public-test result of one program as an inference record's ``public`` field
    (:func:`cobalt.rollout.conversation.judge_program`), counted in ``stats``.

    No program: every public test fails with the profile's no-code text. An
    evaluator call that raises, or a result marked as an infrastructure error,
    raises :class:`~cobalt.health.InfrastructureError` in both profiles: such a
    failure is never a score and never feedback to the model (the original feeds
    the caller's exception text back; docs/FIDELITY.md); the problem is left out
    and redone. Each call is counted by ``breaker`` when given.
    """
    return (await _judged(judge_program(program, problem.public, client, profile=profile, breaker=breaker),
                          stats)).public


async def _step(response: str, problem: ProblemRecord, client: Any, stats: RolloutStats,
                profile: str, breaker: FailureBreaker | None = None) -> tuple[str | None, dict]:
    step = await _judged(environment_step(response, problem.public, client, profile=profile, breaker=breaker),
                         stats)
    return step.program, step.public


async def _judged(judging, stats: RolloutStats) -> Step:
    """Await one judging, counting it in ``stats`` (an infrastructure failure too, then re-raised)."""
    try:
        step = await judging
    except InfrastructureError:
        stats.programs_run += 1
        stats.evaluator_errors += 1
        raise
    _count(step, stats)
    return step


def _count(step: Step, stats: RolloutStats) -> None:
    if step.no_code:
        stats.no_code += 1
    else:
        stats.programs_run += 1
    if step.evaluator_error:
        stats.evaluator_errors += 1


def _turn_record(response: str, completion: Completion | None, program: str | None, public: dict) -> dict:
    if completion is None:
        return turn_dict(response, program, public)
    return turn_dict(response, program, public, finish_reason=completion.finish_reason,
                     completion_tokens=completion.completion_tokens, engine=True, cut=completion.extra.get("cut"))


def _cached_turn(turn: Mapping[str, Any], profile: str) -> dict:
    """A cached first turn as this run records it: its fields kept (the public result
    included, not re-executed), an earlier hidden evaluation dropped, ``cached`` set."""
    response = turn["response"]
    program = turn["code"] if "code" in turn else extract_code(response, profile)
    public = public_field(turn["public"]["passing"], turn["public"]["feedback"], turn["public"].get("error"))
    out = {k: v for k, v in turn.items() if not k.startswith("hidden_")}
    out.update(_turn_record(response, None, program, public))
    out["cached"] = True
    return out


def _rejudge_cached(profile: str, cached_public: Any, problem: ProblemRecord) -> bool:
    """Whether cached first turns run again: always under ``paper`` (run_multi_turn_vllm.py
    executes every cached response on this run's public tests); under ``cobalt`` only when
    they were judged on other public tests."""
    return profile == "paper" or (cached_public is not None and cached_public != problem.public)


async def _run_sample(problem: ProblemRecord, index: int, first: dict, engine: Engine, client: Any,
                      params: SamplingParams, config: RolloutConfig, limiter: Limiter, stats: RolloutStats,
                      on_turn: Callable[[], None] | None, breaker: FailureBreaker | None = None) -> dict:
    messages = first_turn_messages(problem, config.template_dir)
    turns = [first]
    if on_turn:
        on_turn()
    for t in range(1, config.repair_turns + 1):
        prev = turns[-1]
        messages = extend(messages, prev["response"], prev["public"], no_code=prev["code"] is None,
                          enable_thinking=config.enable_thinking, max_chars=config.history_max_chars,
                          template_dir=config.template_dir, fn_name=problem.public.fn_name, profile=config.profile)
        seeded = dataclasses.replace(params, n=1, seed=request_seed(_base_seed(params, config), problem.id, index, t))
        (completion,) = await _generate(engine, messages, seeded, limiter, stats, breaker)
        program, public = await _step(completion.text, problem, client, stats, config.profile, breaker)
        turns.append(_turn_record(completion.text, completion, program, public))
        if on_turn:
            on_turn()
    return {"turns": turns}


async def rollout_problem(problem: ProblemRecord, engine: Engine, client: Any, params: SamplingParams,
                          config: RolloutConfig, *, cached: Sequence[Mapping[str, Any]] | None = None,
                          cached_public: TestCases | None = None,
                          limiter: Limiter | None = None, stats: RolloutStats | None = None,
                          on_turn: Callable[[], None] | None = None,
                          breaker: FailureBreaker | None = None) -> dict:
    """All trajectories of one problem, as one inference record (docs/TRAJECTORIES.md).

    ``cached``: the problem's first turns from an earlier run (a turn mapping
    each, at least ``config.samples``); otherwise turn 0 is generated here.
    ``cached_public``: the public tests those first turns were judged on. Under
    ``paper`` every cached program is executed again on this run's public tests,
    as the original does, and the record keeps the new result; under ``cobalt``
    only when they are not this run's (a run on perturbed public tests that
    reuses the first turns of a run on the data set's own). ``rejudged`` is set
    on each turn run again.
    An infrastructure failure of any turn raises (see :func:`judge_public`);
    ``breaker`` counts the engine and evaluator calls.
    """
    limiter = limiter or Limiter(config.max_requests)
    stats = stats if stats is not None else RolloutStats()
    n = config.samples
    if cached is not None:
        if len(cached) < n:
            raise ValueError(f"problem {problem.id}: {len(cached)} cached first turns, {n} samples asked for")
        firsts = [_cached_turn(turn, config.profile) for turn in cached[:n]]
        stats.cached_first_turns += n
        if _rejudge_cached(config.profile, cached_public, problem):
            if config.profile == "paper":  # the original extracts the program from the response again
                for first in firsts:
                    first["code"] = extract_code(first["response"], config.profile)
            publics = await asyncio.gather(*(judge_public(f["code"], problem, client, stats, breaker,
                                                          profile=config.profile) for f in firsts))
            for first, public in zip(firsts, publics):
                first.update(_turn_record(first["response"], None, first["code"], public))
                first["rejudged"] = True
            stats.rejudged_first_turns += n
    else:
        messages = first_turn_messages(problem, config.template_dir)
        first_params = dataclasses.replace(params, n=n, seed=request_seed(_base_seed(params, config), problem.id, 0, 0))
        completions = await _generate(engine, messages, first_params, limiter, stats, breaker)
        judged = await asyncio.gather(*(_step(c.text, problem, client, stats, config.profile, breaker)
                                        for c in completions))
        firsts = [_turn_record(c.text, c, p, pub) for c, (p, pub) in zip(completions, judged)]
    samples = await asyncio.gather(*(
        _run_sample(problem, i, firsts[i], engine, client, params, config, limiter, stats, on_turn, breaker)
        for i in range(n)
    ))
    return inference_record(problem.to_dict(), samples, enable_thinking=config.enable_thinking,
                            dropped=RECORD_FIELDS_DROPPED)


async def run_rollout(problems: Iterable[ProblemRecord], engine: Engine, client: Any, params: SamplingParams,
                      config: RolloutConfig, write: Callable[[dict], None], *,
                      first_turns: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                      first_turn_public: Mapping[str, TestCases] | None = None,
                      done: set | None = None, progress: Any = None, stats: RolloutStats | None = None,
                      breaker: FailureBreaker | None = None) -> RolloutStats:
    """Roll out every problem not in ``done``; ``write(record)`` is called as each problem finishes.

    At most ``config.max_problems`` problems are in flight; a problem whose
    rollout fails (engine error, missing cached turns) is counted and left out
    of the output, so that a rerun retries it. ``progress`` is a tqdm-like bar
    advanced once per turn of each sample. ``first_turn_public``: problem id ->
    the public tests its cached first turns were judged on (see :func:`rollout_problem`).
    ``breaker`` (default: a new :class:`~cobalt.health.FailureBreaker`) counts the
    engine and evaluator calls; once it opens, the problems in flight are
    cancelled (and left out) and :class:`~cobalt.health.BreakerOpen` is raised.
    """
    stats = stats if stats is not None else RolloutStats()
    breaker = breaker if breaker is not None else FailureBreaker("engine or evaluator")
    done = done if done is not None else set()
    limiter = Limiter(config.max_requests)
    slots = asyncio.Semaphore(config.max_problems)
    start = time.monotonic()
    pending: set[asyncio.Task] = set()
    on_turn = (lambda: progress.update(1)) if progress is not None else None

    async def one(problem: ProblemRecord) -> None:
        try:
            cached = None
            if first_turns is not None:
                if problem.id not in first_turns:
                    raise KeyError(f"problem {problem.id}: not in the cached first turns")
                cached = first_turns[problem.id]
            cached_public = first_turn_public.get(problem.id) if first_turn_public is not None else None
            record = await rollout_problem(problem, engine, client, params, config, cached=cached,
                                           cached_public=cached_public, limiter=limiter, stats=stats,
                                           on_turn=on_turn, breaker=breaker)
            write(record)
            stats.problems_done += 1
        except BreakerOpen:  # the run stops; the breaker's one line says why
            stats.problems_failed += 1
        except Exception as exc:  # one problem's failure must not stop the others
            stats.problems_failed += 1
            stats.errors.append(f"{problem.id}: {type(exc).__name__}: {exc}")
        finally:
            slots.release()

    for problem in problems:
        stats.problems_total += 1
        if problem.id in done:
            stats.problems_resumed += 1
            if progress is not None:
                progress.update(config.samples * (config.repair_turns + 1))
            continue
        await slots.acquire()
        if breaker.tripped is not None:
            slots.release()
            break
        task = asyncio.create_task(one(problem))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*list(pending))
    stats.seconds = round(time.monotonic() - start, 3)
    breaker.check()
    return stats
