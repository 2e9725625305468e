#!/usr/bin/env bash
# The contextual frontier (issue 46): the clean inverter (clean-to-clean, the reference that bounds every chain) on
# the contextual embedder, one setting after another, each scored beside its floors on the test split; a table of
# token F1 and BLEU against the CPU-hours each setting's training took.
#   studies/contextual_frontier/run.sh NAME "SETS" [NAME "SETS" ...]
#   e.g. studies/contextual_frontier/run.sh base "" steps3k "--set stage2.steps=3000"
# SETS are `--set key=value` options on top of configs/contextual-frontier.yaml (CONFIG overrides it). Each setting
# trains `daei train --stage clean-inverter` on NP ranks (default 2) and is evaluated with `daei eval` (the clean
# rows, clean-to-noisy at the config's σ, floor-constant and floor-retrieval). The embedder, corpus, tokenizer,
# pretrain T5 and caches: studies/contextual_embedder/data.sh (runs/ctxf-data, built when missing). Each setting's run:
# runs/ctxf-NAME; rows of the table in runs/ctxf-NAME.row (JSON); the summary: studies/contextual_frontier/summary.py.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CONFIG:-configs/contextual-frontier.yaml}
NP=${NP:-2}
D=${DAEI:-build/daei}
(($# >= 2 && $# % 2 == 0)) || { echo "usage: studies/contextual_frontier/run.sh NAME \"SETS\" [NAME \"SETS\" ...]" >&2; exit 2; }
CONFIG=$CONFIG NP=$NP DAEI=$D bash studies/contextual_embedder/data.sh
while (($# >= 2)); do
  name=$1 sets=$2; shift 2
  [[ $name =~ ^[a-z0-9-]+$ && $name != data ]] || { echo "bad setting name '$name'" >&2; exit 2; }
  run=runs/ctxf-$name
  mkdir -p "$run"
  for d in corpus tokenizer pretrain cache; do [[ -e $run/$d ]] || ln -s "../ctxf-data/$d" "$run/$d"; done
  t0=$(date +%s.%N)
  # The training's CPU seconds (user + system of every rank, from the children's rusage): its cost whatever else
  # shares the machine; the wall time is kept beside it.
  # shellcheck disable=SC2086
  python3 studies/common/cpu_seconds.py "$run.cpu_s" bash launch/mpirun.sh "$NP" train --stage clean-inverter --resume --config "$CONFIG" $sets \
    --set run.name=ctxf-$name >"$run.train.log" 2>&1 ||
    { echo "[frontier] $name: training failed, see $run.train.log" >&2; continue; }
  t1=$(date +%s.%N)
  # shellcheck disable=SC2086
  bash launch/mpirun.sh "$NP" eval --config "$CONFIG" $sets --set run.name=ctxf-$name >"$run.eval.log" 2>&1 ||
    { echo "[frontier] $name: eval failed, see $run.eval.log" >&2; continue; }
  python3 - "$name" "$sets" "$t0" "$t1" "$NP" "$run" >"$run.row" <<'PY'
import json, sys
name, sets, t0, t1, np_, run = sys.argv[1:]
cfg = open(f"{run}/config.yaml").read()
cpu = open(f"{run}.cpu_s").read().strip()
print(json.dumps({"name": name, "sets": sets.strip(), "train_wall_s": float(t1) - float(t0), "ranks": int(np_),
                  "train_cpu_s": float(cpu),
                  "results": f"{run}/eval/results.json", "config": f"{run}/config.yaml",
                  "metrics": f"{run}/clean-inverter/metrics.jsonl"}))
PY
  echo "[frontier] $name done: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['splits']['test']['systems']; \
print(' '.join(f'{k} F1 {v[\"token_f1\"]:.3f} BLEU {v[\"bleu\"]:.3f};' for k, v in r.items()))" "$run/eval/results.json")"
done
