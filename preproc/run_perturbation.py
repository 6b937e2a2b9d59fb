"""Perturb public tests (the paper's preproc/run_perturbation.py).

A thin shim: `python preproc/run_perturbation.py [flags]` is `cobalt perturb [flags]`.
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["perturb", *sys.argv[1:]]))
