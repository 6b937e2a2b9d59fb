"""Hidden-test evaluation and Pass@1 per turn (the paper's script and flags: --input_file --output_file).

A thin shim over `cobalt rollout` / `cobalt eval`: see :mod:`cobalt.shims`.
"""
import sys

from cobalt.shims import main

if __name__ == "__main__":
    sys.exit(main("eval_multi_turn"))
