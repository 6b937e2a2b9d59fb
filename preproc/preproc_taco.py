"""Clean TACO-verified (the paper's preproc/preproc_taco.py).

A thin shim: `python preproc/preproc_taco.py [flags]` is `cobalt preproc-taco [flags]`.
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["preproc-taco", *sys.argv[1:]]))
