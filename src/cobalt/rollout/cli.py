"""`cobalt rollout`: single- or multi-turn inference on a problems file, public tests judged.

Reads problems (JSONL: a problems file of ``cobalt preproc-taco``/``preproc-lcb``,
or inference records), writes inference records (docs/TRAJECTORIES.md), one per
problem, appended and flushed as each problem finishes; a rerun with the same
``--output`` resumes. ``--turns 0`` is single-turn inference. The resolved
configuration is saved as ``<output>.config.json``.

The paper's workflow: a single-turn run with 16 samples first, then every
multi-turn run reuses its first turns (``--first-turn-from``).

Public tests (``--public-tests``): ``auto`` (default) runs a record that carries
``perturbed_public_test_cases`` (the output of ``cobalt perturb``) on its
perturbed public tests and any other on its own, so that the paper's workflow
(perturb, then multi-turn inference on the perturbed file) needs no conversion;
``public`` and ``perturbed`` force one set. Each output record names the set
in ``public_test_set``; on the perturbed set, ``public_test_cases`` are the
perturbed tests the run used, ``original_public_test_cases`` the correct ones,
``test_cases`` the correct tests (the reward's ground truth), and the hidden
tests are unchanged. Cached first turns judged on other public tests than this
run's (a single-turn run on the data set's own tests) are judged again on this
run's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Mapping

from cobalt.cli_support import (THINKING_CHOICES, UsageError, add_alias, fraction, non_negative_float,
                                non_negative_int, positive_float, positive_int)
from cobalt.defaults import HISTORY_MAX_CHARS, MAX_NEW_TOKENS, TEMPERATURE, TOP_P
from cobalt.io import CONFIG_SUFFIX, RecordError
from cobalt.profile import add_profile_argument

SUMMARY_SUFFIX = ".summary.json"
# Fields that must agree between a run and the run it resumes.
RESUME_KEYS = ("engine", "model", "samples", "repair_turns", "enable_thinking", "thinking", "max_new_tokens",
               "temperature", "top_p", "profile", "first_turn_from", "public_tests")


def add_engine_flags(parser: argparse.ArgumentParser, *, default_engine: str | None = None) -> None:
    """Engine flags (the shared set of :func:`cobalt.engines.cli.add_engine_arguments`).

    ``default_engine`` None: ``$COBALT_ENGINE``, else openai, as the help says.
    """
    from cobalt.engines.cli import add_engine_arguments

    add_engine_arguments(parser, default_engine=default_engine)


PAPER_POLICY_REASONING_EFFORT = "medium"
"""``paper``: the original API inference scripts' ``reasoning_effort`` (openai/litellm engines)."""


