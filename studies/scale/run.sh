#!/usr/bin/env bash
# Issue 16's measurements at the paper's 7 M rows on this machine (a benchmark, not a CI test; about 30 minutes on
# 2 cores): corpus (real WordNet + GCIDE texts and seeded recombinations of their clauses) → noisy cache on 2 ranks
# (float16, and float32 for its size) → stage 1, killed with -9 mid-run and resumed → stage 2 for a few steps →
# a stage-2 epoch's data time; the same stages on the quickstart's 192 k rows, so that only the corpus size differs.
# Needs the quickstart run (runs/quickstart: its caches and tokenizer). Writes runs/scale-7m/measure/scale.json.
#   bash studies/scale/run.sh            (after launch/quickstart.sh)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=build/daei
CFG=configs/scale-7m.yaml
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
Q=runs/quickstart
BIG=runs/scale-7m
SMALL=runs/scale-192k
OUT=$BIG/measure
[[ -x $D ]] || { echo "scale_7m: $D is missing; run launch/build.sh first"; exit 1; }
[[ -f $Q/cache/train/manifest.json && -f $Q/tokenizer/spm.model ]] ||
  { echo "scale_7m: needs the quickstart's caches and tokenizer in $Q (run launch/quickstart.sh first)"; exit 1; }
mkdir -p "$OUT" "$SMALL"
TOK=$PWD/$Q/tokenizer/spm.model
common=(--config "$CFG" --set inverter.tokenizer="$TOK")
# The 192 k side reads the quickstart's corpus and caches (same model, batch and steps as the 7 M side).
[[ -e $SMALL/corpus ]] || ln -s "$PWD/$Q/corpus" "$SMALL/corpus"
[[ -e $SMALL/cache ]] || ln -s "$PWD/$Q/cache" "$SMALL/cache"

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
log() { echo "[scale] $*" | tee -a "$OUT/scale.log"; }
declare -A M  # measurements, written as JSON at the end
# Median examples/s of a stage's logged intervals, the first (warm-up) left out.
median_rate() {
  python3 - "$1" <<'PY'
import json, statistics, sys
v = [json.loads(l)["examples_per_s"] for l in open(sys.argv[1]) if '"examples_per_s"' in l][1:]
print(round(statistics.median(v), 1))
PY
}

t=$(now)
[[ -f $BIG/corpus/stats.json ]] || "$D" corpus build "${common[@]}" 2>&1 | tail -3
M[corpus_s]=$(since "$t")
M[train_rows]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["splits"]["train"])' "$BIG/corpus/stats.json")
log "corpus: ${M[train_rows]} training rows in ${M[corpus_s]} s"

t=$(now)
"${MPI[@]}" -np 2 "$D" cache build --split train "${common[@]}" 2>&1 | tail -2
M[cache_s]=$(since "$t")
M[cache_f16_bytes]=$(du -sb "$BIG/cache/train" | cut -f1)
log "cache (float16, 2 ranks): ${M[cache_s]} s, ${M[cache_f16_bytes]} bytes"

# float32: the same rows, another run folder (its corpus linked), only for the size on disk.
F32=runs/scale-7m-f32
mkdir -p "$F32"
[[ -e $F32/corpus ]] || ln -s "$PWD/$BIG/corpus" "$F32/corpus"
t=$(now)
"${MPI[@]}" -np 2 "$D" cache build --split train "${common[@]}" --set run.name=scale-7m-f32 --set cache.dtype=float32 2>&1 | tail -1
M[cache_f32_s]=$(since "$t")
M[cache_f32_bytes]=$(du -sb "$F32/cache/train" | cut -f1)
rm -rf "$F32"
log "cache (float32): ${M[cache_f32_s]} s, ${M[cache_f32_bytes]} bytes"

# Stage 1 at 7 M rows: kill -9 one rank after the checkpoint at step 200, then resume to the end.
"${MPI[@]}" -np 2 "$D" train --stage 1 "${common[@]}" >"$OUT/stage1_killed.log" 2>&1 &
job=$!
for _ in $(seq 1200); do [[ -f $BIG/stage1/ckpt-00000200/DONE ]] && break; sleep 0.5; done
[[ -f $BIG/stage1/ckpt-00000200/DONE ]] || { tail "$OUT/stage1_killed.log"; echo "scale_7m: no checkpoint at step 200"; exit 1; }
sleep 3
victim=$(pgrep -P "$job" | tail -1)  # a rank: a child of mpirun
kill -9 "$victim"
t=$(now)
set +e; wait "$job"; rc=$?; set -e
M[kill_exit]=$rc
M[kill_end_s]=$(since "$t")
log "stage 1 (7 M): rank process $victim killed with -9 after step 200; the job ended with exit $rc in ${M[kill_end_s]} s"
"${MPI[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --resume >"$OUT/stage1_7m.log" 2>&1
M[resumed_from]=$(grep -o "resumed from [^ ]*" "$OUT/stage1_7m.log" | sed -n '1s/resumed from //p')
log "stage 1 (7 M): resumed from ${M[resumed_from]}"

"${MPI[@]}" -np 2 "$D" train --stage 1 "${common[@]}" --set run.name=scale-192k >"$OUT/stage1_192k.log" 2>&1

for side in 7m 192k; do
  dir=$BIG; [[ $side == 192k ]] && dir=$SMALL
  M[stage1_${side}_examples_per_s]=$(median_rate "$dir/stage1/metrics.jsonl")
  log_file=$OUT/stage1_$side.log
  M[stage1_${side}_rss_mb]=$(grep -o "peak RSS per rank (MB): .*" "$log_file" | sed 's/.*: //')
  log "stage 1 ($side): ${M[stage1_${side}_examples_per_s]} examples/s, peak RSS per rank ${M[stage1_${side}_rss_mb]} MB"
  "${MPI[@]}" -np 2 "$D" train --stage 2 "${common[@]}" --set run.name="$(basename "$dir")" >"$OUT/stage2_$side.log" 2>&1
  M[stage2_${side}_rss_mb]=$(grep -o "peak RSS per rank (MB): .*" "$OUT/stage2_$side.log" | sed 's/.*: //')
  M[stage2_${side}_examples_per_s]=$(median_rate "$dir/stage2/metrics.jsonl")
  log "stage 2 ($side): ${M[stage2_${side}_examples_per_s]} examples/s, peak RSS per rank ${M[stage2_${side}_rss_mb]} MB"
  # A stage-2 epoch's data: one rank's micro-batches (global batch 64 on 2 ranks), vectors and texts, read-ahead on.
  build/bench_data_stream "$dir/cache/train" --batch 32 --world 2 --rank 0 --texts --read-ahead >"$OUT/epoch_$side.json"
  M[epoch_data_${side}]=$(tail -1 "$OUT/epoch_$side.json")
  log "stage-2 epoch data ($side, rank 0 of 2): ${M[epoch_data_${side}]}"
done

{
  echo "{"
  first=1
  for k in $(printf '%s\n' "${!M[@]}" | sort); do
    v=${M[$k]}
    [[ $v =~ ^[-0-9.]+$ || $v == \{* ]] || v="\"$v\""
    ((first)) || echo ","
    printf '  "%s": %s' "$k" "$v"
    first=0
  done
  echo
  echo "}"
} >"$OUT/scale.json"
cat "$OUT/scale.json"
