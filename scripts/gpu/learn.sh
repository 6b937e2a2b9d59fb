#!/usr/bin/env bash
# The learning experiment of docs/TRAINING.md §8 on one GPU: generated tasks, a planted warm start,
# Cobalt (or single-turn GRPO) training, held-out evaluation of base and trained, bootstrap tables.
#
# Usage: bash scripts/gpu/learn.sh --out DIR [--run cobalt|single] [--dry-run] [--steps S1,S2,...]
#   --out DIR     tables, figures and logs (the device call's $OUT); state stays in $WORK/learn
#   --run         cobalt (scripts/train_cobalt.sh, default) or single (train_grpo_single_turn.sh)
#   --dry-run     CPU check: tiny sizes, the transformers engine, the training script's --dry-run
#                 (verl's config check, no training: the "trained" model is the base, said so)
#   --steps       a subset, in this order (default all; each skips what an earlier call finished):
#     problems    cobalt make-synthetic --seed 20261125 (600 train / 200 held-out instances)
#     warm        scripts/gpu/warm_start_learn.py (fp32) -> $WORK/learn/base
#     base-train  base rollouts on the training instances (4 samples, 2 repair turns, seed 0), eval
#     gate        base turn-0 Pass@1 on the training instances must lie in [0.2, 0.7], else stop
#     data        build-prompts + make-verl-data (Cobalt rows; single-turn rows; held-out validation)
#     train       the run's script, 16 prompts x 8 samples, 5 steps, lr 1e-4, greedy validation on
#                 the 200 held-out prompts every 5 steps; resumes from its last checkpoint (every
#                 5 steps), so a call cut by its time limit is finished by the next
#     merge       scripts/gpu/merge_fp32.py: the last checkpoint -> $WORK/learn/trained-<run> (fp32)
#     eval-base   held-out rollouts, 8 samples x 2 repair turns, of the base with seed sets 1 and 2;
#                 cobalt eval on each (a rerun resumes)
#     eval-trained  the same for the trained model with seed set 1
#     report      into $WORK/learn/report, packed as $OUT/learn_report.tar.gz: cobalt report, compare-runs (bootstrap; base vs base as the noise floor; Cobalt
#                 vs single-turn when both ran), train-report of the training logs
#   not in the default list:
#     startup     one-step single-turn runs (tiny overrides + the experiment's, no validation, no
#                 checkpoint), one per variant of LEARN_STARTUP_VARIANTS [embedded,ref]: base (the
#                 experiment's settings), embedded (no Ray Serve app: the reward workers run the sandbox),
#                 ref (a reference model: KL loss 0.001), workers (8 dataloader workers); needs only the
#                 problems, the warm start $WORK/learn/base if built (else a random tiny model) and the
#                 single-turn rows; a variant whose first step is done is not run again; the start-up
#                 tables -> $OUT/startup.md, the runs' logs -> $OUT/startup_logs.tar.gz
#
# Variables: those of scripts/gpu/_gpu_common.sh (WORK, ENV_FILE, PYTHON, STEP_TIMEOUT, ...) and
#   ROLLOUT_ENGINE [vllm; transformers with --dry-run], LEARN_TRAIN_TIMEOUT [560] seconds for one
#   training call, LEARN_EVALUATOR [ray; embedded: the reward workers run the sandbox themselves and
#   no Ray Serve app starts], LEARN_GATE_LOW / LEARN_GATE_HIGH [0.2 / 0.7], LEARN_WARM_STEPS [1500],
#   LEARN_STEPS [5] training steps (the reported run), LEARN_PROMPT_TOKENS [1536] the longest prompt
#   kept (verl pads every sequence to it plus the response length), LEARN_STARTUP_VARIANTS / LEARN_STARTUP_TIMEOUT
#   [embedded,ref / 420] the startup step's variants and seconds for each, EXTRA_OVERRIDES (Hydra overrides after the experiment's own).
set -eo pipefail

RUN_NAME=cobalt DRY=0 OUT_DIR="" STEPS="problems,warm,base-train,gate,data,eval-base,train,merge,eval-trained,report"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) OUT_DIR="$2"; shift 2 ;;
        --run) RUN_NAME="$2"; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        --steps) STEPS="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -eo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "learn.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ -n "$OUT_DIR" ]] || { echo "learn.sh: --out DIR is required" >&2; exit 2; }
