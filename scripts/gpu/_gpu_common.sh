# shellcheck shell=bash
# Shared by scripts/gpu/prove_inference.sh and prove_training.sh: environment of the offline
# install, logging of each step into $OUT, Ray and Ray Serve helpers, the warm-started tiny model.
#
# Variables (defaults in brackets):
#   ENV_FILE       written by install_wheelhouse.sh [/tmp/cobalt-gpu.env]
#   OUT            folder for the logs; at most 8 files are kept there [$OUT, else /tmp/cobalt-proof]
#   WORK           models, records, checkpoints; reused by later calls on the same machine [/tmp/cobalt-work]
#   PYTHON         interpreter that holds torch [python3]
#   STEP_TIMEOUT   seconds one command of a step may take [540]
#   TINY_HIDDEN / TINY_LAYERS   size of the tiny Qwen3 [256 / 4]
#   WARM_STEPS     supervised warm-start steps on the GPU [400]
#   MODEL          use this model folder instead of the warm-started tiny model

REPO_ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)"
ENV_FILE="${ENV_FILE:-/tmp/cobalt-gpu.env}"
if [[ -f "$ENV_FILE" ]]; then
    # shellcheck source=/dev/null
    source "$ENV_FILE"
else
    echo "gpu: no $ENV_FILE: run scripts/gpu/install_wheelhouse.sh install first (or set ENV_FILE)" >&2
fi
# The repository's code goes before the installed wheel, so a fix needs no new wheel.
export PYTHONPATH="$REPO_ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHON="${PYTHON:-python3}"
export COBALT_SHARED="${COBALT_SHARED:-$REPO_ROOT/../shared}"
export COBALT_QWEN3_TOKENIZER="${COBALT_QWEN3_TOKENIZER:-$COBALT_SHARED/data/qwen3_tokenizer}"
export TIKTOKEN_CACHE_DIR="${TIKTOKEN_CACHE_DIR:-$COBALT_SHARED/data/tiktoken}"
export PYTHONUNBUFFERED=1
# Ray 2.60 turns on token authentication for a head started by `ray start`, and then `ray status`
# from another process fails without the token: one machine, no network, so it stays off.
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
OUT="${OUT:-/tmp/cobalt-proof}"
WORK="${WORK:-/tmp/cobalt-work}"
STEP_TIMEOUT="${STEP_TIMEOUT:-540}"
TINY_HIDDEN="${TINY_HIDDEN:-256}"
TINY_LAYERS="${TINY_LAYERS:-4}"
WARM_STEPS="${WARM_STEPS:-400}"
WARM_DIR="$WORK/tiny-warm"
mkdir -p "$OUT" "$WORK"
cd "$REPO_ROOT"

cobalt() { "$PYTHON" -m cobalt "$@"; }
ray_cli() { "$PYTHON" -m ray.scripts.scripts "$@"; }
# Every long command runs under a deadline, so that a hang still leaves its log behind.
t() { timeout -k 20 "$STEP_TIMEOUT" "$@"; }
tcobalt() { t "$PYTHON" -m cobalt "$@"; }

# step NAME LOGFILE FUNCTION [ARGS...]: run FUNCTION, tee its output into $OUT/LOGFILE, and add
# "NAME rc=.. s=.." to $OUT/summary.log. Later steps run even when one fails.
step() {
    local name="$1" log="$2"; shift 2
    local start=$SECONDS rc
    echo "=== $(date -u +%H:%M:%S) step $name" | tee -a "$OUT/$log"
    set +e
    ( set -e; "$@" ) 2>&1 | tee -a "$OUT/$log"
    rc=${PIPESTATUS[0]}
    set -e
    printf '%-22s rc=%-3s %5d s  (log %s)\n' "$name" "$rc" "$((SECONDS - start))" "$log" | tee -a "$OUT/summary.log"
    return 0
}

