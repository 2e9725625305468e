#!/usr/bin/env bash
# Issue 22 item 3, "where the DAE pays": noisy-inverter, dae-only and wiener-inverter with equal budgets
# (configs/dae-regimes.yaml: 500 stage-2 steps × 64 rows) in the many-epoch regime (1,250 training texts, 25.6 epochs
# over rows whose noise is fixed) and the few-epoch regime (21,000 texts, 1.5 epochs), across σ. Every run shares
# the test and val texts (the corpus is cut test, val, then train from one seeded stream) and one tokenizer (trained
# on the first few-epoch run's 21,000 training texts). About 1 hour on 2 cores.
#   bash studies/dae_regimes/run.sh                       → runs/dae-regimes-*/, results/dae_regimes.json
#   SIGMAS="0.04" REGIMES="many" bash studies/dae_regimes/run.sh   (a subset)
#   REGIMES="few many many-dae21k": the third regime trains only dae-only again, on the many-epoch run's 1,250 rows but
#   with the few-epoch run's DAE (the DAE trained on 1,250 rows does not generalise: results/dae_regimes.md)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${DAEI:-build/daei}
CFG=configs/dae-regimes.yaml
SIGMAS=${SIGMAS:-"0.04 0.06 0.08"}
REGIMES=${REGIMES:-"few many"}
FEW_SIGMAS=${FEW_SIGMAS:-"0.04 0.08"}
OUT=${OUT:-results/dae_regimes.json}
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
declare -A TRAIN_SIZE=([many]=1250 [few]=21000 [many-dae21k]=1250)
# One tokenizer for every run: the first few-epoch run's (trained there when it does not exist yet).
first_few=runs/dae-regimes-few-${FEW_SIGMAS%% *}
TOK=""
[[ -f $first_few/tokenizer/spm.model ]] && TOK=$PWD/$first_few/tokenizer/spm.model
runs=()
start=$(date +%s)
for regime in $REGIMES; do
  sigmas=$SIGMAS
  [[ $regime == few ]] && sigmas=$FEW_SIGMAS
  [[ $regime == many-dae21k ]] && sigmas=${DAE21K_SIGMAS:-$SIGMAS}
  for sigma in $sigmas; do
    name=dae-regimes-$regime-$sigma
    sets=(--config "$CFG" --set run.name="$name" --set embedder.sigma="$sigma" --set corpus.train_size="${TRAIN_SIZE[$regime]}")
    [[ -n $TOK ]] && sets+=(--set inverter.tokenizer="$TOK")
    log=runs/$name.log
    mkdir -p runs
    echo "[regimes] $name ($(( ($(date +%s) - start) / 60 )) min so far)"
    if [[ $regime == many-dae21k ]]; then
      # The many-epoch inverters with a DAE that did not itself train many epochs: stage 1 of the 21,000-row run at
      # this σ (noisy rows only, as every DAE). The corpus, caches, tokenizer and the two other inverters are the
      # many-epoch run's (linked), so the rows differ only in dae-only's DAE.
      few=runs/dae-regimes-few-$sigma many=runs/dae-regimes-many-$sigma
      few_sets=(--config "$CFG" --set run.name="dae-regimes-few-$sigma" --set embedder.sigma="$sigma"
                --set corpus.train_size="${TRAIN_SIZE[few]}" --set inverter.tokenizer="$TOK")
      {
        [[ -f $few/corpus/stats.json ]] || "$D" corpus build "${few_sets[@]}"
        [[ -f $few/cache/train/manifest.json ]] || "${MPI[@]}" "$D" cache build --split train "${few_sets[@]}"
        [[ -f $few/stage1/final/DONE ]] || "${MPI[@]}" "$D" train --stage 1 "${few_sets[@]}"
      } >>"$log" 2>&1 || { tail -20 "$log"; echo "[regimes] $few stage 1 failed (log: $log)"; exit 1; }
      [[ -f $many/noisy-inverter/final/DONE && -f $many/wiener-inverter/final/DONE ]] ||
        { echo "[regimes] $name needs $many complete (REGIMES=\"few many many-dae21k\")"; exit 1; }
      mkdir -p "runs/$name"
      for link in corpus cache tokenizer noisy-inverter wiener-inverter; do
        [[ -e runs/$name/$link ]] || ln -s "$PWD/$many/$link" "runs/$name/$link"
      done
      [[ -d runs/$name/stage1 ]] || cp -r "$few/stage1" "runs/$name/stage1"
    fi
    {
      [[ -f runs/$name/corpus/stats.json ]] || "$D" corpus build "${sets[@]}"
      for split in train val test; do
        clean=(); [[ $split != train ]] && clean=(--clean)
        [[ -f runs/$name/cache/$split/manifest.json ]] || "${MPI[@]}" "$D" cache build --split $split "${clean[@]}" "${sets[@]}"
      done
      for stage in 1 2 noisy-inverter wiener-inverter; do
        folder=$stage; [[ $stage == 1 ]] && folder=stage1; [[ $stage == 2 ]] && folder=stage2
        [[ -f runs/$name/$folder/final/DONE ]] && continue
        resume=(); [[ -d runs/$name/$folder ]] && resume=(--resume)
        "${MPI[@]}" "$D" train --stage $stage "${resume[@]}" "${sets[@]}"
      done
      [[ -f runs/$name/eval/results.json ]] || "${MPI[@]}" "$D" eval "${sets[@]}"
    } >>"$log" 2>&1 || { tail -20 "$log"; echo "[regimes] $name failed (log: $log)"; exit 1; }
    [[ -z $TOK ]] && TOK=$PWD/runs/$name/tokenizer/spm.model
    runs+=("$regime:$sigma:runs/$name")
  done
done
echo "[regimes] all runs done in $(( ($(date +%s) - start) / 60 )) min"
python3 studies/dae_regimes/summary.py "$OUT" "${runs[@]}"
