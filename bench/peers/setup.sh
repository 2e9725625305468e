#!/usr/bin/env bash
# The peers' throw-away venv for bench/peers (issue 66): Hugging Face transformers, sentence-transformers and
# tokenizers at pinned versions on the torch wheel daei builds against (torch 2.11.0 of launch/wheels.lock, taken
# from the asset cache's pypi/ where launch/setup.sh put it). The venv lives in the asset cache,
#   ${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}/venv-st-5.1.2
# the same one tests/fixtures/minilm/make_fixtures.sh builds from the same pins: an existing venv with exactly the
# pinned versions is reused (nothing downloaded). A new one installs bench/peers/requirements-hashed.txt with
# --require-hashes --no-deps (SHA-256 checked: torch, transformers, sentence-transformers, tokenizers), then their
# needs at the exact versions of bench/peers/requirements.lock. Nothing of it is used by the build or the tests.
#   bash bench/peers/setup.sh [--check]     # --check: only say whether the venv is there with the pins (exit 1 if not)
# Prints the venv's python path on its last line.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
VENV="$ASSETS/venv-st-5.1.2"
PINS="torch==2.11.0 transformers==4.57.1 sentence-transformers==5.1.2 tokenizers==0.22.1"

pins_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  # shellcheck disable=SC2086  # PINS is a word list
  "$VENV/bin/python" - $PINS <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
bad = []
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have != want:
        bad.append("%s: %s (want %s)" % (name, have, want))
if bad:
    print("peers venv: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
}

if pins_ok; then
  echo "peers venv: $VENV has the pins ($PINS), reused" >&2
  echo "$VENV/bin/python"
  exit 0
fi
if [[ ${1:-} == --check ]]; then
  echo "peers venv: missing or not at the pins: bash bench/peers/setup.sh" >&2
  exit 1
fi
[[ -f "$ASSETS/pypi/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl" ]] ||
  { echo "peers setup: no torch 2.11.0 wheel in $ASSETS/pypi (run launch/setup.sh first)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "peers setup: python3 missing" >&2; exit 1; }
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --require-hashes --no-deps --find-links "$ASSETS/pypi" -r "$HERE/requirements-hashed.txt"
"$VENV/bin/pip" install -q --find-links "$ASSETS/pypi" -r "$HERE/requirements.lock"
pins_ok || { echo "peers setup: the venv does not hold the pins after installing" >&2; exit 1; }
echo "$VENV/bin/python"
