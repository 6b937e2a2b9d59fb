#!/usr/bin/env bash
# Split a wheelhouse into numbered chunk folders of at most N MiB each, for transfer links that
# carry a limited size at a time (an air-gapped machine fed by a file-size-limited channel).
#
# Usage: scripts/gpu/pack_wheelhouse.sh [--max-mib 58] [--shared DIR] WHEELHOUSE CHUNKS_DIR
#
#   WHEELHOUSE    a folder made by scripts/gpu/build_wheelhouse.sh (it holds SHA256SUMS)
#   CHUNKS_DIR    refilled from scratch with chunk-01/, chunk-02/, ...
#   --max-mib N   the most bytes of files in one chunk, in MiB [58]; a file larger than that
#                 is cut into byte pieces (`split`), which install_wheelhouse.sh joins again
#   --shared DIR  also carry the data the GPU proofs read from the project's ../shared/data:
#                 DIR/data/{qwen3_tokenizer,tiktoken,leetcode}, as one shared-data.tar.xz
#
# The files are placed largest first, each into the first chunk with room for it (first-fit
# decreasing), so the chunk count is close to total/N. Every chunk holds the wheelhouse's
# SHA256SUMS and the PIECES list (piece -> file it belongs to, in order, with its own sha256),
# so the installer can tell which files are still missing whichever chunks it has received.
set -euo pipefail

MAX_MIB=58
SHARED=""
ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --max-mib) MAX_MIB="$2"; shift 2 ;;
        --shared) SHARED="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "pack_wheelhouse: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
[[ ${#ARGS[@]} -eq 2 ]] || { echo "pack_wheelhouse: need WHEELHOUSE and CHUNKS_DIR (see --help)" >&2; exit 2; }
SRC="$(cd -- "${ARGS[0]}" && pwd)"
DEST="${ARGS[1]}"
[[ -f "$SRC/SHA256SUMS" ]] || { echo "pack_wheelhouse: $SRC/SHA256SUMS is missing: build with build_wheelhouse.sh" >&2; exit 2; }

echo "pack_wheelhouse: checking $SRC against its SHA256SUMS"
(cd "$SRC" && sha256sum --quiet -c SHA256SUMS)

rm -rf "$DEST"
mkdir -p "$DEST"
DEST="$(cd -- "$DEST" && pwd)"
STAGE="$DEST/.stage"
mkdir -p "$STAGE"
cp "$SRC/SHA256SUMS" "$STAGE/SHA256SUMS"

if [[ -n "$SHARED" ]]; then
    for d in qwen3_tokenizer tiktoken leetcode; do
        [[ -d "$SHARED/data/$d" ]] || { echo "pack_wheelhouse: $SHARED/data/$d is missing" >&2; exit 2; }
    done
    echo "pack_wheelhouse: packing $SHARED/data/{qwen3_tokenizer,tiktoken,leetcode} as shared-data.tar.xz"
    tar -C "$SHARED" -cf - data/qwen3_tokenizer data/tiktoken data/leetcode data/README.md 2>/dev/null \
        | xz -T0 -6 > "$STAGE/shared-data.tar.xz"
    (cd "$STAGE" && sha256sum shared-data.tar.xz >> SHA256SUMS)
fi

python3 - "$SRC" "$STAGE" "$DEST" "$MAX_MIB" <<'PY'
import hashlib
import os
import shutil
import sys
from pathlib import Path

src, stage, dest, max_mib = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
limit = int(max_mib * 1024 * 1024)
names = [line.split(None, 1)[1].strip() for line in (stage / "SHA256SUMS").read_text().splitlines() if line.strip()]


def origin(name: str) -> Path:
    return stage / name if (stage / name).exists() else src / name


# Items: (flat name in a chunk, size, source path, byte offset, length). Large files become pieces.
items = []
pieces = []  # (piece name, original file, sha256 of the piece)
for name in names:
    path = origin(name)
    size = path.stat().st_size
    flat = Path(name).name
    if size <= limit:
        items.append((flat, size, path, 0, size))
        continue
    with path.open("rb") as fh:
        for k, offset in enumerate(range(0, size, limit)):
            length = min(limit, size - offset)
            piece = f"{flat}.part-{k:03d}"
            fh.seek(offset)
            pieces.append((piece, flat, hashlib.sha256(fh.read(length)).hexdigest()))
            items.append((piece, length, path, offset, length))

bins: list[list] = []
free: list[int] = []
for item in sorted(items, key=lambda it: -it[1]):
    for i, room in enumerate(free):
        if item[1] <= room:
            bins[i].append(item)
            free[i] -= item[1]
            break
    else:
        bins.append([item])
        free.append(limit - item[1])

pieces_text = "".join(f"{p}\t{orig}\t{sha}\n" for p, orig, sha in pieces)
total = 0
for i, content in enumerate(bins, start=1):
    chunk = dest / f"chunk-{i:02d}"
    chunk.mkdir()
    for flat, size, path, offset, length in content:
        if offset == 0 and length == path.stat().st_size:
            shutil.copyfile(path, chunk / flat)
        else:
            with path.open("rb") as fin, (chunk / flat).open("wb") as fout:
                fin.seek(offset)
                fout.write(fin.read(length))
    shutil.copyfile(stage / "SHA256SUMS", chunk / "SHA256SUMS")
    (chunk / "PIECES").write_text(pieces_text)
    (chunk / "CHUNK").write_text(f"{i} {len(bins)}\n")
    used = sum(it[1] for it in content)
    total += used
    print(f"pack_wheelhouse: chunk-{i:02d}: {len(content):3d} files, {used / 2**20:6.1f} MiB")
print(f"pack_wheelhouse: {len(bins)} chunks, {total / 2**20:.1f} MiB in all "
      f"(at least {-(-total // limit)} at {max_mib:g} MiB each), {len(pieces)} pieces of large files")
PY
rm -rf "$STAGE"
echo "pack_wheelhouse: done: $DEST/chunk-*; send each as the carried folder and stash it with"
echo "  bash scripts/gpu/install_wheelhouse.sh stash <folder>, then install_wheelhouse.sh install"
