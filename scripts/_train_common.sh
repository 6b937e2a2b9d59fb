# shellcheck shell=bash
# Shared launcher of the paper's veRL GRPO runs; sourced by scripts/train_*.sh, which set RUN.
#
# Usage: scripts/train_<run>.sh [--dry-run] [HYDRA_OVERRIDE ...]
#
# Steps: start Ray (or join RAY_ADDRESS), start the evaluator app on it, write the
# composed config to $OUTPUT_DIR/train_config.json, then run
# `python -m verl.trainer.main_ppo` with the run's overrides (cobalt train-config
# RUN --print-overrides) followed by yours. --dry-run prints the composed config
# and starts nothing.
#
# Variables (defaults in brackets):
#   MODEL            policy model, hub id or local folder [Qwen/Qwen3-8B]
#   DATA_DIR         folder with <run>/train.parquet, <run>/val.parquet [<repo>/data/verl]
#   TRAIN_FILE       training parquet [from DATA_DIR]
#   VAL_FILE         validation parquet [from DATA_DIR]
#   N_GPUS_PER_NODE  GPUs per node [this machine's: the entries of CUDA_VISIBLE_DEVICES, else
#                    the GPUs nvidia-smi lists; 4, the paper's, for --dry-run on a machine with none]
#   NNODES           nodes [1]
#   LOGGER           comma-separated verl loggers, e.g. console,wandb [console]
#   OUTPUT_DIR       checkpoints, validation dumps, train_config.json [<repo>/outputs/<run>-<model name>]
#   PROJECT_NAME     tracking project [cobalt]
#   EXPERIMENT_NAME  tracking experiment [<run>-<model name>]
#   ROLLOUT_TP       vLLM tensor parallel size [2, the paper's; 1 on a one-GPU node]
#   RAY_ADDRESS      join this Ray cluster instead of starting a local head
#   EVALUATOR_REPLICAS  evaluator replicas of 1 CPU each; the paper ran 80 [half this node's CPUs, at most 80]
#   EVALUATOR_ARGS   more flags for `cobalt serve` (--memory-gb-per-replica ...) []
#   SKIP_EVALUATOR   1: the evaluator app is already running on the cluster [0]
#   KEEP_RAY         1: leave the Ray head this script started running at exit [0]
#   PYTHON           interpreter with cobalt[train] installed [<repo>/.venv/bin/python, else python3]

set -euo pipefail

: "${RUN:?RUN must be set by the calling script}"
REPO_ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

DRY_RUN=0
EXTRA_OVERRIDES=()
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY_RUN=1 ;;
        -h|--help)
            sed -n '/^# Usage:/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0 ;;
        *) EXTRA_OVERRIDES+=("$arg") ;;
    esac
done

MODEL="${MODEL:-Qwen/Qwen3-8B}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/data/verl}"
# The GPUs this process may use: CUDA_VISIBLE_DEVICES when set (an empty value hides all),
# else what the driver lists. Prints 0 when there is no driver.
visible_gpu_count() {
    if [[ -n "${CUDA_VISIBLE_DEVICES+set}" ]]; then
        local ids="${CUDA_VISIBLE_DEVICES// /}"
        if [[ -z "$ids" || "$ids" == "-1" ]]; then echo 0; else echo "$ids" | tr ',' '\n' | grep -c .; fi
        return
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
        return
    fi
    echo 0
}

if [[ -z "${N_GPUS_PER_NODE:-}" ]]; then
    N_GPUS_PER_NODE="$(visible_gpu_count)"
    if [[ "$N_GPUS_PER_NODE" -lt 1 ]]; then
        if [[ "$DRY_RUN" == 1 ]]; then
            N_GPUS_PER_NODE=4   # the paper's node; a dry run only composes the config
        else
            echo "$(basename -- "$0"): no GPU found (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them all); set N_GPUS_PER_NODE or run on a GPU node" >&2
            exit 1
        fi
    fi
