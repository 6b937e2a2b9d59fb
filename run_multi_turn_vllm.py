"""Multi-turn inference with a vLLM-served model from cached first turns (the paper's script and flags: --input_file --output_file --max_tokens --enable_thinking --model_name).

A thin shim over `cobalt rollout` / `cobalt eval`: see :mod:`cobalt.shims`.
"""
import sys

from cobalt.shims import main

if __name__ == "__main__":
    sys.exit(main("run_multi_turn_vllm"))
