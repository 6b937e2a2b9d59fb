#!/usr/bin/env bash
# VeRPO-MT: the online multi-turn baseline (verl agent loop cobalt.verl_plugin.agent_loop,
# up to T = 2 repair turns with public-test feedback, VeRPO's dense reward).
# Same model, batch sizes, KL and clipping as scripts/train_cobalt.sh (src/cobalt/verl_plugin/runs.py);
# data: $DATA_DIR/multiturn/{train,val}.parquet from `cobalt make-verl-data --kind multiturn`.
# See docs/BASELINES.md. Run with --help for the variables, --dry-run to print the composed
# verl config; any other argument is a Hydra override for verl.
export RUN=verpo-mt
# shellcheck source=scripts/_train_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_train_common.sh"