fi
NNODES="${NNODES:-1}"
LOGGER="${LOGGER:-console}"
PROJECT_NAME="${PROJECT_NAME:-cobalt}"
EXPERIMENT_NAME="${EXPERIMENT_NAME:-$RUN-$(basename -- "${MODEL%/}")}"
OUTPUT_DIR="${OUTPUT_DIR:-$REPO_ROOT/outputs/$EXPERIMENT_NAME}"
ROLLOUT_TP="${ROLLOUT_TP:-$(( N_GPUS_PER_NODE >= 2 ? 2 : 1 ))}"

# Flags of `cobalt train-config`; they go after the run name and its extra overrides.
CONFIG_ARGS=(
    --model "$MODEL"
    --data-dir "$DATA_DIR"
    --n-gpus-per-node "$N_GPUS_PER_NODE"
    --nnodes "$NNODES"
    --logger "$LOGGER"
    --project-name "$PROJECT_NAME"
    --experiment-name "$EXPERIMENT_NAME"
    --output-dir "$OUTPUT_DIR"
    --rollout-tp "$ROLLOUT_TP"
)
[[ -n "${TRAIN_FILE:-}" ]] && CONFIG_ARGS+=(--train-files "$TRAIN_FILE")
[[ -n "${VAL_FILE:-}" ]] && CONFIG_ARGS+=(--val-files "$VAL_FILE")

cobalt_cli() { "$PYTHON" -m cobalt "$@"; }

if [[ "$DRY_RUN" == 1 ]]; then
    cobalt_cli train-config "$RUN" "${EXTRA_OVERRIDES[@]}" "${CONFIG_ARGS[@]}"
    exit $?
fi

STARTED_RAY=0
cleanup() {
    if [[ "$STARTED_RAY" == 1 && "${KEEP_RAY:-0}" != 1 ]]; then "$PYTHON" -m ray.scripts.scripts stop || true; fi
}
trap cleanup EXIT

# 1. Ray: join the given cluster, or start a head here.
if [[ -z "${RAY_ADDRESS:-}" ]]; then
    "$PYTHON" -m ray.scripts.scripts start --head --disable-usage-stats
    STARTED_RAY=1
    export RAY_ADDRESS=auto
fi
export RAY_ADDRESS

# 2. The evaluator app ("evaluator", route /evaluator) on that cluster.
if [[ "${SKIP_EVALUATOR:-0}" != 1 ]]; then
    read -r -a EVALUATOR_EXTRA <<< "${EVALUATOR_ARGS:-}"
    HALF_CPUS=$(( $(nproc) / 2 ))
    EVALUATOR_REPLICAS="${EVALUATOR_REPLICAS:-$(( HALF_CPUS > 80 ? 80 : (HALF_CPUS < 1 ? 1 : HALF_CPUS) ))}"
    EVALUATOR_EXTRA=(--replicas "$EVALUATOR_REPLICAS" "${EVALUATOR_EXTRA[@]}")
    cobalt_cli serve --address "$RAY_ADDRESS" --detach "${EVALUATOR_EXTRA[@]}"
    "$PYTHON" - <<'PY'
import os
import sys
import time

import ray
from ray import serve

ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    app = serve.status().applications.get("evaluator")
    if app is not None and str(app.status).endswith("RUNNING"):
        print("evaluator app is running", file=sys.stderr)
        sys.exit(0)
    time.sleep(2)
sys.exit("the evaluator app did not reach RUNNING within 300 s")
PY
fi

# 3. The composed config beside the outputs, then the trainer. One train-config call (it imports
#    verl) checks and saves the config and prints the overrides: the run's own, then yours.
mkdir -p "$OUTPUT_DIR"
mapfile -t OVERRIDES < <(cobalt_cli train-config "$RUN" "${EXTRA_OVERRIDES[@]}" "${CONFIG_ARGS[@]}" \
    --save "$OUTPUT_DIR/train_config.json" --print-overrides)
[[ "${#OVERRIDES[@]}" -gt 0 ]] || { echo "cobalt train-config printed no overrides (see its message above)" >&2; exit 1; }
export COBALT_EVALUATOR=ray
cd "$REPO_ROOT"
"$PYTHON" -m verl.trainer.main_ppo "${OVERRIDES[@]}"
