#!/usr/bin/env bash
# The inference proof on one GPU (issue 14), in one command, after install_wheelhouse.sh install.
#
# Usage: bash scripts/gpu/prove_inference.sh [STEP ...]
#   steps, in this order by default: model serve rollout bench-rollout bench-grpo
#   model          warm-start the tiny Qwen3 (scripts/gpu/warm_start_tiny.py), reused if built earlier
#   serve          Ray head, the evaluator app (`cobalt serve --detach`), and the vLLM engine as the
#                  Ray Serve app vllm_actor (`serve run vllm_engine_actor:app`, the paper's command;
#                  shaped by COBALT_VLLM_* variables, cobalt.engines.vllm_serve)
#   rollout        cobalt rollout --engine vllm-serve through vllm_actor: 8 problems, 4 samples,
#                  2 repair turns, programs judged by the evaluator app; then cobalt eval and report
#   bench-rollout  benchmarks/bench_rollout.py --engine vllm (in-process; vllm_actor is deleted first):
#                  64 problems x 16 samples x 256 tokens, first turn only: one generate holding all
#                  prompts, the rollout driver (programs judged in the loop), the blocking driver
#                  (one generate per prompt, programs judged one by one; first BENCH_BLOCKING problems);
#                  then a multi-turn run (BENCH_MT_PROBLEMS x 4 samples x 2 repair turns)
#   bench-grpo     benchmarks/bench_grpo_batch.py --via serve: one GRPO batch (2,048 responses x 20
#                  tests) scored by compute_score through the Ray Serve evaluator on all cores
#
# Variables: those of scripts/gpu/_gpu_common.sh (OUT, WORK, ENV_FILE, MODEL, TINY_HIDDEN,
# TINY_LAYERS, WARM_STEPS, STEP_TIMEOUT) and
#   N_PROBLEMS / SAMPLES / TURNS / MAX_TOKENS   the rollout [8 / 4 / 2 / 512]
#   EVALUATOR_REPLICAS   evaluator replicas of one CPU [cores - 2]
#   EVALUATOR_MEM_GB     memory each evaluator replica reserves in Ray, GiB [2]
#   VLLM_GPU_UTIL        GPU memory share of the vllm_actor replica [0.4]
#   VLLM_BACKEND         engine inside vllm_actor: vllm, or transformers for a CPU dry run [vllm]
#   BENCH_ENGINE         engine of bench-rollout: vllm, or transformers for a CPU dry run [vllm]
#   BENCH_PROMPTS / BENCH_SAMPLES / BENCH_TOKENS / BENCH_BLOCKING   bench-rollout [64 / 16 / 256 / 8]
#   BENCH_MT_PROBLEMS    problems of the multi-turn bench run, 0 to skip [16]
#   GRPO_RESPONSES / GRPO_TESTS / GRPO_MIX / GRPO_PASSES   bench-grpo
#                        [2048 / 20 / correct=0.45,wrong=0.5,slow=0.03,hostile=0.02 / 4]
# Logs in $OUT (8 files at most come back): summary.log, setup.log, rollout.log,
# bench_rollout.log, bench_grpo.log, inference_results.tar.gz (records, report), ray_logs.tar.gz on failure.
set -eo pipefail
# shellcheck source=scripts/gpu/_gpu_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_gpu_common.sh"

N_PROBLEMS="${N_PROBLEMS:-8}"
SAMPLES="${SAMPLES:-4}"
TURNS="${TURNS:-2}"
MAX_TOKENS="${MAX_TOKENS:-512}"
EVALUATOR_REPLICAS="${EVALUATOR_REPLICAS:-$(( $(nproc) > 4 ? $(nproc) - 2 : 1 ))}"
EVALUATOR_MEM_GB="${EVALUATOR_MEM_GB:-2}"
VLLM_GPU_UTIL="${VLLM_GPU_UTIL:-0.4}"
VLLM_BACKEND="${VLLM_BACKEND:-vllm}"
BENCH_ENGINE="${BENCH_ENGINE:-vllm}"
BENCH_PROMPTS="${BENCH_PROMPTS:-64}"
BENCH_SAMPLES="${BENCH_SAMPLES:-16}"
BENCH_TOKENS="${BENCH_TOKENS:-256}"
BENCH_BLOCKING="${BENCH_BLOCKING:-8}"
BENCH_MT_PROBLEMS="${BENCH_MT_PROBLEMS:-16}"
GRPO_RESPONSES="${GRPO_RESPONSES:-2048}"
GRPO_TESTS="${GRPO_TESTS:-20}"
GRPO_MIX="${GRPO_MIX:-correct=0.45,wrong=0.5,slow=0.03,hostile=0.02}"
GRPO_PASSES="${GRPO_PASSES:-4}"
LEETCODE="$COBALT_SHARED/data/leetcode/leetcode_problems.jsonl.gz"
RUN_DIR="$WORK/inference"
STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(model serve rollout bench-rollout bench-grpo)

do_model() { ensure_model; }

