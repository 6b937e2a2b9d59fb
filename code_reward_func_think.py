"""Compatibility shim for the paper's ``custom_reward_function.path=code_reward_func_think.py``.

verl loads this file by path and calls ``compute_score``; the implementation
lives in the installed package (:mod:`cobalt.verl_plugin.reward`). Prefer
``custom_reward_function.path=pkg://cobalt.verl_plugin.reward``, which does not
depend on the working directory of verl's reward workers.
"""
from cobalt.verl_plugin.reward import compute_score

__all__ = ["compute_score"]
