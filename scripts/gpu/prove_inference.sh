#!/usr/bin/env bash
# The inference proof on one GPU (issue 14), in one command, after install_wheelhouse.sh install.
#
# Usage: bash scripts/gpu/prove_inference.sh [STEP ...]
#   steps, in this order by default: model serve rollout bench-rollout bench-grpo
#   model          warm-start the tiny Qwen3 (scripts/gpu/warm_start_tiny.py), reused if built earlier
#   serve          Ray head, the evaluator app, and the vLLM engine as the Ray Serve app vllm_actor
#                  (`serve run vllm_engine_actor:app`, the paper's command)
#   rollout        cobalt rollout through vllm_actor: 8 problems, 4 samples, 2 repair turns,
#                  programs judged by the evaluator app; then cobalt eval and cobalt report
#   bench-rollout  benchmarks/bench_rollout.py --engine vllm: the rollout driver against the
#                  blocking driver and against one all-at-once generate, same prompts, same run
#   bench-grpo     benchmarks/bench_grpo_batch.py: one GRPO batch (2,048 responses x ~20 tests)
#                  scored by compute_score against the evaluator app on this machine's cores
#
# Variables: those of scripts/gpu/_gpu_common.sh (OUT, WORK, ENV_FILE, MODEL, TINY_HIDDEN,
# TINY_LAYERS, WARM_STEPS, STEP_TIMEOUT) and
#   N_PROBLEMS / SAMPLES / TURNS / MAX_TOKENS   the rollout [8 / 4 / 2 / 512]
#   EVALUATOR_REPLICAS   evaluator replicas of one CPU [cores - 2]
#   VLLM_GPU_UTIL        GPU memory share of the vLLM engine [0.4]
#   SERVE_ENGINE         cobalt's engine name for the Ray Serve vLLM app [vllm-serve]
#   BENCH_PROMPTS / BENCH_SAMPLES / BENCH_TOKENS   bench-rollout size [64 / 16 / 256]
#   GRPO_RESPONSES       bench-grpo batch [2048]
# Logs in $OUT (8 files at most come back): summary.log, setup.log, rollout.log,
# bench_rollout.log, bench_grpo.log, results.tar.gz (records, report), ray_logs.tar.gz on failure.
set -eo pipefail
# shellcheck source=scripts/gpu/_gpu_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_gpu_common.sh"

N_PROBLEMS="${N_PROBLEMS:-8}"
SAMPLES="${SAMPLES:-4}"
TURNS="${TURNS:-2}"
MAX_TOKENS="${MAX_TOKENS:-512}"
EVALUATOR_REPLICAS="${EVALUATOR_REPLICAS:-$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))}"
VLLM_GPU_UTIL="${VLLM_GPU_UTIL:-0.4}"
# TODO(engines): the engine name that reaches the Ray Serve app vllm_actor from `cobalt rollout`
# is not fixed yet (issue 12); set SERVE_ENGINE to it, or to "vllm" for the in-process engine.
SERVE_ENGINE="${SERVE_ENGINE:-vllm-serve}"
BENCH_PROMPTS="${BENCH_PROMPTS:-64}"
BENCH_SAMPLES="${BENCH_SAMPLES:-16}"
BENCH_TOKENS="${BENCH_TOKENS:-256}"
GRPO_RESPONSES="${GRPO_RESPONSES:-2048}"
RUN_DIR="$WORK/inference"
STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(model serve rollout bench-rollout bench-grpo)

do_model() { ensure_model; }

do_serve() {
    mkdir -p "$RUN_DIR"
    ensure_ray
    start_evaluator "$EVALUATOR_REPLICAS"
    if app_running vllm_actor; then echo "vllm_actor already running"; return 0; fi
    [[ -f vllm_engine_actor.py ]] || { echo "TODO(engines): vllm_engine_actor.py is not in the repository yet"; return 1; }
    # TODO(engines): the variable names the deployment reads (model, replicas, TP, memory share)
    # are assumed here; match them to vllm_engine_actor.py / cobalt.engines once it lands.
    COBALT_VLLM_MODEL="$(model_dir)" COBALT_VLLM_NUM_REPLICAS=1 COBALT_VLLM_TP=1 \
        COBALT_VLLM_GPU_MEMORY_UTILIZATION="$VLLM_GPU_UTIL" \
        setsid "$PYTHON" -m ray.serve.scripts run vllm_engine_actor:app --address auto \
        --name vllm_actor --route-prefix /vllm_actor > "$RUN_DIR/serve_run.log" 2>&1 &
    wait_app vllm_actor 420
}

