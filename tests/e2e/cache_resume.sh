#!/usr/bin/env bash
# Issue 4 end to end: an MPI cache build killed with kill -9 on one rank, resumed with 3 ranks, has the same
# `cache verify` digest as an uninterrupted 1-process build; a flipped byte and a missing manifest are clear errors.
set -euo pipefail
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
DAEI="$BUILD/daei"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none)
TMP=$(mktemp -d /tmp/daei-e2e-cache.XXXXXX)
MPI_PID=""
cleanup() { [[ -n "$MPI_PID" ]] && kill -9 "$MPI_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
cd "$TMP"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

ASSETS="${DAEI_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/daei}"
GLOVE=()
[[ -f "$ASSETS/glove-100d/asset.json" ]] || GLOVE=(--set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini")
python3 - <<'PY'
import random
random.seed(3)
words = "the cat sat on a mat dog ran in park union state people law war peace time year city".split()
with open("texts.txt", "w") as f:
    for i in range(2600):
        f.write(" ".join(random.choice(words) for _ in range(random.randint(3, 12))) + f" {i}\n")
PY
COMMON=(--set run.root="$TMP/runs" --set corpus.sources=[] --set "corpus.files=[$TMP/texts.txt]" --set corpus.ood=[]
        --set corpus.test_size=100 --set corpus.val_size=100 --set cache.shard_rows=100 --set cache.batch_size=20
        "${GLOVE[@]}")
"$DAEI" corpus build "${COMMON[@]}" --set run.name=ref 2>/dev/null
mkdir -p runs/resumed && cp -r runs/ref/corpus runs/resumed/

echo "== uninterrupted, 1 process"
"$DAEI" cache build "${COMMON[@]}" --set run.name=ref --split train 2>/dev/null
REF=$("$DAEI" cache verify "${COMMON[@]}" --set run.name=ref --split train --json 2>/dev/null)
echo "$REF"

echo "== 2 ranks, one killed with kill -9 midway"
"${MPIRUN[@]}" -np 2 "$DAEI" cache build "${COMMON[@]}" --set run.name=resumed --split train \
  --set cache.max_rows_per_s=300.0 >mpi2.log 2>&1 &
MPI_PID=$!
SH=runs/resumed/cache/train
for _ in $(seq 1 600); do
  n=$( (find $SH -maxdepth 1 -name "shard-*.h5" 2>/dev/null || true) | wc -l)
  [[ $n -ge 4 ]] && break
  kill -0 $MPI_PID 2>/dev/null || { cat mpi2.log; echo "mpirun ended before the kill"; exit 1; }
  sleep 0.1
done
RANK_PIDS=$(ps -o pid= --ppid $MPI_PID | tr -d ' ')
VICTIM=$(for p in $RANK_PIDS; do [[ "$(cat /proc/$p/comm 2>/dev/null)" == daei ]] && echo $p; done | tail -1)
[[ -n "$VICTIM" ]] || { echo "no rank process found under mpirun $MPI_PID"; ps -ef | grep -v grep | grep daei; exit 1; }
kill -9 "$VICTIM"
if wait $MPI_PID; then echo "mpirun succeeded although a rank was killed"; exit 1; fi
MPI_PID=""
KEPT=$(ls $SH/shard-*.h5 | wc -l)
[[ ! -f $SH/manifest.json ]] || { echo "manifest written by a killed build"; exit 1; }
echo "killed rank $VICTIM; $KEPT complete shards left of 24"
[[ $KEPT -lt 24 ]] || { echo "the build finished before the kill: nothing was tested"; exit 1; }
if "$DAEI" cache verify "${COMMON[@]}" --set run.name=resumed --split train 2>err.txt; then exit 1; fi
grep -q "incomplete: manifest.json missing" err.txt || { cat err.txt; exit 1; }

echo "== resumed with 3 ranks"
"${MPIRUN[@]}" -np 3 "$DAEI" cache build "${COMMON[@]}" --set run.name=resumed --split train >mpi3.log 2>&1 ||
  { cat mpi3.log; exit 1; }
grep -q "($KEPT kept)" mpi3.log || { cat mpi3.log; echo "expected $KEPT kept shards"; exit 1; }
GOT=$("$DAEI" cache verify "${COMMON[@]}" --set run.name=resumed --split train --json 2>/dev/null)
echo "$GOT"
python3 - "$REF" "$GOT" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["rows"] == b["rows"] == 2400 and a["shards"] == b["shards"] == 24, (a, b)
assert a["digest"] == b["digest"], (a["digest"], b["digest"])
print("same digest", a["digest"])
PY

echo "== flipped byte -> checksum error naming the shard"
python3 - runs/resumed/cache/train/shard-00007.h5 <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(b)
PY
if "$DAEI" cache verify "${COMMON[@]}" --set run.name=resumed --split train 2>err.txt; then exit 1; fi
cat err.txt
[[ $(wc -l <err.txt) -eq 1 ]] && grep -q "shard-00007.h5: checksum error" err.txt

echo "== clean embeddings of the training split are refused outside the reference mode"
if "$DAEI" cache build "${COMMON[@]}" --set run.name=ref --split train --clean 2>err.txt; then exit 1; fi
grep -q "outside the threat model" err.txt || { cat err.txt; exit 1; }
echo "== the clean corrector (clean targets, clean hypotheses) is refused without reference.corrector"
for cmd in "train --stage clean-corrector" "hypotheses --for clean-corrector"; do
  # shellcheck disable=SC2086
  if "$DAEI" $cmd "${COMMON[@]}" --set run.name=ref --set reference.enabled=true 2>err.txt; then exit 1; fi
  [[ $(wc -l <err.txt) -eq 1 ]] && grep -q "clean-corrector is a reference outside the threat model.*reference.corrector: true" err.txt ||
    { echo "$cmd:"; cat err.txt; exit 1; }
done
if "$DAEI" pipeline --dry-run "${COMMON[@]}" --set run.name=ref --set reference.corrector=true 2>err.txt >/dev/null; then
  echo "pipeline planned a clean corrector without reference.enabled"; exit 1
fi
grep -q "reference.corrector: true needs reference.enabled: true" err.txt || { cat err.txt; exit 1; }
echo "ok"
