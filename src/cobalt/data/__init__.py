"""Data pipeline: raw problem sets to clean problems, perturbed tests, trajectories and veRL datasets.

- :mod:`cobalt.data.problems`: the problem record and readers for raw sources;
- :mod:`cobalt.data.taco`: TACO-verified cleaning (``cobalt preproc-taco``);
- :mod:`cobalt.data.livecodebench`: LiveCodeBench release test6 (``cobalt preproc-lcb``);
- :mod:`cobalt.data.perturbation`: perturbed public tests (``cobalt perturb``).

Importing this package loads nothing heavy; each command imports what it needs.
"""