def engine_from_args(args: argparse.Namespace):
    """Build the engine that the flags name (:func:`cobalt.engines.cli.engine_from_args`)."""
    from cobalt.engines.cli import engine_from_args as build

    return build(args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt rollout``."""
    parser.add_argument("--input", required=True, help="problems JSONL (.gz ok): problems file or inference records")
    parser.add_argument("--output", required=True, help="inference records JSONL, appended; a rerun resumes")
    add_engine_flags(parser)
    group = parser.add_argument_group("rollout")
    group.add_argument("--samples", type=positive_int, default=16, help="trajectories (first-turn samples) per problem")
    group.add_argument("--turns", type=non_negative_int, default=8,
                       help="repair turns after the first (8: evaluation, 2: training data, 0: single-turn)")
    group.add_argument("--first-turn-from", default=None,
                       help="inference records of an earlier run whose first turns (turn 0) are reused instead of "
                       "generated (the paper's cached single-turn samples)")
    group.add_argument("--public-tests", choices=("auto", "public", "perturbed"), default="auto",
                       help="public tests run and shown in feedback: 'perturbed' (the perturbed_public_test_cases "
                       "of `cobalt perturb`, for the reward-hacking study), 'public' (the data set's own), or "
                       "'auto': perturbed for records that carry them, else their own (default)")
    group.add_argument("--thinking", choices=THINKING_CHOICES, default="auto",
                       help="on: thinking model, the history keeps the text after the last </think>, cut to "
                       "--history-max-chars, and the chat template gets enable_thinking; off: the template gets "
                       "enable_thinking=false; auto: the template's own choice, history as without thinking "
                       "(default: auto)")
    add_alias(group, "--enable-thinking", dest="thinking", action="store_const", const="on")
    group.add_argument("--history-max-chars", type=positive_int, default=HISTORY_MAX_CHARS,
                       help="cut of an assistant turn in the history")
    group.add_argument("--limit", type=non_negative_int, default=None,
                       help="only the first N problems of --input (0: none)")
    group.add_argument("--template-dir", default=None, help="folder with prompt template overrides")
    group.add_argument("--no-progress", action="store_true", help="no progress bar")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--max-new-tokens", dest="max_tokens", type=positive_int, default=MAX_NEW_TOKENS,
                          help="new tokens per response at most")
    add_alias(sampling, "--max-tokens", dest="max_tokens", type=positive_int)
    sampling.add_argument("--temperature", type=non_negative_float, default=TEMPERATURE,
                          help="sampling temperature (0: greedy)")
    sampling.add_argument("--top-p", type=fraction, default=TOP_P, help="nucleus sampling mass, in (0, 1]")
    sampling.add_argument("--seed", type=int, default=None, help="base seed (one derived per request)")
    bounds = parser.add_argument_group("concurrency")
    bounds.add_argument("--max-problems", type=positive_int, default=16, help="problems in flight at once")
    bounds.add_argument("--max-requests", type=positive_int, default=64, help="engine requests in flight at once")
    bounds.add_argument("--max-programs", dest="eval_concurrency", type=positive_int, default=None,
                        help="programs in the sandbox at once (default: CPUs embedded, 256 with Ray)")
    add_alias(bounds, "--eval-concurrency", dest="eval_concurrency", type=positive_int)
    bounds.add_argument("--evaluator", choices=("embedded", "ray"), default="embedded",
                        help="embedded sandbox in this process, or the Ray Serve 'evaluator' app")
    bounds.add_argument("--ray-address", default=None, help="Ray cluster address for --evaluator ray")
    bounds.add_argument("--eval-timeout", type=positive_float, default=None,
                        help="seconds a caller waits for one program's public tests "
                             "(default: 300 under paper, as the original; 30 under cobalt)")
    add_profile_argument(parser)


def template_hashes(template_dir: str | None) -> dict[str, str]:
    """SHA-256 (first 16 hex digits) and origin of every prompt template this run uses."""
    from cobalt.prompts import TEMPLATES, load_template

    out = {}
    for name in TEMPLATES:
        text, origin = load_template(name, template_dir)
        out[name] = f"{hashlib.sha256(text.encode()).hexdigest()[:16]} {origin}"
    return out


def load_first_turns(path: str | Path, public_out: dict | None = None) -> dict[str, list[dict]]:
    """Problem id -> first turns (turn 0 of each sample) of an earlier run's inference records.

    ``public_out``, when given, receives problem id -> the public tests
    (:class:`~cobalt.execution.base.TestCases`) those first turns were judged on.
    """
    from cobalt.data.problems import require_tests
    from cobalt.data.records import read_first_turns
    from cobalt.io import iter_jsonl

    out: dict[str, list[dict]] = {}
    for line, rec in iter_jsonl(path):
        if not isinstance(rec, Mapping) or "id" not in rec:
            raise RecordError(path, line, "id", "missing")
        if public_out is not None:
            public_out[str(rec["id"])] = require_tests(rec, "public_test_cases", path=str(path), line=line)
        out[str(rec["id"])] = read_first_turns(rec, path=str(path), line=line)
    return out


SECRET_WORDS = ("key", "secret", "token", "password")


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of every credential-like flag (``--openai_api_key X``, ``--api-key=X``) hidden.

    >>> redact_argv(["--model", "m", "--openai_api_key", "sk-1", "--api-key=sk-2"])
    ['--model', 'm', '--openai_api_key', '***', '--api-key=***']
    """
    out, hide_next = [], False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        secret = arg.startswith("-") and any(w in flag.lower() for w in SECRET_WORDS)
        if secret and eq:
            out.append(f"{flag}=***")
        else:
            out.append(arg)
            hide_next = secret
    return out


def resolved_config(args: argparse.Namespace, engine: Any, params: Any, config: Any) -> dict:
    """The run configuration saved beside the output."""
    import dataclasses

    from cobalt import __version__

    description = engine.describe() if hasattr(engine, "describe") else {"engine": args.engine, "model": args.model}
    return {
        "command": "cobalt rollout",
        "argv": redact_argv(sys.argv[1:]),
        "cobalt_version": __version__,
        "input": str(args.input),
        "output": str(args.output),
        "first_turn_from": args.first_turn_from,
        "public_tests": args.public_tests,
        "engine": description.get("engine", args.engine),
        "model": description.get("model", args.model),
        "engine_description": description,
        "sampling": dataclasses.asdict(params),
        "rollout": config.to_dict(),
        "samples": config.samples,
        "repair_turns": config.repair_turns,
        "enable_thinking": config.enable_thinking,
        "thinking": args.thinking,
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "profile": config.profile,
        "evaluator": {"mode": args.evaluator, "timeout_s": args.eval_timeout, "concurrency": args.eval_concurrency},
        "templates": template_hashes(config.template_dir),
    }


def check_resume(path: Path, new: Mapping[str, Any]) -> str | None:
    """An error message when ``path`` (an earlier run's config) disagrees with ``new``, else None."""
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    diffs = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in RESUME_KEYS if k in old and old.get(k) != new.get(k)]
    if diffs:
        return (f"{path}: the output belongs to a run with other settings ({'; '.join(diffs)}); "
                "use another --output or delete it to start over")
    return None


