#!/usr/bin/env bash
# Install Cobalt's GPU extras on an offline machine from the chunks of pack_wheelhouse.sh.
#
# Usage:
#   scripts/gpu/install_wheelhouse.sh stash CHUNK_DIR...     keep a received chunk (any order)
#   scripts/gpu/install_wheelhouse.sh install [CHUNK_DIR...] stash these too, then install
#   scripts/gpu/install_wheelhouse.sh check                  import everything, print versions
#
# Variables (defaults in brackets); the same values must be used by every step:
#   STORE       where chunks are gathered [/tmp/cobalt-wheelhouse]
#   TARGET      the `pip install --target` folder [/tmp/cobalt-site]
#   DEB_ROOT    where Debian packages are unpacked with dpkg -x [/tmp/cobalt-root]
#   SHARED_DEST where shared-data.tar.xz (tokenizer, tiktoken, LeetCode) is unpacked [/tmp/cobalt-shared]
#   ENV_FILE    the environment to source before using the install [/tmp/cobalt-gpu.env]
#   PYTHON      the interpreter that holds torch [python3]
#
# install: joins the pieces of large files (checking each piece's sha256), checks every file
# against SHA256SUMS (and names the missing ones), installs all wheels in ONE
# `pip install --no-index --no-deps --target` (a second --target install into the same folder
# replaces whole top-level folders and breaks namespace packages), unpacks the bubblewrap .deb,
# unpacks the shared data, writes ENV_FILE, then runs `check`. Use it with
#   source /tmp/cobalt-gpu.env
# which puts TARGET on PYTHONPATH and its bin/ and bubblewrap on PATH, points TIKTOKEN_CACHE_DIR
# and COBALT_SHARED at the data, keeps Hugging Face offline and turns off vLLM's flashinfer
# sampler (flashinfer-cubin is not in the set).
set -euo pipefail

STORE="${STORE:-/tmp/cobalt-wheelhouse}"
TARGET="${TARGET:-/tmp/cobalt-site}"
DEB_ROOT="${DEB_ROOT:-/tmp/cobalt-root}"
SHARED_DEST="${SHARED_DEST:-/tmp/cobalt-shared}"
ENV_FILE="${ENV_FILE:-/tmp/cobalt-gpu.env}"
PYTHON="${PYTHON:-python3}"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

stash() {
    mkdir -p "$STORE/received"
    for dir in "$@"; do
        [[ -f "$dir/SHA256SUMS" ]] || { echo "install_wheelhouse: $dir holds no SHA256SUMS: not a chunk of pack_wheelhouse.sh" >&2; exit 2; }
        find "$dir" -maxdepth 1 -type f ! -name CHUNK -exec cp -f {} "$STORE/" \;
        if [[ -f "$dir/CHUNK" ]]; then
            read -r k n < "$dir/CHUNK"
            touch "$STORE/received/$k"
            echo "$n" > "$STORE/TOTAL"
            echo "install_wheelhouse: stashed chunk $k of $n from $dir ($(ls "$STORE/received" | wc -l) of $n received)"
        fi
    done
}

assemble() {
    # Join pieces, then check every file of SHA256SUMS by its name (chunks are flat folders).
    "$PYTHON" - "$STORE" <<'PY'
import hashlib
import sys
from pathlib import Path

store = Path(sys.argv[1])


def sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


expected = {}
for line in (store / "SHA256SUMS").read_text().splitlines():
    if line.strip():
        digest, name = line.split(None, 1)
        expected[Path(name.strip()).name] = digest
groups: dict[str, list[tuple[str, str]]] = {}
pieces_file = store / "PIECES"
if pieces_file.exists():
    for line in pieces_file.read_text().splitlines():
        if line.strip():
            piece, original, digest = line.split("\t")
            groups.setdefault(original, []).append((piece, digest))
missing, bad = [], []
for original, parts in groups.items():
    if (store / original).exists() and sha(store / original) == expected.get(original):
        continue
    absent = [p for p, _ in parts if not (store / p).exists()]
    if absent:
        missing += absent
        continue
    for piece, digest in parts:
        if sha(store / piece) != digest:
            bad.append(piece)
    if not bad:
        with (store / original).open("wb") as out:
            for piece, _ in sorted(parts):
                out.write((store / piece).read_bytes())
        for piece, _ in parts:
            (store / piece).unlink()
        print(f"install_wheelhouse: joined {original} from {len(parts)} pieces")
for name, digest in expected.items():
    if name in groups and any(p in missing for p, _ in groups[name]):
        continue
    path = store / name
    if not path.exists():
        missing.append(name)
    elif sha(path) != digest:
        bad.append(name)
if missing or bad:
    received = sorted(int(p.name) for p in (store / "received").iterdir()) if (store / "received").exists() else []
    sys.exit(f"install_wheelhouse: chunks received: {received}; missing: {missing}; sha256 mismatch: {bad}")
print(f"install_wheelhouse: all {len(expected)} files present and verified")
PY
}

