#!/usr/bin/env bash
# config.yaml is written only by a command that has passed validation and holds the stage's lock (issue 26 item 1):
# a trainer refused over an earlier run's checkpoints, or refused because another process holds the stage's lock
# (with or without --force), leaves runs/NAME/config.yaml as it was, so a later --resume with a changed
# stage1.lr is still refused. --force works for stage 1 as for the other stages (archives, trains again).
set -euo pipefail
BUILD=$1
D=$BUILD/daei
T=$(mktemp -d)
bg=
cleanup() { [[ -n $bg ]] && kill "$bg" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
common=(--set run.root="$T" --set train.synthetic_rows=240 --set train.synthetic_dim=16 --set dae.hidden=32
        --set dae.depth=2 --set stage1.batch_size=12 --set stage1.eval_every=0 --set stage1.warmup_steps=2
        --set train.ckpt_every=100 --set train.threads=1)
expect() {
  local want=$1; shift
  set +e; "$@" >"$T/last.log" 2>&1; local rc=$?; set -e
  [[ $rc == "$want" ]] || { cat "$T/last.log"; echo "FAIL: exit $rc, want $want: $*"; exit 1; }
}
same_config() {  # $1: run name, $2: the saved copy
  cmp -s "$T/$1/config.yaml" "$2" || { diff "$2" "$T/$1/config.yaml"; echo "FAIL: $3 rewrote $1/config.yaml"; exit 1; }
}

# An earlier run of stage 1 with a checkpoint at step 5.
expect 75 "$D" train --stage 1 "${common[@]}" --set run.name=a --set stage1.steps=10 --set train.stop_after=5
[[ -f $T/a/stage1/ckpt-00000005/DONE ]] || { echo "FAIL: no DONE checkpoint at step 5"; exit 1; }
cp "$T/a/config.yaml" "$T/a.yaml"

# Without --resume over those checkpoints, with a key that changes no saved work: refused, config.yaml unchanged.
expect 1 "$D" train --stage 1 "${common[@]}" --set run.name=a --set stage1.steps=10 --set train.log_every=3
grep -q "holds checkpoints of an earlier run" "$T/last.log" || { cat "$T/last.log"; echo "FAIL: no refusal"; exit 1; }
same_config a "$T/a.yaml" "a trainer refused over an earlier run"

# A second trainer while the first holds the lock: refused naming host and PID, config.yaml unchanged.
"$D" train --stage 1 "${common[@]}" --set run.name=b --set stage1.steps=100000 >"$T/b.log" 2>&1 &
bg=$!
have_ckpt() { compgen -G "$T/b/stage1/ckpt-*/DONE" >/dev/null; }
for _ in $(seq 300); do have_ckpt && break; sleep 0.2; done  # a checkpoint: stage1/ now holds saved work
have_ckpt || { cat "$T/b.log"; echo "FAIL: the first trainer wrote no checkpoint"; exit 1; }
cp "$T/b/config.yaml" "$T/b.yaml"
expect 1 "$D" train --stage 1 "${common[@]}" --set run.name=b --set stage1.steps=100000 --force --set stage1.lr=5e-3
grep -q "is in use by another daei process (host .* pid $bg)" "$T/last.log" ||
  { cat "$T/last.log"; echo "FAIL: the refusal does not name host and pid $bg"; exit 1; }
same_config b "$T/b.yaml" "a --force refused by the lock"
expect 1 "$D" train --stage 1 "${common[@]}" --set run.name=b --set stage1.steps=100000 --resume --set train.log_every=3
same_config b "$T/b.yaml" "a --resume refused by the lock"
# The bypass of issue 26: after the refused --force, a resume with the changed lr must still be refused.
expect 2 "$D" train --stage 1 "${common[@]}" --set run.name=b --set stage1.steps=100000 --resume --set stage1.lr=5e-3
grep -q "stage1.lr" "$T/last.log" || { cat "$T/last.log"; echo "FAIL: the refusal does not name stage1.lr"; exit 1; }
same_config b "$T/b.yaml" "a refused --resume"
kill -USR1 "$bg"
set +e; wait "$bg"; rc=$?; set -e
bg=
[[ $rc == 75 ]] || { cat "$T/b.log"; echo "FAIL: the first trainer exited $rc after SIGUSR1, want 75"; exit 1; }

# --force works for stage 1: the earlier checkpoints are archived, the stage trains again with the new lr, and
# the replaced config.yaml is kept in config.history/.
expect 0 "$D" train --stage 1 "${common[@]}" --set run.name=a --set stage1.steps=10 --force --set stage1.lr=5e-3
ls -d "$T"/a/stage1/archive-*/ckpt-00000005 >/dev/null 2>&1 || { cat "$T/last.log"; echo "FAIL: not archived"; exit 1; }
[[ -f $T/a/stage1/final/DONE ]] || { cat "$T/last.log"; echo "FAIL: no final after --force"; exit 1; }
grep -q "lr: 0.005\|lr: 5.0e-3\|lr: 5e-3\|lr: 5.0e-03" "$T/a/config.yaml" ||
  { grep -n "lr:" "$T/a/config.yaml"; echo "FAIL: config.yaml lacks the forced lr"; exit 1; }
ls "$T"/a/config.history/*.yaml >/dev/null 2>&1 || { echo "FAIL: the previous config was not kept"; exit 1; }
echo "config_lock: OK"
