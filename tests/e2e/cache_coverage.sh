#!/usr/bin/env bash
# Issue 26 item 5: a cache that no longer covers its corpus is refused by `cache verify` and by every opener (here
# `train --stage 1`), not only by `cache build`: the last shard deleted and removed from a manifest whose row counts
# were fixed up (the corpus hash still matches) is one error line naming both row counts, exit 1.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-coverage.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/r/corpus"
# shellcheck source=tests/support/word_corpus.sh
source "$SRC/tests/support/word_corpus.sh"
write_word_corpus "$T/r/corpus/train.jsonl" 2400 5
cfg=(--set run.root="$T" --set run.name=r --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini"
     --set cache.shard_rows=300)
"$D" cache build --split train "${cfg[@]}" >/dev/null 2>"$T/build.err" || { cat "$T/build.err"; fail "cache build"; }
"$D" cache verify --split train "${cfg[@]}" >"$T/v0.out" 2>&1 || { cat "$T/v0.out"; fail "verify of an intact cache"; }

C=$T/r/cache/train
rm "$C/shard-00007.h5"
python3 - "$C/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["shards"] = [s for s in m["shards"] if s["file"] != "shard-00007.h5"]
m["rows"] = sum(s["rows"] for s in m["shards"])
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
check() {  # NAME: the command's stderr in $T/NAME.err, exit code in rc
  [[ $rc == 1 ]] || { cat "$T/$1.err"; fail "$1 exited $rc, want 1"; }
  [[ $(grep -c "daei: error:" "$T/$1.err") == 1 ]] || { cat "$T/$1.err"; fail "$1: not one error line"; }
  grep -q "daei: error: .*manifest lists 2100 rows but the corpus .*train.jsonl has 2400" "$T/$1.err" ||
    { cat "$T/$1.err"; fail "$1: the error does not name both row counts"; }
}
set +e; "$D" cache verify --split train "${cfg[@]}" >/dev/null 2>"$T/verify.err"; rc=$?; set -e
check verify
set +e
"$D" train --stage 1 "${cfg[@]}" --set dae.hidden=32 --set dae.depth=1 --set stage1.batch_size=8 --set stage1.steps=5 \
  --set stage1.eval_every=0 --set train.plot=false >/dev/null 2>"$T/train.err"
rc=$?
set -e
check train
[[ ! -d $T/r/stage1/final ]] || fail "stage 1 trained on a cache that does not cover its corpus"
echo "cache_coverage: OK"
