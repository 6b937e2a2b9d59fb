"""veRL plugin: the adapter between the pinned verl (0.9.1) and Cobalt's reward.

Nothing of verl is copied or patched. verl loads our code through its public
extension points:

- ``reward.custom_reward_function.path=pkg://cobalt.verl_plugin.reward`` with
  ``name=compute_score``: the async reward function (verl awaits it natively);
- ``reward.reward_manager.source=importlib`` with
  ``module.path=pkg://cobalt.verl_plugin.reward_manager`` and
  ``name=CobaltRewardManager``: a reward manager that bounds concurrent
  evaluator calls per reward worker, applies a timeout and scores a failed row
  -1 in training (0 in validation) instead of failing the batch;
- :mod:`cobalt.verl_plugin.runs`: the paper's training runs as Hydra overrides
  of ``python -m verl.trainer.main_ppo``, printed by ``cobalt train-config``.

Importing this package imports neither verl, torch nor Ray.
"""
