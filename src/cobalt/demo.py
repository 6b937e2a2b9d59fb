"""The whole Cobalt loop on the LeetCode problems shipped in the package (``cobalt demo``).

Stages, each with a one-screen summary:

0. sandbox: hostile programs must all fail;
1. problems: the shipped LeetCode slice as problems with 4 public and the rest hidden tests;
2. model: the instruct coder model of ``--model`` (hub id or local folder); when the hub
   cannot be reached, a tiny randomly initialised Qwen3 built locally from the Qwen3
   tokenizer, labelled as such: its programs are noise, the run proves the pipeline;
3. first turn: sample 0's is the data set's real model answer, as a cached first
   turn, the other samples' are the model's (``--first-turn shipped``, default), or
   the model writes all of them (``--first-turn model``);
4. repair turns (``cobalt rollout``), public tests judged in the sandbox;
5. hidden-test evaluation (``cobalt eval``);
6. Pass@1 per turn: markdown table, CSV and PNG (``cobalt report``);
7. bandit prompts (``cobalt build-prompts``);
8. the veRL parquet (``cobalt make-verl-data --kind cobalt``).

Everything is written under ``--work-dir``; a rerun resumes each stage.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import socket
import sys
import time
from pathlib import Path

from cobalt.cli_support import UsageError, add_alias, non_negative_int, positive_int
from cobalt.profile import add_profile_argument

DEMO_ENGINES = ("transformers", "openai", "vllm")

DEFAULT_MODEL = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
HUB_HOST = ("huggingface.co", 443)

HOSTILE = {
    "infinite loop": "while True:\n    pass\n",
    "memory bomb": "x = [0] * (10 ** 10)\n",
    "fork bomb": "import os\nwhile True:\n    os.fork()\n",
    "read host files": "print(open('/etc/hostname').read())\n",
    "network": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n",
    "huge output": "while True:\n    print('x' * 10000)\n",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt demo``."""
    parser.add_argument("--problems", type=Path, default=None,
                        help="LeetCodeDataset-format JSONL(.gz) (default: the 24 problems shipped with cobalt)")
    parser.add_argument("--limit", type=non_negative_int, default=None, help="only the first N problems (0: none)")
    parser.add_argument("--output-dir", dest="work_dir", type=Path, default=Path("cobalt-demo"),
                        help="where every stage writes")
    add_alias(parser, "--work-dir", dest="work_dir", type=Path)
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="hub id or local folder of an instruct model (transformers engine); without the hub, "
                        "a tiny random model is built locally instead")
    parser.add_argument("--engine", choices=DEMO_ENGINES, default="transformers", help="engine for --model")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible server for --engine openai")
    parser.add_argument("--tiny", action="store_true", help="use the tiny random model even when the hub answers")
    parser.add_argument("--first-turn", choices=("shipped", "model"), default="shipped",
                        help="shipped: sample 0's first turn is the data set's real model answer (cached), the "
                        "other samples' are the model's; model: the model writes every first turn")
    parser.add_argument("--samples", type=positive_int, default=2, help="trajectories per problem")
    parser.add_argument("--turns", type=non_negative_int, default=2, help="repair turns (2: the paper's training data)")
    parser.add_argument("--max-new-tokens", dest="max_tokens", type=positive_int, default=None,
                        help="new tokens per response (default: 48 for the tiny random model, 2048 otherwise)")
    add_alias(parser, "--max-tokens", dest="max_tokens", type=positive_int)
    parser.add_argument("--max-programs", dest="workers", type=positive_int, default=None,
                        help="programs judged at once (default: CPUs)")
    add_alias(parser, "--workers", dest="workers", type=positive_int)
    parser.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap (trusted code only)")
    add_profile_argument(parser)


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the Hugging Face hub answers a TCP connection (and offline mode is off)."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def _line(stage: str, text: str) -> None:
    print(f"[{stage}] {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every stage worked. A sandbox or model that cannot work is one line and exit 1."""
    from cobalt.health import InfrastructureError, PreflightError

    if args.engine == "openai" and not (args.base_url or os.environ.get("OPENAI_BASE_URL")):
        raise UsageError("--engine openai needs --base-url URL (an OpenAI-compatible server) or $OPENAI_BASE_URL")
    if args.problems is not None and not args.problems.is_file():
        raise UsageError(f"--problems {args.problems}: no such file")
    try:
        return asyncio.run(_main(args))
    except (PreflightError, InfrastructureError) as exc:
        print(f"cobalt demo: {exc}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace) -> int:
    from cobalt.data.leetcode import load_leetcode
    from cobalt.execution.base import ExecOptions, TestCases
    from cobalt.execution.client import EvaluatorClient
    from cobalt.execution.sandbox import SandboxUnavailable
    from cobalt.io import resume_settings, run_settings, save_settings
    from cobalt.profile import profile_from_args

    from cobalt.health import acheck_engine, check_evaluator

    started = time.perf_counter()
    profile = str(profile_from_args(args))
    check_evaluator("embedded", sandbox="none" if args.no_sandbox else "bwrap")
    work = args.work_dir
    settings = run_settings(args, profile=profile)
    refused = resume_settings(work / "rollout.jsonl", settings)
    if refused:
        print(f"cobalt demo: {refused}", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    client = EvaluatorClient.embedded(max_concurrency=args.workers, sandbox="none" if args.no_sandbox else "bwrap",
                                      options=ExecOptions(profile=profile, allow_packages=True))
    print(f"cobalt demo: the whole loop on {Path(args.problems or 'leetcode_sample.jsonl.gz').name}, "
          f"profile {profile}, outputs in {work}/")

    # 0. sandbox
    t0 = time.perf_counter()
    try:
        hostile = await client.evaluate_many([(code, TestCases(("1\n",), ("1",))) for code in HOSTILE.values()])
    except SandboxUnavailable as exc:
        print(f"cobalt demo: {exc}", file=sys.stderr)
        return 2
    contained = sum(not r.all_passed for r in hostile)
    _line("0 sandbox", f"{contained}/{len(HOSTILE)} hostile programs failed as they must "
          f"({', '.join(f'{k}: {r.status[0]}' for k, r in zip(HOSTILE, hostile))}) [{time.perf_counter() - t0:.1f}s]")

    # 1. problems
    from cobalt.rollout.leetcode import problem_records

    from cobalt.rollout.leetcode import SAMPLE_FILE

    args.problems = args.problems or SAMPLE_FILE
    leet = load_leetcode(args.problems)[: args.limit]
    records = problem_records(leet)
    problems_path = work / "problems.jsonl"
    problems_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    n_pub = sum(len(json.loads(r["public_test_cases"])["inputs"]) for r in records)
    n_hid = sum(len(json.loads(r["hidden_test_cases"])["inputs"]) for r in records)
    _line("1 problems", f"{len(records)} LeetCode problems, {n_pub} public and {n_hid} hidden call-based tests "
          f"-> {problems_path}")

    # 2. model
    model, label, tiny = _choose_model(args, work)
    from cobalt.engines import create_engine

    options = {"base_url": args.base_url} if args.base_url else {}
    if args.engine == "transformers":
        options["device"] = "cpu" if tiny else "auto"
    engine = create_engine(args.engine, model, **options)
    await acheck_engine(engine)
    if args.max_tokens is None:
        args.max_tokens = 48 if tiny else 2048
    # The tiny model's text is noise either way; greedy decoding spares top-p over 151,936
    # tokens per step, which dominates its time on a CPU. A real model samples as the paper.
    from cobalt.defaults import TEMPERATURE, TOP_P
    from cobalt.engines.base import SamplingParams

    args.temperature = 0.0 if tiny else TEMPERATURE

    t0 = time.perf_counter()
    from cobalt.rollout.conversation import message

    await engine.generate([[message("user", "hello")]], SamplingParams(max_new_tokens=1))
    _line("2 model", f"{label} ({args.engine} engine, loaded in {time.perf_counter() - t0:.1f}s; "
          f"{'greedy' if args.temperature == 0 else f'temperature {TEMPERATURE}, top-p {TOP_P}'}, "
          f"{args.max_tokens} new tokens)")

    # 3-4. rollout
    save_settings(work / "rollout.jsonl", "cobalt demo", settings, extra={"samples": args.samples, "profile": profile})
    ok = await _rollout(args, engine, client, work, problems_path, profile, leet)
    await engine.aclose()
    if not ok:
        return 1

    # 5. hidden evaluation
    from cobalt.defaults import HISTORY_MAX_CHARS
    from cobalt.evaluation.hidden import EvalStats, evaluate_file
    from cobalt.evaluation.passk import summarize
    from cobalt.io import JsonlAppender

    t0 = time.perf_counter()
    stats = EvalStats()
    evaluated = work / "eval.jsonl"
    save_settings(evaluated, "cobalt demo", {"input": os.path.abspath(work / "rollout.jsonl"), "profile": profile})
    with JsonlAppender(evaluated) as out:
        errors = await evaluate_file(work / "rollout.jsonl", out.write, client, profile=profile, enable_thinking=None,
                                     history_max_chars=HISTORY_MAX_CHARS, max_problems=8, done={str(d) for d in out.done},
                                     stats=stats)
    summary = summarize(evaluated)
    _line("5 hidden eval", f"{stats.distinct_programs} distinct programs run on the hidden tests, "
          f"{stats.no_code} turns without a program, {len(errors)} errors [{time.perf_counter() - t0:.1f}s]")

    # 6. report
    from cobalt.analysis.report import write_report

    note = (f"Model: {label}. {args.samples} trajectories per problem; the estimator's n is the samples drawn "
            "for each problem (the paper's 16 samples give its n = 16).")
    report = write_report([evaluated], work / "report", labels=[("tiny random model" if tiny else model)],
                          title="Cobalt demo: Pass@1 per turn", note=note)
    for _, notes in report["notes"]:
        for line in notes:
            _line("6 Pass@1", f"note: {line}")
    _line("6 Pass@1", f"per turn (hidden tests), {summary['problems']} problems:")
    for row in report["table"].splitlines():
        print(f"    {row}")
    _line("6 Pass@1", f"table, CSV and plot: {report['md']}, {report['csv']}, {report['png']}")

    # 7-8. bandit prompts and the veRL parquet
    ok = _training_data(work, evaluated, model)
    _line("done", f"whole loop in {time.perf_counter() - started:.0f}s; outputs in {work}/")
    return 0 if ok and contained == len(HOSTILE) and not errors else 1


def _choose_model(args: argparse.Namespace, work: Path) -> tuple[str, str, bool]:
    """``(model path or id, label, is_tiny)``: the hub/local model, or a tiny random one built here."""
    local = Path(args.model).expanduser()
    if local.exists():
        return str(local), f"local model {local}", False
    if args.engine != "transformers":
        return args.model, f"{args.model}", False
    if not args.tiny and hub_reachable():
        return args.model, f"{args.model} from the hub", False
    if not args.tiny:
        print(f"[2 model] the Hugging Face hub cannot be reached: using a tiny randomly initialised Qwen3 built "
              f"locally instead of {args.model} (its programs are noise: this run proves the pipeline, not a model)")
    from cobalt.engines.tiny_model import build_tiny_qwen3

    out = work / "tiny-qwen3"
    if not (out / "config.json").exists():
        build_tiny_qwen3(out)
    return str(out), f"tiny random Qwen3 (2 layers, hidden 64, random weights) at {out}", True


async def _rollout(args, engine, client, work: Path, problems_path: Path, profile: str, leet) -> bool:
    """Stages 3 and 4: the first turn (cached real answers or the model's) and the repair turns."""
    from cobalt.data.problems import iter_problems
    from cobalt.data.records import inference_record, public_rates, turn_dict
    from cobalt.defaults import TOP_P
    from cobalt.engines.base import SamplingParams
    from cobalt.io import JsonlAppender
    from cobalt.rollout.cli import load_first_turns
    from cobalt.rollout.leetcode import fenced_answer
    from cobalt.rollout.loop import RolloutConfig, RolloutStats, judge_public, run_rollout
    from cobalt.text import extract_code

    problems = [p for _, p in iter_problems(problems_path)]
    params = SamplingParams(temperature=args.temperature, top_p=TOP_P if args.temperature else 1.0,
                            max_new_tokens=args.max_tokens, seed=0)
    first_path = work / "first_turn.jsonl"
    t0 = time.perf_counter()
    samples = args.samples
    model_samples = samples - 1 if args.first_turn == "shipped" else samples
    model_first: dict[str, list] = {}
    if model_samples > 0:
        stats = RolloutStats()
        config = RolloutConfig(samples=model_samples, repair_turns=0, profile=profile, seed=0,
                               max_problems=max(1, len(problems)), max_requests=256)
        model_path = work / "first_turn_model.jsonl"
        with JsonlAppender(model_path) as out:
            await run_rollout(problems, engine, client, params, config, out.write, done=set(out.done), stats=stats)
        if stats.problems_failed:
            for err in stats.errors[:5]:
                print(f"    failed: {err}")
            return False
        model_first = {k: [{"turns": [t]} for t in v] for k, v in load_first_turns(model_path).items()}
    shipped_stats = RolloutStats()
    answers = {p.task_id: fenced_answer(p) for p in leet}
    with JsonlAppender(first_path) as out:
        async def one(problem):
            if problem.id in out.done:
                return
            firsts = []
            if args.first_turn == "shipped":
                response = answers[problem.id]
                program = extract_code(response, profile)
                public = await judge_public(program, problem, client, shipped_stats, profile=profile)
                firsts.append({"turns": [{**turn_dict(response, program, public), "shipped_answer": True}]})
            firsts += model_first.get(problem.id, [])
            out.write(inference_record(problem.to_dict(), firsts, enable_thinking=False))

        await asyncio.gather(*(one(p) for p in problems))
    if args.first_turn == "shipped":
        source = (f"sample 0: the data set's real model answer (cached); {model_samples} more from the model"
                  if model_samples else "the data set's real model answers (cached)")
    else:
        source = f"the model's {samples} samples"
    first = [json.loads(x) for x in first_path.read_text().splitlines()]
    rates = [s[0] for r in first for s in public_rates(r)]
    _line("3 first turn", f"{source}: mean public pass rate {sum(rates) / max(len(rates), 1):.3f}, "
          f"{sum(r == 1.0 for r in rates)}/{len(rates)} pass every public test [{time.perf_counter() - t0:.1f}s]")

    t0 = time.perf_counter()
    # every problem in flight: the engine batches all samples of a turn together
    config = RolloutConfig(samples=samples, repair_turns=args.turns, profile=profile, seed=0,
                           max_problems=max(1, len(problems)), max_requests=256)
    stats = RolloutStats()
    with JsonlAppender(work / "rollout.jsonl") as out:
        await run_rollout(problems, engine, client, params, config, out.write, first_turns=load_first_turns(first_path),
                          done=set(out.done), stats=stats)
    if stats.problems_failed:
        for err in stats.errors[:5]:
            print(f"    failed: {err}")
        return False
    recs = [json.loads(x) for x in (work / "rollout.jsonl").read_text().splitlines()]
    per_turn = []
    for t in range(args.turns + 1):
        vals = [s[t] for r in recs for s in public_rates(r)]
        per_turn.append(f"{sum(vals) / max(len(vals), 1):.2f}")
    _line("4 repair turns", f"{args.turns} repair turns x {samples} sample(s) x {len(recs)} problems: "
          f"{stats.responses} responses ({stats.completion_tokens} tokens), {stats.programs_run} programs judged, "
          f"{stats.no_code} without code; mean public pass rate per turn {' -> '.join(per_turn)} "
          f"[{time.perf_counter() - t0:.1f}s]")
    return True


def _tokenizer_for(model: str) -> str:
    """The model's own tokenizer when it is a local folder, else the shipped Qwen3 tokenizer
    (prompt lengths are then counted as the paper's Qwen3 policy would count them)."""
    if (Path(model) / "tokenizer_config.json").is_file():
        return model
    env = os.environ.get("COBALT_QWEN3_TOKENIZER")
    if env:
        return env
    return str(Path(__file__).resolve().parents[3] / "shared" / "data" / "qwen3_tokenizer")


def _training_data(work: Path, evaluated: Path, model: str) -> bool:
    """Stages 7 and 8 through their commands; their own output is kept in a log file."""
    from cobalt.cli import main as cobalt_main

    tokenizer = _tokenizer_for(model)
    log = io.StringIO()
    prompts = work / "prompts.jsonl"
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rc = cobalt_main(["build-prompts", "--input", str(evaluated), "--output", str(prompts),
                          "--model-name", tokenizer, "--no-progress"])
    (work / "build_prompts.log").write_text(log.getvalue(), encoding="utf-8")
    if rc != 0:
        _line("7 bandit prompts", f"failed (exit {rc}); see {work / 'build_prompts.log'}")
        return False
    summary = json.loads((work / "prompts.jsonl.summary.json").read_text())["summary"]
    _line("7 bandit prompts", f"{summary['prompts']} prompts ({summary['first_turn_prompts']} first-turn, "
          f"{summary['partial_prompts']} partial-trajectory) from {summary['problems_considered']} problems; "
          f"{summary['problems_too_easy']} too easy (dropped by dynamic sampling), "
          f"{summary['trajectories_kept']} trajectories kept -> {prompts} [{time.perf_counter() - t0:.1f}s]")
    if summary["prompts"] == 0:
        _line("8 veRL parquet", "no prompts, nothing to write")
        return True
    t0 = time.perf_counter()
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rc = cobalt_main(["make-verl-data", "--kind", "cobalt", "--train", str(prompts), "--out-dir",
                          str(work / "verl"), "--tokenizer", tokenizer, "--no-progress"])
    (work / "make_verl_data.log").write_text(log.getvalue(), encoding="utf-8")
    if rc != 0:
        _line("8 veRL parquet", f"failed (exit {rc}); see {work / 'make_verl_data.log'}")
        return False
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(work / "verl" / "train.parquet").metadata.num_rows
    _line("8 veRL parquet", f"{rows} rows in veRL's schema -> {work / 'verl' / 'train.parquet'} "
          f"[{time.perf_counter() - t0:.1f}s]")
    return True
