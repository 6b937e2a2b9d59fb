"""Rollout driver against a blocking driver, same engine, same problems, one run.

- blocking (the paper's design): one request at a time (the first turn: one
  generate of all samples of a prompt; repair turns: one per sample); within a
  turn, every response is generated first, then the programs are judged one
  after another, then the next turn (``--blocking-problems N``: only the first
  N problems, compared per turn);
- at once (``--at-once``): one generate holding every first-turn prompt, nothing
  judged: what the driver approaches with ``--turns 0``;
- cobalt (``cobalt.rollout.loop.run_rollout``): every problem and sample in
  flight at once (bounded), each program judged while other samples generate.

Both produce the same records (same conversations, same feedback rules); the
script checks that the public pass rates agree when the engine is deterministic
and prints wall times and their ratio.

Engines:
- default: the tiny random Qwen3 on CPU (``transformers``), built on the fly;
  its text is noise, so this mostly measures batching of generation;
- ``--test-server-delay S``: the OpenAI-compatible test server of
  ``tests/support`` answering each problem's reference program after S seconds
  (a model of known latency whose programs are judged for real);
- ``--engine openai --base-url http://host:8000/v1 --model NAME``: a vLLM server on a GPU;
- ``--engine vllm --model DIR``: vLLM in this process (scripts/gpu/prove_inference.sh).

    .venv/bin/python benchmarks/bench_rollout.py --problems 6 --samples 4 --turns 2
    .venv/bin/python benchmarks/bench_rollout.py --test-server-delay 0.2 --problems 8 --samples 4 --turns 2
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


async def blocking_rollout(problems, engine, client, params, config) -> list[dict]:
    """The paper's loop: sequential requests; programs judged after the turn's generation."""
    import dataclasses

    from cobalt.rollout.conversation import extend, first_turn_messages
    from cobalt.rollout.loop import RolloutStats, _turn_record, judge_public
    from cobalt.text import extract_code

    stats = RolloutStats()
    records = []
    for problem in problems:
        convs = [first_turn_messages(problem, config.template_dir) for _ in range(config.samples)]
        trajectories: list[list[dict]] = [[] for _ in range(config.samples)]
        for t in range(config.repair_turns + 1):
            responses = []
            if t == 0:  # the first turn: one blocking generate of all samples of the prompt
                (responses,) = await engine.generate([convs[0]], dataclasses.replace(params, n=config.samples))
            for conv in convs[len(responses):]:  # repair turns: one request at a time
                (out,) = await engine.generate([conv], dataclasses.replace(params, n=1))
                responses.append(out[0])
            for i, completion in enumerate(responses):  # then judge, one program at a time
                program = extract_code(completion.text, config.profile)
                public = await judge_public(program, problem, client, stats, profile=config.profile)
                trajectories[i].append(_turn_record(completion.text, completion, program, public))
            if t < config.repair_turns:
                for k, turns in enumerate(trajectories):
                    last = turns[-1]
                    convs[k] = extend(convs[k], last["response"], last["public"], no_code=last["code"] is None,
                                      enable_thinking=config.enable_thinking, max_chars=config.history_max_chars,
                                      template_dir=config.template_dir, fn_name=problem.public.fn_name,
                                      profile=config.profile)
        records.append({"id": problem.id, "samples": [{"turns": tr} for tr in trajectories]})
    return records


async def at_once(problems, engine, params, config) -> float:
    """Seconds of one generate call holding every problem's first-turn prompt (n = samples), nothing judged."""
    import dataclasses

    from cobalt.rollout.conversation import first_turn_messages

    convs = [first_turn_messages(p, config.template_dir) for p in problems]
    t0 = time.perf_counter()
    await engine.generate(convs, dataclasses.replace(params, n=config.samples))
    return time.perf_counter() - t0


def _rates(records) -> dict:
    return {r["id"]: [[t["public_pass_rate"] for t in s["turns"]] for s in r["samples"]] for r in records}


