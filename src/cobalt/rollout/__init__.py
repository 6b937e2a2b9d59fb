"""Single- and multi-turn rollouts: engines generate, the evaluator judges on public tests.

``turns`` builds each repair turn's user message; ``loop`` runs the rollout;
``cli`` is ``cobalt rollout``.
"""
