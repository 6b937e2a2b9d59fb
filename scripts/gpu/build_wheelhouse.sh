#!/usr/bin/env bash
# Build a wheelhouse of Cobalt's GPU extras for an offline (air-gapped) GPU machine.
#
# Usage: scripts/gpu/build_wheelhouse.sh [--dest DIR] [--python-version 3.12] [--abi cp312]
#            [--arch x86_64] [--torch 2.11.0] [--requirements FILE] [--no-project] [--no-deb]
#
# Run it on a machine WITH network access (any Linux, any Python >= 3.10 with pip); the wheels
# are chosen for the TARGET interpreter and platform, not this one:
#   --dest DIR          where the wheelhouse goes [./wheelhouse-gpu]; it is refilled from scratch
#   --python-version V  the target's Python, X.Y [3.12]
#   --abi TAG           the target's CPython ABI tag [cp + V without the dot, e.g. cp312]
#   --arch A            the target's machine (x86_64, aarch64) [x86_64]; every manylinux tag
#                       from manylinux_2_17 to manylinux_2_39 of that machine is accepted
#   --torch V           the torch release installed on the target [2.11.0]; the build fails if
#                       the vLLM wheel asks for another one (pick the vLLM release built for it)
#   --requirements F    the pins, one NAME==VERSION a line [scripts/gpu/requirements-gpu.txt]
#   --no-project        leave out Cobalt's own wheel (`pip wheel --no-deps .`)
#   --no-deb            leave out Debian's bubblewrap .deb (the sandbox's one binary)
#   --image-packages F  names of the packages the target image holds, one a line; then the
#                       requirements of the wheels that neither the wheelhouse nor the image
#                       satisfy are listed (a warning: some are optional or imported lazily)
#
# Every wheel is fetched with `pip download --no-deps --only-binary=:all:` so that nothing the
# target image already holds (torch, CUDA libraries, numpy) is pulled in; the pins list the
# rest explicitly. Packages published only as a source archive (antlr4-python3-runtime 4.9.3)
# are built here with `pip wheel` and must come out pure Python (py3-none-any).
# Output: DIR/*.whl, DIR/debs/*.deb, DIR/SHA256SUMS (sha256sum -c format, paths relative to
# DIR) and DIR/MANIFEST.tsv (file, bytes, name, version). Install on the target with
# scripts/gpu/install_wheelhouse.sh after splitting with scripts/gpu/pack_wheelhouse.sh.
set -euo pipefail

REPO_ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="$PWD/wheelhouse-gpu"
PYVER=3.12
ABI=""
ARCH=x86_64
TORCH=2.11.0
REQS="$REPO_ROOT/scripts/gpu/requirements-gpu.txt"
WITH_PROJECT=1
WITH_DEB=1
IMAGE_PACKAGES=""
# Published only as source archives: built here, must give a pure-Python wheel.
SDIST_ONLY=(antlr4-python3-runtime)

while [[ $# -gt 0 ]]; do
    case "$1" in
        --dest) DEST="$2"; shift 2 ;;
        --python-version) PYVER="$2"; shift 2 ;;
        --abi) ABI="$2"; shift 2 ;;
        --arch) ARCH="$2"; shift 2 ;;
        --torch) TORCH="$2"; shift 2 ;;
        --requirements) REQS="$2"; shift 2 ;;
        --no-project) WITH_PROJECT=0; shift ;;
        --no-deb) WITH_DEB=0; shift ;;
        --image-packages) IMAGE_PACKAGES="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_wheelhouse: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ -z "$ABI" ]] && ABI="cp${PYVER/./}"
[[ -f "$REQS" ]] || { echo "build_wheelhouse: no requirements file $REQS" >&2; exit 2; }

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
# pip, without the noise of index folders configured on this machine that lack a package.
pip_() { "$PYTHON" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

normalize() { tr 'A-Z_.' 'a-z--' <<< "$1"; }

# Split the pins into wheels to download and source-only packages to build.
mapfile -t ALL_PINS < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$REQS" | grep -v '^$')
DOWNLOAD=()
BUILD=()
for pin in "${ALL_PINS[@]}"; do
    [[ "$pin" == *==* ]] || { echo "build_wheelhouse: $REQS: '$pin' is not NAME==VERSION" >&2; exit 2; }
    name="$(normalize "${pin%%==*}")"
    case "$name" in
        torch|torchvision|torchaudio|nvidia-*-cu1[0-9]|nvidia-cublas*|nvidia-cuda-runtime*)
            echo "build_wheelhouse: $REQS pins '$pin': torch and CUDA libraries come from the target image, never from the wheelhouse" >&2
            exit 2 ;;
    esac
    is_sdist=0
    for s in "${SDIST_ONLY[@]}"; do [[ "$name" == "$s" ]] && is_sdist=1; done
    if [[ $is_sdist == 1 ]]; then BUILD+=("$pin"); else DOWNLOAD+=("$pin"); fi
done

PLATFORMS=()
for n in $(seq 17 39); do PLATFORMS+=(--platform "manylinux_2_${n}_${ARCH}"); done
PLATFORMS+=(--platform "manylinux2014_${ARCH}" --platform "manylinux1_${ARCH}")

rm -rf "$DEST"
mkdir -p "$DEST"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
printf '%s\n' "${DOWNLOAD[@]}" > "$TMP/download.txt"