do_serve() {
    mkdir -p "$RUN_DIR"
    ensure_ray
    start_evaluator "$EVALUATOR_REPLICAS" "$EVALUATOR_MEM_GB"
    if app_running vllm_actor; then echo "vllm_actor already running"; return 0; fi
    # One replica of one CPU (the evaluator holds the other cores), one GPU; vLLM at VLLM_GPU_UTIL.
    local start=$SECONDS
    COBALT_VLLM_MODEL="$(model_dir)" COBALT_VLLM_NUM_REPLICAS=1 COBALT_VLLM_TENSOR_PARALLEL_SIZE=1 \
        COBALT_VLLM_GPU_MEMORY_UTILIZATION="$VLLM_GPU_UTIL" COBALT_VLLM_CPUS_PER_REPLICA=1 \
        COBALT_VLLM_MAX_MODEL_LEN=8192 COBALT_VLLM_BACKEND="$VLLM_BACKEND" \
        setsid "$PYTHON" -m ray.serve.scripts run vllm_engine_actor:app --address auto \
        --name vllm_actor --route-prefix /vllm_actor > "$RUN_DIR/serve_run.log" 2>&1 < /dev/null &
    wait_app vllm_actor 420 || { tail -n 60 "$RUN_DIR/serve_run.log"; return 1; }
    echo "vllm_actor RUNNING $((SECONDS - start)) s after serve run"
}

do_rollout() {
    local model; model="$(model_dir)"
    do_serve   # a no-op when the apps run already (a later call starts them again)
    mkdir -p "$RUN_DIR"
    rm -f "$RUN_DIR"/records.jsonl* "$RUN_DIR"/evaluated.jsonl*
    local start=$SECONDS
    tcobalt rollout --engine vllm-serve --model "$model" --input "$WARM_DIR/problems.jsonl" \
        --limit "$N_PROBLEMS" --samples "$SAMPLES" --turns "$TURNS" --max-tokens "$MAX_TOKENS" \
        --temperature 1.0 --evaluator ray --ray-address auto --output "$RUN_DIR/records.jsonl" --no-progress --seed 0
    echo "rollout: $N_PROBLEMS problems x $SAMPLES samples x (1 + $TURNS) turns in $((SECONDS - start)) s"
    tcobalt eval --input "$RUN_DIR/records.jsonl" --output "$RUN_DIR/evaluated.jsonl" \
        --evaluator ray --ray-address auto --no-progress
    tcobalt report "$RUN_DIR/evaluated.jsonl" --labels "tiny-warm" --out-dir "$RUN_DIR/report" \
        --note "tiny Qwen3 (hidden $TINY_HIDDEN, $TINY_LAYERS layers, warm-started), $VLLM_BACKEND in Ray Serve, $N_PROBLEMS LeetCode problems"
    cat "$RUN_DIR/report/pass_at_1.md"
}

do_bench_rollout() {
    # The in-process engine needs the GPU memory the Ray Serve replica holds.
    if ray_cli status >/dev/null 2>&1; then export RAY_ADDRESS=auto; app_running vllm_actor && delete_app vllm_actor; fi
    local common=(--engine "$BENCH_ENGINE" --model "$(model_dir)" --data "$LEETCODE" --max-tokens "$BENCH_TOKENS")
    [[ "$BENCH_ENGINE" == vllm ]] && common+=(--gpu-memory-utilization 0.8)
    echo "bench-rollout 1: $BENCH_PROMPTS prompts x $BENCH_SAMPLES samples x $BENCH_TOKENS tokens, first turn only"
    t "$PYTHON" benchmarks/bench_rollout.py "${common[@]}" --problems "$BENCH_PROMPTS" --samples "$BENCH_SAMPLES" \
        --turns 0 --at-once --blocking-problems "$BENCH_BLOCKING"
    if [[ "$BENCH_MT_PROBLEMS" -gt 0 ]]; then
        echo "bench-rollout 2: $BENCH_MT_PROBLEMS problems x 4 samples x (1 + 2 repair turns)"
        t "$PYTHON" benchmarks/bench_rollout.py "${common[@]}" --problems "$BENCH_MT_PROBLEMS" --samples 4 \
            --turns 2 --blocking-problems "$(( BENCH_MT_PROBLEMS / 4 > 0 ? BENCH_MT_PROBLEMS / 4 : 1 ))"
    fi
}

do_bench_grpo() {
    stop_ray   # the benchmark starts its own Ray with all cores and deploys the evaluator (one replica)
    t "$PYTHON" benchmarks/bench_grpo_batch.py --via serve --data "$LEETCODE" --programs "$GRPO_RESPONSES" \
        --tests-per-program "$GRPO_TESTS" --workers "$(nproc)" --mix "$GRPO_MIX" --passes "$GRPO_PASSES"
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
tar -C "$WORK" -czf "$OUT/inference_results.tar.gz" --exclude='*.safetensors' --exclude='_base' \
    tiny-warm/warm_start.json tiny-warm/problems.jsonl inference 2>/dev/null || true
grep -q 'rc=[1-9]' "$OUT/summary.log" && { failed=1; pack_ray_logs; }
cat "$OUT/summary.log"
exit "$failed"
