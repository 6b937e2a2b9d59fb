"""Single-turn inference with an API model (the paper's script and flags: --model_name --input_file --output_file and the credential flags).

A thin shim over `cobalt rollout` / `cobalt eval`: see :mod:`cobalt.shims`.
"""
import sys

from cobalt.shims import main

if __name__ == "__main__":
    sys.exit(main("run_single_turn_litellm"))