OUT_DIR="$(mkdir -p -- "$OUT_DIR" && cd -- "$OUT_DIR" && pwd)"
case "$RUN_NAME" in
    cobalt) SCRIPT=scripts/train_cobalt.sh ;;
    single) SCRIPT=scripts/train_grpo_single_turn.sh ;;
    *) echo "learn.sh: --run must be cobalt or single, not '$RUN_NAME'" >&2; exit 2 ;;
esac
export OUT="$OUT_DIR"
# shellcheck source=scripts/gpu/_gpu_common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/_gpu_common.sh"
# shellcheck source=scripts/gpu/tiny_overrides.sh
source "$REPO_ROOT/scripts/gpu/tiny_overrides.sh"
read -r -a MORE <<< "${EXTRA_OVERRIDES:-}"

L="$WORK/learn"
mkdir -p "$L/logs" "$L/eval" "$OUT"
SEED_GEN=20261125 SEED_WARM=0 SEED_PROMPTS=0 SEED_A=1 SEED_B=2
if [[ "$DRY" == 1 ]]; then
    ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-transformers}"
    TRAIN_LIMIT=4 HELD_LIMIT=2 TRAIN_SAMPLES=2 EVAL_SAMPLES=2 TURNS=1 MAX_TOKENS=8
    WARM_ARGS=(--hidden-size 32 --layers 1 --steps 2 --batch-size 2 --probe 2 --sample 0 --device cpu)
    GATE_LOW="${LEARN_GATE_LOW:-0}" GATE_HIGH="${LEARN_GATE_HIGH:-1}"
else
    ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-vllm}"
    TRAIN_LIMIT=0 HELD_LIMIT=0 TRAIN_SAMPLES=4 EVAL_SAMPLES=8 TURNS=2 MAX_TOKENS=512
    WARM_ARGS=(--hidden-size "$TINY_HIDDEN" --layers "$TINY_LAYERS" --steps "${LEARN_WARM_STEPS:-1500}"
               --batch-size 16 --lr 2e-3 --sample 4 --sample-problems 16 --max-new-tokens 200 --device cuda)
    GATE_LOW="${LEARN_GATE_LOW:-0.2}" GATE_HIGH="${LEARN_GATE_HIGH:-0.7}"
fi
BASE="$L/base"
TRAINED="$L/trained-$RUN_NAME"
RUN_DIR="$L/runs/$RUN_NAME"
TOTAL_STEPS="${LEARN_STEPS:-5}"
# Longest prompt the bandit data keeps (the base rollouts' longest was 1,352 tokens): verl pads every
# sequence to this plus the response length, so it sets the actor's cost per step.
PROMPT_TOKENS="${LEARN_PROMPT_TOKENS:-1536}"

# The experiment's settings over the tiny overrides (docs/TRAINING.md §8 lists the deviations).
LEARN_OVERRIDES=(
    data.train_batch_size=16
    data.max_prompt_length="$PROMPT_TOKENS"
    data.filter_overlong_prompts=False
    actor_rollout_ref.rollout.n=8
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=16384
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.optim.lr=1e-4
    actor_rollout_ref.actor.use_kl_loss=False
    algorithm.use_kl_in_reward=False
    actor_rollout_ref.rollout.val_kwargs.do_sample=False
    actor_rollout_ref.rollout.val_kwargs.n=1
    data.seed=0
    data.dataloader_num_workers=0
    trainer.total_training_steps="$TOTAL_STEPS"
    trainer.test_freq=5
    trainer.save_freq=5
    trainer.max_actor_ckpt_to_keep=1
    trainer.resume_mode=auto
    trainer.project_name=cobalt-learn
)

rollout() {  # rollout MODEL PROBLEMS SAMPLES SEED OUT: multi-turn records (a rerun resumes), then cobalt eval
    tcobalt rollout --engine "$ROLLOUT_ENGINE" --model "$1" --input "$2" --samples "$3" --turns "$TURNS" \
        --max-tokens "$MAX_TOKENS" --temperature 1.0 --seed "$4" --evaluator embedded --output "$5.jsonl" --no-progress \
        --enable-thinking   # the history keeps the text after </think>, as the warm start taught it
    tcobalt eval --input "$5.jsonl" --output "$5.evaluated.jsonl" --no-progress
}