write_env() {
    local bwrap_dir="$DEB_ROOT/usr/bin"
    cat > "$ENV_FILE" <<EOF
# Written by scripts/gpu/install_wheelhouse.sh; source it before using the offline install.
export PYTHONPATH="$TARGET\${PYTHONPATH:+:\$PYTHONPATH}"
export PATH="$TARGET/bin:$bwrap_dir:\$PATH"
export COBALT_SHARED="$SHARED_DEST"
export TIKTOKEN_CACHE_DIR="$SHARED_DEST/data/tiktoken"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_USE_FLASHINFER_SAMPLER=0
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled
EOF
    echo "install_wheelhouse: wrote $ENV_FILE"
}

check() {
    [[ -f "$ENV_FILE" ]] && source "$ENV_FILE"
    echo "install_wheelhouse: bwrap $(command -v bwrap || echo MISSING): $(bwrap --version 2>&1 || true)"
    bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true \
        && echo "install_wheelhouse: a bubblewrap sandbox started" \
        || echo "install_wheelhouse: WARNING: bwrap could not start a sandbox here" >&2
    "$PYTHON" - <<'PY'
import importlib
import sys

failed = []
for module, dist in [("torch", "torch"), ("vllm", "vllm"), ("ray", "ray"), ("ray.serve", None),
                     ("verl", "verl"), ("verl.trainer.main_ppo", None), ("transfer_queue", "transferqueue"),
                     ("transformers", "transformers"), ("tokenizers", "tokenizers"), ("cobalt", "cobalt")]:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # report every failure, not only the first
        failed.append(module)
        print(f"  FAILED {module}: {type(exc).__name__}: {exc}")
        continue
    version = getattr(mod, "__version__", "")
    if not version and dist:
        from importlib.metadata import version as dist_version
        version = dist_version(dist)
    print(f"  ok {module} {version} ({getattr(mod, '__file__', '')})")
try:
    import torch

    print(f"  torch.cuda.is_available()={torch.cuda.is_available()} devices={torch.cuda.device_count()}")
except ImportError:
    pass
sys.exit(f"install_wheelhouse: imports failed: {failed}" if failed else 0)
PY
}

cmd="${1:-}"
[[ -n "$cmd" ]] && shift
case "$cmd" in
    stash) [[ $# -gt 0 ]] || { echo "install_wheelhouse: stash needs a chunk folder" >&2; exit 2; }; stash "$@" ;;
    install)
        [[ $# -gt 0 ]] && stash "$@"
        [[ -f "$STORE/SHA256SUMS" ]] || { echo "install_wheelhouse: nothing stashed in $STORE" >&2; exit 2; }
        assemble
        shopt -s nullglob
        wheels=("$STORE"/*.whl)
        debs=("$STORE"/*.deb)
        echo "install_wheelhouse: pip install of ${#wheels[@]} wheels into $TARGET"
        start=$SECONDS
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --disable-pip-version-check --root-user-action=ignore --target "$TARGET" "${wheels[@]}"
        echo "install_wheelhouse: pip took $((SECONDS - start)) s"
        mkdir -p "$DEB_ROOT"
        for deb in "${debs[@]}"; do
            dpkg -x "$deb" "$DEB_ROOT"
            echo "install_wheelhouse: unpacked $(basename "$deb") into $DEB_ROOT"
        done
        if [[ -f "$STORE/shared-data.tar.xz" ]]; then
            mkdir -p "$SHARED_DEST"
            tar -C "$SHARED_DEST" -xJf "$STORE/shared-data.tar.xz"
            echo "install_wheelhouse: shared data in $SHARED_DEST/data: $(ls "$SHARED_DEST/data" | tr '\n' ' ')"
        fi
        write_env
        check ;;
    check) check ;;
    -h|--help|"") usage; [[ -n "$cmd" ]] ;;
    *) echo "install_wheelhouse: unknown command '$cmd' (stash, install, check)" >&2; exit 2 ;;
esac
