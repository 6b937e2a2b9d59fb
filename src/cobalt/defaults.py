"""Every default that more than one part of Cobalt relies on, defined once.

Commands, configs and library functions import these names rather than
repeating the numbers; ``tests/unit/test_defaults.py`` checks that each is
defined in this module only. docs/DEFAULTS.md explains them.
"""
from __future__ import annotations

HISTORY_MAX_CHARS = 6000
"""How much of an assistant turn a multi-turn history keeps with thinking enabled (METHOD §9)."""
