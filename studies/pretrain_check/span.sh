#!/usr/bin/env bash
# Issue 22 item 2 with T5's own objective: does `daei pretrain` (span corruption on the attacker's training texts, no
# embeddings; token embeddings started by token_init as a fresh inverter's are) followed by the noisy inverter beat
# the noisy inverter from scratch (token_init) at the same total CPU time? Same data and inverter as
# studies/pretrain_check/run.sh (dae-regimes-few-0.04: 21,000 training texts, σ 0.04), whose scratch arm
# (runs/pretrain-scratch, SCRATCH_STEPS steps) is the reference.
#   span: pretrain PRE_STEPS steps, then noisy-inverter from its T5 (pretrain.enabled) for INV_STEPS steps, so that
#         both arms spend the same CPU (user + sys of all ranks, /usr/bin/time; CPU, not wall, because the machine may
#         be shared): INV_STEPS = SCRATCH_STEPS − (CPU of pretrain) / c, c an inverter step's marginal CPU from two
#         runs of the scratch arm's inverter, SCRATCH_STEPS (runs/pretrain-scratch-cpu, the CPU of the scratch arm)
#         and CAL_STEPS (runs/pretrain-span-cal) steps; start-up costs are then the only difference (one more for
#         the span arm).
# Prints CPU times, held-out CE and test scores; writes results/pretrain_span_check.json.
#   bash studies/pretrain_check/span.sh     (after studies/pretrain_check/run.sh; about 15 min on 2 quiet cores)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${DAEI:-build/daei}
BASE=runs/dae-regimes-few-0.04
SCRATCH_STEPS=${SCRATCH_STEPS:-1500} PRE_STEPS=${PRE_STEPS:-700} CAL_STEPS=${CAL_STEPS:-300}
MPI=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
[[ -f runs/pretrain-scratch/eval/results.json ]] || { echo "pretrain_span_check: run studies/pretrain_check/run.sh first"; exit 1; }
common=(--config configs/dae-regimes.yaml --set embedder.sigma=0.04 --set corpus.train_size=21000
        --set inverter.tokenizer="$PWD/$BASE/tokenizer/spm.model" --set stage2.wiener_inverter=false
        --set pretrain.enabled=true --set pretrain.steps="$PRE_STEPS" --set pretrain.eval_every=100)
link_base() { mkdir -p "$1"; for l in corpus cache tokenizer stage1; do [[ -e $1/$l ]] || ln -s "$PWD/$BASE/$l" "$1/$l"; done; }
cpu_of() { awk '{print $2 + $3}' "$1"; }  # user + sys seconds of /usr/bin/time -f "%e %U %S"
R=runs/pretrain-span C=runs/pretrain-span-cal S=runs/pretrain-scratch-cpu
link_base "$R"; link_base "$C"; link_base "$S"
# The scratch arm again, for its CPU (the same seeds and code as runs/pretrain-scratch: its final model is compared).
[[ -f $S/noisy-inverter/final/DONE ]] ||
  /usr/bin/time -f "%e %U %S" -o "$S.inverter.time" "${MPI[@]}" "$D" train --stage noisy-inverter "${common[@]}" \
    --set pretrain.enabled=false --set run.name=pretrain-scratch-cpu --set stage2.steps="$SCRATCH_STEPS" >>"$S.log" 2>&1
cmp -s runs/pretrain-scratch/noisy-inverter/final/inverter/model.safetensors $S/noisy-inverter/final/inverter/model.safetensors &&
  echo "[pretrain] the scratch arm's rerun is bit-identical to runs/pretrain-scratch" ||
  echo "[pretrain] the scratch arm's rerun differs from runs/pretrain-scratch"
# The pretraining T5.
[[ -f $R/pretrain/final/DONE ]] ||
  /usr/bin/time -f "%e %U %S" -o "$R.pretrain.time" "${MPI[@]}" "$D" pretrain "${common[@]}" --set run.name=pretrain-span >>"$R.log" 2>&1
# A short inverter run (from the pretrained T5, as the span arm's: the same step cost) for the marginal CPU a step.
[[ -f $C/pretrain/final/DONE ]] || { mkdir -p "$C/pretrain"; cp -r "$R/pretrain/final" "$C/pretrain/"; }
[[ -f $C/noisy-inverter/final/DONE ]] ||
  /usr/bin/time -f "%e %U %S" -o "$C.inverter.time" "${MPI[@]}" "$D" train --stage noisy-inverter "${common[@]}" \
    --set run.name=pretrain-span-cal --set stage2.steps="$CAL_STEPS" --set stage2.eval_every=0 >>"$C.log" 2>&1
INV_STEPS=$(python3 -c "
c = ($(cpu_of "$S.inverter.time") - $(cpu_of "$C.inverter.time")) / ($SCRATCH_STEPS - $CAL_STEPS)
print(max(0, round($SCRATCH_STEPS - $(cpu_of "$R.pretrain.time") / c)))")
echo "[pretrain] CPU: scratch arm $(cpu_of "$S.inverter.time") s ($SCRATCH_STEPS steps), $CAL_STEPS inverter steps $(cpu_of "$C.inverter.time") s, pretrain $(cpu_of "$R.pretrain.time") s ($PRE_STEPS steps); the inverter gets $INV_STEPS steps"
[[ -f $R/noisy-inverter/final/DONE ]] ||
  /usr/bin/time -f "%e %U %S" -o "$R.inverter.time" "${MPI[@]}" "$D" train --stage noisy-inverter "${common[@]}" \
    --set run.name=pretrain-span --set stage2.steps="$INV_STEPS" >>"$R.log" 2>&1
[[ -f $R/eval/results.json ]] || "${MPI[@]}" "$D" eval "${common[@]}" --set run.name=pretrain-span --set stage2.steps="$INV_STEPS" >>"$R.log" 2>&1
python3 - "$R" "$PRE_STEPS" "$INV_STEPS" "$CAL_STEPS" <<'PY'
import json, sys
R, pre, inv, cal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t = lambda f: dict(zip(("wall", "user", "sys"), map(float, open(f).read().split())))
out = {"pretrain_steps": pre, "inverter_steps": inv, "calibration_steps": cal,
       "time_s": {"pretrain": t(R + ".pretrain.time"), "inverter": t(R + ".inverter.time"),
                  "calibration_inverter": t(R + "-cal.inverter.time"),
                  "scratch": t("runs/pretrain-scratch-cpu.inverter.time")}}
for arm, run in (("scratch", "runs/pretrain-scratch"), ("span", R)):
    s = json.load(open(run + "/eval/results.json"))["splits"]["test"]["systems"]["noisy-inverter"]
    held = [(j["step"], j["eval"]["heldout_ce"]) for j in map(json.loads, open(run + "/noisy-inverter/metrics.jsonl")) if "eval" in j]
    out[arm] = {k: s[k] for k in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "cos", "repeat4")}
    out[arm]["heldout_ce"] = held
    print(arm, {k: s[k] for k in ("bleu", "token_f1", "token_f1_ci")}, "held-out CE", held[:2], held[-1])
out["pretrain_heldout_ce"] = [(j["step"], j["eval"]["heldout_ce"]) for j in map(json.loads, open(R + "/pretrain/metrics.jsonl")) if "eval" in j]
json.dump(out, open("results/pretrain_span_check.json", "w"), indent=1)
PY
