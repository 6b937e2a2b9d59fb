"""Fixtures of the escape and abuse suite (the harness itself is in escape_harness.py)."""
from escape_harness import host, run_attack, sentinel_proc  # noqa: F401  (pytest fixtures)