do_problems() {
    [[ -s "$L/problems/heldout.jsonl" ]] && { echo "problems: $L/problems (made earlier)"; return 0; }
    tcobalt make-synthetic --out-dir "$L/problems" --seed "$SEED_GEN" --train-limit "$TRAIN_LIMIT" --heldout-limit "$HELD_LIMIT"
}

do_warm() {
    [[ -f "$BASE/warm_start.json" ]] && { echo "warm: $BASE (built earlier)"; return 0; }
    t "$PYTHON" scripts/gpu/warm_start_learn.py --problems "$L/problems/train.jsonl" --out "$BASE" \
        --tokenizer "$COBALT_QWEN3_TOKENIZER" --seed "$SEED_WARM" "${WARM_ARGS[@]}"
    cp "$BASE/warm_start.json" "$OUT/warm_start.json"
}

do_base_train() { rollout "$BASE" "$L/problems/train.jsonl" "$TRAIN_SAMPLES" "$SEED_PROMPTS" "$L/base_train"; }

do_gate() {
    "$PYTHON" - "$L/base_train.evaluated.jsonl" "$GATE_LOW" "$GATE_HIGH" "$L/gate.json" <<'PY'
import json
import sys

from cobalt.analysis.compare_runs import correct_matrix, load_run

path, low, high, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
run = load_run(path)
value = sum(float(correct_matrix(r, 1)[:, 0].mean()) for r in run.values()) / len(run)
ok = low <= value <= high
json.dump({"turn0_pass_at_1_train": value, "low": low, "high": high, "passed": ok, "problems": len(run)}, open(out, "w"))
print(f"gate: base turn-0 Pass@1 on {len(run)} training instances = {value:.3f}; required [{low}, {high}]: "
      + ("passed" if ok else "FAILED: the warm start did not plant partial competence; stop (see docs/TRAINING.md §8)"))
sys.exit(0 if ok else 3)
PY
}