echo "build_wheelhouse: ${#DOWNLOAD[@]} wheels for CPython $PYVER ($ABI, $ARCH) into $DEST"
pip_ download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --abi "$ABI" --abi abi3 --abi none "${PLATFORMS[@]}" -d "$DEST" -r "$TMP/download.txt"

for pin in "${BUILD[@]}"; do
    echo "build_wheelhouse: building $pin from its source archive"
    pip_ wheel -q --no-deps --no-binary=:all: -w "$TMP/built" "$pin"
done
if [[ ${#BUILD[@]} -gt 0 ]]; then
    for w in "$TMP"/built/*.whl; do
        [[ "$w" == *-py3-none-any.whl || "$w" == *-py2.py3-none-any.whl ]] \
            || { echo "build_wheelhouse: $(basename "$w") is not pure Python; build it on the target's platform" >&2; exit 1; }
        mv "$w" "$DEST/"
    done
fi

if [[ $WITH_PROJECT == 1 ]]; then
    echo "build_wheelhouse: Cobalt's own wheel (pip wheel --no-deps $REPO_ROOT)"
    pip_ wheel -q --no-deps --no-build-isolation -w "$TMP/project" "$REPO_ROOT"
    mv "$TMP"/project/cobalt-*.whl "$DEST/"
    rm -rf "$REPO_ROOT/build"   # setuptools' scratch folder
fi

if [[ $WITH_DEB == 1 ]]; then
    echo "build_wheelhouse: Debian's bubblewrap .deb"
    mkdir -p "$DEST/debs"
    (cd "$DEST/debs" && apt-get download -q bubblewrap)
fi

# Checks: exactly one wheel per pin, at the pinned version; vLLM built for the target's torch.
"$PYTHON" - "$DEST" "$TORCH" "${ALL_PINS[@]}" <<'PY'
import re
import sys
import zipfile
from pathlib import Path

dest, torch_version, pins = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


found = {}
for wheel in sorted(dest.glob("*.whl")):
    name, version = wheel.name.split("-")[:2]
    found.setdefault(norm(name), []).append((version, wheel.name))
errors = []
for pin in pins:
    name, version = pin.split("==")
    got = found.pop(norm(name), [])
    if len(got) != 1 or got[0][0] != version:
        errors.append(f"{pin}: wheelhouse holds {[g[1] for g in got] or 'nothing'}")
extra = {k: v for k, v in found.items() if k != "cobalt"}
if extra:
    errors.append(f"wheels not in the pins: {sorted(extra)}")
for vllm in dest.glob("vllm-*.whl"):
    with zipfile.ZipFile(vllm) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        reqs = [l for l in zf.read(meta).decode().splitlines() if l.startswith("Requires-Dist: torch")]
    torch_pins = [r for r in reqs if re.match(r"Requires-Dist: torch\s*[=<>!~]", r)]
    if torch_pins and not any(f"=={torch_version}" in r for r in torch_pins):
        errors.append(f"{vllm.name} asks for {torch_pins}, the target has torch {torch_version}")
if errors:
    sys.exit("build_wheelhouse: " + "\n  ".join(["check failed:"] + errors))
print(f"build_wheelhouse: {len(pins)} pins matched, vLLM built for torch {torch_version}")
PY

if [[ -n "$IMAGE_PACKAGES" ]]; then
    "$PYTHON" - "$DEST" "$IMAGE_PACKAGES" "$PYVER" "$ARCH" <<'PY'
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

dest, image_file, pyver, arch = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


image = {norm(line.strip()) for line in open(image_file) if line.strip() and not line.startswith("#")}
ours = {norm(w.name.split("-")[0]): w for w in dest.glob("*.whl")}
env = {"python_version": pyver, "python_full_version": pyver + ".0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": arch, "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
unmet: dict[str, list[str]] = {}
for name, wheel in sorted(ours.items()):
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode(errors="replace").splitlines()
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            applies = req.marker is None or req.marker.evaluate(env)
            if applies and norm(req.name) not in ours and norm(req.name) not in image:
                unmet.setdefault(norm(req.name), []).append(name)
for req, by in sorted(unmet.items()):
    print(f"build_wheelhouse: WARNING: {req} (required by {', '.join(by)}) is neither in the wheelhouse nor in the image")
print(f"build_wheelhouse: {len(unmet)} requirements unmet by the wheelhouse and the image")
PY
fi

# Manifest: sha256 sums (sha256sum -c from inside DEST) and a table of what is there.
(cd "$DEST" && find . -type f \( -name '*.whl' -o -name '*.deb' \) -printf '%P\n' | sort \
    | xargs sha256sum > SHA256SUMS)
{
    printf 'file\tbytes\tname\tversion\n'
    (cd "$DEST" && find . -type f \( -name '*.whl' -o -name '*.deb' \) -printf '%P\t%s\n' | sort) \
        | while IFS=$'\t' read -r file bytes; do
            base="$(basename "$file")"
            if [[ "$base" == *.deb ]]; then IFS=_ read -r n v _ <<< "$base"; else IFS=- read -r n v _ <<< "$base"; fi
            printf '%s\t%s\t%s\t%s\n' "$file" "$bytes" "$n" "$v"
        done
} > "$DEST/MANIFEST.tsv"
echo "build_wheelhouse: $(($(wc -l < "$DEST/SHA256SUMS"))) files, $(du -sh --apparent-size "$DEST" | cut -f1) in $DEST"
