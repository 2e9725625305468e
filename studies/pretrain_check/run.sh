#!/usr/bin/env bash
# Issue 22 item 2's question, with the pretraining objective daei already has: does a T5 pretrained on the attacker's
# own training texts (the `lm` stage: a denoising autoencoder on texts alone, no embeddings) and then trained as the
# noisy inverter beat the noisy inverter trained from scratch (token_init, the frontier's recipe) for the same
# total time? On dae-regimes-few-0.04 (21,000 training texts, σ 0.04, configs/dae-regimes.yaml's inverter):
#   scratch:    noisy-inverter, SCRATCH_STEPS steps
#   pretrained: lm, LM_STEPS steps, then noisy-inverter from lm/final/lm (inverter.t5_dir), INV_STEPS steps (default
#               auto: the scratch arm's time less the generator's, at the scratch arm's steps a second)
# Prints both arms' wall times, held-out CE curves and test scores; writes results/pretrain_check.json.
#   bash studies/pretrain_check/run.sh      (after studies/dae_regimes/run.sh; about 20 min on 2 cores)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${DAEI:-build/daei}
BASE=runs/dae-regimes-few-0.04
SCRATCH_STEPS=${SCRATCH_STEPS:-1500} LM_STEPS=${LM_STEPS:-700} INV_STEPS=${INV_STEPS:-auto}
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
[[ -f $BASE/cache/test/manifest.json && -f $BASE/stage1/final/DONE ]] || { echo "pretrain_check: run studies/dae_regimes/run.sh first"; exit 1; }
common=(--config configs/dae-regimes.yaml --set embedder.sigma=0.04 --set corpus.train_size=21000
        --set inverter.tokenizer="$PWD/$BASE/tokenizer/spm.model" --set stage2.wiener_inverter=false --set lm.eval_every=100)
declare -A WALL
for arm in scratch pretrained; do
  R=runs/pretrain-$arm
  mkdir -p "$R"
  for link in corpus cache tokenizer stage1; do [[ -e $R/$link ]] || ln -s "$PWD/$BASE/$link" "$R/$link"; done
  sets=("${common[@]}" --set "run.name=pretrain-$arm")
  t0=$(date +%s)
  if [[ $arm == scratch ]]; then
    [[ -f $R/noisy-inverter/final/DONE ]] || "${MPI[@]}" "$D" train --stage noisy-inverter "${sets[@]}" --set stage2.steps="$SCRATCH_STEPS" >>"$R.log" 2>&1
  else
    # The generator trains in a run of its own: inverter.t5_dir reshapes every T5 stage of a run, lm included.
    L=runs/pretrain-lm
    mkdir -p "$L"
    for link in corpus cache tokenizer; do [[ -e $L/$link ]] || ln -s "$PWD/$BASE/$link" "$L/$link"; done
    [[ -f $L/lm/final/DONE ]] || "${MPI[@]}" "$D" train --stage lm "${common[@]}" --set run.name=pretrain-lm \
      --set lm.steps="$LM_STEPS" >>"$L.log" 2>&1
    t1=$(date +%s); WALL[lm]=$((t1 - t0))
    # Equal total time: the inverter gets what the scratch arm took, less the generator's time, at the scratch
    # arm's rate (steps a second, start-up included).
    [[ $INV_STEPS == auto ]] && INV_STEPS=$(( (WALL[scratch] - WALL[lm]) * SCRATCH_STEPS / WALL[scratch] ))
    echo "[pretrain] lm: ${WALL[lm]} s for $LM_STEPS steps; the inverter gets $INV_STEPS steps"
    [[ -f $R/noisy-inverter/final/DONE ]] || "${MPI[@]}" "$D" train --stage noisy-inverter "${sets[@]}" \
      --set stage2.steps="$INV_STEPS" --set inverter.t5_dir="$PWD/$L/lm/final/lm" >>"$R.log" 2>&1
  fi
  WALL[$arm]=$(($(date +%s) - t0))
  extra=(); [[ $arm == pretrained ]] && extra=(--set stage2.steps="$INV_STEPS" --set inverter.t5_dir="$PWD/runs/pretrain-lm/lm/final/lm")
  [[ $arm == scratch ]] && extra=(--set stage2.steps="$SCRATCH_STEPS")
  [[ -f $R/eval/results.json ]] || "${MPI[@]}" "$D" eval "${sets[@]}" "${extra[@]}" >>"$R.log" 2>&1
  echo "[pretrain] $arm: training wall ${WALL[$arm]} s"
done
python3 - "${WALL[scratch]}" "${WALL[pretrained]}" "${WALL[lm]:-0}" <<'PY'
import json, sys
out = {"wall_s": {"scratch": int(sys.argv[1]), "pretrained": int(sys.argv[2]), "lm_part": int(sys.argv[3])}}
for arm in ("scratch", "pretrained"):
    R = "runs/pretrain-" + arm
    s = json.load(open(R + "/eval/results.json"))["splits"]["test"]["systems"]["noisy-inverter"]
    held = [(j["step"], j["eval"]["heldout_ce"]) for j in map(json.loads, open(R + "/noisy-inverter/metrics.jsonl")) if "eval" in j]
    out[arm] = {k: s[k] for k in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "cos", "repeat4")}
    out[arm]["heldout_ce"] = held
    print(arm, {k: s[k] for k in ("bleu", "token_f1", "token_f1_ci")}, "held-out CE", held[-1])
json.dump(out, open("results/pretrain_check.json", "w"), indent=1)
PY
