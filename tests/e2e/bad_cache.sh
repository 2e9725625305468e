#!/usr/bin/env bash
# Issue 14, "Caches": with the manifest deleted, one shard truncated and one with flipped bytes, `cache build`
# verifies every kept shard, says which are damaged, builds them again, and ends with the same content digest; a
# damaged manifest is treated the same way; a manifest naming a file outside the cache is refused.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-badcache.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/r/corpus"
python3 - "$T/r/corpus/val.jsonl" <<'PY'
import json, sys
words = "the cat sat on a mat dog ran".split()
with open(sys.argv[1], "w") as f:
    for i in range(3000):
        f.write(json.dumps({"id": i, "text": " ".join(words[(i + k) % len(words)] for k in range(5)), "source": "x"}) + "\n")
PY
cfg=(--set run.root="$T" --set run.name=r --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini" --set cache.shard_rows=1000)
C=$T/r/cache/val
"$D" cache build --split val "${cfg[@]}" >/dev/null 2>"$T/b1.err" || { cat "$T/b1.err"; fail "first build"; }
want=$("$D" cache verify --split val --json "${cfg[@]}" 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['digest'])")

echo "== manifest deleted, shard 1 truncated, shard 2 with flipped bytes"
rm "$C/manifest.json"
truncate -s 3000 "$C/shard-00001.h5"
python3 - "$C/shard-00002.h5" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
for i in range(len(b) // 2, len(b) // 2 + 64): b[i] ^= 0xFF   # inside the data chunks
open(p, "wb").write(bytes(b))
PY
"$D" cache build --split val "${cfg[@]}" >/dev/null 2>"$T/b2.err" || { cat "$T/b2.err"; fail "rebuild failed"; }
grep -q "shard-00001.h5 is damaged" "$T/b2.err" || { cat "$T/b2.err"; fail "truncated shard not reported"; }
grep -q "shard-00002.h5 is damaged" "$T/b2.err" || { cat "$T/b2.err"; fail "flipped shard not reported"; }
if grep -q "shard-00000.h5 is damaged" "$T/b2.err"; then fail "an intact shard reported damaged"; fi
grep -q "2 shards to build" "$T/b2.err" || { cat "$T/b2.err"; fail "not exactly the 2 damaged shards rebuilt"; }
got=$("$D" cache verify --split val --json "${cfg[@]}" 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['digest'])")
[[ $got == "$want" ]] || fail "digest after the repair $got, want $want"

echo "== a damaged manifest: verified and repaired the same way"
echo '{"schema": 1, "rows": "many"' >"$C/manifest.json"
truncate -s 2000 "$C/shard-00000.h5"
"$D" cache build --split val "${cfg[@]}" >/dev/null 2>"$T/b3.err" || { cat "$T/b3.err"; fail "rebuild after a damaged manifest"; }
grep -q "manifest.json: not valid JSON" "$T/b3.err" || { cat "$T/b3.err"; fail "damaged manifest not reported"; }
grep -q "shard-00000.h5 is damaged" "$T/b3.err" || { cat "$T/b3.err"; fail "shard 0 not reported"; }
got=$("$D" cache verify --split val --json "${cfg[@]}" 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['digest'])")
[[ $got == "$want" ]] || fail "digest after the second repair $got, want $want"

echo "== a manifest that names a file outside the cache is refused, naming the field"
python3 - "$C/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["shards"][0]["file"] = "../../../etc/passwd"; json.dump(m, open(sys.argv[1], "w"))
PY
if "$D" cache verify --split val "${cfg[@]}" >/dev/null 2>"$T/v.err"; then fail "bad manifest accepted"; fi
grep -q 'shards\[0\].file' "$T/v.err" || { cat "$T/v.err"; fail "the field is not named"; }
echo "ok"
