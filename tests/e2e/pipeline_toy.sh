#!/usr/bin/env bash
# daei pipeline end to end on a toy corpus (real GloVe embeddings, tiny models, a few steps a stage) under
# mpirun -np 2: every step runs and eval writes the full table (every system, intervals, verdicts, queries per
# text) and the noise sweep; a second run does no work; a run stopped inside stage 2 resumes there; every config in
# configs/ passes `pipeline --dry-run`.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$1
SRC=$2
D=$BUILD/daei
e2e_tmp
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)

for c in "$SRC"/configs/*.yaml; do
  "$D" pipeline --dry-run --config "$c" --set run.root="$T/dry" >"$T/dry.log" 2>&1 || { cat "$T/dry.log"; fail "dry run of $c"; }
  grep -q "Global batch per optimizer step" "$T/dry.log" || { cat "$T/dry.log"; fail "no batch arithmetic for $c"; }
  grep -q "stage 3 (joint, PCGrad)" "$T/dry.log" || fail "no stage 3 in the plan of $c"
done
[[ ! -e $T/dry/quickstart/stage1 ]] || fail "--dry-run trained something"

# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"
# The bag-of-words rows too (issue 65): bow-noisy, bow-dae and the bow-clean reference; and the T5 inverters guided
# by them (guided-noisy, guided-dae, the guided-clean reference), their fold models on the bow budget.
write_toy_config "$T" "bow: {enabled: true, steps: 6, batch_size: 16, hidden: 32, warmup_steps: 1, eval_every: 3, k_max: 4, k_rows: 20}
guided: {enabled: true, folds: 2, words: 3, max_pieces: 8}"

"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" >"$T/run1.log" 2>&1 || { tail -50 "$T/run1.log"; fail "pipeline"; }
R=$T/toy
for f in eval/results.json eval/results.md eval/samples.md eval/sigma_sweep.json eval/sigma_sweep.md \
         stage1/final/dae/dae.json stage2/final/inverter/config.json stage3/final/dae/dae.json \
         stage4/final/corrector/config.json cache/hyp-train/manifest.json stage2/metrics.jsonl \
         dae-corrector/final/corrector/config.json noisy-corrector/final/corrector/config.json \
         cache/hyp-train-dae/manifest.json cache/hyp-train-noisy/manifest.json cache/hyp-val/manifest.json \
         clean-corrector/final/corrector/config.json cache/hyp-train-clean/manifest.json cache/hyp-val-clean/manifest.json \
         eval/per_round.json eval/per_round.md eval/per_round.png \
         wiener-inverter/wiener.safetensors wiener-inverter/final/inverter/config.json \
         bow-noisy/final/bow/bow.json bow-dae/final/bow/k_choice.json bow-clean/final/bow/model.safetensors \
         guided-noisy/guidance/train.txt guided-dae/folds/1/final/bow/bow.json guided-clean/final/inverter/inverter.json; do
  [[ -s $R/$f ]] || { tail -30 "$T/run1.log"; fail "missing $f"; }
done
/usr/bin/python3 - "$R/eval/results.json" "$R/eval/sigma_sweep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["embedder"] == "glove-100d" and abs(r["sigma"] - 0.04) < 1e-12, (r["embedder"], r["sigma"])
t = r["splits"]["test"]
assert t["n"] == 24, t["n"]
want = {"clean-to-clean", "clean-to-noisy", "noisy-inverter", "noisy-vec2text", "dae-only", "dae-corrected",
        "dae-only-continued", "clean-to-clean-corrected", "clean-to-noisy-corrected",
        "joint-no-corrector", "daei", "daei-clean-hyp", "wiener-inverter", "floor-constant", "floor-retrieval",
        "bow-noisy", "bow-dae", "bow-clean", "guided-noisy", "guided-dae", "guided-clean"}
assert set(t["systems"]) == want, sorted(t["systems"])
# A guided inverter names its guide (words, bow stage) in its folder, and decodes texts, not word lists.
for name in ("guided-noisy", "guided-dae", "guided-clean"):
    inv = json.load(open(sys.argv[1].replace("eval/results.json", name + "/final/inverter/inverter.json")))
    assert inv["guide"] == {"words": 3, "bow_stage": name.replace("guided-", "bow-"), "max_pieces": 8, "copy": False}, inv
    lines = open(sys.argv[1].replace("eval/results.json", name + "/guidance/train.txt")).read().splitlines()
    assert lines and all(1 <= len(l.split()) <= 3 for l in lines), (name, lines[:3])
assert t["systems"]["guided-clean"]["reference"] and not t["systems"]["guided-dae"]["reference"]
# A bag-of-words row answers with k words of its vocabulary (k chosen on val, at most bow.k_max), a reference only on
# clean inputs.
assert t["systems"]["bow-clean"]["reference"] and not t["systems"]["bow-noisy"]["reference"]
for name in ("bow-noisy", "bow-dae", "bow-clean"):
    choice = json.load(open(sys.argv[1].replace("eval/results.json", name + "/final/bow/k_choice.json")))
    k, tau = choice["k"], choice["min_prob"]
    assert 1 <= k <= 4 and t["systems"][name]["queries_per_text"] == 0, (name, k)
    rec = [json.loads(l)["systems"][name]["text"] for l in open(sys.argv[1].replace("results.json", "recoveries.jsonl"))]
    # exactly k words, or (rule "p >= tau") between 1 and k
    assert len(rec) == 24 and all(len(x.split()) == k if tau == 0 else 1 <= len(x.split()) <= k for x in rec), \
        (name, k, tau, rec[:3])
# Issue 46: the floors. One string for every text (distinct 1/n, its 3-gram a template wherever a truth lacks it);
# retrieval's index is the train cache (counted once); every other row paired against both floors.
fc, fr = t["systems"]["floor-constant"], t["systems"]["floor-retrieval"]
assert fc["floor"] and fr["floor"] and not fc["reference"] and not fr["reference"]
assert abs(fc["distinct"] - 1 / 24) < 1e-12 and fc["queries_per_text"] == 0, fc
assert fr["index_queries"] >= 500 and fr["queries_per_text"] == 0, fr
fv = {v["system"]: v for v in t["floor_verdicts"]}
assert set(fv) == want - {"floor-constant", "floor-retrieval"}, sorted(fv)
for v in fv.values():
    lo, hi = v["floor-retrieval/token_f1"]["ci"]
    assert lo <= v["floor-retrieval/token_f1"]["diff"] <= hi and isinstance(v["above_both"], bool), v
    lo, hi = v["floor-constant/content_f1"]["ci"]
    assert lo <= v["floor-constant/content_f1"]["diff"] <= hi and isinstance(v["above_both_content"], bool), v
for s_ in t["systems"].values():
    assert all(0 <= s_[k] <= 1 for k in ("distinct", "top_template", "loops", "artefacts")), s_
for name, s in t["systems"].items():
    assert 0 <= s["content_recall"] <= 1, (name, s)
    for k in ("bleu", "token_f1", "content_f1", "rouge_l", "cos"):
        lo, hi = s[k + "_ci"]
        floor = -1 - 1e-9 if k == "cos" else 0  # a cosine may be negative (the toy's random vectors have no common part)
        assert floor <= lo <= s[k] + 1e-12 and s[k] <= hi + 1e-12 and hi <= 1 + 1e-9, (name, k, lo, s[k], hi)
    assert s["reference"] == (name.startswith("clean-to-") or name in ("daei-clean-hyp", "bow-clean", "guided-clean")), name
assert t["systems"]["daei"]["queries_per_text"] >= 1, t["systems"]["daei"]
assert t["systems"]["dae-only"]["queries_per_text"] == 0
for name in ("noisy-vec2text", "dae-corrected", "daei", "clean-to-clean-corrected", "clean-to-noisy-corrected"):
    assert t["systems"][name]["queries_per_text"] >= 1, (name, t["systems"][name])
assert all(0 <= s["repeat4"] <= 1 and 0 <= s["loops"] <= 1 for s in t["systems"].values())
pairs = {(v["a"], v["b"], v["metric"]) for v in t["verdicts"]}
assert ("dae-only", "wiener-inverter", "token_f1") in pairs and ("wiener-inverter", "noisy-inverter", "bleu") in pairs
assert t["systems"]["wiener-inverter"]["queries_per_text"] == 0 and not t["systems"]["wiener-inverter"]["reference"]
assert ("dae-only", "noisy-inverter", "bleu") in pairs and ("daei", "joint-no-corrector", "token_f1") in pairs, pairs
assert ("daei", "noisy-vec2text", "content_f1") in pairs, pairs
assert "mse_dae_stage3" in r["dae"]["test"] and "oracle_fitted_on" in r["dae"]["test"]
s = json.load(open(sys.argv[2]))
assert [p["sigma"] for p in s["points"]] == [0.02, 0.06]
lo, hi = s["points"]
assert lo["cos_noisy_clean"] > hi["cos_noisy_clean"], "utility must fall as sigma grows"
print("results OK:", {k: round(v["bleu"], 3) for k, v in t["systems"].items()})
PY
# Per round (eval.per_round): max_steps + 1 rounds for every corrected system, round 0 = its inverter alone,
# cumulative queries never decrease, the main table's row is the early-stopped round.
/usr/bin/python3 - "$R/eval/per_round.json" "$R/eval/results.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["splits"]["test"]
r = json.load(open(sys.argv[2]))["splits"]["test"]["systems"]
round0 = {"noisy-vec2text": "noisy-inverter", "dae-corrected": "dae-only", "daei": "joint-no-corrector",
          "daei-clean-hyp": "joint-no-corrector", "clean-to-clean-corrected": "clean-to-clean",
          "clean-to-noisy-corrected": "clean-to-noisy"}
assert set(p) == set(round0), sorted(p)
for name, block in p.items():
    rounds = block["rounds"]
    assert [x["round"] for x in rounds] == [0, 1, 2], (name, rounds)
    q = [x["queries_per_text"] for x in rounds]
    assert q[0] == 1 and all(b >= a for a, b in zip(q, q[1:])), (name, q)
    assert abs(rounds[0]["bleu"] - r[round0[name]]["bleu"]) < 1e-12, (name, rounds[0], r[round0[name]])
    es = rounds[block["early_stop_round"]]
    assert abs(es["bleu"] - r[name]["bleu"]) < 1e-12 and abs(es["queries_per_text"] - r[name]["queries_per_text"]) < 1e-9
    assert {v["metric"] for v in block["verdicts"]} == {"bleu", "token_f1", "content_f1"}
    assert abs(rounds[0]["content_f1"] - r[round0[name]]["content_f1"]) < 1e-12, (name, rounds[0])
print("per-round OK")
PY
# Held-out CE beside the training CE in every T5 stage; the correctors were warm-started from their inverters.
for st in stage2 noisy-inverter clean-inverter stage3 stage2-continued stage4 dae-corrector noisy-corrector \
          clean-corrector; do
  grep -q '"heldout_ce"' "$R/$st/metrics.jsonl" || fail "$st/metrics.jsonl has no held-out CE"
done
# The extra-steps control continued the stage-2 inverter for stage 3's steps.
grep -q '"step": *3' "$R/stage2-continued/metrics.jsonl" || fail "stage2-continued did not run stage 3's 3 steps"
grep -q "\[stage4\] warm start: .* tensors from .*stage3/final/inverter" "$T/run1.log" || fail "stage 4 not warm-started"
grep -q "\[noisy-corrector\] warm start: .* tensors from .*noisy-inverter/final/inverter" "$T/run1.log" ||
  fail "the vanilla corrector not warm-started from the noisy inverter"
# The clean reference's corrector (reference.corrector): warm-started from the clean inverter, its hypotheses decoded
# from the clean rows and embedded without noise (σ 0 in the manifest).
grep -q "\[clean-corrector\] warm start: .* tensors from .*clean-inverter/final/inverter" "$T/run1.log" ||
  fail "the clean corrector not warm-started from the clean inverter"
/usr/bin/python3 - "$R/cache/hyp-train-clean/manifest.json" "$R/cache/hyp-train-noisy/manifest.json" <<'PY' || fail "clean hypotheses"
import json, sys
c, n = (json.load(open(f)) for f in sys.argv[1:])
assert c["hypotheses"]["input"] == "clean" and c["sigma"] == 0, (c["hypotheses"], c["sigma"])
assert "input" not in n["hypotheses"] and n["sigma"] == 0.04, (n["hypotheses"], n["sigma"])
PY
grep -q "| daei |" "$R/eval/results.md" || fail "results.md has no daei row"

# A dry run over the finished run, with a changed harmless key, leaves config.yaml as it was.
cp "$R/config.yaml" "$T/config.dry"
"$D" pipeline --dry-run --config "$T/toy.yaml" --set train.log_every=7 >"$T/dry2.log" 2>&1 || { cat "$T/dry2.log"; fail "dry run"; }
cmp -s "$T/config.dry" "$R/config.yaml" || fail "pipeline --dry-run rewrote config.yaml"

# A second run does no work.
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" >"$T/run2.log" 2>&1 || { tail -30 "$T/run2.log"; fail "second run"; }
grep -q "skipped (complete)" "$T/run2.log" || { cat "$T/run2.log"; fail "nothing reported as skipped"; }
if grep -E "^  .*(done in|resumed, done)" "$T/run2.log" | grep -v "^  eval" | grep . >/dev/null; then
  cat "$T/run2.log"; fail "the second run redid a step"
fi

# Another training seed in a run that links this run's cache/ whole: its complete hypotheses were decoded by this
# run's inverters, so the pipeline checks them instead of skipping them, and the first hypotheses step refuses,
# naming them, before a corrector trains on them; the linked caches stay as they were.
mkdir -p "$T/toy-seed"
for f in corpus tokenizer cache; do ln -s "$R/$f" "$T/toy-seed/$f"; done
cp "$R/cache/hyp-train/manifest.json" "$T/hyp.before"
set +e
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" --set run.name=toy-seed --set train.seed=77 >"$T/seed.log" 2>&1
rc=$?
set -e
[[ $rc != 0 ]] && grep -q "holds hypotheses of another build, and .* is another run's folder .*: link that run's caches split by split" "$T/seed.log" &&
  ! grep -q "corrector.*: starting" "$T/seed.log" ||
  { tail -20 "$T/seed.log"; fail "another seed's run used the linked hypotheses (exit $rc)"; }
cmp -s "$T/hyp.before" "$R/cache/hyp-train/manifest.json" || fail "the linked hypotheses were changed"
grep -q "complete (checked against this run's models)" "$T/dry2.log" || { cat "$T/dry2.log"; fail "dry run: hypotheses not marked as checked"; }

# Resuming with a changed key: one that would invalidate saved work is refused (exit 2, naming the key and the
# folder) and the saved config stays; one that changes nothing saved is accepted, named, and the old file is kept.
cp "$R/config.yaml" "$T/config.before"
set +e
err=$("${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" --set stage2.lr=0.002 --set stage3.steps=4 2>&1)
rc=$?
set -e
[[ $rc == 2 && $err == *"stage2.lr (stage2/, noisy-inverter/, wiener-inverter/, clean-inverter/, guided-noisy/, guided-dae/, guided-clean/ hold work)"* && $err == *"stage3.steps (stage3/, stage2-continued/, noisy-inverter/ hold work)"* ]] ||
  { echo "$err" | tail -5; fail "a change of stage2.lr after stage 2 was not refused (exit $rc)"; }
[[ $(grep -c "would invalidate saved work" <<<"$err") == 1 ]] || fail "the refusal was not printed once"
cmp -s "$T/config.before" "$R/config.yaml" || fail "a refused resume rewrote config.yaml"
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" --set train.log_every=3 --set eval.samples=5 >"$T/run2b.log" 2>&1 ||
  { tail -20 "$T/run2b.log"; fail "a harmless change was refused"; }
grep -q "change no saved work (accepted): eval.samples, train.log_every" "$T/run2b.log" || fail "accepted keys not named"
grep -q "log_every: 3" "$R/config.yaml" || fail "config.yaml does not hold the accepted value"
cmp -s "$T/config.before" "$R"/config.history/*.yaml || fail "the previous config was not kept in config.history/"

# A follow-up config extends the run's own with `base:`, as configs/sigma-sweep.yaml extends quickstart.yaml: its
# documented commands, a dry run and the noise sweep, are accepted over the finished run (issue 26 item 2).
printf 'base: toy.yaml\neval:\n  sweep: true\n' >"$T/follow.yaml"
"$D" pipeline --dry-run --config "$T/follow.yaml" >"$T/follow_dry.log" 2>&1 || { cat "$T/follow_dry.log"; fail "follow-up dry run"; }
"$D" eval --config "$T/follow.yaml" --sigma 0.03,0.05 >"$T/follow_sweep.log" 2>&1 ||
  { tail -20 "$T/follow_sweep.log"; fail "follow-up noise sweep"; }
grep -q '"sigma": 0.05' "$R/eval/sigma_sweep.json" || fail "the follow-up sweep did not write sigma_sweep.json"

# invert picks any trained row with --system and lists them with --list (issue 26 item 13).
"$D" invert --config "$T/toy.yaml" --list >"$T/list.out" 2>"$T/list.err" || { cat "$T/list.err"; fail "invert --list"; }
grep -qx "daei  (default)" "$T/list.out" || { cat "$T/list.out"; fail "invert --list does not mark daei the default"; }
grep -qx "clean-to-clean  (reference, outside the threat model)" "$T/list.out" || fail "invert --list: no labelled reference"
/usr/bin/python3 -c "
import json, random
r = random.Random(3)
for _ in range(3): print(json.dumps({'embedding': [r.gauss(0, 0.1) for _ in range(100)]}))" >"$T/emb.jsonl"
"$D" invert --config "$T/toy.yaml" --input "$T/emb.jsonl" --system noisy-inverter --output "$T/inv.jsonl" 2>"$T/inv.err" ||
  { cat "$T/inv.err"; fail "invert --system noisy-inverter"; }
[[ $(grep -c '"system":"noisy-inverter"' "$T/inv.jsonl") == 3 ]] || { cat "$T/inv.jsonl"; fail "invert did not use --system"; }
set +e; "$D" invert --config "$T/toy.yaml" --input "$T/emb.jsonl" --system bogus >/dev/null 2>"$T/inv_bad.err"; rc=$?; set -e
[[ $rc == 2 ]] && grep -q "invert: --system bogus is not trained in .*; it has: clean-to-clean" "$T/inv_bad.err" ||
  { cat "$T/inv_bad.err"; fail "invert --system bogus: exit $rc"; }

# ZSInvert (issue 23): zsinvert.enabled adds the lm step (the generator, texts only) to the pipeline; eval then has
# the zsinvert and zsinvert-dae rows, run on the first zsinvert.max_texts texts, with their queries counted.
ZS=(--set zsinvert.enabled=true --set lm.steps=3 --set lm.batch_size=16 --set lm.warmup_steps=1 --set lm.eval_every=3
    --set zsinvert.max_steps=3 --set zsinvert.top_k=4 --set zsinvert.beam=2 --set zsinvert.max_texts=6)
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" "${ZS[@]}" >"$T/run_zs.log" 2>&1 || { tail -30 "$T/run_zs.log"; fail "pipeline with zsinvert"; }
[[ -s $R/lm/final/lm/config.json ]] || { tail -30 "$T/run_zs.log"; fail "no lm/final/lm"; }
"$D" eval --config "$T/toy.yaml" "${ZS[@]}" >"$T/eval_zs.log" 2>&1 || { tail -30 "$T/eval_zs.log"; fail "eval with zsinvert"; }
/usr/bin/python3 - "$R/eval/results.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["splits"]["test"]["systems"]
for name in ("zsinvert", "zsinvert-dae"):
    s = t[name]
    # at most k + (steps - 1) * beam * k a stage, two stages (fewer only if a step had under beam distinct texts)
    assert s["n"] == 6 and 0 < s["queries_per_text"] <= 2 * (4 + 2 * 2 * 4), (name, s)
    lo, hi = s["bleu_ci"]
    assert 0 <= lo <= s["bleu"] <= hi <= 1, (name, s)
print("zsinvert rows OK:", {k: (round(t[k]["cos"], 3), t[k]["queries_per_text"]) for k in ("zsinvert", "zsinvert-dae")})
PY
grep -q "| zsinvert (first 6 texts) |" "$R/eval/results.md" || fail "results.md has no zsinvert row"

# Stopped inside stage 2 (exit 75), then resumed there.
sed -i "s/name: toy,/name: toy2,/" "$T/toy.yaml"
set +e
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" --set train.stop_after=5 >"$T/run3.log" 2>&1
rc=$?
set -e
[[ $rc == 75 ]] || { tail -30 "$T/run3.log"; fail "stop in stage 2 gave exit $rc, want 75"; }
[[ -f $T/toy2/stage1/final/DONE && -f $T/toy2/stage2/ckpt-00000005/DONE && ! -e $T/toy2/stage2/final ]] ||
  fail "not stopped inside stage 2"
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" >"$T/run4.log" 2>&1 || { tail -30 "$T/run4.log"; fail "resume"; }
grep -q "resumed from .*stage2/ckpt-00000005" "$T/run4.log" || { grep stage2 "$T/run4.log" | sed -n 1,10p; fail "stage 2 not resumed"; }
# Pretraining (issue 22 item 2): pretrain.enabled adds `daei pretrain` (T5 span corruption on the training texts)
# before stage 2, and every inverter starts from its T5.
sed -i "s/name: toy2,/name: toy3,/" "$T/toy.yaml"
PT=(--set pretrain.enabled=true --set pretrain.steps=4 --set pretrain.batch_size=16 --set pretrain.warmup_steps=1
    --set pretrain.eval_every=2)
"$D" pipeline --config "$T/toy.yaml" "${PT[@]}" --dry-run >"$T/dry_pt.out" 2>&1 || { cat "$T/dry_pt.out"; fail "dry run with pretrain"; }
grep -q "pretrain (T5 span corruption, texts only) *daei train --stage pretrain --resume" "$T/dry_pt.out" ||
  { cat "$T/dry_pt.out"; fail "no pretrain step in the dry run"; }
"${MPIRUN[@]}" -np 2 "$D" pipeline --config "$T/toy.yaml" "${PT[@]}" >"$T/run_pt.log" 2>&1 || { tail -30 "$T/run_pt.log"; fail "pipeline with pretrain"; }
grep -q '"objective": "T5 span corruption' "$T/toy3/pretrain/final/t5/training.json" || fail "no pretrain/final/t5/training.json"
for tag in stage2 noisy-inverter; do
  grep -q "\[$tag\] T5 starts from the pretrained .*toy3/pretrain/final/t5" "$T/run_pt.log" ||
    { grep "\[$tag\]" "$T/run_pt.log" | sed -n 1,5p; fail "$tag did not start from the pretrained T5"; }
done
grep -q "heldout_ce" "$T/toy3/pretrain/metrics.jsonl" || fail "pretrain logged no held-out CE"
set +e; "$D" pretrain --config "$T/toy.yaml" "${PT[@]}" --set inverter.t5_dir=/nonexistent >/dev/null 2>"$T/pt_bad.err"; rc=$?; set -e
[[ $rc == 2 ]] && grep -q "pretrain.enabled and inverter.t5_dir both say where the T5 starts" "$T/pt_bad.err" ||
  { cat "$T/pt_bad.err"; fail "pretrain with inverter.t5_dir: exit $rc"; }
echo "pipeline_toy: OK"
