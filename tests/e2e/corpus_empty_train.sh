#!/usr/bin/env bash
# `corpus build` whose train split would be empty (a source of 3,000 copies of one line: test 1, val 0, train 0)
# ends with one error line and exit 1, and leaves an earlier corpus untouched (issue 26 item 6).
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd)
D=$BUILD/daei
e2e_tmp
for _ in $(seq 3000); do echo "the same line of text again"; done >"$T/one.txt"
args=(--set run.root="$T/runs" --set run.name=c --set corpus.sources=[] --set "corpus.files=[$T/one.txt]"
      --set corpus.ood=[] --set corpus.test_size=10 --set corpus.val_size=10)
mkdir -p "$T/runs/c/corpus"
echo '{"id": 0, "text": "an earlier corpus", "source": "x"}' >"$T/runs/c/corpus/train.jsonl"
set +e; "$D" corpus build "${args[@]}" >"$T/out" 2>"$T/err"; rc=$?; set -e
[[ $rc == 1 ]] || { cat "$T/out" "$T/err"; fail "exit $rc, want 1"; }
n=$(grep -c "daei: error:" "$T/err" || true)
[[ $n == 1 ]] || { cat "$T/err"; fail "$n error lines, want 1"; }
grep -q "daei: error: .*train split is empty" "$T/err" || { cat "$T/err"; fail "the error does not say the train split is empty"; }
grep -q "an earlier corpus" "$T/runs/c/corpus/train.jsonl" || fail "the earlier train.jsonl was replaced"
[[ ! -f $T/runs/c/corpus/stats.json ]] || fail "stats.json written for a failed build"
[[ -z $(find "$T/runs" -name '*.tmp-*' -o -name '.sort-tmp*') ]] || fail "temporary files left"
# With room for a train split the same source builds (four distinct texts: test 1, val 1, train 2).
for i in 1 2 3; do echo "another distinct line number $i here"; done >>"$T/one.txt"
"$D" corpus build "${args[@]}" --set corpus.test_size=1 --set corpus.val_size=1 --force >"$T/out" 2>&1 ||
  { cat "$T/out"; fail "a corpus with two train rows was refused"; }
echo "corpus_empty_train: OK"