def check_first_turn_samples(first_turns: Mapping[str, list], problems: list, samples: int, path: str) -> None:
    """Refuse (before the run) cached first turns with fewer samples than ``--samples`` for a problem."""
    short = [(p.id, len(first_turns[p.id])) for p in problems if p.id in first_turns
             and len(first_turns[p.id]) < samples]
    if short:
        pid, have = short[0]
        raise UsageError(f"--first-turn-from {path}: problem {pid!r} has {have} first-turn samples but --samples "
                         f"is {samples} ({len(short)} problem(s) short); lower --samples or use a run with more")


def summary_table(stats: Mapping[str, Any]) -> str:
    """The run's counters as a two-column table (the JSON goes to the summary file)."""
    rows = [(k.replace("_", " "), v) for k, v in stats.items() if k != "errors"]
    width = max((len(k) for k, _ in rows), default=0)
    lines = []
    for key, value in rows:
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        lines.append(f"  {key:<{width}}  {shown:>12}")
    return "rollout summary:\n" + "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``cobalt rollout``."""
    import asyncio

    from cobalt.data.perturbation import iter_problems_on
    from cobalt.engines.base import EngineError, SamplingParams
    from cobalt.execution.client import EvaluatorClient
    from cobalt.execution.base import ExecOptions
    from cobalt.health import BreakerOpen, FailureBreaker, PreflightError, preflight
    from cobalt.io import JsonlAppender, check_unique_id, empty_input_warning, resume_guard, write_json_atomic
    from cobalt.profile import profile_from_args
    from cobalt.cli_support import capped, on_interrupt, progress, require_output_file, resumed_line, thinking_value
    from cobalt.rollout.loop import RolloutConfig, RolloutStats, run_rollout

    profile = profile_from_args(args)
    if args.eval_timeout is None:
        from cobalt.defaults import caller_wait_s

        args.eval_timeout = caller_wait_s(str(profile))
    for name in ("samples", "max_tokens", "max_problems", "max_requests"):
        if getattr(args, name) < 1:
            print(f"cobalt rollout: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.turns < 0:
        print("cobalt rollout: --turns must be 0 or more", file=sys.stderr)
        return 2
    if not Path(args.input).exists():
        print(f"cobalt rollout: {args.input}: no such file", file=sys.stderr)
        return 2
    if not args.model:
        print("cobalt rollout: --model is required", file=sys.stderr)
        return 2
    require_output_file(args.output)
    if args.limit == 0:  # asked for no problem: nothing runs, nothing is written (an empty input is another matter)
        print("rollout: 0 problems (--limit 0); nothing to do", file=sys.stderr)
        return 0
    settings, refused = resume_guard(args, [args.input, args.first_turn_from], profile=str(profile))
    if refused:
        print(f"cobalt rollout: {refused}", file=sys.stderr)
        return 2
    try:
        problems, seen = [], {}
        for line, problem in iter_problems_on(args.input, args.public_tests):
            if args.limit is not None and len(problems) >= args.limit:
                break
            check_unique_id(problem.id, seen, path=args.input, line=line)
            problems.append(problem)
        first_public: dict = {}
        first_turns = load_first_turns(args.first_turn_from, first_public) if args.first_turn_from else None
    except (RecordError, FileNotFoundError) as exc:
        print(f"cobalt rollout: {exc}", file=sys.stderr)
        return 1
    if not problems and args.limit != 0:  # --limit 0 asks for nothing: not an empty input
        print(empty_input_warning("cobalt rollout", args.input), file=sys.stderr)
        return 1
    if first_turns is not None:
        check_first_turn_samples(first_turns, problems, args.samples, args.first_turn_from)
    params = SamplingParams(n=1, temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_tokens,
                            seed=args.seed, enable_thinking=thinking_value(args.thinking))
    config = RolloutConfig(samples=args.samples, repair_turns=args.turns, enable_thinking=args.thinking == "on",
                           history_max_chars=args.history_max_chars, max_problems=args.max_problems,
                           max_requests=args.max_requests, profile=str(profile), template_dir=args.template_dir,
                           seed=args.seed)
    from cobalt.engines.cli import default_reasoning_effort

    default_reasoning_effort(args, PAPER_POLICY_REASONING_EFFORT, str(profile))
    try:
        engine = engine_from_args(args)
    except EngineError as exc:
        print(f"cobalt rollout: {exc}", file=sys.stderr)
        return 2
    try:
        preflight(evaluator=args.evaluator, ray_address=args.ray_address, engine=engine)
    except PreflightError as exc:
        print(f"cobalt rollout: {exc}", file=sys.stderr)
        return 1
    client = EvaluatorClient(mode=args.evaluator, ray_address=args.ray_address, timeout_s=args.eval_timeout,
                             max_concurrency=args.eval_concurrency, options=ExecOptions(profile=str(profile)))
    output = Path(args.output)
    config_path = output.with_name(output.name + CONFIG_SUFFIX)
    resolved = resolved_config(args, engine, params, config)
    resolved["settings"] = settings
    problem = check_resume(config_path, resolved)
    if problem is not None and output.exists() and output.stat().st_size > 0:
        print(f"cobalt rollout: {problem}", file=sys.stderr)
        return 2
    write_json_atomic(config_path, resolved)
    stats = RolloutStats()
    breaker = FailureBreaker("engine or evaluator")
    stopped: str | None = None
    with JsonlAppender(output) as out:
        todo = sum(1 for p in problems if p.id not in out.done)
        n_perturbed = sum(p.perturbed for p in problems)
        on_interrupt(lambda: f"{sum(1 for p in problems if p.id in out.done)} of {len(problems)} problems")
        print(f"rollout: {len(problems)} problems ({resumed_line(len(problems) - todo, len(problems), 'problems')} "
              f"in {output}; {n_perturbed} on perturbed public tests), "
              f"{config.samples} samples, {config.repair_turns} repair turns, engine {resolved['engine']} "
              f"model {resolved['model']}, profile {profile}", file=sys.stderr)
        bar = progress(len(problems) * config.samples * (config.repair_turns + 1), "rollout", "turns",
                       enabled=not args.no_progress)

        async def main() -> None:
            try:
                await run_rollout(problems, engine, client, params, config, out.write, first_turns=first_turns,
                                  first_turn_public=first_public, done=set(out.done), progress=bar, stats=stats,
                                  breaker=breaker)
            finally:
                await engine.aclose()

        try:
            asyncio.run(main())
        except BreakerOpen as exc:
            stopped = str(exc)
        finally:
            bar.close()
    resolved["stats"] = stats.to_dict()
    resolved["stats"]["calls"] = breaker.to_dict()
    write_json_atomic(config_path, resolved)
    write_json_atomic(output.with_name(output.name + SUMMARY_SUFFIX), resolved["stats"])
    print(summary_table(resolved["stats"]), file=sys.stderr)
    for err in capped(stats.errors):
        print(f"cobalt rollout: failed: {err}", file=sys.stderr)
    if stopped is not None:
        print(f"cobalt rollout: {stopped}", file=sys.stderr)
        return 1
    if stats.problems_failed:
        print(f"cobalt rollout: {stats.problems_failed} problem(s) failed and are not in the output; "
              "rerun the same command to retry them", file=sys.stderr)
        return 1
    return 0
