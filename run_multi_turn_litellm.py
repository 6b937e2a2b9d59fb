"""Multi-turn inference with an API model from cached first turns (the paper's script and flags).

A thin shim over `cobalt rollout` / `cobalt eval`: see :mod:`cobalt.shims`.
"""
import sys

from cobalt.shims import main

if __name__ == "__main__":
    sys.exit(main("run_multi_turn_litellm"))
