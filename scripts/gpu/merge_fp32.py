"""Merge a verl FSDP actor checkpoint into a Hugging Face folder in float32.

verl 0.9.1's ``verl.model_merger`` casts every shard to bfloat16, which rounds
away small GRPO updates of a model trained with float32 master weights (the
learning experiment, docs/TRAINING.md §8). This merger keeps float32: it reads
``model_world_size_<W>_rank_<r>.pt`` of ``--local-dir`` (``.../global_step_N/actor``),
joins sharded DTensors along their shard dimension, loads the result into the
model of ``<local-dir>/huggingface`` (strictly: every weight present), saves it
with the base's tokenizer files, and prints how far the weights moved from
``--base``.

    python scripts/gpu/merge_fp32.py --local-dir RUN/checkpoints/global_step_20/actor --target DIR --base BASE
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "chat_template.jinja",
                   "special_tokens_map.json", "added_tokens.json", "generation_config.json")


def shard_files(local_dir: Path) -> list[Path]:
    """The rank files of one world size, in rank order; refuses a folder without a complete set."""
    found = {}
    for path in local_dir.glob("model_world_size_*_rank_*.pt"):
        m = re.fullmatch(r"model_world_size_(\d+)_rank_(\d+)\.pt", path.name)
        if m:
            found.setdefault(int(m.group(1)), {})[int(m.group(2))] = path
    if len(found) != 1:
        raise SystemExit(f"merge_fp32: {local_dir}: expected model_world_size_<W>_rank_<r>.pt of one world size, "
                         f"found {sorted(found) or 'none'}")
    (world, ranks), = found.items()
    if sorted(ranks) != list(range(world)):
        raise SystemExit(f"merge_fp32: {local_dir}: ranks {sorted(ranks)} of world size {world}")
    return [ranks[r] for r in range(world)]


def merged_state_dict(files: list[Path]) -> dict:
    """{name: float32 tensor}: shards joined along their DTensor shard dimension (replicas taken once)."""
    import torch
    from torch.distributed.tensor import DTensor

    shards = [torch.load(f, map_location="cpu", weights_only=False) for f in files]
    out = {}
    for key in shards[0]:
        parts = [s[key] for s in shards]
        if isinstance(parts[0], DTensor):
            placement = parts[0].placements[-1]
            local = [p._local_tensor for p in parts]
            tensor = torch.cat(local, dim=placement.dim) if placement.is_shard() else local[0]
        elif len(parts) == 1:
            tensor = parts[0]
        else:
            raise SystemExit(f"merge_fp32: {key}: a plain tensor in a checkpoint of {len(parts)} ranks "
                             "(only DTensor shards say how to join them)")
        out[key] = tensor.detach().to(torch.float32).contiguous()
    return out


def weight_change(base_dir: str, model) -> str:
    """A line: how many weights differ from the base model's and the largest change."""
    import torch
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).state_dict()
    trained = model.state_dict()
    changed = sum(int((base[k] != trained[k]).sum()) for k in base if k in trained)
    total = sum(v.numel() for v in base.values())
    biggest = max(float((base[k] - trained[k]).abs().max()) for k in base if k in trained)
    return (f"merge_fp32: {changed} of {total} weights differ from the base ({changed / total:.2%}); "
            f"largest change {biggest:.3g}")


def main(argv: list[str] | None = None) -> int:
    """Merge, save in float32, copy the tokenizer, print the change against the base."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--local-dir", required=True, help="the checkpoint's actor folder (global_step_N/actor)")
    p.add_argument("--target", required=True, help="output Hugging Face folder")
    p.add_argument("--base", default=None, help="the model training started from (tokenizer files, weight change)")
    args = p.parse_args(argv)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    local = Path(args.local_dir)
    state = merged_state_dict(shard_files(local))
    config = AutoConfig.from_pretrained(str(local / "huggingface"))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(f"merge_fp32: {local}: weights missing {missing[:5]}, unexpected {unexpected[:5]}")
    if config.tie_word_embeddings:
        model.tie_weights()
    target = Path(args.target)
    model.save_pretrained(str(target))
    source = Path(args.base) if args.base else local / "huggingface"
    for name in TOKENIZER_FILES:
        if (source / name).is_file() and not (target / name).exists():
            shutil.copy(source / name, target / name)
    print(f"merge_fp32: {len(state)} tensors from {local} saved in float32 to {target}")
    if args.base:
        print(weight_change(args.base, model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