async def main_async(args) -> int:
    from cobalt.data.leetcode import load_leetcode
    from cobalt.data.problems import problem_from_dict
    from cobalt.engines import SamplingParams, create_engine
    from cobalt.execution.base import ExecOptions
    from cobalt.execution.client import EvaluatorClient
    from cobalt.rollout.leetcode import SAMPLE_FILE, problem_record
    from cobalt.rollout.loop import RolloutConfig, run_rollout

    leet = load_leetcode(args.data or SAMPLE_FILE)[: args.problems]
    if len(leet) < args.problems:
        print(f"note: only {len(leet)} problems in {args.data or SAMPLE_FILE}", file=sys.stderr)
    problems = [problem_from_dict(problem_record(p), path="sample", line=i) for i, p in enumerate(leet, 1)]
    server = None
    if args.test_server_delay is not None:
        sys.path.insert(0, str(REPO / "tests"))
        from support.openai_server import OpenAIServer

        refs = {p.question.strip(): p.reference for p in leet}

        def responder(messages):
            first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
            question = next((q for q in refs if q in first_user), None)
            return f"```python\n{refs[question]}\n```" if question else "no program"

        server = OpenAIServer(responder=responder, delay=args.test_server_delay).start()
        engine_name, model, options = "openai", "test-model", {"base_url": server.base_url}
    elif args.engine == "transformers" and args.model is None:
        from cobalt.engines.tiny_model import build_tiny_qwen3

        tmp = tempfile.mkdtemp(prefix="bench-rollout-")
        model = str(build_tiny_qwen3(Path(tmp) / "tiny"))
        engine_name, options = "transformers", {"device": "cpu"}
    else:
        engine_name, model, options = args.engine, args.model, ({"base_url": args.base_url} if args.base_url else {})
    # greedy decoding so that both drivers see the same texts
    max_tokens = args.max_tokens or (8192 if server is not None else 64)
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=max_tokens)
    config = RolloutConfig(samples=args.samples, repair_turns=args.turns, max_problems=args.max_problems,
                           max_requests=args.max_requests)
    client = EvaluatorClient.embedded(max_concurrency=args.eval_concurrency, options=ExecOptions(allow_packages=True))
    if args.gpu_memory_utilization is not None:
        options["gpu_memory_utilization"] = args.gpu_memory_utilization
    engine = create_engine(engine_name, model, **options)
    n_block = len(problems) if args.blocking_problems is None else min(args.blocking_problems, len(problems))
    t_at_once = None
    try:
        await engine.generate([[{"role": "user", "content": "warm up"}]], SamplingParams(max_new_tokens=4))
        if args.at_once:
            t_at_once = await at_once(problems, engine, params, config)
        t0 = time.perf_counter()
        blocking = await blocking_rollout(problems[:n_block], engine, client, params, config)
        t_block = time.perf_counter() - t0
        ours: list[dict] = []
        t0 = time.perf_counter()
        stats = await run_rollout(problems, engine, client, params, config, ours.append)
        t_ours = time.perf_counter() - t0
    finally:
        await engine.aclose()
        if server is not None:
            server.stop()
    ours_rates = _rates(ours)
    same = _rates(blocking) == {r["id"]: ours_rates[r["id"]] for r in blocking}
    turns = len(problems) * args.samples * (args.turns + 1)
    block_turns = n_block * args.samples * (args.turns + 1)
    # throughput ratio (turns per second), so the blocking driver may run on fewer problems
    speedup = (turns / t_ours) / (block_turns / t_block) if t_ours > 0 and t_block > 0 else None
    result = {
        "engine": engine_name, "model": model, "problems": len(problems), "samples": args.samples,
        "repair_turns": args.turns, "max_tokens": max_tokens, "turns_total": turns,
        "programs_judged": stats.programs_run, "blocking_problems": n_block, "blocking_s": round(t_block, 3),
        "cobalt_s": round(t_ours, 3), "speedup": round(speedup, 2) if speedup else None,
        "same_public_pass_rates": same,
    }
    if t_at_once is not None:
        result["at_once_s"] = round(t_at_once, 3)
        result["cobalt_over_at_once"] = round(t_ours / t_at_once, 2)
    print(json.dumps(result, indent=2))
    print(f"\nblocking driver {t_block:.1f}s on {n_block} problems ({block_turns} turns), cobalt driver "
          f"{t_ours:.1f}s on {len(problems)} ({turns} turns): {speedup:.2f}x the throughput "
          f"({stats.programs_run} programs judged; same pass rates: {same})")
    if t_at_once is not None:
        print(f"all first turns in one generate, nothing judged: {t_at_once:.1f}s; cobalt driver / that: "
              f"{t_ours / t_at_once:.2f} (only comparable with --turns 0)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=6, help="LeetCode problems to use (the first of --data)")
    parser.add_argument("--data", default=None,
                        help="LeetCodeDataset JSONL(.gz) to take them from (default: the shipped 24-problem slice)")
    parser.add_argument("--blocking-problems", type=int, default=None,
                        help="run the (slow) blocking driver on only the first N problems; the ratio is per turn")
    parser.add_argument("--at-once", action="store_true",
                        help="also time one generate holding every first-turn prompt (n = --samples), nothing "
                        "judged: the bound the driver approaches with --turns 0")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None, help="vllm: share of GPU memory")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--turns", type=int, default=2, help="repair turns")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="new tokens per response (default: 64 for the tiny model, 8192 for the test server)")
    parser.add_argument("--engine", default="transformers")
    parser.add_argument("--model", default=None, help="default: a tiny random Qwen3 built on the fly")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--test-server-delay", type=float, default=None,
                        help="use the OpenAI-compatible test server answering reference programs after this delay")
    parser.add_argument("--max-problems", type=int, default=16)
    parser.add_argument("--max-requests", type=int, default=64)
    parser.add_argument("--eval-concurrency", type=int, default=None)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
