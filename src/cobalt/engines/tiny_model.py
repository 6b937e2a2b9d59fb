"""Build a tiny randomly initialised Qwen3-architecture model (``cobalt tiny-model``).

No model weights can be downloaded on the project's machines, so tests, CI
and GPU smoke runs use a model built here from a config: the real Qwen3
tokenizer (``../shared/data/qwen3_tokenizer``, its chat template included)
and a Qwen3 network of a few layers with random weights. The folder it writes
loads with ``AutoModelForCausalLM.from_pretrained`` and
``AutoTokenizer.from_pretrained``, by the ``transformers`` engine, and by vLLM.
Its text is gibberish; what it proves is the plumbing (templates, batching,
token counts, finish reasons).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

ENV_TOKENIZER = "COBALT_QWEN3_TOKENIZER"
"""Environment variable naming the Qwen3 tokenizer folder (default: ``../shared/data/qwen3_tokenizer``)."""

QWEN3_VOCAB_SIZE = 151936
"""Embedding rows of the Qwen3 family (the tokenizer's 151,669 ids padded up)."""


def default_tokenizer_dir() -> Path:
    """``$COBALT_QWEN3_TOKENIZER``, else ``shared/data/qwen3_tokenizer`` beside the repository."""
    env = os.environ.get(ENV_TOKENIZER)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[4] / "shared" / "data" / "qwen3_tokenizer"


def build_tiny_qwen3(
    out_dir: str | os.PathLike,
    tokenizer_dir: str | os.PathLike | None = None,
    hidden_size: int = 64,
    layers: int = 2,
    seed: int = 0,
    heads: int = 4,
    kv_heads: int = 2,
    max_position_embeddings: int = 40960,
) -> Path:
    """Write a random Qwen3 model of ``layers`` x ``hidden_size`` and the tokenizer to ``out_dir``.

    The same arguments and seed give the same weights. Returns ``out_dir``.
    """
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tok_dir = Path(tokenizer_dir) if tokenizer_dir is not None else default_tokenizer_dir()
    if not (tok_dir / "tokenizer_config.json").is_file():
        raise FileNotFoundError(f"{tok_dir}: no Qwen3 tokenizer here (expected tokenizer_config.json); "
                                f"pass --tokenizer or set ${ENV_TOKENIZER}")
    if hidden_size % heads:
        raise ValueError(f"hidden_size {hidden_size} must be a multiple of heads {heads}")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    eos = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[-1]
    config = Qwen3Config(
        vocab_size=max(QWEN3_VOCAB_SIZE, len(tokenizer)),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden_size // heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt tiny-model``."""
    from cobalt.cli_support import add_alias, positive_int

    parser.add_argument("--output-dir", dest="out", required=True, help="folder to write the model and tokenizer to")
    add_alias(parser, "--out", dest="out")
    parser.add_argument("--tokenizer", default=None,
                        help=f"Qwen3 tokenizer folder (default: ${ENV_TOKENIZER}, else ../shared/data/qwen3_tokenizer)")
    parser.add_argument("--hidden-size", type=positive_int, default=64, help="hidden size of the network")
    parser.add_argument("--layers", type=positive_int, default=2, help="number of decoder layers")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")


def run(args: argparse.Namespace) -> int:
    """Build the model; one clear line and exit code 2 on bad input."""
    import sys

    try:
        out = build_tiny_qwen3(args.out, tokenizer_dir=args.tokenizer, hidden_size=args.hidden_size,
                               layers=args.layers, seed=args.seed)
    except (FileNotFoundError, ValueError) as exc:
        print(f"cobalt tiny-model: error: {exc}", file=sys.stderr)
        return 2
    print(f"tiny Qwen3 model ({args.layers} layers, hidden {args.hidden_size}, seed {args.seed}) written to {out}")
    return 0
