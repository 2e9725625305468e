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
cd "$(dirname "$0")/.."
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
python3 - "$OUT" "$(( $(date +%s) - t0 ))" "${SETTINGS[@]}" <<'PY'
import json, os, sys
out, wall, settings = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rows, js, rev = [], {}, "?"
for s in settings:
    name, keys = s.split(":", 1)
    d = f"{out}/decoding/{name}"
    r = json.load(open(f"{d}/results.json"))
    rev = r["revision"]
    w = int(open(f"{d}/wall_s").read())
    S = r["splits"]["test"]["systems"]
    js[name] = {"keys": keys, "eval_wall_s": w, "systems": {n: {k: v[k] for k in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "loops", "repeat4")} for n, v in S.items()}}
lines = ["# Decoding: beams and repetition controls on the quickstart's models (issue 34)\n",
         "- command: `launch/decoding_check.sh` (after `launch/quickstart.sh`; `daei eval` on the test split, 300 texts, "
         "one run a setting, no sweep / per-round / zsinvert / clean-hypothesis rows; the correctors keep `correct.beam` 2)",
         f"- git revision: {rev}", f"- machine: {os.cpu_count()} vCPUs ({cpu}), Debian 12",
         f"- wall time: {wall // 60} min {wall % 60} s for all settings\n",
         "Means over the inverter rows (noisy-inverter, dae-only, joint-no-corrector, dae-only-continued, wiener-inverter",
         "where present) and over the corrected rows (noisy-vec2text, dae-corrected, daei); `loops` is the share of",
         "recoveries with a word or a phrase of up to 3 words immediately repeated; the worst row's loops beside it.\n",
         "| setting | keys | daei F1 | daei BLEU | inverter rows F1 | corrected rows F1 | loops (mean / worst row) | eval wall |",
         "|---|---|---|---|---|---|---|---|"]
inv = ("noisy-inverter", "dae-only", "joint-no-corrector", "dae-only-continued", "wiener-inverter")
cor = ("noisy-vec2text", "dae-corrected", "daei")
for name, j in js.items():
    S = j["systems"]
    att = [n for n in S if not n.startswith("clean-to-")]
    mi = sum(S[n]["token_f1"] for n in inv if n in S) / max(1, sum(n in S for n in inv))
    mc = sum(S[n]["token_f1"] for n in cor if n in S) / max(1, sum(n in S for n in cor))
    lo = [S[n]["loops"] for n in att]
    d = S["daei"]
    lines.append(f"| {name} | `{j['keys'].replace(os.environ['OFF'], 'off') or '(the run config as it is)'}` | {d['token_f1']:.3f} "
                 f"[{d['token_f1_ci'][0]:.3f}, {d['token_f1_ci'][1]:.3f}] | {d['bleu']:.3f} | {mi:.3f} | {mc:.3f} | "
                 f"{100 * sum(lo) / len(lo):.1f} % / {100 * max(lo):.1f} % | {j['eval_wall_s']} s |")
lines.append("\nPer row (token F1, loops):\n")
names = list(next(iter(js.values()))["systems"])
lines.append("| setting | " + " | ".join(names) + " |")
lines.append("|---|" + "---|" * len(names))
for name, j in js.items():
    S = j["systems"]
    lines.append(f"| {name} | " + " | ".join(f"{S[n]['token_f1']:.3f} ({100 * S[n]['loops']:.0f} %)" for n in names) + " |")
open(f"{out}/decoding.md", "w").write("\n".join(lines) + "\n")
json.dump({"revision": rev, "wall_s": wall, "settings": js}, open(f"{out}/decoding.json", "w"), indent=1)
print("\n".join(lines))
PY
