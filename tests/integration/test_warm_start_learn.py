"""The learning experiment's warm start (scripts/gpu/warm_start_learn.py): the planted mixture of
targets per context, the real sandbox feedback in the repair prompts, and the loss floor."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import math
from pathlib import Path

import pytest

from cobalt.data.synthetic import generate

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT.parent / "shared" / "data" / "qwen3_tokenizer"


@pytest.fixture(scope="module")
def warm():
    spec = importlib.util.spec_from_file_location("warm_start_learn", ROOT / "scripts" / "gpu" / "warm_start_learn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(warm, tmp_path_factory):
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("syn") / "train.jsonl"
    train, _ = generate()
    path.write_text("".join(json.dumps(r) + "\n" for r in train[::300]))  # two templates
    problems = warm.load_instances(str(path), 0)
    publics = asyncio.run(warm.public_results(problems))
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    return problems, publics, tokenizer, warm.contexts(tokenizer, problems, publics, 0.4, 0.3)


def test_six_contexts_per_instance_with_the_planted_weights(built):
    problems, _, tokenizer, data = built
    assert len(problems) == 2 and len(data) == 12
    weights = [sorted(round(w, 6) for _, w in targets) for _, targets in data[:6]]
    # first turn; after bug; after reference; after bug, bug; after bug, reference; after reference, reference
    assert weights == [[0.4, 0.6], [0.3, 0.7], [1.0], [0.3, 0.7], [1.0], [1.0]]
    ref_ids = tokenizer(f"```python\n{problems[0].extra['reference'].strip()}\n```", add_special_tokens=False)["input_ids"]
    first_targets = [tokenizer.decode(r) for r, _ in data[0][1]]
    assert problems[0].extra["reference"].strip() in first_targets[0] and "[1:]" in first_targets[1]
    assert len(ref_ids) < len(data[0][1][0][0])


def test_repair_prompts_carry_the_real_feedback(built):
    problems, publics, tokenizer, data = built
    bug = publics[(problems[0].id, "bug")]
    assert not all(bug["passing"]) and all(publics[(problems[0].id, "ref")]["passing"])
    failing = next(f for ok, f in zip(bug["passing"], bug["feedback"]) if not ok)
    after_bug = tokenizer.decode(data[1][0])
    assert failing in after_bug and "[1:]" in after_bug
    assert "[1:]" not in tokenizer.decode(data[2][0]).split("Problem:")[-1]


def test_loss_floor_is_the_mixture_entropy(warm, built, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from cobalt.engines.tiny_model import build_tiny_qwen3

    *_, tokenizer, data = built
    assert warm.entropy([0.4, 0.6]) == pytest.approx(-(0.4 * math.log(0.4) + 0.6 * math.log(0.6)))
    assert warm.entropy([1.0]) == 0.0
    build_tiny_qwen3(str(tmp_path / "m"), tokenizer_dir=str(TOKENIZER), hidden_size=16, layers=1, seed=0)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"), dtype=torch.float32).eval()
    probe = data[:6]
    loss, floor = warm.loss_and_floor(model, probe, "cpu", tokenizer.pad_token_id)
    # one mixed branch per context: 0.4/0.6 on the first turn, 0.3/0.7 after each failing history
    weighted_tokens = sum(w * len(r) for _, targets in probe for r, w in targets)
    expected = (warm.entropy([0.4, 0.6]) + 2 * warm.entropy([0.3, 0.7])) / weighted_tokens
    assert floor == pytest.approx(expected) and loss > 10 * floor  # an untrained model is far above it
