#!/usr/bin/env bash
# daei import vec2text (issue 49) on the tiny fixtures made by vec2text's own classes: the folders it writes load as
# daei's inverter and corrector; refusals are one line and write nothing.
set -uo pipefail
BUILD=$1
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
D="$BUILD/daei"
FX="$SRC/tests/fixtures/vec2text"
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$(mktemp -d)"

out=$("$D" import vec2text --inverter "$FX/inverter" --corrector "$FX/corrector" --out imported 2>&1); rc=$?
check "import exits 0 ($out)" '[[ $rc -eq 0 ]]'
check "inverter folder written" '[[ -f imported/inverter/inverter.json && -f imported/inverter/model.safetensors && -f imported/inverter/embedding_transform.safetensors ]]'
check "corrector folder written" '[[ -f imported/corrector/corrector.json && -f imported/corrector/corrector_heads.safetensors ]]'
check "inverter keeps 4 repeat tokens" 'grep -q "\"num_repeat_tokens\": 4" imported/inverter/inverter.json'

err=$("$D" import vec2text --inverter "$FX/inverter" --out imported 2>&1 >/dev/null); rc=$?
check "existing --out refused (exit 2)" '[[ $rc -eq 2 && "$err" == *"exists"* ]]'

mkdir pickle && cp "$FX/inverter/config.json" pickle/ && echo x > pickle/pytorch_model.bin
err=$("$D" import vec2text --inverter pickle --out fromPickle 2>&1 >/dev/null); rc=$?
errline=$(printf "%s\n" "$err" | grep "error:")
check "pytorch_model.bin refused in one error line" '[[ $rc -eq 1 && $(printf "%s\n" "$errline" | wc -l) -eq 1 && "$errline" == *"pytorch_model.bin"* ]]'
check "nothing written on refusal" '[[ ! -e fromPickle && ! -e fromPickle.importing ]]'

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
