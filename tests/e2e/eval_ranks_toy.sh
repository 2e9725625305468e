#!/usr/bin/env bash
# Eval on every rank (issue 35): the toy pipeline once (mpirun -np 2, with zsinvert's generator), then `daei eval` at
# 1, 2 and 3 ranks over that run, each with a --split FILE whose long texts are cut and queried again. Every rank
# recovers its share of each system's texts (inverter rows, correction loop, zsinvert, the noise sweep) and rank 0
# scores them: results.json, per_round.json, sigma_sweep.json, samples.md and results.md are the same at every world
# size, timing (wall_s, "Wall time") aside. The same once more with eval.per_round off, where the correction's early
# stop (a decision over every rank's texts) picks the rounds.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$1
SRC=$2
D=$BUILD/daei
e2e_tmp
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"
write_toy_config "$T"
ZS=(--set zsinvert.enabled=true --set lm.steps=3 --set lm.batch_size=16 --set lm.warmup_steps=1 --set lm.eval_every=3
    --set zsinvert.max_steps=3 --set zsinvert.top_k=4 --set zsinvert.beam=2 --set zsinvert.max_texts=10
    --set zsinvert.text_batch=3)
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" "${ZS[@]}" >"$T/pipeline.log" 2>&1 ||
  { tail -40 "$T/pipeline.log"; fail "pipeline"; }
# Texts of a --split FILE, some longer than inverter.max_length_eval (12) pieces: cut and queried again by rank 0.
/usr/bin/python3 - "$T/extra.jsonl" <<'PY'
import json, random, sys
w = "the a cat dog sat ran on under big small red blue house tree river old new man city war".split()
r = random.Random(11)
with open(sys.argv[1], "w") as f:
    for i in range(14):
        f.write(json.dumps({"text": " ".join(r.choice(w) for _ in range(r.randint(3, 16)))}) + "\n")
PY
R=$T/toy
eval_at() {  # eval_at NP LABEL [--set ...]: one eval, its files kept in $T/LABEL
  local np=$1 label=$2
  shift 2
  # The same daei arguments at every world size (results.json records them): every rank logs.
  local cmd=("$D" eval --config "$T/toy.yaml" "${ZS[@]}" --split "$T/extra.jsonl" --log-all-ranks "$@")
  [[ $np == 1 ]] || cmd=("${MPIRUN[@]}" -np "$np" "${cmd[@]}")
  rm -rf "$R/eval"
  local t0=$SECONDS
  "${cmd[@]}" >"$T/$label.log" 2>&1 || { tail -40 "$T/$label.log"; fail "eval at $np ranks ($label)"; }
  echo "eval at $np rank(s), $label: $((SECONDS - t0)) s"
  mkdir -p "$T/$label"
  for f in results.json results.md samples.md per_round.json sigma_sweep.json; do
    [[ ! -e $R/eval/$f ]] || cp "$R/eval/$f" "$T/$label/"
  done
  [[ -s $T/$label/results.json ]] || fail "no results.json at $np ranks ($label)"
}
for np in 1 2 3; do eval_at "$np" "np$np"; done
for np in 1 3; do eval_at "$np" "early$np" --set eval.per_round=false; done
# Each rank decoded only its share (the progress line of its last batch names its own count), rank 2 included.
grep -q "\[2/3\] I \[eval\] text [0-9]*/[0-9]* " "$T/np3.log" || { grep "\[eval\] text" "$T/np3.log" | head; fail "rank 2 decoded nothing"; }
grep -q "\[1/2\] I \[correct\] round 1/2" "$T/np2.log" || fail "rank 1 did not run the correction rounds"

/usr/bin/python3 - "$T" <<'PY'
import json, os, sys
T = sys.argv[1]

def drop_timing(x):
    if isinstance(x, dict):
        return {k: drop_timing(v) for k, v in x.items() if k != "wall_s"}
    if isinstance(x, list):
        return [drop_timing(v) for v in x]
    return x

def load(label, name):
    p = os.path.join(T, label, name)
    if name.endswith(".json"):
        return drop_timing(json.load(open(p)))
    lines = open(p).read().splitlines()
    return [l for l in lines if not l.startswith("Wall time:")]

def same(labels, names):
    for name in names:
        want = load(labels[0], name)
        for other in labels[1:]:
            got = load(other, name)
            if got != want:
                if name.endswith(".json"):
                    a, b = json.dumps(want, indent=1).splitlines(), json.dumps(got, indent=1).splitlines()
                else:
                    a, b = want, got
                diff = [f"{x!r} != {y!r}" for x, y in zip(a, b) if x != y][:8]
                sys.exit(f"FAIL: {name} differs between {labels[0]} and {other}: {diff}")

same(["np1", "np2", "np3"], ["results.json", "per_round.json", "sigma_sweep.json", "samples.md", "results.md"])
same(["early1", "early3"], ["results.json", "samples.md", "results.md"])
r = json.load(open(os.path.join(T, "np1", "results.json")))
splits = r["splits"]
assert set(splits) == {"test", "extra"}, sorted(splits)
assert splits["extra"]["cut_before_embedding"] > 0, "no --split text was cut: the root query path was not run"
s = splits["test"]["systems"]
for name in ("zsinvert", "zsinvert-dae", "daei", "noisy-vec2text", "dae-only", "clean-to-clean-corrected"):
    assert name in s, (name, sorted(s))
assert s["zsinvert"]["n"] == 10 and s["daei"]["queries_per_text"] >= 1, (s["zsinvert"], s["daei"])
e = json.load(open(os.path.join(T, "early1", "results.json")))["splits"]["test"]["systems"]
print("eval_ranks_toy: results identical at 1, 2, 3 ranks:",
      {k: round(v["bleu"], 4) for k, v in s.items() if k in ("daei", "zsinvert", "dae-only")},
      "| per_round off:", {k: round(v["queries_per_text"], 2) for k, v in e.items() if k in ("daei", "noisy-vec2text")})
PY
echo "eval_ranks_toy: OK"
