"""Deprecated location, kept for one release: the module is now
``cobalt.training_data.verl_datasets`` (training data sits above rollout and evaluation).

Importing this name gives that module itself, with a DeprecationWarning.
"""
import importlib
import sys
import warnings

warnings.warn("cobalt.data.verl_datasets moved to cobalt.training_data.verl_datasets; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("cobalt.training_data.verl_datasets")
