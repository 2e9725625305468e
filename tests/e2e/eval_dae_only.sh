#!/usr/bin/env bash
# Issue 64: `daei eval --dae-only` on a toy run (corpus, caches, stage 1 only) prints the DAE table and writes
# eval/dae.json (it ended in a segmentation fault: the EvalContext it built had no release). Then the three probes,
# each on a fresh copy of the run: a foreign test shard, a train manifest whose σ disagrees with the release, a DAE of
# another width. Each ends with one error line naming the file, exit 1, and writes nothing (every file of the run
# but daei.log, which records the error, is byte for byte as before; no eval/ folder).
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
e2e_tmp
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"
write_toy_glove "$T/glove"  # seeded 100-d vectors of the toy's words: no GloVe download needed
TOY_GLOVE_DIR=$T/glove write_toy_config "$T"
R=$T/toy
step() {  # step LOG ARGS...: a daei command that must succeed
  local log=$1; shift
  "$D" "$@" --config "$T/toy.yaml" >"$T/$log.log" 2>&1 || { tail -20 "$T/$log.log"; fail "daei $*"; }
}
step corpus corpus build
step train cache build --split train
step val cache build --split val --clean
step test cache build --split test --clean
step stage1 train --stage 1

echo "== a valid run: the DAE table on stdout, eval/dae.json written"
cp -a "$R" "$T/pristine"
set +e
"$D" eval --dae-only --config "$T/toy.yaml" >"$T/dae.out" 2>"$T/dae.err"
rc=$?
set -e
[[ $rc == 0 ]] || { cat "$T/dae.err"; fail "eval --dae-only on a valid run: exit $rc (139 is the crash of issue 64)"; }
grep -q "^DAE table (σ = 0.04)" "$T/dae.out" || { cat "$T/dae.out"; fail "no DAE table printed"; }
grep -Eq "^test +40  DAE \(stage 1, SURE\)" "$T/dae.out" || { cat "$T/dae.out"; fail "no stage-1 DAE row for test"; }
/usr/bin/python3 - "$R/eval/dae.json" <<'PY' || fail "eval/dae.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["embedder"] == "glove-100d" and abs(r["sigma"] - 0.04) < 1e-12, (r["embedder"], r["sigma"])
for split in ("val", "test"):
    d = r["dae"][split]
    assert d["mse_noisy"] > 0 and d["mse_dae"] > 0 and 0 < d["cos_noisy"] <= 1, d
    assert d["oracle_fitted_on"].startswith("the other evaluation split"), d
assert "eval --dae-only" in r["command"], r["command"]
PY

# The run's files (daei.log aside), each with its SHA-256, to show that a refused command wrote nothing.
snapshot() { (cd "$1" && find . -type f ! -name daei.log -print0 | sort -z | xargs -0 sha256sum); }

# probe NAME WANT: eval --dae-only on run copy $T/NAME (run.name NAME) must fail with exit 1 in one error line that
# contains WANT (a path), and leave the copy as it was.
probe() {
  local name=$1 want=$2 rc
  snapshot "$T/$name" >"$T/$name.before"
  set +e
  "$D" eval --dae-only --config "$T/toy.yaml" --set run.name="$name" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
  set -e
  [[ $rc == 1 ]] || { cat "$T/$name.err"; fail "$name: exit $rc, want 1"; }
  [[ $(grep -c "daei: error:" "$T/$name.err") == 1 ]] || { cat "$T/$name.err"; fail "$name: not one error line"; }
  local line
  line=$(grep "daei: error:" "$T/$name.err")
  [[ $line == *"$want"* ]] || { cat "$T/$name.err"; fail "$name: the error does not name $want"; }
  [[ ! -e $T/$name/eval ]] || fail "$name: eval/ written"
  [[ ! -s $T/$name.out ]] || { cat "$T/$name.out"; fail "$name: a table printed"; }
  snapshot "$T/$name" | diff "$T/$name.before" - >/dev/null || fail "$name: files of the run changed"
  echo "$name: $line"
}
# A copy of the run under another run.name (its saved config.yaml says so, so the copy is not a changed config).
copy_run() {
  cp -a "$T/pristine" "$T/$1"
  sed -i "s/^  name: toy$/  name: $1/" "$T/$1/config.yaml"
  grep -q "^  name: $1$" "$T/$1/config.yaml" || fail "run.name not found in config.yaml"
}

echo "== probe 1: a test shard from another run's cache (another corpus order: corpus.seed 99)"
"$D" corpus build --config "$T/toy.yaml" --set run.name=other --set corpus.seed=99 >"$T/other.log" 2>&1 ||
  { tail "$T/other.log"; fail "the other run's corpus"; }
"$D" cache build --split test --config "$T/toy.yaml" --set run.name=other --set corpus.seed=99 >>"$T/other.log" 2>&1 ||
  { tail "$T/other.log"; fail "the other run's test cache"; }
copy_run foreign
cp "$T/other/cache/test/shard-00000.h5" "$T/foreign/cache/test/shard-00000.h5"
probe foreign "foreign/cache/test/shard-00000.h5"

echo "== probe 2: cache/train/manifest.json says σ 0.05, the release's σ is 0.04"
copy_run sigma
/usr/bin/python3 - "$T/sigma/cache/train/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["sigma"] = 0.05; json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
probe sigma "sigma/cache/train/manifest.json"

echo "== probe 3: a stage-1 DAE of 16-d embeddings (synthetic rows) in a run of 100-d ones"
"$D" train --stage 1 --config "$T/toy.yaml" --set run.name=narrow --set train.synthetic_rows=200 \
  --set train.synthetic_dim=16 --set train.synthetic_sigma=0.04 >"$T/narrow.log" 2>&1 ||
  { tail "$T/narrow.log"; fail "the 16-d DAE"; }
grep -q '"dim": 16' "$T/narrow/stage1/final/dae/dae.json" || fail "the other DAE is not 16-d"
copy_run width
# the whole final folder: its DONE lists the digests of what it holds, so a DAE swapped alone would read "incomplete"
rm -rf "$T/width/stage1/final"
cp -a "$T/narrow/stage1/final" "$T/width/stage1/final"
probe width "width/stage1/final/dae/dae.json"
echo "ok"
