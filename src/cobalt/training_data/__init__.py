"""Training data built from evaluated rollouts: partial-trajectory bandit prompts
(:mod:`cobalt.training_data.trajectories`) and veRL's parquet rows
(:mod:`cobalt.training_data.verl_datasets`). Above rollout and evaluation, below veRL."""
