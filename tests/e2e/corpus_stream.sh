#!/usr/bin/env bash
# Issue 4: the corpus build streams. A generated 300k-line file (with duplicates, blanks and invalid UTF-8) is
# built with a 4 MB sort buffer, so most of it spills to disk; peak RSS must stay far below what holding the corpus
# would need, and the counts must be exact. (The 2 M-line measurement is in the issue note: same command, N=2000000.)
set -euo pipefail
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
N=${N:-300000}
TMP=$(mktemp -d /tmp/daei-e2e-corpus.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
python3 - "$N" <<'PY'
import random, sys
n = int(sys.argv[1])
random.seed(5)
words = [f"w{i}" for i in range(5000)]
with open("big.txt", "wb") as f:
    for i in range(n):
        if i % 1000 == 0:
            f.write(b"\n")                                     # blank
        elif i % 1000 == 1:
            f.write(b"bad \xff\xfe utf8 words here\n")       # invalid UTF-8
        elif i % 100 == 2:
            f.write(b"the same duplicate line again\n")        # duplicate
        else:
            f.write((" ".join(random.choice(words) for _ in range(random.randint(4, 20))) + f" {i}\n").encode())
PY
/usr/bin/time -v "$BUILD/daei" corpus build --set run.root="$TMP/runs" --set corpus.sources=[] \
  --set "corpus.files=[$TMP/big.txt]" --set corpus.ood=[] --set corpus.sort_buffer_mb=4 \
  --set corpus.test_size=1000 --set corpus.val_size=1000 2>time.txt >/dev/null || { cat time.txt; exit 1; }
RSS_KB=$(sed -n 's/.*Maximum resident set size (kbytes): //p' time.txt)
# What the program holds before reading any text (libtorch 2.x maps its CUDA libraries: about 480 MB): the bound is
# on what the corpus adds.
/usr/bin/time -v "$BUILD/daei" --version 2>base.txt >/dev/null
BASE_KB=$(sed -n 's/.*Maximum resident set size (kbytes): //p' base.txt)
RSS_KB=$((RSS_KB - BASE_KB))
INPUT_MB=$(( $(stat -c %s big.txt) / 1048576 ))
python3 - "$N" "$RSS_KB" "$INPUT_MB" <<'PY'
import json, sys
n, rss_kb, input_mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
st = json.load(open("runs/quickstart/corpus/stats.json"))
blank, bad = (n + 999) // 1000, (n + 998) // 1000
dup_lines = sum(1 for i in range(n) if i % 100 == 2 and i % 1000 not in (0, 1))
assert st["empty"] == blank, st
assert st["invalid_utf8"] == bad, st
assert st["duplicates"] == dup_lines - 1, (st["duplicates"], dup_lines)
rows = sum(st["splits"].values())
assert rows == n - blank - bad - dup_lines + 1, (rows, st)
lines = sum(1 for s in ("train", "val", "test") for _ in open(f"runs/quickstart/corpus/{s}.jsonl"))
assert lines == rows
print(f"{n} lines ({input_mb} MB) -> {rows} rows; peak RSS {rss_kb/1024:.0f} MB above the program's own; {st['seconds']:.1f} s")
# libtorch + MPI alone take ~100 MB; the corpus itself is held only in the 4 MB sort buffer
assert rss_kb < 48 * 1024, f"peak RSS {rss_kb/1024:.0f} MB above the program's own"
PY
# Re-running with the same config keeps the corpus; another config is refused unless --force (nothing overwritten).
ARGS=(--set run.root="$TMP/runs" --set corpus.sources=[] --set "corpus.files=[$TMP/big.txt]" --set corpus.ood=[]
      --set corpus.test_size=1000 --set corpus.val_size=1000)
before=$(sha256sum runs/quickstart/corpus/train.jsonl)
"$BUILD/daei" corpus build "${ARGS[@]}" 2>log.txt
grep -q "up to date" log.txt || { cat log.txt; exit 1; }
if "$BUILD/daei" corpus build "${ARGS[@]}" --set corpus.seed=7 2>err.txt; then echo "a changed config was accepted"; exit 1; fi
grep -q "corpus.seed (corpus/ holds work).*pass --force" err.txt || { cat err.txt; exit 1; }
[[ "$(sha256sum runs/quickstart/corpus/train.jsonl)" == "$before" ]]
# --force rebuilds with the new config: the guard lets it through with a warning, the saved config follows.
"$BUILD/daei" corpus build "${ARGS[@]}" --set corpus.seed=7 --force 2>force.txt || { cat force.txt; exit 1; }
grep -q "\-\-force: the config changes saved work: corpus.seed" force.txt || { cat force.txt; exit 1; }
[[ "$(sha256sum runs/quickstart/corpus/train.jsonl)" != "$before" ]] || { echo "--force did not rebuild"; exit 1; }
grep -q "seed: 7" runs/quickstart/config.yaml || { echo "config.yaml does not hold the forced value"; exit 1; }
ls runs/quickstart/config.history/*.yaml >/dev/null 2>&1 || { echo "the config replaced by --force was not kept"; exit 1; }
echo ok
