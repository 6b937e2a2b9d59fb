"""Deprecated location, kept for one release: the module is now
``cobalt.training_data.trajectories`` (training data sits above rollout and evaluation).

Importing this name gives that module itself, with a DeprecationWarning.
"""
import importlib
import sys
import warnings

warnings.warn("cobalt.data.trajectories moved to cobalt.training_data.trajectories; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("cobalt.training_data.trajectories")
