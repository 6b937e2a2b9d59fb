#!/usr/bin/env bash
# The training proof on one GPU (issue 15), after install_wheelhouse.sh install. A GPU call may
# run 10 minutes, so the steps are chosen per call (see docs/GPU.md for the planned split).
#
# Usage: bash scripts/gpu/prove_training.sh STEP [STEP ...]
#   data       the warm-started tiny model (as prove_inference.sh), then veRL parquet files:
#              single-turn rows from its 16 LeetCode problems; Cobalt rows from `cobalt
#              build-prompts` over multi-turn rollouts of that model (those of prove_inference.sh
#              when present); perturbed rows from the same over rollouts on `cobalt perturb`ed tests
#   cobalt     scripts/train_cobalt.sh, 2 steps, validation and a checkpoint at step 2
#   resume     scripts/train_cobalt.sh again with 3 steps: resumes from step 2, runs step 3
#   single     scripts/train_grpo_single_turn.sh, 1 step
#   perturbed  scripts/train_cobalt_perturbed.sh, 1 step
#   merge      verl's model merger: the latest Cobalt checkpoint -> a Hugging Face folder
#   compare    cobalt rollout, eval and report on the base (warm-started) and trained models
#   grpo-mt    scripts/train_grpo_mt.sh (online multi-turn baseline, issue 17), 2 steps
#   verpo-mt   scripts/train_verpo_mt.sh (the same with VeRPO's dense reward), 2 steps
#   cost       cobalt cost-report over the training logs of this machine (seconds per example)
# Every training run uses the tiny-size example scripts/gpu/tiny_overrides.sh. After each run
# the per-step metrics that show learning (advantages, gradient norm, reward components,
# responses judged, phase timings) are pulled from verl's console log into summary.log.
#
# Variables: those of scripts/gpu/_gpu_common.sh (OUT, WORK, ENV_FILE, MODEL, ...) and
#   ROLLOUT_ENGINE   engine of the data/compare rollouts: vllm (in-process), or transformers for a
#                    CPU dry run [vllm]
#   ROLLOUT_TOKENS / ROLLOUT_SAMPLES   new tokens and samples of those rollouts [512 / 4]
#   EXTRA_OVERRIDES  more Hydra overrides for every training run (space-separated) []
# Logs in $OUT: summary.log, train_cobalt.log, train_resume.log, train_single.log,
# train_perturbed.log, train_grpo_mt.log, train_verpo_mt.log, compare.log (data, merge, compare,
# cost), results.tar.gz, ray_logs.tar.gz on failure.
set -eo pipefail
# shellcheck source=scripts/gpu/_gpu_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_gpu_common.sh"
# shellcheck source=scripts/gpu/tiny_overrides.sh
source "$REPO_ROOT/scripts/gpu/tiny_overrides.sh"

ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-vllm}"
ROLLOUT_TOKENS="${ROLLOUT_TOKENS:-512}"
ROLLOUT_SAMPLES="${ROLLOUT_SAMPLES:-4}"
read -r -a MORE <<< "${EXTRA_OVERRIDES:-}"
DATA="$WORK/verl"
RUNS="$WORK/runs"
[[ $# -gt 0 ]] || { sed -n '2,/^set -eo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }

# rollout_records PROBLEMS OUT_JSONL: 4 samples x 2 repair turns, in-process vLLM, embedded evaluator.
rollout_records() {
    [[ -s "$2" ]] && { echo "rollout: $2 exists, reused"; return 0; }
    tcobalt rollout --engine "$ROLLOUT_ENGINE" --model "$(model_dir)" --input "$1" --samples "$ROLLOUT_SAMPLES" \
        --turns 2 --max-tokens "$ROLLOUT_TOKENS" --temperature 1.0 --seed 0 --evaluator embedded --output "$2" --no-progress
}

# cobalt_rows SUB RECORDS... -> $DATA/<sub>/{train,val}.parquet: cobalt eval (build-prompts needs
# every turn's hidden pass rate), build-prompts, make-verl-data; fails when no training row came out.
cobalt_rows() {
    local sub="$1"; shift
    local dir="$WORK/prompts/$sub"
    rm -rf "$dir" && mkdir -p "$dir"
    cat "$@" > "$dir/records.jsonl"
    tcobalt eval --input "$dir/records.jsonl" --output "$dir/evaluated.jsonl" --no-progress
    tcobalt build-prompts --input "$dir/evaluated.jsonl" --output "$dir/train.jsonl" --model-name "$(model_dir)" --no-progress
    tcobalt build-prompts --input "$dir/evaluated.jsonl" --output "$dir/val.jsonl" --model-name "$(model_dir)" --is-test --no-progress
    [[ -s "$dir/train.jsonl" ]] || { echo "build-prompts: no prompt rows for $sub"; return 1; }
    [[ -s "$dir/val.jsonl" ]] || cp "$dir/train.jsonl" "$dir/val.jsonl"
    tcobalt make-verl-data --kind cobalt --train "$dir/train.jsonl" --val "$dir/val.jsonl" \
        --out-dir "$DATA/$sub" --tokenizer "$(model_dir)" --no-progress
}

do_data() {
    ensure_model
    stop_ray   # in-process vLLM needs the GPU memory a vllm_actor app of the inference proof holds
    local problems="$WARM_DIR/problems.jsonl"
    tcobalt make-verl-data --kind single-turn --train "$problems" --val "$problems" \
        --out-dir "$DATA/single_turn" --tokenizer "$(model_dir)" --no-progress
    tcobalt make-verl-data --kind multiturn --train "$problems" --val "$problems" \
        --out-dir "$DATA/multiturn" --tokenizer "$(model_dir)" --no-progress
    local records="$WORK/inference/records.jsonl"
    mkdir -p "$WORK/rollouts"
    [[ -s "$records" ]] || records="$WORK/rollouts/records.jsonl"
    if ! { rollout_records "$problems" "$records" && cobalt_rows cobalt "$records"; }; then
        echo "FALLBACK: no Cobalt rows from build-prompts; the cobalt runs train on the single-turn rows"
        mkdir -p "$DATA/cobalt" && cp "$DATA/single_turn"/*.parquet "$DATA/cobalt/"
    fi
    if tcobalt perturb --input "$problems" --output "$WORK/rollouts/perturbed_problems.jsonl" --no-progress \
        && rollout_records "$WORK/rollouts/perturbed_problems.jsonl" "$WORK/rollouts/perturbed_records.jsonl" \
        && cobalt_rows cobalt_perturbed "$records" "$WORK/rollouts/perturbed_records.jsonl"; then
        echo "perturbed rows: trajectories on original and perturbed public tests"
    else
        echo "FALLBACK: no perturbed rows; the perturbed run trains on the Cobalt rows"
        mkdir -p "$DATA/cobalt_perturbed" && cp "$DATA/cobalt"/*.parquet "$DATA/cobalt_perturbed/"
    fi
    "$PYTHON" - "$DATA" <<'PY'
import sys
from pathlib import Path

import pyarrow.parquet as pq

for f in sorted(Path(sys.argv[1]).glob("*/*.parquet")):
    print(f"data: {f.parent.name}/{f.name}: {pq.read_metadata(f).num_rows} rows")
PY
}

# train SCRIPT RUN_DIR_NAME STEPS [OVERRIDES...]: one training run with the tiny overrides.
train() {
    local script="$1" name="$2" steps="$3"; shift 3
    stop_ray   # the launcher starts its own Ray head and evaluator app
    MODEL="$(model_dir)" DATA_DIR="$DATA" OUTPUT_DIR="$RUNS/$name" EXPERIMENT_NAME="$name" \
        t bash "$script" "${TINY_OVERRIDES[@]}" trainer.total_training_steps="$steps" \
        trainer.project_name=cobalt-gpu "$@" "${MORE[@]}"
}

# Per-step metrics of verl's console logger ("step:N - key:value - ...") that show learning.
metrics() {
    "$PYTHON" - "$OUT/$1" <<'PY' | tee -a "$OUT/summary.log"
import re
import sys

keep = re.compile(r"(grad_norm|advantages/(mean|max|min)|critic/score/(mean|max|min)|critic/rewards/mean|"
                  r"correctness|improvement|format|n_tests|has_code|reward_failed|acc/mean|pg_loss|"
                  r"response_length/mean|^timing_s/|^perf/(time_per_step|throughput))")
for line in open(sys.argv[1], errors="replace"):
    if "cobalt reward:" in line:  # the reward manager's component line (training rows)
        print("  " + line[line.index("cobalt reward:"):].strip())
        continue
    m = re.search(r"\bstep:(\d+) - (.*)", line)
    if not m:
        continue
    fields = dict(kv.split(":", 1) for kv in m.group(2).strip().split(" - ") if ":" in kv)
    fields = {k: re.sub(r"^np\.\w+\((.*)\)$", r"\1", v.strip()) for k, v in fields.items()}
    shown = {k: v for k, v in fields.items() if keep.search(k)}
    print(f"  step {m.group(1)}: " + ", ".join(f"{k}={float(v):.4g}" if re.fullmatch(r"[-+0-9.eE]+|nan|inf", v) else f"{k}={v}"
                                      for k, v in sorted(shown.items())))
PY
}

do_cobalt() { train scripts/train_cobalt.sh cobalt 2; }
do_resume() {
    ls "$RUNS/cobalt/checkpoints" || { echo "no checkpoint to resume from: run the step 'cobalt' first"; return 1; }
    train scripts/train_cobalt.sh cobalt 3 trainer.resume_mode=auto
    cat "$RUNS/cobalt/checkpoints/latest_checkpointed_iteration.txt"
}
do_single() { train scripts/train_grpo_single_turn.sh single-turn 1 trainer.test_freq=1 trainer.save_freq=-1; }
do_perturbed() { train scripts/train_cobalt_perturbed.sh cobalt-perturbed 1 trainer.test_freq=1 trainer.save_freq=-1; }

# The baselines: 2 steps, no validation or checkpoint; trajectories of up to 1,024 tokens (the
# per-turn cap stays the run's; the budget caps each turn) and 2 agent-loop workers (16 cores).
BASELINE_OVERRIDES=(trainer.test_freq=-1 trainer.save_freq=-1 data.max_response_length=1024
    actor_rollout_ref.rollout.agent.num_workers=2)
do_grpo_mt() { train scripts/train_grpo_mt.sh grpo-mt 2 "${BASELINE_OVERRIDES[@]}"; }
do_verpo_mt() { train scripts/train_verpo_mt.sh verpo-mt 2 "${BASELINE_OVERRIDES[@]}"; }

# cost: seconds per example from each run's own step timings (the runs that exist here), all
# steps, then without the first (its one-off start-up) for the runs that logged 2 steps or more.
do_cost() {
    local all=() later=() name log n
    for name in cobalt single-turn cobalt-perturbed grpo-mt verpo-mt; do
        case "$name" in
            cobalt) log=train_cobalt.log ;; single-turn) log=train_single.log ;;
            cobalt-perturbed) log=train_perturbed.log ;; grpo-mt) log=train_grpo_mt.log ;;
            verpo-mt) log=train_verpo_mt.log ;;
        esac
        n=$(grep -c 'timing_s/step' "$OUT/$log" 2>/dev/null) || n=0
        [[ "$n" -gt 0 ]] || continue
        local one=(--run "$name=$OUT/$log")
        [[ -f "$RUNS/$name/train_config.json" ]] && one+=(--config "$name=$RUNS/$name/train_config.json")
        all+=("${one[@]}")
        [[ "$n" -gt 1 ]] && later+=("${one[@]}")
    done
    [[ ${#all[@]} -gt 0 ]] || { echo "cost: no training log with timing_s/step here"; return 1; }
    echo "cost, every step:" | tee -a "$OUT/summary.log"
    tcobalt cost-report "${all[@]}" --paper | tee -a "$OUT/summary.log"
    if [[ ${#later[@]} -gt 0 ]]; then
        echo "cost, without step 1:" | tee -a "$OUT/summary.log"
        tcobalt cost-report "${later[@]}" --skip-first 1 | tee -a "$OUT/summary.log"
    fi
}

do_merge() {
    local ckpt="$RUNS/cobalt/checkpoints"
    local step; step="$(cat "$ckpt/latest_checkpointed_iteration.txt")"
    rm -rf "$WORK/trained"
    t "$PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$ckpt/global_step_$step/actor" \
        --target_dir "$WORK/trained"
    for f in tokenizer.json tokenizer_config.json vocab.json merges.txt generation_config.json; do
        [[ -f "$WORK/trained/$f" || ! -f "$(model_dir)/$f" ]] || cp "$(model_dir)/$f" "$WORK/trained/"
    done
    echo "merged global_step_$step into $WORK/trained: $(ls "$WORK/trained" | tr '\n' ' ')"
    # How far training moved the weights (the merged model against the base it started from).
    "$PYTHON" - "$(model_dir)" "$WORK/trained" <<'PY'
import sys

import torch
from transformers import AutoModelForCausalLM

base, trained = (AutoModelForCausalLM.from_pretrained(p, dtype=torch.float32).state_dict() for p in sys.argv[1:3])
changed = sum(int((base[k] != trained[k]).sum()) for k in base if k in trained)
total = sum(v.numel() for v in base.values())
biggest = max(float((base[k] - trained[k]).abs().max()) for k in base if k in trained)
print(f"merge: {changed} of {total} weights differ from the base ({changed / total:.2%}); largest change {biggest:.3g}")
PY
}

do_compare() {
    local dir="$WORK/compare" label model
    mkdir -p "$dir"
    for label in base trained; do
        if [[ $label == base ]]; then model="$(model_dir)"; else model="$WORK/trained"; fi
        rm -f "$dir/$label".*
        tcobalt rollout --engine "$ROLLOUT_ENGINE" --model "$model" --input "$WARM_DIR/problems.jsonl" --limit 8 \
            --samples "$ROLLOUT_SAMPLES" --turns 2 --max-tokens "$ROLLOUT_TOKENS" --temperature 1.0 --seed 0 \
            --evaluator embedded --output "$dir/$label.jsonl" --no-progress
        tcobalt eval --input "$dir/$label.jsonl" --output "$dir/$label.evaluated.jsonl" --no-progress
    done
    tcobalt report "$dir/base.evaluated.jsonl" "$dir/trained.evaluated.jsonl" --labels base trained \
        --out-dir "$dir/report" --note "tiny Qwen3 (hidden $TINY_HIDDEN, $TINY_LAYERS layers): warm-started vs after GRPO (Cobalt, 3 steps)"
    cat "$dir/report/pass_at_1.md"
}

for s in "$@"; do
    case "$s" in
        data) step data compare.log do_data ;;
        cobalt) step cobalt train_cobalt.log do_cobalt; metrics train_cobalt.log ;;
        resume) step resume train_resume.log do_resume; metrics train_resume.log ;;
        single) step single train_single.log do_single; metrics train_single.log ;;
        perturbed) step perturbed train_perturbed.log do_perturbed; metrics train_perturbed.log ;;
        merge) step merge compare.log do_merge ;;
        compare) step compare compare.log do_compare ;;
        grpo-mt) step grpo-mt train_grpo_mt.log do_grpo_mt; metrics train_grpo_mt.log ;;
        verpo-mt) step verpo-mt train_verpo_mt.log do_verpo_mt; metrics train_verpo_mt.log ;;
        cost) step cost compare.log do_cost ;;
        *) echo "prove_training: unknown step '$s'" >&2; exit 2 ;;
    esac
done
tar -C "$WORK" -czf "$OUT/training_results.tar.gz" --exclude='*.safetensors' --exclude='*.pt' --exclude='_base' \
    tiny-warm/warm_start.json verl prompts compare $(cd "$WORK" && ls -d runs/*/train_config.json runs/*/validation 2>/dev/null) \
    2>/dev/null || true
failed=0
grep -q 'rc=[1-9]' "$OUT/summary.log" && { failed=1; pack_ray_logs; }
cat "$OUT/summary.log"
exit "$failed"
