"""Concurrent requests to one engine against the same requests one at a time, in one run.

Baseline (the paper's design): each conversation sent alone, the next one
only after the previous answer came back (one blocking ``generate`` per
request). Cobalt: all conversations submitted at once from separate tasks,
so the engine batches them (transformers: one left-padded batch; vLLM:
continuous batching). Same conversations, same sampling settings, same
engine object. Printed: conversations per second for each and the ratio.

CPU, tiny random Qwen3 (built on the fly unless --model is given):
    PYTHONPATH=src .venv/bin/python benchmarks/bench_engines.py --engine transformers --requests 8 --max-new-tokens 16
GPU, vLLM:
    PYTHONPATH=src .venv/bin/python benchmarks/bench_engines.py --engine vllm --model Qwen/Qwen3-8B --requests 256 --max-new-tokens 1024
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _conversations(k: int) -> list[list[dict]]:
    return [[{"role": "system", "content": "You write Python programs."},
             {"role": "user", "content": f"Problem {i}: read {i + 2} integers and print their sum."}] for i in range(k)]


async def _bench(engine, convs, params) -> tuple[float, float]:
    await engine.generate(convs[:1], params)  # warm-up (model load, first kernels)
    t0 = time.perf_counter()
    for conv in convs:
        await engine.generate([conv], params)
    sequential = time.perf_counter() - t0
    t0 = time.perf_counter()
    await asyncio.gather(*(engine.generate([conv], params) for conv in convs))
    concurrent = time.perf_counter() - t0
    return sequential, concurrent


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the ratio."""
    from cobalt.engines import SamplingParams
    from cobalt.engines.cli import add_engine_arguments, engine_from_args

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_engine_arguments(parser, default_engine="transformers")
    parser.add_argument("--requests", type=int, default=8, help="conversations per design")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="new tokens per sample")
    parser.add_argument("--n", type=int, default=1, help="samples per conversation")
    parser.add_argument("--cpu-threads", type=int, default=None, help="transformers on CPU: torch threads")
    args = parser.parse_args(argv)
    extra = {}
    if args.engine == "transformers":
        if not args.model:
            from cobalt.engines.tiny_model import build_tiny_qwen3

            args.model = str(build_tiny_qwen3(Path(tempfile.mkdtemp(prefix="tiny_qwen3_"))))
        if args.cpu_threads:
            extra["cpu_threads"] = args.cpu_threads
    engine = engine_from_args(args, **extra)
    # Fixed-length answers (no early stop of a random model) keep both designs' work identical.
    params = SamplingParams(n=args.n, temperature=0.6, top_p=1.0, max_new_tokens=args.max_new_tokens, seed=0)
    convs = _conversations(args.requests)

    async def run() -> tuple[float, float]:
        try:
            await engine.check()
            return await _bench(engine, convs, params)
        finally:
            await engine.aclose()

    sequential, concurrent = asyncio.run(run())
    k = len(convs)
    print(f"engine={args.engine} model={args.model} requests={k} n={args.n} max_new_tokens={args.max_new_tokens}")
    print(f"one at a time (paper): {sequential:8.2f} s  {k / sequential:8.2f} conv/s")
    print(f"concurrent (cobalt):   {concurrent:8.2f} s  {k / concurrent:8.2f} conv/s")
    print(f"speed-up: {sequential / concurrent:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
