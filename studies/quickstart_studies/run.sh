#!/usr/bin/env bash
# Studies on top of a finished quickstart run (issue 21), each in its own run directory that links the quickstart's
# corpus, caches, tokenizer and the stages it reuses, so nothing of runs/quickstart is changed:
#   heads    the stage-4 corrector with T2/T3 fresh instead of copies of T1, and without any warm start (from
#            scratch, as before): held-out CE against the stage-3 inverter's, and the daei rows round by round
#   k        query-averaged scoring, correct.queries_per_candidate = k for k in K_LIST (default 1 2 4 8): the daei
#            rows round by round against the queries they cost
#   studies/quickstart_studies/run.sh heads|k
# Output: runs/qs-*/eval/{results,per_round}.{json,md}; a summary on stdout.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."
D=build/daei
Q=${QUICKSTART:-runs/quickstart}
NP=${NP:-2}
[[ -f $Q/stage4/final/DONE ]] || { echo "error: $Q has no finished stage 4 (run launch/quickstart.sh first)" >&2; exit 1; }
ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && ROOT_FLAGS=(--allow-run-as-root)
MPI=(mpirun "${ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np "$NP")
COMMON=(--config configs/quickstart.yaml --set eval.sweep=false --set 'eval.splits=[test]' --set eval.per_round=true)
linked() {  # NAME FOLDER... : a run directory linking the quickstart's folders
  local dir=runs/$1; shift
  rm -rf "$dir" && mkdir -p "$dir"
  for f in corpus cache tokenizer "$@"; do ln -s "$(realpath "$Q/$f")" "$dir/$f"; done
}
last_heldout() { grep '"heldout_ce"' "$1" | tail -1 | python3 -c "import json,sys; print(json.loads(sys.stdin.read())['eval']['heldout_ce'])"; }
summary() {  # RUN: the daei rows by round
  python3 - "runs/$1/eval/per_round.json" "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["splits"]["test"]["daei"]
rows = " ".join(f"r{r['round']}: BLEU {r['bleu']:.4f} F1 {r['token_f1']:.4f} q {r['queries_per_text']:.0f};" for r in p["rounds"])
print(f"{sys.argv[2]}: early-stop round {p['early_stop_round']}; {rows}")
PY
}
case ${1:-} in
  heads)
    echo "stage-3 inverter held-out CE: $(last_heldout "$Q/stage3/metrics.jsonl")"
    echo "stage-4 corrector (T2/T3 copies of T1) held-out CE: $(last_heldout "$Q/stage4/metrics.jsonl")"
    for v in fresh scratch; do
      linked "qs-heads-$v" stage1 stage3
      sets=(--set "stage4.warm_start_t2_t3=fresh")
      [[ $v == scratch ]] && sets=(--set stage4.warm_start=false)
      "${MPI[@]}" $D train --stage 4 "${COMMON[@]}" --set run.name="qs-heads-$v" "${sets[@]}" >"runs/qs-heads-$v.log" 2>&1
      $D eval "${COMMON[@]}" --set run.name="qs-heads-$v" "${sets[@]}" >>"runs/qs-heads-$v.log" 2>&1
      echo "stage-4 corrector ($v) held-out CE: $(last_heldout "runs/qs-heads-$v/stage4/metrics.jsonl")"
      summary "qs-heads-$v"
    done
    ;;
  k)
    for k in ${K_LIST:-1 2 4 8}; do
      linked "qs-k$k" stage1 stage3 stage4
      $D eval "${COMMON[@]}" --set run.name="qs-k$k" --set correct.queries_per_candidate="$k" >"runs/qs-k$k.log" 2>&1
      summary "qs-k$k"
    done
    ;;
  *) echo "usage: $0 heads|k" >&2; exit 2 ;;
esac
