#!/usr/bin/env bash
# Issue 26 item 7: a corrupt shard read by `train` ends with one error line and exit 1, and HDF5's own error stack
# (HDF5-DIAG) reaches stderr from no thread: the cache reader's read-ahead thread is quieted as the main thread is.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-h5quiet.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/r/corpus"
# shellcheck source=tests/support/word_corpus.sh
source "$SRC/tests/support/word_corpus.sh"
write_word_corpus "$T/r/corpus/train.jsonl" 3000 7
cfg=(--set run.root="$T" --set run.name=r --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini"
     --set cache.shard_rows=1000 --set cache.chunk_kb=1)
"$D" cache build --split train "${cfg[@]}" >/dev/null 2>"$T/build.err" || { cat "$T/build.err"; fail "cache build"; }
# Flipped bytes in one chunk of shard 1's noisy vectors (its address from h5ls): fletcher32 fails when that chunk
# is read. The shards still open (their metadata is intact) and the first batches read well, so the read-ahead
# thread is the first to meet the damage (with every chunk damaged the main thread fails first and exits).
f=$T/r/cache/train/shard-00001.h5
h5ls -va "$f/noisy" >"$T/chunks.txt" 2>&1 || { cat "$T/chunks.txt"; fail "h5ls $f"; }
python3 - "$f" "$T/chunks.txt" <<'PY'
import re, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
chunks = [(int(m.group(1)), int(m.group(2))) for m in
          re.finditer(r"^\s*0x[0-9a-f]+\s+(\d+)\s+(\d+)\s+\[", open(sys.argv[2]).read(), re.M)]
assert len(chunks) == 8, f"expected 8 chunks of 128 rows in h5ls's output, found {len(chunks)}"
size, addr = chunks[3]
for i in range(addr + size // 2, addr + size // 2 + 16): b[i] ^= 0xFF
open(p, "wb").write(bytes(b))
PY
set +e
"$D" train --stage 1 "${cfg[@]}" --set dae.hidden=32 --set dae.depth=1 --set stage1.batch_size=8 \
  --set stage1.steps=400 --set stage1.eval_every=0 --set train.ckpt_every=1000 --set train.plot=false \
  --set train.threads=1 >"$T/train.out" 2>"$T/train.err"
rc=$?
set -e
[[ $rc == 1 ]] || { tail -20 "$T/train.err"; fail "train on a corrupt shard exited $rc, want 1"; }
n=$(grep -c "daei: error:" "$T/train.err" || true)
[[ $n == 1 ]] || { cat "$T/train.err"; fail "$n error lines, want 1"; }
grep "daei: error:" "$T/train.err"
if grep -q "HDF5-DIAG" "$T/train.err" "$T/train.out"; then
  grep -m5 -B1 -A3 "HDF5-DIAG" "$T/train.err" "$T/train.out"
  fail "HDF5's error stack reached the output ($(cat "$T/train.err" "$T/train.out" | grep -c "HDF5-DIAG") HDF5-DIAG lines)"
fi
echo "hdf5_quiet: OK"
