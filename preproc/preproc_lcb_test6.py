"""Prepare LiveCodeBench release test6 (the paper's preproc/preproc_lcb_test6.py).

A thin shim: `python preproc/preproc_lcb_test6.py [flags]` is `cobalt preproc-lcb [flags]`.
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["preproc-lcb", *sys.argv[1:]]))
