#!/usr/bin/env bash
# Mutation testing (issue 11, item 6): make one-line changes to a module and check
# that its tests notice. Not part of CI: it takes minutes per module.
#
# Usage:  scripts/mutation.sh [TARGET ...]
#   TARGET is one of: compare feedback reward shaped scoring repetition tokens trajectories
#   perturbation
#   (default: all of compare feedback reward trajectories perturbation).
# Env:    MUTMUT_CHILDREN  parallel workers (default: number of cores)
#         KEEP=1           keep the scratch folder (mutmut's results, `mutmut show NAME`)
#         MUTANTS="GLOB …" only these mutants (mutmut names, `*` allowed), e.g.
#                          MUTANTS='cobalt.reward.scoring.x_compute_score*' scripts/mutation.sh scoring
#
# Each target runs in a scratch copy of the repository (src/, tests/, preproc/, pyproject.toml),
# with ../shared linked beside it, so that mutmut's `mutants/` folder and cache never
# touch the work tree. The tool is mutmut (pinned in the `dev` extra and constraints.txt).
# The surviving mutants are listed at the end; docs/TESTING.md records the last run and
# why each remaining survivor is harmless.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="$(cd "$REPO/.." && pwd)/shared"
PY="${PYTHON:-$REPO/.venv/bin/python}"
CHILDREN="${MUTMUT_CHILDREN:-$(nproc)}"

# target -> "module glob|test paths"
declare -A TARGETS=(
  [compare]="src/cobalt/execution/compare.py|tests/unit/execution/test_compare.py"
  [feedback]="src/cobalt/execution/feedback.py|tests/unit/execution/test_feedback.py"
  [reward]="src/cobalt/reward/*|tests/unit/reward"
  [shaped]="src/cobalt/reward/shaped.py|tests/unit/reward/test_shaped.py"
  [scoring]="src/cobalt/reward/scoring.py|tests/unit/reward/test_scoring.py"
  [repetition]="src/cobalt/reward/repetition.py|tests/unit/reward/test_repetition.py"
  [tokens]="src/cobalt/reward/tokens.py|tests/unit/reward/test_tokens.py"
  [trajectories]="src/cobalt/training_training_data/trajectories.py|tests/unit/data/test_trajectories.py tests/unit/data/test_max_variance.py tests/unit/data/test_trajectories_cli.py --deselect=tests/unit/data/test_trajectories_cli.py::test_evaluation_prompts_through_the_paper_shim"
  [perturbation]="src/cobalt/data/perturbation.py|tests/unit/data/test_perturbation.py tests/unit/data/test_public_test_set.py"
)
if [ "$#" -eq 0 ]; then
  set -- compare feedback reward trajectories perturbation
fi

"$PY" -c "import mutmut" 2>/dev/null || {
  echo "mutmut is not installed: pip install -e '.[dev]' -c constraints.txt" >&2
  exit 2
}

status=0
for target in "$@"; do
  spec="${TARGETS[$target]:-}"
  if [ -z "$spec" ]; then
    echo "unknown target '$target'; choose from: ${!TARGETS[*]}" >&2
    exit 2
  fi
  module="${spec%%|*}"
  tests="${spec#*|}"
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/cobalt-mutation-$target.XXXXXX")"
  mkdir "$scratch/repo"
  cp -r "$REPO/src" "$REPO/tests" "$REPO/preproc" "$scratch/repo/"  # preproc: the paper-script shims some tests run
  # pyproject without any [tool.mutmut] table, so that the setup.cfg below is read
  sed '/^\[tool\.mutmut\]/,/^\[/{/^\[tool\.mutmut\]/d;/^\[/!d}' "$REPO/pyproject.toml" > "$scratch/repo/pyproject.toml"
  ln -s "$SHARED" "$scratch/repo/shared"  # tests find ../shared from mutants/ (repo/mutants/..)
  {
    echo "[mutmut]"
    echo "source_paths = src"
    echo "only_mutate = $module"
    echo "also_copy = preproc"
    echo "pytest_add_cli_args_test_selection ="
    for t in $tests; do echo "    $t"; done
    echo "pytest_add_cli_args = -p no:cacheprovider -q"
  } > "$scratch/repo/setup.cfg"
  echo "== $target: mutating $module, tests: $tests (scratch $scratch)"
  (
    cd "$scratch/repo"
    unset PYTHONPATH  # the mutated copy must be what the tests import
    export TIKTOKEN_CACHE_DIR="${TIKTOKEN_CACHE_DIR:-$SHARED/data/tiktoken}"
    # no network here: a mutant that asks the Hugging Face hub for a model (the default
    # Qwen/Qwen3-8B of build-prompts) fails at once instead of waiting for mutmut's timeout
    export HF_HUB_OFFLINE=1
    # shellcheck disable=SC2086  # MUTANTS is a list of globs for mutmut, not for the shell
    (set -f; "$PY" -m mutmut run --max-children "$CHILDREN" ${MUTANTS:-} > "$scratch/run.log" 2>&1) || true
    tr '\r' '\n' < "$scratch/run.log" | grep -E '[0-9]+/[0-9]+ ' | tail -n 1 || true
    "$PY" -m mutmut results > "$scratch/results.txt" 2>&1 || true
    survived="$(grep -c ': survived' "$scratch/results.txt" || true)"
    other="$(grep -vc -e ': survived' -e ': killed' -e '^$' "$scratch/results.txt" || true)"
    echo "-- $target: $survived survived, $other neither killed nor survived (timeouts, suspicious, not checked)"
    grep -v ': killed' "$scratch/results.txt" || true
    for name in $(grep ': survived' "$scratch/results.txt" | sed 's/^ *//; s/: survived$//'); do
      "$PY" -m mutmut show "$name" 2>/dev/null | sed -n '1,40p'
    done
  ) || status=1
  if [ "${KEEP:-0}" != "1" ]; then rm -rf "$scratch"; else echo "kept $scratch"; fi
done
exit "$status"
