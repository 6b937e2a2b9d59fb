"""The GPU proof's warm start (scripts/gpu/warm_start_tiny.py): its repair curriculum on the
shipped LeetCode slice, the real Qwen3 tokenizer and the real sandbox."""
from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from cobalt.execution.client import EvaluatorClient

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT.parent / "shared" / "data" / "qwen3_tokenizer"


@pytest.fixture(scope="module")
def warm():
    spec = importlib.util.spec_from_file_location("warm_start_tiny", ROOT / "scripts" / "gpu" / "warm_start_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER))

@pytest.fixture(scope="module")
def examples(warm, tokenizer):
    return warm.build_examples(tokenizer, warm.shipped_problems(), 1536)[:6]

def _public_pass_rate(warm, problem, program: str) -> float:
    record = warm.problem_record(problem)
    result = asyncio.run(EvaluatorClient.embedded().evaluate(program, record.public))
    return sum(result.passing) / len(result.passing)

def test_broken_variant_is_valid_python_that_fails_where_the_reference_passes(warm, examples):
    for problem, _, _ in examples:
        broken = warm.broken_variant(problem.reference)
        assert broken != problem.reference
        ast.parse(broken)
        assert _public_pass_rate(warm, problem, problem.reference) == 1.0, problem.task_id
        assert _public_pass_rate(warm, problem, broken) == 0.0, problem.task_id

def test_broken_variant_keeps_a_block_that_would_be_empty(warm):
    code = "class Solution:\n    def f(self, x):\n        if x:\n            return 1\n"
    assert warm.broken_variant(code) == "class Solution:\n    def f(self, x):\n        if x:\n            pass"

def test_repair_examples_follow_the_rollout_conversation(warm, tokenizer, examples):
    extra = warm.repair_examples(tokenizer, examples[:2])
    assert len(extra) == 4 * 2
    problem, prompt_ids, reference_ids = examples[0]
    again, broken, repair, keep = extra[:4]
    assert again == examples[0]
    assert broken[1] == prompt_ids and broken[2] != reference_ids
    assert tokenizer.decode(broken[2]).rstrip("<|im_end|>").endswith("```")
    for follow_up in (repair, keep):
        assert follow_up[1][: len(prompt_ids) - 3] == prompt_ids[: len(prompt_ids) - 3]  # same system + problem
        assert follow_up[2] == reference_ids
    repair_text = tokenizer.decode(repair[1])
    keep_text = tokenizer.decode(keep[1])
    # the broken program's history and its real failing feedback; the reference's all-passed message
    assert "Program's Output" in repair_text and "Program's Output" not in keep_text
    assert "passed every public test" in keep_text and "passed every public test" not in repair_text
    assert "</think>" not in repair_text.split("<|im_start|>assistant")[1]  # history after the last </think>
    assert warm.broken_variant(problem.reference).strip().split("\n")[-1].strip() in repair_text

def test_main_writes_a_loadable_model_and_its_problems(warm, tmp_path):
    out = tmp_path / "tiny"
    rc = warm.main(["--out", str(out), "--tokenizer", str(TOKENIZER), "--steps", "2", "--problems", "2",
                    "--batch-size", "2", "--sample", "0", "--device", "cpu"])
    assert rc == 0
    report = json.loads((out / "warm_start.json").read_text())
    assert report["settings"]["curriculum"] == "repair" and len(report["loss"]) == 2
    problems = [json.loads(line) for line in (out / "problems.jsonl").read_text().splitlines()]
    assert [p["id"] for p in problems] == report["problems"]
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(str(out)).config.hidden_size == 64
