"""Warm start of the learning experiment: partial, stochastic competence on the generated tasks.

The base of docs/TRAINING.md §8. A tiny Qwen3 (``cobalt.engines.tiny_model``, the
real tokenizer) is taught, on the *training* instances of ``cobalt make-synthetic``
only, to answer in the policy's format (thinking closed by ``</think>``, one
python block; the targets of ``warm_start_tiny.target``) with a planted mixture:

- first turn: the reference program with weight ``--p-correct`` (0.4), the shared
  small bug (the list read with ``[1:]``) with the rest (0.6);
- after a buggy program and its real failing feedback (public tests run in the
  real sandbox, worded as the rollouts word them, after one or two earlier turns):
  the fix with weight ``--p-fix`` (0.3), the same bug again with the rest (0.7);
- after the reference and the all-passed feedback: the reference again.

Each context carries all its targets with their weights, and the loss is
the weights' token sum, so that its minimum is reached when the model's branch
token follows the mixture: the floor (the mixture's entropy per weighted token)
is printed beside the loss on a fixed set of contexts. Training runs and the
model is saved in float32 (``--save-dtype``) so that the later GRPO updates are
not rounded away.

Then ``--sample`` first-turn programs per instance on ``--sample-problems``
training instances at temperature 1 are sorted by exact match into reference /
bug / other; the gate proper (base turn-0 Pass@1 on the training instances,
hidden tests) runs in ``scripts/gpu/learn.sh`` on the base rollouts.

Writes ``--out`` (the model and tokenizer) and ``--out/warm_start.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from warm_start_tiny import prompt_token_ids, response_token_ids, target  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Flags of the warm start."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", required=True, help="training problems file of cobalt make-synthetic (train.jsonl)")
    p.add_argument("--out", required=True, help="folder for the model, tokenizer and warm_start.json")
    p.add_argument("--tokenizer", default=None, help="Qwen3 tokenizer folder (default: $COBALT_QWEN3_TOKENIZER)")
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--limit", type=int, default=0, help="use the first N training instances (0: all; dry runs)")
    p.add_argument("--p-correct", type=float, default=0.4, help="first turn: weight of the reference")
    p.add_argument("--p-fix", type=float, default=0.3, help="after failing feedback: weight of the fix")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=16, help="contexts per step (each with all its targets)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--probe", type=int, default=64, help="contexts on which the loss is compared with its floor")
    p.add_argument("--sample", type=int, default=4, help="first-turn samples per instance after training (0: none)")
    p.add_argument("--sample-problems", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=256)
    return p.parse_args(argv)


def load_instances(path: str, limit: int) -> list:
    """The training problems (``ProblemRecord`` with ``reference`` and ``buggy`` in ``extra``)."""
    from cobalt.data.problems import iter_problems

    problems = [p for _, p in iter_problems(path)]
    for p in problems:
        if "reference" not in p.extra or "buggy" not in p.extra:
            raise SystemExit(f"{path}: problem {p.id}: no 'reference'/'buggy' field (not a make-synthetic file)")
    return problems[:limit] if limit > 0 else problems


async def public_results(problems) -> dict:
    """{(problem id, 'ref'|'bug'): public result} from the real sandbox (embedded evaluator)."""
    from cobalt.execution.client import EvaluatorClient

    client = EvaluatorClient.embedded()
    keys, jobs = [], []
    for p in problems:
        for kind in ("ref", "bug"):
            keys.append((p.id, kind))
            jobs.append((p.extra["reference" if kind == "ref" else "buggy"], p.public))
    results = await client.evaluate_many(jobs)
    return {k: {"passing": list(r.passing), "feedback": list(r.feedback)} for k, r in zip(keys, results)}


def contexts(tokenizer, problems, publics, p_correct: float, p_fix: float) -> list:
    """Per instance and history: (prompt ids, [(response ids, weight), ...]) (module docstring)."""
    from cobalt.rollout.conversation import extend, first_turn_messages

    out = []
    for p in problems:
        ids = {"ref": response_token_ids(tokenizer, p.extra["reference"]),
               "bug": response_token_ids(tokenizer, p.extra["buggy"])}
        for kind in ("ref", "bug"):
            if all(publics[(p.id, kind)]["passing"]) != (kind == "ref"):
                raise SystemExit(f"problem {p.id}: the {kind} program does not behave as planted on its public tests")
        for history in ((), ("bug",), ("ref",), ("bug", "bug"), ("bug", "ref"), ("ref", "ref")):
            messages = first_turn_messages(p)
            for kind in history:
                code = p.extra["reference" if kind == "ref" else "buggy"]
                messages = extend(messages, target(code), publics[(p.id, kind)], no_code=False,
                                  enable_thinking=True, fn_name=p.public.fn_name)
            if not history:
                targets = [(ids["ref"], p_correct), (ids["bug"], 1 - p_correct)]
            elif history[-1] == "bug":
                targets = [(ids["ref"], p_fix), (ids["bug"], 1 - p_fix)]
            else:
                targets = [(ids["ref"], 1.0)]
            out.append((prompt_token_ids(tokenizer, messages), targets))
    return out


def entropy(weights) -> float:
    """Entropy in nats of a branch with these weights (they sum to 1)."""
    return -sum(w * math.log(w) for w in weights if w > 0)


def weighted_loss(model, batch, device, pad_id: int, reduce: bool = True):
    """Sum over (context, target) of weight x token cross-entropy, over the weighted token count.

    Its minimum over a context is reached when the model's probability of each
    target's branch token equals the target's weight. ``reduce=False`` returns
    (weighted nats, weighted tokens) as floats.
    """
    import torch
    import torch.nn.functional as F

    rows = [(prompt, resp, w) for prompt, targets in batch for resp, w in targets if w > 0]
    seqs = [p + r for p, r, _ in rows]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    pos_r, pos_c, labels, weights = [], [], [], []
    for i, ((p, r, w), seq) in enumerate(zip(rows, seqs)):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        for j in range(len(p) - 1, len(seq) - 1):
            pos_r.append(i)
            pos_c.append(j)
            labels.append(seq[j + 1])
            weights.append(w)
    hidden = model.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
    logits = model.lm_head(hidden[torch.tensor(pos_r, device=device), torch.tensor(pos_c, device=device)]).float()
    nats = F.cross_entropy(logits, torch.tensor(labels, device=device), reduction="none")
    w = torch.tensor(weights, device=device)
    if not reduce:
        return float((nats * w).sum()), float(w.sum())
    return (nats * w).sum() / w.sum()


def loss_and_floor(model, probe, device, pad_id: int) -> tuple[float, float]:
    """(weighted loss, its floor) over the ``probe`` contexts."""
    import torch

    nats = tokens = floor = 0.0
    with torch.no_grad():
        for i in range(0, len(probe), 8):
            a, b = weighted_loss(model, probe[i:i + 8], device, pad_id, reduce=False)
            nats, tokens = nats + a, tokens + b
    floor = sum(entropy([w for _, w in targets]) for _, targets in probe)
    return nats / tokens, floor / tokens


def train(model, data, args, device, pad_id: int, probe) -> list[dict]:
    """AdamW over shuffled contexts (linear warm-up, cosine decay to 10%); the loss curve."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup = max(1, args.steps // 20)
    rng = random.Random(args.seed)
    order: list = []
    curve = []
    start = time.monotonic()
    model.train()
    for step in range(args.steps):
        if len(order) < args.batch_size:
            more = list(data)
            rng.shuffle(more)
            order += more
        batch, order = order[: args.batch_size], order[args.batch_size:]
        frac = (step - warmup) / max(1, args.steps - warmup)
        lr = args.lr * ((step + 1) / warmup if step < warmup else 0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        loss = weighted_loss(model, batch, device, pad_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % max(1, args.steps // 10) == 0 or step == args.steps - 1:
            model.eval()
            probe_loss, floor = loss_and_floor(model, probe, device, pad_id)
            model.train()
            curve.append({"step": step + 1, "batch_loss": round(loss.item(), 5), "probe_loss": round(probe_loss, 5),
                          "floor": round(floor, 5), "s": round(time.monotonic() - start, 1)})
            print(f"warm_start_learn: step {step + 1}/{args.steps} loss {loss.item():.4f} probe {probe_loss:.4f} "
                  f"(floor {floor:.4f}) {time.monotonic() - start:.0f} s", flush=True)
    model.eval()
    return curve


def sample_first_turns(model, tokenizer, problems, args, device) -> dict:
    """First-turn samples at temperature 1 sorted into reference / bug / other by their code."""
    import torch

    from cobalt.rollout.conversation import first_turn_messages
    from cobalt.text import extract_code

    torch.manual_seed(args.seed)
    counts = {"reference": 0, "bug": 0, "other": 0}
    for p in problems[:: max(1, len(problems) // max(1, args.sample_problems))][: args.sample_problems]:
        prompt = prompt_token_ids(tokenizer, first_turn_messages(p))
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0,
                                 top_p=1.0, top_k=0, max_new_tokens=args.max_new_tokens,
                                 num_return_sequences=args.sample, pad_token_id=tokenizer.pad_token_id)
        for text in tokenizer.batch_decode(out[:, len(prompt):], skip_special_tokens=True):
            code = (extract_code(text) or "").strip()
            kind = ("reference" if code == p.extra["reference"].strip()
                    else "bug" if code == p.extra["buggy"].strip() else "other")
            counts[kind] += 1
    total = sum(counts.values())
    return {**counts, "samples": total, "reference_share": round(counts["reference"] / total, 4) if total else None}


def main(argv: list[str] | None = None) -> int:
    """Build the tiny model, teach it the planted mixture, save it in float32, sample."""
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cobalt.engines.tiny_model import build_tiny_qwen3

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    torch.manual_seed(args.seed)
    out = Path(args.out)
    base = out / "_base"
    build_tiny_qwen3(str(base), tokenizer_dir=args.tokenizer, hidden_size=args.hidden_size, layers=args.layers,
                     seed=args.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32).to(device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    problems = load_instances(args.problems, args.limit)
    start = time.monotonic()
    publics = asyncio.run(public_results(problems))
    data = contexts(tokenizer, problems, publics, args.p_correct, args.p_fix)
    print(f"warm_start_learn: {len(problems)} instances, {len(data)} contexts, feedback from the sandbox in "
          f"{time.monotonic() - start:.0f} s, device {device}", flush=True)
    probe = random.Random(args.seed + 1).sample(data, max(1, min(args.probe, len(data))))
    start = time.monotonic()
    curve = train(model, data, args, device, pad_id, probe)
    train_s = time.monotonic() - start

    out.mkdir(parents=True, exist_ok=True)
    model.to(getattr(torch, args.save_dtype)).save_pretrained(str(out))
    model.float()
    tokenizer.save_pretrained(str(out))
    report = {"settings": vars(args), "instances": len(problems), "contexts": len(data), "train_s": round(train_s, 1),
              "curve": curve}
    if args.sample > 0:
        report["first_turn_samples"] = sample_first_turns(model, tokenizer, problems, args, device)
        print("warm_start_learn: first-turn samples " + json.dumps(report["first_turn_samples"]), flush=True)
    (out / "warm_start.json").write_text(json.dumps(report, indent=1) + "\n")
    last = curve[-1]
    print(f"warm_start_learn: model in {out} ({args.save_dtype}); probe loss {last['probe_loss']:.4f} against the "
          f"floor {last['floor']:.4f}; {train_s:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