# A Ray head on this machine with all its CPUs and GPUs, unless one runs already (in its own
# session, so that it outlives the command and a later call on the same machine finds it).
ensure_ray() {
    if ! ray_cli status >/dev/null 2>&1; then
        setsid "$PYTHON" -m ray.scripts.scripts start --head --port "${RAY_PORT:-6379}" --disable-usage-stats --num-cpus "$(nproc)" \
            --num-gpus "$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')" < /dev/null
    fi
    export RAY_ADDRESS=auto
}

# Stops every Ray process of this machine (the lent machine runs ours alone). STOP_RAY=0 keeps
# them (a shared machine where a dry run must not touch other users' Ray).
stop_ray() { [[ "${STOP_RAY:-1}" == 0 ]] || ray_cli stop --force >/dev/null 2>&1 || true; unset RAY_ADDRESS; }

# wait_app NAME [SECONDS]: until the Ray Serve application NAME is RUNNING.
wait_app() {
    "$PYTHON" - "$1" "${2:-300}" <<'PY'
import sys
import time

import ray
from ray import serve

name, limit = sys.argv[1], float(sys.argv[2])
ray.init(address="auto", logging_level="ERROR")
start = time.monotonic()
while time.monotonic() - start < limit:
    app = serve.status().applications.get(name)
    status = str(app.status) if app is not None else "absent"
    if status.endswith("RUNNING"):
        print(f"Ray Serve app {name} RUNNING after {time.monotonic() - start:.0f} s")
        sys.exit(0)
    if status.endswith("DEPLOY_FAILED"):
        sys.exit(f"Ray Serve app {name} DEPLOY_FAILED: {app.message}")
    time.sleep(2)
sys.exit(f"Ray Serve app {name} not RUNNING after {limit:.0f} s")
PY
}

delete_app() {
    "$PYTHON" -c "import ray; from ray import serve; ray.init(address='auto', logging_level='ERROR'); serve.delete('$1')" || true
}

# app_running NAME: exit 0 when the Ray Serve application NAME is RUNNING now.
app_running() {
    "$PYTHON" -c "import sys, ray; from ray import serve; ray.init(address='auto', logging_level='ERROR'); a = serve.status().applications.get('$1'); sys.exit(0 if a is not None and str(a.status).endswith('RUNNING') else 1)" 2>/dev/null
}

# The evaluator app ("evaluator", route /evaluator) with $1 replicas of one CPU and $2 GiB each
# [2], unless it runs.
start_evaluator() {
    if app_running evaluator; then echo "evaluator app already running"; return 0; fi
    cobalt serve --address auto --detach --replicas "$1" --memory-gb-per-replica "${2:-2}"
    wait_app evaluator 300
}

# The warm-started tiny model in $WARM_DIR (built once per machine; later calls reuse it).
ensure_model() {
    if [[ -n "${MODEL:-}" ]]; then echo "model: $MODEL (given)"; return 0; fi
    if [[ -f "$WARM_DIR/warm_start.json" ]]; then echo "model: $WARM_DIR (built earlier)"; return 0; fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    t "$PYTHON" scripts/gpu/warm_start_tiny.py --out "$WARM_DIR" --tokenizer "$COBALT_QWEN3_TOKENIZER" \
        --hidden-size "$TINY_HIDDEN" --layers "$TINY_LAYERS" --steps "$WARM_STEPS" --batch-size 8 \
        --problems 16 --device cuda --sample 8 --sample-problems 8 --max-new-tokens 512
}
model_dir() { echo "${MODEL:-$WARM_DIR}"; }

# A tarball of Ray's logs (last resort when a step failed), cut to keep under the 16 MiB a file.
pack_ray_logs() {
    local logs=/tmp/ray/session_latest/logs
    [[ -d "$logs" ]] || return 0
    tar -C "$logs" -czf "$OUT/ray_logs.tar.gz" --exclude='*.out.*' . 2>/dev/null || true
    if [[ -f "$OUT/ray_logs.tar.gz" && $(stat -c %s "$OUT/ray_logs.tar.gz") -gt 15000000 ]]; then
        find "$logs" -name '*.err' -o -name '*.log' | head -200 | tar -czf "$OUT/ray_logs.tar.gz" -T - 2>/dev/null || true
    fi
}
