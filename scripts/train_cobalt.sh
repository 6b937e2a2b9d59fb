#!/usr/bin/env bash
# Cobalt: contextual bandit learning on partial-trajectory prompts.
# The paper's settings (METHOD §5) live in src/cobalt/verl_plugin/runs.py; see
# docs/TRAINING.md. Run with --help for the variables, --dry-run to print the
# composed verl config; any other argument is a Hydra override for verl.
export RUN=cobalt
# shellcheck source=scripts/_train_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_train_common.sh"
