#!/usr/bin/env bash
# e2e_bad_disk's two MPI cases looped N times (issue 32): `tests/repeat/bad_disk_loop.sh [N]` (default 50, root: it
# mounts a 4 MB tmpfs). Case "natural": mpirun -np 2 cache build into the full disk (the free-space check fails). Case
# "forced": the same with tests/support/statvfs_plenty.c preloaded, so the full disk is met inside HDF5's writes (the
# path of the exit-time SIGSEGV fixed in src/cli/main.cpp). Counts runs that exit other than 1 or whose stderr shows
# a rank's signal; their stderr is kept. Prints one line a run and the count.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
SRC=$PWD
D=${DAEI:-$SRC/build/daei}
N=${1:-50}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "bad_disk_loop: N must be a positive integer, got '$N'" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "bad_disk_loop: needs root (it mounts a tmpfs)" >&2; exit 2; }
T=$(mktemp -d /tmp/daei-disk-loop.XXXXXX)
cleanup() { umount "$T/full" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
mkdir -p "$T/full" "$T/corpus" "$T/bad"
mount -t tmpfs -o size=4m tmpfs "$T/full"
python3 - "$T/corpus/train.jsonl" <<'PY'
import json, sys
words = "the cat sat on a mat dog ran".split()
with open(sys.argv[1], "w") as f:
    for i in range(150000):
        f.write(json.dumps({"id": i, "text": " ".join(words[(i + k) % len(words)] for k in range(4)), "source": "x"}) + "\n")
PY
cc -shared -fPIC -O1 -o "$T/plenty.so" "$SRC/tests/support/statvfs_plenty.c" -ldl
ROOT_FLAGS=(--allow-run-as-root)
bad=0
for i in $(seq 1 "$N"); do
  for mode in natural forced; do
    rm -rf "${T:?}/full/"*
    mkdir -p "$T/full/k" && ln -s "$T/corpus" "$T/full/k/corpus"
    pre=()
    [[ $mode == forced ]] && pre=(-x LD_PRELOAD="$T/plenty.so" -x DAEI_PLENTY_UNDER="$T/full")
    mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "${pre[@]}" \
      -np 2 "$D" cache build --split train --set run.root="$T/full" --set run.name=k \
      --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini" --set cache.shard_rows=10000 --set cache.dtype=float32 \
      >/dev/null 2>"$T/err"
    rc=$?
    sig=$(grep -c "Process received signal\|exited on signal" "$T/err")
    if [[ $rc != 1 || $sig != 0 ]]; then bad=$((bad + 1)); cp "$T/err" "/tmp/bad_disk_loop.$i.$mode.err"; fi
    echo "run $i $mode: exit $rc, signal lines $sig"
  done
done
echo "bad runs: $bad of $((2 * N))$( ((bad)) && echo " (stderr kept in /tmp/bad_disk_loop.*.err)")"
((bad == 0))