do_rollout() {
    local model; model="$(model_dir)"
    do_serve   # a no-op when the apps run already (a later call starts them again)
    mkdir -p "$RUN_DIR"
    rm -f "$RUN_DIR"/records.jsonl* "$RUN_DIR"/evaluated.jsonl*
    local start=$SECONDS
    tcobalt rollout --engine "$SERVE_ENGINE" --model "$model" --input "$WARM_DIR/problems.jsonl" \
        --limit "$N_PROBLEMS" --samples "$SAMPLES" --turns "$TURNS" --max-tokens "$MAX_TOKENS" \
        --evaluator ray --ray-address auto --output "$RUN_DIR/records.jsonl" --no-progress --seed 0
    echo "rollout: $N_PROBLEMS problems x $SAMPLES samples x (1 + $TURNS) turns in $((SECONDS - start)) s"
    tcobalt eval --input "$RUN_DIR/records.jsonl" --output "$RUN_DIR/evaluated.jsonl" \
        --evaluator ray --ray-address auto --no-progress
    tcobalt report "$RUN_DIR/evaluated.jsonl" --labels "tiny-warm" --out-dir "$RUN_DIR/report" \
        --note "tiny Qwen3 (hidden $TINY_HIDDEN, $TINY_LAYERS layers, warm-started), vLLM in Ray Serve, $N_PROBLEMS LeetCode problems"
    cat "$RUN_DIR/report/pass_at_1.md"
}

do_bench_rollout() {
    # The in-process engine needs the GPU memory the Ray Serve replica holds.
    ensure_ray
    start_evaluator "$EVALUATOR_REPLICAS"
    app_running vllm_actor && delete_app vllm_actor
    [[ -f benchmarks/bench_rollout.py ]] || { echo "TODO(rollout): benchmarks/bench_rollout.py is not in the repository yet"; return 1; }
    # TODO(rollout): flag names assumed; match them to benchmarks/bench_rollout.py once it lands.
    t "$PYTHON" benchmarks/bench_rollout.py --engine vllm --model "$(model_dir)" \
        --input "$WARM_DIR/problems.jsonl" --prompts "$BENCH_PROMPTS" --samples "$BENCH_SAMPLES" \
        --max-tokens "$BENCH_TOKENS" --evaluator ray --ray-address auto
}

do_bench_grpo() {
    [[ -f benchmarks/bench_grpo_batch.py ]] || { echo "TODO(exec): benchmarks/bench_grpo_batch.py is not in the repository yet"; return 1; }
    ensure_ray
    start_evaluator "$EVALUATOR_REPLICAS"
    # TODO(exec): flag names assumed; match them to benchmarks/bench_grpo_batch.py once it lands.
    t "$PYTHON" benchmarks/bench_grpo_batch.py --responses "$GRPO_RESPONSES" --tests 20 \
        --evaluator ray --ray-address auto --replicas "$EVALUATOR_REPLICAS"
}

failed=0
for s in "${STEPS[@]}"; do
    case "$s" in
        model) step model setup.log do_model ;;
        serve) step serve setup.log do_serve ;;
        rollout) step rollout rollout.log do_rollout ;;
        bench-rollout) step bench-rollout bench_rollout.log do_bench_rollout ;;
        bench-grpo) step bench-grpo bench_grpo.log do_bench_grpo ;;
        *) echo "prove_inference: unknown step '$s'" >&2; exit 2 ;;
    esac
done
tar -C "$WORK" -czf "$OUT/results.tar.gz" --exclude='*.safetensors' --exclude='_base' \
    tiny-warm/warm_start.json tiny-warm/problems.jsonl inference 2>/dev/null || true
grep -q 'rc=[1-9]' "$OUT/summary.log" && { failed=1; pack_ray_logs; }
cat "$OUT/summary.log"
exit "$failed"
