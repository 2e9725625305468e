#!/usr/bin/env bash
# Decoding settings on the quickstart's trained models (issue 34): every inverter row (eval.*) and every corrector
# (correct.*) decoded alike under each setting, the test split (300 texts), no sweep / per-round / zsinvert / clean-
# hypothesis rows. Needs a complete quickstart run (launch/quickstart.sh). Writes OUT/decoding.{md,json}; each
# setting's results.json is kept under OUT/decoding/NAME/. ONLY="name:k=v,k=v name2:..." overrides the list.
# Every setting starts from CONFIG (the config the run was made with), never from RUN/config.yaml: `daei eval`
# saves its resolved config there, so reading it back would carry one setting's keys into the next (it did, in the
# first version of this script). Each setting names every decoding key it needs relative to `off`.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${RUN:-runs/quickstart}
CONFIG=${CONFIG:-configs/quickstart.yaml}
DAEI=${DAEI:-build/daei}
EXTRA=${EXTRA:-}  # keys added to every setting, e.g. the run's own hypotheses.* when the defaults moved since
OUT=${OUT:-results}
NP=${NP:-2}
[[ -s $RUN/stage4/final/corrector/config.json ]] || { echo "decoding_check: $RUN is not a complete quickstart run" >&2; exit 2; }
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
# name and the keys it sets over `off` (eval.* for the inverter rows, correct.* for the correctors; the corrector
# keeps correct.beam = 2, the quickstart's, except where a setting names it)
export OFF=eval.num_beams=1,eval.repetition_penalty=1.0,eval.no_repeat_ngram_size=0,correct.repetition_penalty=1.0,correct.no_repeat_ngram_size=0
SETTINGS=(
  "off:$OFF"
  "beam2:$OFF,eval.num_beams=2"
  "beam4:$OFF,eval.num_beams=4"
  "beam8:$OFF,eval.num_beams=8"
  "ngram2:$OFF,eval.no_repeat_ngram_size=2,correct.no_repeat_ngram_size=2"
  "ngram3:$OFF,eval.no_repeat_ngram_size=3,correct.no_repeat_ngram_size=3"
  "penalty1.2:$OFF,eval.repetition_penalty=1.2,correct.repetition_penalty=1.2"
  "penalty1.5:$OFF,eval.repetition_penalty=1.5,correct.repetition_penalty=1.5"
  "penalty2:$OFF,eval.repetition_penalty=2.0,correct.repetition_penalty=2.0"
  "penalty1.2+ngram3:$OFF,eval.repetition_penalty=1.2,correct.repetition_penalty=1.2,eval.no_repeat_ngram_size=3,correct.no_repeat_ngram_size=3"
  "penalty2+ngram3:$OFF,eval.repetition_penalty=2.0,correct.repetition_penalty=2.0,eval.no_repeat_ngram_size=3,correct.no_repeat_ngram_size=3"
)
[[ -z ${ONLY:-} ]] || read -r -a SETTINGS <<<"$ONLY"
EVAL=(--config "$CONFIG" --set run.root="$(dirname "$RUN")" --set "eval.splits=[test]" --set eval.sweep=false
      --set eval.per_round=false --set eval.clean_hypotheses_reference=false --set zsinvert.enabled=false)
t0=$(date +%s)
for s in "${SETTINGS[@]}"; do
  name=${s%%:*}; keys=${s#*:}
  dst=$OUT/decoding/$name
  [[ -s $dst/results.json ]] && continue
  sets=()
  IFS=, read -r -a kv <<<"$keys,$EXTRA"
  for k in "${kv[@]}"; do [[ -n $k ]] && sets+=(--set "$k"); done
  echo "[decoding] $name ${sets[*]}"
  ts=$(date +%s)
  mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP" \
    "$DAEI" eval "${EVAL[@]}" "${sets[@]}" >"$RUN/eval_decoding_$name.log" 2>&1 || { tail -20 "$RUN/eval_decoding_$name.log"; exit 1; }
  mkdir -p "$dst" && cp "$RUN/eval/results.json" "$RUN/eval/results.md" "$RUN/eval/samples.md" "$dst/"
  echo "$(( $(date +%s) - ts ))" >"$dst/wall_s"
done
python3 studies/decoding/summary.py "$OUT" "$(( $(date +%s) - t0 ))" "${SETTINGS[@]}"