do_data() {
    local d="$L/verl" p="$L/prompts"
    mkdir -p "$d" "$p"
    tcobalt make-verl-data --kind single-turn --train "$L/problems/train.jsonl" --val "$L/problems/heldout.jsonl" \
        --out-dir "$d/single_turn" --tokenizer "$BASE" --max-prompt-tokens "$PROMPT_TOKENS" --no-progress
    rm -f "$p/train.jsonl"
    tcobalt build-prompts --input "$L/base_train.evaluated.jsonl" --output "$p/train.jsonl" --model-name "$BASE" \
        --seed "$SEED_PROMPTS" --enable-thinking --max-prompt-tokens "$PROMPT_TOKENS" --no-progress
    if [[ -s "$p/train.jsonl" ]]; then
        tcobalt make-verl-data --kind cobalt --train "$p/train.jsonl" --out-dir "$d/cobalt" --tokenizer "$BASE" \
            --max-prompt-tokens "$PROMPT_TOKENS" --no-progress
    elif [[ "$DRY" == 1 ]]; then
        echo "DRY RUN FALLBACK: build-prompts kept no prompt from the untrained tiny model; the Cobalt run uses the single-turn rows"
        mkdir -p "$d/cobalt" && cp "$d/single_turn/train.parquet" "$d/cobalt/train.parquet"
    else
        echo "data: build-prompts kept no prompt from the base rollouts: nothing for Cobalt to train on"; return 1
    fi
    cp "$d/single_turn/val.parquet" "$d/cobalt/val.parquet"   # both runs validate on the held-out first turns
    "$PYTHON" -c "import sys, pyarrow.parquet as pq; [print(f'data: {f}: {pq.read_metadata(f).num_rows} rows') for f in sys.argv[1:]]" \
        "$d"/*/*.parquet
}

data_sub() { [[ "$RUN_NAME" == cobalt ]] && echo cobalt || echo single_turn; }
last_ckpt() { cat "$RUN_DIR/checkpoints/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0; }

# launch SCRIPT MODEL DATA_SUB OUTPUT_DIR EXPERIMENT EVALUATOR(ray|embedded) SECONDS LOG [OVERRIDE...]:
# one training call with the experiment's overrides, then the given ones and EXTRA_OVERRIDES, under a
# deadline, appended to LOG; prints nothing of its own and returns the script's rc (--dry-run: the
# script's config check). The embedded evaluator starts no Ray Serve app: the reward workers run the
# sandbox themselves.
launch() {
    local script="$1" model="$2" sub="$3" out="$4" name="$5" evaluator="$6" limit="$7" log="$8"
    shift 8
    local extra=() skip="${SKIP_EVALUATOR:-0}"
    case "$evaluator" in
        ray) ;;
        embedded) skip=1; extra=(ray_kwargs.ray_init.runtime_env.env_vars.COBALT_EVALUATOR=embedded) ;;
        *) echo "learn.sh: the evaluator must be ray or embedded, not '$evaluator'" >&2; return 2 ;;
    esac
    local args=("${TINY_OVERRIDES[@]}" "${LEARN_OVERRIDES[@]}" "$@" "${extra[@]}" "${MORE[@]}")
    [[ "$DRY" == 1 ]] && args=(--dry-run "${args[@]}")
    stop_ray
    local rc=0
    SKIP_EVALUATOR="$skip" MODEL="$model" TRAIN_FILE="$L/verl/$sub/train.parquet" VAL_FILE="$L/verl/$sub/val.parquet" \
        OUTPUT_DIR="$out" EXPERIMENT_NAME="$name" timeout -k 20 "$limit" bash "$script" "${args[@]}" \
        2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
    return "$rc"
}

do_train() {
    local sub; sub="$(data_sub)"
    local extra=(trainer.val_before_train=True)
    [[ "$(last_ckpt)" -ge "$TOTAL_STEPS" ]] && { echo "train: $RUN_NAME has global_step_$TOTAL_STEPS already"; return 0; }
    [[ "$(last_ckpt)" -gt 0 ]] && extra=(trainer.val_before_train=False)   # resumed: step 0 validated before
    local rc=0
    launch "$SCRIPT" "$BASE" "$sub" "$RUN_DIR" "learn-$RUN_NAME" "${LEARN_EVALUATOR:-ray}" "${LEARN_TRAIN_TIMEOUT:-560}" \
        "$L/logs/train_$RUN_NAME.log" "${extra[@]}" || rc=$?
    echo "train: rc $rc; last checkpoint global_step_$(last_ckpt) of $TOTAL_STEPS"
    [[ "$DRY" == 1 ]] && { [[ $rc == 0 ]] && echo "DRY RUN: verl's config check only; no step ran"; return "$rc"; }
    [[ "$(last_ckpt)" -ge "$TOTAL_STEPS" ]] || { echo "train: not finished: run the step 'train' again (it resumes)"; return 1; }
}

do_merge() {
    if [[ "$DRY" == 1 ]]; then
        echo "DRY RUN: no checkpoint; the 'trained' model is a copy of the base"
        rm -rf "$TRAINED" && cp -r "$BASE" "$TRAINED"; return 0
    fi
    [[ -f "$TRAINED/config.json" && -f "$TRAINED/.merged_step_$TOTAL_STEPS" ]] && { echo "merge: $TRAINED (earlier)"; return 0; }
    rm -rf "$TRAINED"
    t "$PYTHON" scripts/gpu/merge_fp32.py --local-dir "$RUN_DIR/checkpoints/global_step_$(last_ckpt)/actor" \
        --target "$TRAINED" --base "$BASE"
    touch "$TRAINED/.merged_step_$(last_ckpt)"
}

do_eval_base() {
    stop_ray   # in-process vLLM needs the GPU
    rollout "$BASE" "$L/problems/heldout.jsonl" "$EVAL_SAMPLES" "$SEED_A" "$L/eval/base.s$SEED_A"
    rollout "$BASE" "$L/problems/heldout.jsonl" "$EVAL_SAMPLES" "$SEED_B" "$L/eval/base.s$SEED_B"
}

do_eval_trained() {
    stop_ray
    rollout "$TRAINED" "$L/problems/heldout.jsonl" "$EVAL_SAMPLES" "$SEED_A" "$L/eval/$RUN_NAME.s$SEED_A"
}

do_report() {
    local e="$L/eval" r="$L/report"
    mkdir -p "$r"
    local runs=("$e/base.s$SEED_A.evaluated.jsonl") labels=(base)
    for name in cobalt single; do
        [[ -s "$e/$name.s$SEED_A.evaluated.jsonl" ]] && { runs+=("$e/$name.s$SEED_A.evaluated.jsonl"); labels+=("$name"); }
    done
    tcobalt report "${runs[@]}" --labels "${labels[@]}" --out-dir "$r" \
        --title "held-out Pass@1 per turn" --note "learning experiment (docs/TRAINING.md §8)$([[ $DRY == 1 ]] && echo ', DRY RUN')"
    for name in "${labels[@]:1}"; do
        tcobalt compare-runs "$e/base.s$SEED_A.evaluated.jsonl" "$e/$name.s$SEED_A.evaluated.jsonl" --labels base "$name" \
            --noise "$e/base.s$SEED_B.evaluated.jsonl" --out "$r/compare_$name.json" | tee "$r/compare_$name.md"
    done
    if [[ " ${labels[*]} " == *" cobalt "* && " ${labels[*]} " == *" single "* ]]; then
        tcobalt compare-runs "$e/single.s$SEED_A.evaluated.jsonl" "$e/cobalt.s$SEED_A.evaluated.jsonl" \
            --labels single cobalt --out "$r/compare_single_cobalt.json" | tee "$r/compare_single_cobalt.md"
    fi
    local logs=()
    for name in cobalt single; do
        grep -q 'step:[0-9]' "$L/logs/train_$name.log" 2>/dev/null && logs+=(--run "$name=$L/logs/train_$name.log")
    done
    if [[ ${#logs[@]} -gt 0 ]]; then
        tcobalt train-report "${logs[@]}" --out-dir "$r" --title "learning experiment: training curves"
        "$PYTHON" - "$r/train_report.csv" <<'PY'
import csv
import sys

totals = {}
for row in csv.DictReader(open(sys.argv[1])):
    if row.get("response_length/mean"):
        totals[row["run"]] = totals.get(row["run"], 0.0) + float(row["response_length/mean"]) * 16 * 8
for run, tokens in totals.items():
    print(f"tokens generated in training ({run}): about {tokens:,.0f} (mean response length x 16 prompts x 8 samples, per step)")
PY
    else
        echo "report: no training log with step records (dry run or not trained): no curves"
    fi
    cp "$L/gate.json" "$r/" 2>/dev/null || true
    cp "$BASE/warm_start.json" "$r/" 2>/dev/null || true
    cp "$L"/logs/train_*.log "$r/" 2>/dev/null || true
    # one file back from the device call; the evaluated held-out records let a later lease (the other
    # run) compare against these without rolling them out again
    (cd "$L" && tar -czf "$OUT/learn_report.tar.gz" report eval/*.evaluated.jsonl)
    ls "$r"
}

# startup: one-step single-turn runs in variants of the experiment's settings, timed from ray start to
# the first step done; needs only the problems, a model and the single-turn rows.
STARTUP_SCRIPT=scripts/train_grpo_single_turn.sh
startup_log() { echo "$L/logs/startup_$1.log"; }

do_startup() {
    local variants v bad=() rc failed=()
    IFS=',' read -r -a variants <<< "${LEARN_STARTUP_VARIANTS:-embedded,ref}"
    [[ ${#variants[@]} -gt 0 ]] || { echo "startup: LEARN_STARTUP_VARIANTS names no variant" >&2; return 2; }
    for v in "${variants[@]}"; do
        case "$v" in base|embedded|ref|workers) ;; *) bad+=("'$v'") ;; esac
    done
    if [[ ${#bad[@]} -gt 0 ]]; then
        echo "startup: unknown variant ${bad[*]} in LEARN_STARTUP_VARIANTS; the variants are base, embedded, ref, workers" >&2
        return 2
    fi
    do_problems
    local model="$BASE"
    if [[ ! -f "$BASE/config.json" ]]; then
        model="$L/startup-model"
        if [[ -f "$model/config.json" ]]; then echo "startup: model $model (made earlier)"
        else
            echo "startup: no warm start at $BASE: a random tiny model (hidden $TINY_HIDDEN, $TINY_LAYERS layers) at $model"
            tcobalt tiny-model --output-dir "$model" --tokenizer "$COBALT_QWEN3_TOKENIZER" \
                --hidden-size "$TINY_HIDDEN" --layers "$TINY_LAYERS"
        fi
    fi
    if [[ -s "$L/verl/single_turn/train.parquet" && -s "$L/verl/single_turn/val.parquet" ]]; then
        echo "startup: single-turn rows in $L/verl/single_turn (made earlier)"
    else
        tcobalt make-verl-data --kind single-turn --train "$L/problems/train.jsonl" --val "$L/problems/heldout.jsonl" \
            --out-dir "$L/verl/single_turn" --tokenizer "$model" --max-prompt-tokens "$PROMPT_TOKENS" --no-progress
    fi
    for v in "${variants[@]}"; do
        local log evaluator=ray extra=()
        log="$(startup_log "$v")"
        if grep -Eq 'Training Progress:.*\| *1/1 \[' "$log" 2>/dev/null; then
            echo "startup: $v: first step done in an earlier call ($log); not run again"; continue
        fi
        case "$v" in
            embedded) evaluator=embedded ;;
            ref) extra=(actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001) ;;
            workers) extra=(data.dataloader_num_workers=8) ;;
        esac
        echo "=== $(date -u +%H:%M:%S) startup: variant $v (log $log)"
        rm -f "$log"   # a new attempt: the start-up is timed from this attempt's markers alone
        rc=0
        launch "$STARTUP_SCRIPT" "$model" single_turn "$L/runs/startup-$v" "startup-$v" "$evaluator" \
            "${LEARN_STARTUP_TIMEOUT:-420}" "$log" trainer.total_training_steps=1 trainer.val_before_train=False \
            trainer.test_freq=-1 trainer.save_freq=-1 "${extra[@]}" > /dev/null || rc=$?
        echo "startup: variant $v rc $rc$([[ $rc == 124 || $rc == 137 ]] && echo " (timed out after ${LEARN_STARTUP_TIMEOUT:-420} s)")"
        [[ $rc == 0 ]] || { failed+=("$v"); tail -n 30 "$log" || true; }
    done
    stop_ray
    local runs=() names=()
    for v in "${variants[@]}"; do
        [[ -f "$(startup_log "$v")" ]] && { runs+=("$v=$(startup_log "$v")"); names+=("startup_$v.log"); }
    done
    mkdir -p "$L/startup-report"
    "$PYTHON" - "$L/startup-report" "${runs[@]}" <<'PY'
import sys
from pathlib import Path

from cobalt.verl_plugin.train_report import startup_breakdowns, write_startup

logs = dict(pair.split("=", 1) for pair in sys.argv[2:])
print(write_startup(Path(sys.argv[1]), startup_breakdowns(logs)))
PY
    cp "$L/startup-report/startup.md" "$OUT/startup.md"
    [[ ${#names[@]} == 0 ]] || tar -C "$L/logs" -czf "$OUT/startup_logs.tar.gz" "${names[@]}"
    [[ "$DRY" == 1 ]] && echo "DRY RUN: verl's config check only; no start-up was timed"
    [[ ${#failed[@]} == 0 ]] || { echo "startup: failed: ${failed[*]} (rc above; logs in startup_logs.tar.gz)"; return 1; }
}

IFS=',' read -r -a chosen <<< "$STEPS"
for s in "${chosen[@]}"; do
    case "$s" in
        problems) fn=do_problems ;; warm) fn=do_warm ;; base-train) fn=do_base_train ;; gate) fn=do_gate ;;
        data) fn=do_data ;; train) fn=do_train ;; merge) fn=do_merge ;; eval-base) fn=do_eval_base ;;
        eval-trained) fn=do_eval_trained ;; report) fn=do_report ;; startup) fn=do_startup ;;
        *) echo "learn.sh: unknown step '$s'" >&2; exit 2 ;;
    esac
    step "learn-$s" "learn_$([[ $s == train ]] && echo "train_$RUN_NAME" || echo "$s").log" "$fn"
    if grep -q "^learn-$s .*rc=[1-9]" "$OUT/summary.log"; then
        echo "learn.sh: step $s failed (see $OUT/summary.log); later steps not run" >&2
        exit 1
    fi
done
echo "learn.sh: steps $STEPS done; results in $OUT"
