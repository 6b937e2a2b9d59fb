"""The paper's inference and evaluation scripts, with their flags, as thin front-ends.

``run_single_turn_vllm.py``, ``run_multi_turn_vllm.py``, ``run_single_turn_litellm.py``,
``run_multi_turn_litellm.py`` and ``eval_multi_turn.py`` at the repository root
call :func:`main` with their name. Each takes the original flags
(``--input_file --output_file --max_tokens --enable_thinking --model_name``, and
for API models the credential flags), sets the defaults of the original run
(engine, turns, sampling) and runs ``cobalt rollout`` or ``cobalt eval``. Any
other flag is passed on unchanged to the cobalt command (``--base-url``,
``--samples``, ``--profile`` ...).

As in the original, a multi-turn script's ``--input_file`` is the output of the
single-turn script: its problems and their cached first turns.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class RolloutShim:
    """Defaults of one of the paper's inference scripts."""

    engine: str
    repair_turns: int
    api: bool
    """An API model (LiteLLM in the original): temperature 1.0, top-p 1.0, 32,000 tokens (METHOD §9)."""

    @property
    def multi_turn(self) -> bool:
        """Reads cached first turns from its input."""
        return self.repair_turns > 0


ROLLOUT_SHIMS: dict[str, RolloutShim] = {
    "run_single_turn_vllm": RolloutShim("vllm", 0, False),
    "run_multi_turn_vllm": RolloutShim("vllm", 8, False),
    "run_single_turn_litellm": RolloutShim("litellm", 0, True),
    "run_multi_turn_litellm": RolloutShim("litellm", 8, True),
}

# Credential flags of the LiteLLM scripts -> the environment variables the clients read.
CREDENTIAL_FLAGS = {
    "openai_api_key": "OPENAI_API_KEY",
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_region_name": "AWS_REGION_NAME",
}


def rollout_parser(name: str) -> argparse.ArgumentParser:
    """The original flags of inference script ``name``."""
    shim = ROLLOUT_SHIMS[name]
    parser = argparse.ArgumentParser(
        prog=f"{name}.py",
        description=f"The paper's {name}.py on Cobalt: runs `cobalt rollout` with the original defaults "
        f"(engine {shim.engine}, {shim.repair_turns} repair turns). Other flags go to `cobalt rollout` "
        "(see `cobalt rollout --help`).",
    )
    parser.add_argument("--input_file", required=True,
                        help="problems (single-turn) or the single-turn output with the cached first turns (multi-turn)")
    parser.add_argument("--output_file", required=True, help="inference records (JSONL)")
    parser.add_argument("--model_name", default=os.environ.get("COBALT_MODEL"),
                        help="model (hub id, local path or API name); default $COBALT_MODEL")
    parser.add_argument("--max_tokens", type=int, default=32000 if shim.api else 8192, help="new tokens per response")
    if not shim.api:
        parser.add_argument("--enable_thinking", action="store_true",
                            help="keep only the text after </think> (cut to 6,000 characters) in the history")
    else:
        for flag, env in CREDENTIAL_FLAGS.items():
            parser.add_argument(f"--{flag}", default=None, help=f"sets ${env} for the API client (never saved)")
    return parser


def translate(name: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``cobalt`` arguments and environment settings equivalent to ``name.py argv``."""
    shim = ROLLOUT_SHIMS[name]
    args, rest = rollout_parser(name).parse_known_args(argv)
    engine = shim.engine
    out = ["rollout", "--engine", engine, "--input", args.input_file, "--output", args.output_file,
           "--turns", str(shim.repair_turns), "--max-tokens", str(args.max_tokens)]
    if args.model_name:
        out += ["--model", args.model_name]
    if shim.multi_turn:
        out += ["--first-turn-from", args.input_file]
    if shim.api:
        out += ["--temperature", "1.0", "--top-p", "1.0"]
    elif args.enable_thinking:
        out.append("--enable-thinking")
    env = {}
    if shim.api:
        env = {CREDENTIAL_FLAGS[f]: getattr(args, f) for f in CREDENTIAL_FLAGS if getattr(args, f)}
    # flags given again by the user win: argparse keeps the last occurrence
    return out + rest, env


def eval_parser() -> argparse.ArgumentParser:
    """The original flags of ``eval_multi_turn.py``."""
    parser = argparse.ArgumentParser(
        prog="eval_multi_turn.py",
        description="The paper's eval_multi_turn.py on Cobalt: `cobalt eval` (hidden tests of every turn, "
        "Pass@1 per turn). Other flags go to `cobalt eval`.",
    )
    parser.add_argument("--input_file", required=True, help="inference records of a multi-turn run")
    parser.add_argument("--output_file", required=True, help="evaluated records (JSONL) and a summary beside them")
    return parser


def main(name: str, argv: list[str] | None = None) -> int:
    """Run the paper's script ``name`` (a key of :data:`ROLLOUT_SHIMS` or ``eval_multi_turn``)."""
    from cobalt.cli import main as cobalt_main

    argv = list(sys.argv[1:] if argv is None else argv)
    if name == "eval_multi_turn":
        args, rest = eval_parser().parse_known_args(argv)
        return cobalt_main(["eval", "--input", args.input_file, "--output", args.output_file, *rest])
    cobalt_argv, env = translate(name, argv)
    os.environ.update(env)
    return cobalt_main(cobalt_argv)
