"""Cobalt: contextual bandit learning with offline trajectories for multi-turn code generation.

Importing ``cobalt`` (or any subpackage) has no side effects: no Ray handles,
no model loads, no network calls. Build those in functions and pass them in.
"""

__version__ = "0.1.0"
