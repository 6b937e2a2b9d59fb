#!/usr/bin/env bash
# One entry point for the lent GPU machine: stash wheelhouse chunks, install once all have come,
# run proof steps, keep at most 8 files in $OUT, print a summary table last.
#
# Usage: bash scripts/gpu/device_run.sh [CHUNK_DIR ...] [STEP ...]
#   CHUNK_DIR   a folder of pack_wheelhouse.sh (e.g. .whl/chunk-03, carried by the call): stashed in
#               /tmp/cobalt-wheelhouse; when every chunk has arrived and nothing is installed yet,
#               install_wheelhouse.sh install runs (log: install.log)
#   STEP        inference (scripts/gpu/prove_inference.sh): model serve rollout bench-rollout bench-grpo
#               training (scripts/gpu/prove_training.sh): data cobalt resume single perturbed merge compare
#                 grpo-mt verpo-mt cost
#               learning experiment (scripts/gpu/learn.sh, docs/TRAINING.md §8): learn-prep (problems, warm
#                 start, base rollouts on train, gate, data), learn-eval-base, learn-train, learn-eval
#                 (merge, trained held-out eval, report); learn-single-train, learn-single-eval (--run single)
#                 learn-startup (start-up of one-step runs in LEARN_STARTUP_VARIANTS; learn.sh --help)
#               check: import everything and print versions (install_wheelhouse.sh check)
#   Steps run in the order given; inference steps before training steps are passed together to
#   prove_inference.sh, and so on. A step that fails does not stop the later ones.
#
# Variables: those of prove_inference.sh, prove_training.sh and _gpu_common.sh; ENV_FILE
# [/tmp/cobalt-gpu.env] marks a finished install. Output: $OUT (else /tmp/cobalt-proof) holds at
# most 8 files of at most 15 MiB each; extra logs are packed into more_logs.tar.gz.
set -uo pipefail

HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd -- "$HERE/../.." && pwd)"
export OUT="${OUT:-/tmp/cobalt-proof}"
export ENV_FILE="${ENV_FILE:-/tmp/cobalt-gpu.env}"
STORE="${STORE:-/tmp/cobalt-wheelhouse}"
mkdir -p "$OUT"
cd "$REPO_ROOT"
START=$SECONDS

chunks=() steps=()
for arg in "$@"; do
    if [[ -d "$arg" && -f "$arg/SHA256SUMS" ]]; then chunks+=("$arg")
    else
        case "$arg" in
            model|serve|rollout|bench-rollout|bench-grpo|data|cobalt|resume|single|perturbed|merge|compare|grpo-mt|verpo-mt|cost|check|learn-*) steps+=("$arg") ;;
            *) echo "device_run: '$arg' is neither a chunk folder nor a step (see --help)" >&2
               [[ "$arg" == -h || "$arg" == --help ]] && sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
               exit 2 ;;
        esac
    fi
done

row() { printf '%-22s %s\n' "$1" "$2" >> "$OUT/summary.log"; }

# 1. Chunks: stash; install once all have arrived.
if [[ ${#chunks[@]} -gt 0 ]]; then
    bash "$HERE/install_wheelhouse.sh" stash "${chunks[@]}" || { echo "device_run: stash failed" >&2; exit 1; }
fi
if [[ -f "$STORE/SHA256SUMS" && ! -f "$ENV_FILE" ]]; then
    total="$(cat "$STORE/TOTAL" 2>/dev/null)"
    got=$(ls "$STORE/received" 2>/dev/null | wc -l)
    if [[ -n "${total:-}" && "$got" -ge "$total" ]]; then
        s=$SECONDS
        bash "$HERE/install_wheelhouse.sh" install 2>&1 | tee "$OUT/install.log"
        rc=${PIPESTATUS[0]}
        row install "rc=$rc $((SECONDS - s)) s (log install.log)"
    else
        echo "device_run: $got of ${total:-?} chunks stashed; install after the last one"
        [[ ${#steps[@]} -eq 0 ]] && exit 0
    fi
fi
if [[ ${#steps[@]} -gt 0 && ! -f "$ENV_FILE" ]]; then
    echo "device_run: no install ($ENV_FILE missing): send every chunk first (a cold machine lost them)" >&2
    row install "MISSING: steps ${steps[*]} not run"
    cat "$OUT/summary.log"
    exit 1
fi

# learn_step NAME: one device step of the learning experiment as learn.sh steps.
learn_step() {
    case "$1" in
        learn-prep) bash "$HERE/learn.sh" --out "$OUT" --steps problems,warm,base-train,gate,data ;;
        learn-eval-base) bash "$HERE/learn.sh" --out "$OUT" --steps eval-base ;;
        learn-train) bash "$HERE/learn.sh" --out "$OUT" --steps train ;;
        learn-eval) bash "$HERE/learn.sh" --out "$OUT" --steps merge,eval-trained,report ;;
        learn-single-train) bash "$HERE/learn.sh" --out "$OUT" --run single --steps train ;;
        learn-single-eval) bash "$HERE/learn.sh" --out "$OUT" --run single --steps merge,eval-trained,report ;;
        learn-startup) bash "$HERE/learn.sh" --out "$OUT" --steps startup ;;
        *) echo "device_run: unknown learning step '$1'" >&2; row "$1" "rc=2 (unknown learning step)"; return 2 ;;
    esac
}

# 2. Steps, grouped into runs of one script.
group=() kind=""
flush() {
    [[ ${#group[@]} -gt 0 ]] || return 0
    case "$kind" in
        inference) bash "$HERE/prove_inference.sh" "${group[@]}" ;;
        training) bash "$HERE/prove_training.sh" "${group[@]}" ;;
        check) bash "$HERE/install_wheelhouse.sh" check 2>&1 | tee -a "$OUT/install.log" ;;
        learn) for g in "${group[@]}"; do learn_step "$g"; done ;;
    esac
    group=()
}
for s in "${steps[@]}"; do
    case "$s" in
        model|serve|rollout|bench-rollout|bench-grpo) k=inference ;;
        check) k=check ;;
        learn-*) k=learn ;;
        *) k=training ;;
    esac
    [[ "$k" != "$kind" ]] && flush
    kind="$k"; group+=("$s")
done
flush

# 3. At most 8 files of at most 15 MiB in $OUT.
for f in "$OUT"/*; do
    [[ -f "$f" && $(stat -c %s "$f") -gt 15000000 ]] || continue
    case "$f" in
        *.log) { head -c 5000000 "$f"; printf '\n[... cut by device_run.sh ...]\n'; tail -c 9000000 "$f"; } > "$f.cut" && mv "$f.cut" "$f" ;;
        *) rm -f "$f"; row "$(basename "$f")" "dropped: over 15 MiB" ;;
    esac
done
mapfile -t files < <(cd "$OUT" && ls -1)
if [[ ${#files[@]} -gt 8 ]]; then
    mapfile -t extra < <(cd "$OUT" && ls -1 -S *.log | grep -v '^summary.log$' | tail -n +6)
    tar -C "$OUT" -czf "$OUT/more_logs.tar.gz" "${extra[@]}" && (cd "$OUT" && rm -f "${extra[@]}")
fi
row total "$((SECONDS - START)) s; files: $(cd "$OUT" && ls -1 | tr '\n' ' ')"
echo
echo "================ device_run summary ================"
cat "$OUT/summary.log"
! grep -q 'rc=[1-9]\|MISSING' "$OUT/summary.log"
