#!/usr/bin/env bash
# What server.noise_mode per_text is worth to a defender (issue 32): daei's query-averaged scoring
# (correct.queries_per_candidate k = 1, 4, 8) against a fresh-noise release and a per-text one, on the quickstart's
# trained models. Needs a complete quickstart run (launch/quickstart.sh). The per_text release is the same run copied
# to runs/quickstart-per-text with embedder.noise_mode per_text and its evaluation caches rebuilt (every query of a
# text, the evaluated texts' own included, answers with that text's noise); training is unchanged, since every
# training text and hypothesis is queried once. Writes results/noise_mode.{md,json}.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${RUN:-runs/quickstart}
COPY=${COPY:-runs/quickstart-per-text}
read -r -a KS <<<"${KS:-1 4 8}"
OUT=${OUT:-results}
NP=${NP:-2}
[[ -s $RUN/stage4/final/corrector/config.json && -s $RUN/noisy-corrector/final/corrector/config.json ]] ||
  { echo "noise_mode_check: $RUN has no trained correctors (run launch/quickstart.sh first)" >&2; exit 2; }
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
mpi() { mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP" build/daei "$@"; }
# Eval settings the study shares (test split only; no sweep, no per-round table, no clean-hypothesis row).
EVAL=(--set "eval.splits=[test]" --set eval.sweep=false --set eval.per_round=false
      --set eval.clean_hypotheses_reference=false --set zsinvert.enabled=false)
t0=$(date +%s)
if [[ ! -d $COPY ]]; then
  mkdir -p "$COPY"
  # models, tokenizer, corpus, training cache: copied; the evaluation caches are rebuilt under per_text below
  for d in corpus tokenizer stage1 stage2 stage3 stage4 noisy-inverter noisy-corrector dae-corrector clean-inverter \
           clean-corrector wiener-inverter stage2-continued lm; do
    [[ -e $RUN/$d ]] && cp -r "$RUN/$d" "$COPY/"
  done
  mkdir -p "$COPY/cache" && cp -r "$RUN/cache/train" "$COPY/cache/"
  # run.name and embedder.noise_mode (only in their sections: server.noise_mode is another key)
  awk -v name="$(basename "$COPY")" '/^[a-z]/{sec=$1} sec=="run:" && $1=="name:"{sub(/name: .*/, "name: " name)}
    sec=="embedder:" && $1=="noise_mode:"{sub(/noise_mode: fresh/, "noise_mode: per_text")} {print}' \
    "$RUN/config.yaml" >"$COPY/config.yaml"
  grep "noise_mode: per_text" "$COPY/config.yaml" >/dev/null || { echo "noise_mode_check: no embedder.noise_mode in $RUN/config.yaml" >&2; exit 1; }
fi
PT=(--config "$COPY/config.yaml" --set run.root="$(dirname "$COPY")")
for split in val test; do
  build/daei cache build --split "$split" --clean "${PT[@]}" >"$COPY/cache_$split.log" 2>&1 || { tail "$COPY/cache_$split.log"; exit 1; }
done
for mode in fresh per_text; do
  for k in "${KS[@]}"; do
    dst=$OUT/noise_mode/$mode-k$k
    [[ -s $dst/results.json ]] && continue
    if [[ $mode == fresh ]]; then cfg=(--config "$RUN/config.yaml" --set run.root="$(dirname "$RUN")"); r=$RUN; else cfg=("${PT[@]}"); r=$COPY; fi
    echo "[noise_mode] $mode, queries_per_candidate $k"
    mpi eval "${cfg[@]}" "${EVAL[@]}" --set correct.queries_per_candidate="$k" >"$r/eval_k$k.log" 2>&1 ||
      { tail -20 "$r/eval_k$k.log"; exit 1; }
    mkdir -p "$dst" && cp "$r/eval/results.json" "$r/eval/results.md" "$dst/"
  done
done
python3 studies/noise_mode/summary.py "$OUT" "$(( $(date +%s) - t0 ))" "${KS[@]}"
