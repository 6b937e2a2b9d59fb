"""Hidden-test evaluation of rollouts and Pass@1 per turn (METHOD §6, §9).

``passk`` holds the unbiased estimator and the per-turn table; ``hidden`` runs
every turn's program on the hidden tests; ``cli`` is ``cobalt eval``.
"""
