#!/usr/bin/env bash
# A cache built across two nodes (issue 33): `daei cache build --split train` with one rank on each of two emulated
# nodes (`sbatch -N2 launch/slurm/cache.sbatch`, launch/emulate_cluster.sh) writes the same shards and manifest,
# byte for byte, as 2 ranks on this host. Needs root; skipped otherwise.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
D=$BUILD/daei
# shellcheck source=tests/support/two_hosts.sh
source "$SRC/tests/support/two_hosts.sh"
th_start two_hosts_cache 2
a=(--config "$T/toy.yaml" --set run.root="$T/runs" "${TOY[@]}")

"$D" corpus build "${a[@]}" --set run.name=base >"$T/corpus.log" 2>&1 || { tail -20 "$T/corpus.log"; echo "FAIL: corpus build"; exit 1; }
copy_run base one
copy_run base two
t=$SECONDS
one_host "$T/one.log" cache build --split train "${a[@]}" --set run.name=one
say "one host, 2 ranks: cache build in $((SECONDS - t)) s"
t=$SECONDS
j=$(submit two cache.sbatch -- "${a[@]}" --set run.name=two --split train)
wait_end "$j" 120
[[ $(job_field "$j" JobState) == COMPLETED ]] || { cat "$T/two.out"; echo "FAIL: job $j ended $(job_field "$j" JobState)"; exit 1; }
grep -E '\[dist\] .*world 2: 0:emu1\(local 0\), 1:emu2\(local 0\)' "$T/two.out" >/dev/null ||
  { cat "$T/two.out"; echo "FAIL: the log does not name both hosts"; exit 1; }
say "two hosts (job $j): cache build in $((SECONDS - t)) s"

C1=$T/runs/one/cache/train
C2=$T/runs/two/cache/train
[[ -s $C1/manifest.json && -s $C2/manifest.json ]] || { ls -l "$C1" "$C2"; echo "FAIL: no manifest"; exit 1; }
# Same files; the manifest (every shard's rows and content checksum) byte for byte; every shard's content what the
# manifest says (`cache verify` recomputes it) and, where h5diff is installed, its datasets equal to the other's. The
# .h5 files themselves differ in a few header bytes even between two builds on one host (HDF5 metadata), and .lock
# holds the locking process's pid and host.
( cd "$C1" && find . -type f ! -name .lock | sort ) >"$T/files.one"
( cd "$C2" && find . -type f ! -name .lock | sort ) >"$T/files.two"
diff "$T/files.one" "$T/files.two" || { echo "FAIL: the two caches hold different files"; exit 1; }
cmp "$C1/manifest.json" "$C2/manifest.json" || { echo "FAIL: manifest.json differs between one host and two hosts"; exit 1; }
for r in one two; do
  "$D" cache verify "${a[@]}" --set run.name=$r --split train --json >"$T/verify.$r" 2>"$T/verify.$r.err" ||
    { cat "$T/verify.$r.err"; echo "FAIL: cache verify of the $r-host cache"; exit 1; }
done
cmp "$T/verify.one" "$T/verify.two" || { cat "$T/verify.one" "$T/verify.two"; echo "FAIL: cache verify digests differ"; exit 1; }
shards=$(grep -c 'shard-' "$T/files.one" || true)
h5=""
if command -v h5diff >/dev/null; then
  while read -r f; do
    [[ $f == *.h5 ]] || continue
    h5diff "$C1/$f" "$C2/$f" >/dev/null || { h5diff "$C1/$f" "$C2/$f" | sed -n 1,20p; echo "FAIL: $f: datasets differ"; exit 1; }
  done <"$T/files.one"
  h5="; h5diff: every shard's datasets equal"
fi
say "$shards shards: manifest.json byte for byte equal, cache verify digest $(sed -n 's/.*"digest":"\([0-9a-f]\{12\}\).*/\1/p' "$T/verify.one")... on both$h5"
say "OK"
