"""Offline trajectories to bandit prompts (the paper's preproc/process_multi_turn_taco.py).

A thin shim: `python preproc/process_multi_turn_taco.py --input_file X --output_file Y
--model_name M [--is_test] [flags]` is `cobalt build-prompts [flags]`.
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["build-prompts", *sys.argv[1:]]))
