#!/usr/bin/env bash
# Inverter efficiency at a fixed CPU budget (issue 22): the clean inverter (clean-to-clean, the reference whose
# quality bounds every system) trained for the same wall time under each setting, then scored on the test split.
#   studies/inverter_frontier/run.sh MINUTES NAME "SETS" [NAME "SETS" ...]
# SETS are `--set key=value` options on top of configs/quickstart.yaml. Each setting trains on one rank (two
# settings run side by side, one core each); its step count is MINUTES × the steps/s of a 30-step probe of the
# same setting, so every setting gets the same wall time, not the same steps. Corpus and caches are built once
# (runs/frontier-data) and linked into every setting's run directory. Results: runs/frontier-NAME/eval/results.json;
# the summary table goes to stdout.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
MIN=$1; shift
D=build/daei
BASE=(--config configs/quickstart.yaml --set reference.enabled=true --set eval.sweep=false --set 'eval.splits=[test]'
      --set eval.max_texts=500 --set train.plot=false --set stage2.eval_every=0)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [[ ! -f runs/frontier-data/cache/test/clean/manifest.json ]]; then
  $D corpus build "${BASE[@]}" --set run.name=frontier-data >/dev/null
  $D cache build --split train --clean "${BASE[@]}" --set run.name=frontier-data >/dev/null
  for s in val test; do $D cache build --split $s --clean "${BASE[@]}" --set run.name=frontier-data >/dev/null; done
fi
one() {  # NAME SETS
  [[ $1 != data && $1 != probe-* ]] || { echo "a setting may not be named $1" >&2; return 1; }
  local name=$1 sets=$2 run=runs/frontier-$1 probe=runs/frontier-probe-$1
  for d in "$run" "$probe"; do
    rm -rf "$d" && mkdir -p "$d" && ln -s ../frontier-data/corpus "$d/corpus" && ln -s ../frontier-data/cache "$d/cache"
  done
  # shellcheck disable=SC2086
  $D train --stage clean-inverter "${BASE[@]}" $sets --set run.name=frontier-probe-$name --set stage2.steps=30 \
    --set stage2.warmup_steps=1 >"$probe.log" 2>&1
  local rate steps
  # The probe's first logged step includes start-up: it is left out of the rate.
  rate=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"examples_per_s\"' in l]; \
print(sum(x['examples_per_s'] for x in r[1:]) / max(1, len(r) - 1))" "$probe/clean-inverter/metrics.jsonl")
  local batch
  batch=$(echo "$sets" | grep -o 'stage2.batch_size=[0-9]*' | cut -d= -f2 || true)
  batch=${batch:-64}
  steps=$(python3 -c "print(max(50, int($MIN * 60 * $rate / $batch)))")
  local t0=$SECONDS
  # shellcheck disable=SC2086
  $D train --stage clean-inverter "${BASE[@]}" $sets --set run.name=frontier-$name --set stage2.steps=$steps \
    >"$run.train.log" 2>&1
  local train_s=$((SECONDS - t0))
  # shellcheck disable=SC2086
  $D eval "${BASE[@]}" $sets --set run.name=frontier-$name --set stage2.steps=$steps >"$run.eval.log" 2>&1
  python3 - "$run/eval/results.json" "$name" "$steps" "$train_s" "$rate" "$sets" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["splits"]["test"]["systems"]["clean-to-clean"]
print(f"| {sys.argv[2]} | `{sys.argv[6].strip()}` | {sys.argv[3]} | {int(sys.argv[4])} s | {float(sys.argv[5]):.0f} | "
      f"{r['token_f1']:.3f} [{r['token_f1_ci'][0]:.3f}, {r['token_f1_ci'][1]:.3f}] | "
      f"{r['bleu']:.3f} [{r['bleu_ci'][0]:.3f}, {r['bleu_ci'][1]:.3f}] | {r['cos']:.3f} | {100 * r['repeat4']:.1f} % |")
PY
}
echo "| setting | sets | steps | train wall | examples/s (probe) | token F1 [95 %] | BLEU [95 %] | cos | repeats ≥ 4 |"
echo "|---|---|---|---|---|---|---|---|---|"
while (($# >= 2)); do
  n1=$1 s1=$2; shift 2
  if (($# >= 2)); then
    n2=$1 s2=$2; shift 2
    one "$n1" "$s1" >"runs/frontier-$n1.row" & p1=$!
    one "$n2" "$s2" >"runs/frontier-$n2.row" & p2=$!
    wait $p1 || echo "| $n1 | failed: see runs/frontier-$n1.*.log |" >"runs/frontier-$n1.row"
    wait $p2 || echo "| $n2 | failed: see runs/frontier-$n2.*.log |" >"runs/frontier-$n2.row"
    cat "runs/frontier-$n1.row" "runs/frontier-$n2.row"
  else
    one "$n1" "$s1" || echo "| $n1 | failed |"
  fi
done
