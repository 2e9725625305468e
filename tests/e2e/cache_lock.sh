#!/usr/bin/env bash
# Issue 26 item 4: `cache build` locks the split folder as the training stages lock theirs. A second build of the
# same split while the first runs is refused naming the first's host and PID, removes none of its temporaries and
# leaves config.yaml as it was; the first then completes and verifies. A shard that cannot be renamed into place
# (a folder is in the way) is reported with the rename's own error, not "Success".
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-cachelock.XXXXXX)
bg=
cleanup() { [[ -n $bg ]] && kill "$bg" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
GLOVE=()
[[ -f "$ASSETS/glove-100d/asset.json" ]] || GLOVE=(--set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini")
python3 - "$T/texts.txt" <<'PY'
import random, sys
random.seed(3)
words = "the cat sat on a mat dog ran in park union state people law war peace time year city".split()
with open(sys.argv[1], "w") as f:
    for i in range(1200):
        f.write(" ".join(random.choice(words) for _ in range(random.randint(3, 12))) + f" {i}\n")
PY
COMMON=(--set run.root="$T/runs" --set run.name=r --set corpus.sources=[] --set "corpus.files=[$T/texts.txt]"
        --set corpus.ood=[] --set corpus.test_size=100 --set corpus.val_size=100 --set cache.shard_rows=100
        --set cache.batch_size=20 "${GLOVE[@]}")
"$D" corpus build "${COMMON[@]}" >"$T/corpus.log" 2>&1 || { cat "$T/corpus.log"; fail "corpus build"; }
SH=$T/runs/r/cache/train

echo "== a second build of the split while the first runs"
"$D" cache build "${COMMON[@]}" --split train --set cache.max_rows_per_s=40.0 >"$T/first.log" 2>&1 &
bg=$!
for _ in $(seq 300); do
  compgen -G "$SH/shard-*.h5*" >/dev/null && break
  kill -0 "$bg" 2>/dev/null || { cat "$T/first.log"; fail "the first build ended early"; }
  sleep 0.1
done
cp "$T/runs/r/config.yaml" "$T/saved.yaml"
set +e; "$D" cache build "${COMMON[@]}" --split train --set cache.max_rows_per_s=100.0 >"$T/second.log" 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || { cat "$T/second.log"; fail "the second build exited $rc, want 1"; }
grep -q "daei: error: .*cache/train is in use by another daei process (host .* pid $bg)" "$T/second.log" ||
  { cat "$T/second.log"; fail "the refusal does not name host and pid $bg"; }
[[ $(grep -c "daei: error:" "$T/second.log") == 1 ]] || { cat "$T/second.log"; fail "not one error line"; }
if grep -q "removing partial" "$T/second.log"; then cat "$T/second.log"; fail "the refused build removed files"; fi
cmp -s "$T/saved.yaml" "$T/runs/r/config.yaml" || fail "the refused build rewrote config.yaml"
set +e; wait "$bg"; rc=$?; set -e
bg=
[[ $rc == 0 ]] || { cat "$T/first.log"; fail "the first build exited $rc"; }
"$D" cache verify "${COMMON[@]}" --split train >"$T/verify.log" 2>&1 || { cat "$T/verify.log"; fail "verify"; }

echo "== a shard that cannot be renamed into place"
"$D" corpus build "${COMMON[@]}" --set run.name=s >/dev/null 2>&1
mkdir -p "$T/runs/s/cache/train/shard-00000.h5/in-the-way"
set +e; "$D" cache build "${COMMON[@]}" --set run.name=s --split train >"$T/rename.log" 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || { cat "$T/rename.log"; fail "exit $rc, want 1"; }
grep "daei: error:" "$T/rename.log"
grep -q "daei: error: .*cannot rename the written shard into place: Is a directory" "$T/rename.log" ||
  { cat "$T/rename.log"; fail "the rename error is not the rename's own"; }
echo "cache_lock: OK"
