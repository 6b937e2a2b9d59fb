"""Benchmark the reward: has_repetition against the paper's regex way, and shaped_reward throughput.

Texts of 24,000 characters (about a 6,144-token response) built from the real
model answers in ../shared/data/leetcode, plus adversarial ones. For each, the
fast check and the direct regex reference are timed in this run and must
agree; the ratio is printed. Then shaped_reward is timed on realistic
thinking responses (o200k_base token counting included).

    .venv/bin/python benchmarks/bench_reward.py [--chars 24000] [--repeat 20] [--skip-reference] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"


def reference(text: str, min_len: int = 32, min_repeats: int = 8) -> bool:
    """The paper's way: one regex search per block length."""
    for length in range(min_len, len(text) // min_repeats + 1):
        if re.search(r"(.{%d})\1{%d}" % (length, min_repeats - 1), text, re.DOTALL):
            return True
    return False


def load_answers(data_dir: Path) -> list[str]:
    """The real model answers of the shared LeetCode data."""
    with gzip.open(data_dir / "leetcode" / "leetcode_problems.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line)["response"] for line in fh if line.strip()]


def build_texts(answers: list[str], n: int) -> dict[str, str]:
    """Named texts of ``n`` characters: realistic and adversarial."""
    real = "".join(answers)
    block = real[5000:5040]
    texts = {
        "real answers": real[:n],
        "real + 40-char line x8 at the end": real[: n - 320] + block * 8,
        "real + 32-char block x7 (no hit)": (real[:8000] + block[:32] * 7 + real[8000:])[:n],
        "code block repeated (period 2,000)": (real[:2000] * 13)[:n],
        "runs of 255 'a' (one short)": "".join("a" * 255 + chr(0x4E00 + i) for i in range(n // 256 + 1))[:n],
        "7 copies of many block sizes": "".join(real[i * 997:i * 997 + size] * 7 for i, size in enumerate(range(32, 400, 8)))[:n],
        "two-letter random": "".join("ab"[(i * 7919 >> 3) % 2] for i in range(n)),
    }
    return texts


def time_call(fn, arg, repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(arg)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_repetition(texts: dict[str, str], repeat: int, skip_reference: bool) -> None:
    """Print fast vs reference timings per text."""
    from cobalt.reward import has_repetition

    print(f"has_repetition (min_len=32, min_repeats=8), median of {repeat} calls")
    print(f"{'text':38s} {'chars':>6s} {'hit':>5s} {'fast ms':>9s} {'regex ms':>10s} {'ratio':>8s}")
    for name, text in texts.items():
        fast = time_call(has_repetition, text, repeat)
        hit = has_repetition(text)
        if skip_reference:
            print(f"{name:38s} {len(text):6d} {hit!s:>5s} {fast * 1e3:9.3f}")
            continue
        start = time.perf_counter()
        ref_hit = reference(text)
        slow = time.perf_counter() - start
        if ref_hit != hit:
            raise SystemExit(f"MISMATCH on {name!r}: fast={hit} reference={ref_hit}")
        print(f"{name:38s} {len(text):6d} {hit!s:>5s} {fast * 1e3:9.3f} {slow * 1e3:10.1f} {slow / fast:7.0f}x")


def bench_shaped(answers: list[str], repeat: int) -> None:
    """Print shaped_reward throughput on thinking responses built from real answers."""
    from cobalt.reward import get_token_counter, shaped_reward

    fenced = [a for a in answers if "```python" in a]
    responses = []
    for i, answer in enumerate(fenced):
        start = answer.index("```python")
        think = "\n".join(answers[(i * 7 + j) % len(answers)] for j in range(12))  # ~3,000 tokens of reasoning
        responses.append(f"<think>\n{think}\n</think>\n\n{answer[start:]}")
    get_token_counter().count("warm up")  # load the encoding outside the timing
    chars = sum(map(len, responses)) / len(responses)
    for label, rate in (("failing (length terms)", 0.0), ("passing", 1.0), ("validation", None)):
        kwargs = {"is_val": True} if rate is None else {}
        p = 1.0 if rate is None else rate
        runs = []
        for _ in range(max(1, repeat // 5)):
            start = time.perf_counter()
            for r in responses:
                shaped_reward(r, p, **kwargs)
            runs.append(time.perf_counter() - start)
        per = statistics.median(runs) / len(responses)
        print(f"shaped_reward {label:24s}: {per * 1e3:7.3f} ms/response, {1 / per:8.0f} responses/s "
              f"({len(responses)} responses, mean {chars:.0f} chars)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=24000, help="length of each repetition test text")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per measurement (median reported)")
    parser.add_argument("--skip-reference", action="store_true", help="do not run the slow regex reference")
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA,
                        help="folder with leetcode/ and tiktoken/ (default: ../shared/data beside the repo)")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str((args.data_dir / "tiktoken").resolve()))
    answers = load_answers(args.data_dir)
    bench_repetition(build_texts(answers, args.chars), args.repeat, args.skip_reference)
    print()
    bench_shaped(answers, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
