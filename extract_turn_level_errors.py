"""Extract turn-level reward-hacking cases (the paper's extract_turn_level_errors.py).

A thin shim: `python extract_turn_level_errors.py --data_file D --input_file I --output_file O`
is `cobalt extract-hacking` with the same flags.
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["extract-hacking", *sys.argv[1:]]))
