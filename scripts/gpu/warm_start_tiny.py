"""Warm-start a tiny Qwen3 model so that GRPO rewards vary (issue 15).

A randomly initialised model never writes a code block, so every reward is -1
and every GRPO advantage is 0. This script gives the tiny model (built by
``cobalt tiny-model`` / ``cobalt.engines.tiny_model.build_tiny_qwen3``) a short
supervised pass on the shipped LeetCode reference answers, each written as the
policy's response: a short thinking part closed by ``</think>``, then exactly
one ```` ```python ```` block with the reference solution, then ``<|im_end|>``.
The prompt is the single-turn training prompt (system + instruction templates)
under the Qwen3 chat template, thinking on, as veRL renders it. The loss covers
the response tokens only.

With ``--curriculum repair`` (the default) each problem also teaches the repair
turn, so that multi-turn rollouts of the tiny model have trajectories that
improve (what ``cobalt build-prompts`` keeps) and the online baselines see a
repair: a "broken" first answer (the reference without its last ``return``
line, a realistic bug whose tests fail with ``None``), the same prompt with that
answer's history and the real sandbox feedback on the public tests followed by
the reference, and the prompt with the reference's history and the
all-tests-passed feedback followed by the reference again. The reference is
taught twice as often as the broken answer, so at temperature 1 the first turn
passes on some samples and fails on others. ``--curriculum single`` teaches
the first turn only (every first turn passes once the model has learnt it, so
no trajectory improves).

Then it samples from the trained model at the training temperature and scores
every sample with the project's own reward (``cobalt.reward.compute_score``,
embedded sandboxed evaluator, public tests): the counts of responses with a
```` ```python ```` block, well-formed ones, programs passing at least one test,
and the spread of rewards show whether GRPO will see non-zero advantages.

It writes the model to ``--out`` (loadable by transformers, vLLM and veRL),
``--out/warm_start.json`` (settings, loss curve, sample statistics) and the
problems it trained on as a problems file (``--problems-out``), the input of
``cobalt rollout`` and ``cobalt make-verl-data --kind single-turn``.

Run (CPU check here, more steps on a GPU)::

    python scripts/gpu/warm_start_tiny.py --out /tmp/tiny-warm --steps 60 --sample 4
    python scripts/gpu/warm_start_tiny.py --out /tmp/tiny-warm --hidden-size 256 --layers 4 \\
        --steps 600 --device cuda --sample 8
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

THINK = "<think>\nI will write the solution in Python.\n</think>\n\n"
"""The thinking part of a warm-start target: short, closed by </think> as the format rule asks."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Flags of the warm start."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the warm-started model, tokenizer and warm_start.json")
    p.add_argument("--base", default=None,
                   help="start from this model folder (default: build a tiny Qwen3 with the flags below)")
    p.add_argument("--tokenizer", default=None,
                   help="Qwen3 tokenizer folder (default: $COBALT_QWEN3_TOKENIZER, else ../shared/data/qwen3_tokenizer)")
    p.add_argument("--hidden-size", type=int, default=64, help="hidden size of a newly built model")
    p.add_argument("--layers", type=int, default=2, help="decoder layers of a newly built model")
    p.add_argument("--problems", type=int, default=16,
                   help="train on the N LeetCode problems of the shipped slice with the shortest reference answers")
    p.add_argument("--problems-out", default=None,
                   help="write those problems as a problems file (JSONL) for cobalt rollout / make-verl-data "
                   "(default: <out>/problems.jsonl)")
    p.add_argument("--max-prompt-tokens", type=int, default=1536, help="skip problems whose prompt is longer")
    p.add_argument("--steps", type=int, default=60, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=4, help="examples per step")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW, linear warm-up, cosine decay)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--save-dtype", choices=("bfloat16", "float32"), default="bfloat16",
                   help="dtype of the saved weights (training runs in float32); vLLM's attention kernels need 16 bits")
    p.add_argument("--seed", type=int, default=0, help="seed of data order, weights and sampling")
    p.add_argument("--sample", type=int, default=4, help="samples per problem after training (0: none)")
    p.add_argument("--sample-problems", type=int, default=8, help="problems to sample from after training")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (veRL's training value)")
    p.add_argument("--max-new-tokens", type=int, default=384, help="new tokens per sample")
    p.add_argument("--curriculum", choices=("repair", "single"), default="repair",
                   help="repair: also teach a broken first answer and its repair after real feedback; "
                   "single: the first turn's reference only (see the module docstring)")
    return p.parse_args(argv)


def shipped_problems():
    """The LeetCode slice shipped in ``cobalt/fixtures`` (problems with reference answers)."""
    from cobalt.data.leetcode import load_leetcode
    from cobalt.rollout.leetcode import SAMPLE_FILE

    return load_leetcode(SAMPLE_FILE)


def problems_record(problem, n_public: int = 4) -> dict:
    """A problems-file record, as the rollouts read the shipped problems (call-based tests, the
    first ones public, the rest hidden, the starter code the first turn shows)."""
    from cobalt.rollout.leetcode import problem_record as leetcode_record

    return leetcode_record(problem, n_public)


def problem_record(problem):
    """``problem`` as the rollouts read it (a ``ProblemRecord`` of :func:`problems_record`)."""
    from cobalt.data.problems import problem_from_dict

    return problem_from_dict(problems_record(problem), path="<warm start>", line=None)


def messages(problem) -> list[dict]:
    """The single-turn training prompt: the rollouts' first turn (system + instruction templates)."""
    from cobalt.rollout.conversation import first_turn_messages

    return first_turn_messages(problem_record(problem))


def target(code: str) -> str:
    """The policy response a warm start teaches: thinking closed by </think>, one python block of ``code``."""
    return f"{THINK}```python\n{code.strip()}\n```"


def build_examples(tokenizer, problems, max_prompt_tokens: int):
    """(problem, prompt ids, response ids) for each usable problem, shortest answers first."""
    examples = []
    for problem in problems:
        if "`" in problem.reference:
            continue  # the format rule forbids backticks in the code
        prompt_ids = prompt_token_ids(tokenizer, messages(problem))
        if len(prompt_ids) > max_prompt_tokens:
            continue
        examples.append((problem, prompt_ids, response_token_ids(tokenizer, problem.reference)))
    examples.sort(key=lambda e: (len(e[2]), e[0].task_id))
    return examples


def prompt_token_ids(tokenizer, conversation: list[dict]) -> list[int]:
    """Token ids of ``conversation`` under the chat template, ready for the assistant's answer."""
    prompt = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return tokenizer(prompt, add_special_tokens=False)["input_ids"]


def response_token_ids(tokenizer, code: str) -> list[int]:
    """Token ids of the policy response that carries ``code`` (see :func:`target`), with its end token."""
    return tokenizer(target(code) + "<|im_end|>", add_special_tokens=False)["input_ids"]


def broken_variant(code: str) -> str:
    """``code`` without its last ``return`` line (``pass`` in its place where the block would be empty)."""
    import ast

    lines = code.rstrip().split("\n")
    last = max((i for i, line in enumerate(lines) if line.lstrip().startswith("return")), default=None)
    if last is None:
        return code + "\n        return None  # wrong on purpose" if "def " in code else code
    dropped = lines[:last] + lines[last + 1:]
    try:
        ast.parse("\n".join(dropped))
        return "\n".join(dropped)
    except SyntaxError:
        indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
        return "\n".join(lines[:last] + [indent + "pass"] + lines[last + 1:])


def repair_examples(tokenizer, examples) -> list:
    """The repair curriculum's extra examples for each first-turn example (module docstring).

    The feedback is what a rollout shows: the public tests of :func:`problems_record` run in
    the real sandbox (embedded evaluator), worded by ``cobalt.rollout.conversation`` after the
    earlier answer as the history keeps it (the conversation the rollouts hold).
    """
    from cobalt.execution.client import EvaluatorClient
    from cobalt.rollout.conversation import extend, first_turn_messages, judge_program

    client = EvaluatorClient.embedded()

    async def public_result(program: str, record) -> dict:
        return (await judge_program(program, record.public, client)).public

    extra = []
    for problem, prompt_ids, response_ids in examples:
        record = problem_record(problem)
        first = first_turn_messages(record)
        broken = broken_variant(problem.reference)
        broken_ids = response_token_ids(tokenizer, broken)
        extra.append((problem, prompt_ids, response_ids))  # the reference twice as often as the bug
        extra.append((problem, prompt_ids, broken_ids))
        for program in (broken, problem.reference):
            answer = target(program)
            public = asyncio.run(public_result(program, record))
            follow_up = extend(first, answer, public, no_code=False, enable_thinking=True,
                               fn_name=record.public.fn_name)
            extra.append((problem, prompt_token_ids(tokenizer, follow_up), response_ids))
    return extra


def batch_loss(model, batch, device, pad_id: int):
    """Mean cross-entropy over the response tokens of ``batch`` (the lm head runs on those only)."""
    import torch
    import torch.nn.functional as F

    seqs = [p + r for _, p, r in batch]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    positions, labels = [], []
    for row, ((_, p, r), seq) in enumerate(zip(batch, seqs)):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        for j in range(len(p) - 1, len(seq) - 1):  # position j predicts token j+1 (a response token)
            positions.append((row, j))
            labels.append(seq[j + 1])
    hidden = model.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
    rows = torch.tensor([r for r, _ in positions], device=device)
    cols = torch.tensor([c for _, c in positions], device=device)
    logits = model.lm_head(hidden[rows, cols]).float()
    return F.cross_entropy(logits, torch.tensor(labels, device=device))


def train(model, examples, args, device, pad_id: int) -> list[float]:
    """``args.steps`` AdamW steps over shuffled examples; returns the loss of each step."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup = max(1, args.steps // 10)

    def lr_at(step: int) -> float:
        if step < warmup:
            return args.lr * (step + 1) / warmup
        done = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))

    rng = random.Random(args.seed)
    order: list = []
    losses = []
    model.train()
    start = time.monotonic()
    for step in range(args.steps):
        if len(order) < args.batch_size:
            more = list(examples)
            rng.shuffle(more)
            order += more
        batch, order = order[: args.batch_size], order[args.batch_size:]
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = batch_loss(model, batch, device, pad_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(round(loss.item(), 4))
        if step % max(1, args.steps // 20) == 0 or step == args.steps - 1:
            print(f"warm_start: step {step + 1}/{args.steps} loss {loss.item():.3f} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
    model.eval()
    return losses


def sample_and_score(model, tokenizer, examples, args, device) -> dict:
    """Sample ``args.sample`` responses per problem and score each with cobalt's reward."""
    import torch

    from cobalt.execution.client import EvaluatorClient
    from cobalt.reward import compute_score
    from cobalt.reward.shaped import format_violation
    from cobalt.text import extract_code

    client = EvaluatorClient.embedded()
    torch.manual_seed(args.seed)
    scored = []
    for problem, prompt_ids, _ in examples[: args.sample_problems]:
        ids = torch.tensor([prompt_ids], device=device)
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                 temperature=args.temperature, top_p=1.0, top_k=0,
                                 max_new_tokens=args.max_new_tokens, num_return_sequences=args.sample,
                                 pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(out[:, len(prompt_ids):], skip_special_tokens=True)
        ground_truth = problems_record(problem)["public_test_cases"]
        for text in texts:
            info = asyncio.run(compute_score("leetcode", text, ground_truth, {"prev_best_pass_rate": 0.0},
                                             client=client))
            scored.append({"id": problem.task_id, "has_python_block": "```python" in text,
                           "has_code": extract_code(text) is not None,
                           "format_violation": format_violation(text), **{k: info.get(k) for k in (
                               "score", "pass_rate", "correctness", "improvement", "format", "reason")}})
    scores = [s["score"] for s in scored]
    summary = {
        "samples": len(scored),
        "with_python_block": sum(s["has_python_block"] for s in scored),
        "well_formed": sum(s["format_violation"] is None for s in scored),
        "passing_some_test": sum((s["pass_rate"] or 0) > 0 for s in scored),
        "passing_all_tests": sum((s["pass_rate"] or 0) >= 1 for s in scored),
        "reasons": dict(Counter(str(s["reason"]) for s in scored).most_common()),
        "distinct_rewards": sorted({round(s, 3) for s in scores}),
        "reward_mean": round(statistics.fmean(scores), 4) if scores else None,
        "reward_std": round(statistics.pstdev(scores), 4) if scores else None,
    }
    return {"summary": summary, "samples": scored}


def main(argv: list[str] | None = None) -> int:
    """Build or load the tiny model, warm-start it, save it, sample and score."""
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    torch.manual_seed(args.seed)
    out = Path(args.out)
    base = args.base
    if base is None:
        from cobalt.engines.tiny_model import build_tiny_qwen3

        base = str(out / "_base")
        build_tiny_qwen3(base, tokenizer_dir=args.tokenizer, hidden_size=args.hidden_size, layers=args.layers,
                         seed=args.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    examples = build_examples(tokenizer, shipped_problems(), args.max_prompt_tokens)[: args.problems]
    if not examples:
        print("warm_start: error: no shipped problem fits --max-prompt-tokens", file=sys.stderr)
        return 2
    training = examples + (repair_examples(tokenizer, examples) if args.curriculum == "repair" else [])
    print(f"warm_start: {len(examples)} problems, {len(training)} examples ({args.curriculum}), response tokens "
          f"{min(len(e[2]) for e in examples)}-{max(len(e[2]) for e in examples)}, device {device}", flush=True)
    start = time.monotonic()
    losses = train(model, training, args, device, pad_id)
    train_s = time.monotonic() - start

    out.mkdir(parents=True, exist_ok=True)
    model.to(getattr(torch, args.save_dtype)).save_pretrained(str(out))
    model.float()
    tokenizer.save_pretrained(str(out))
    problems_out = Path(args.problems_out) if args.problems_out else out / "problems.jsonl"
    problems_out.parent.mkdir(parents=True, exist_ok=True)
    with problems_out.open("w") as fh:
        for problem, _, _ in examples:
            fh.write(json.dumps(problems_record(problem)) + "\n")
    report = {"settings": {k: v for k, v in vars(args).items()}, "base": base, "train_s": round(train_s, 1),
              "problems": [e[0].task_id for e in examples], "loss": losses}
    if args.sample > 0:
        scored = sample_and_score(model, tokenizer, examples, args, device)
        report.update(scored)
        print("warm_start: samples " + json.dumps(scored["summary"]), flush=True)
    (out / "warm_start.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"warm_start: model in {out}, problems in {problems_out}, "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {train_s:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
