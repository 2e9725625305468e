#!/usr/bin/env bash
# vec2text's imported models in a run (issue 49), on the tiny fixtures of tests/fixtures/vec2text: `daei import
# vec2text`, then a toy run of their shape (24-d GloVe-style vectors over the toy corpus, a 40-piece tokenizer)
# whose noisy inverter starts from the imported one (inverter.init_from), then `daei eval` with eval.imported: the
# rows imported-inverter and imported-vec2text are in results.json (every column, intervals, floors), results.md and
# samples.md, and the rows an eval without the key writes are unchanged. Refused in one line: a corrector of another
# embedding dimension (the fixture's is vec2text's hard-coded 768), a missing folder, pretrain with init_from, and a
# change of inverter.init_from once the noisy inverter is trained. Then `daei invert --imported` with no trained run.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$1
SRC=$2
D=$BUILD/daei
FX=$SRC/tests/fixtures/vec2text
e2e_tmp
# shellcheck source=tests/support/toy_config.sh
source "$SRC/tests/support/toy_config.sh"
write_toy_config "$T"

# 24-d vectors for the toy corpus's words (the fixture inverter reads 24-d embeddings), as a GloVe asset.
/usr/bin/python3 - "$T/corpus.txt" "$T/glove24.txt" <<'PY'
import random, sys
words = sorted({w for line in open(sys.argv[1]) for w in line.split()})
r = random.Random(24)
with open(sys.argv[2], "w") as f:
    for w in words:
        f.write(w + " " + " ".join(str(round(r.gauss(0, 1), 6)) for _ in range(24)) + "\n")
PY
/usr/bin/python3 "$SRC/launch/convert_glove.py" "$T/glove24.txt" "$T/glove24" >/dev/null

# The fixture's corrector cut to 24-d embeddings: its transforms' first 24 inputs and hidden units (vec2text's
# CorrectorEncoderModel hard-codes 768; the fixture's live block is 32 x 24 of it), every other tensor as it is.
/usr/bin/python3 - "$FX/corrector" "$T/corrector24" <<'PY'
import json, os, shutil, struct, sys
src, out = sys.argv[1], sys.argv[2]
blob = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header, data = json.loads(blob[8:8 + n]), blob[8 + n:]
tensors = {}
for k, v in header.items():
    if k == "__metadata__":
        continue
    b, e = v["data_offsets"]
    raw, shape = data[b:e], list(v["shape"])
    if k.startswith("embedding_transform_") and ".0." in k:  # Linear(768, 768) -> Linear(24, 24)
        rows = shape[0]
        cols = shape[1] if len(shape) == 2 else 1
        raw = b"".join(raw[i * cols * 4:(i * cols + min(cols, 24)) * 4] for i in range(24))
        shape = [24, 24] if len(shape) == 2 else [24]
    elif k.startswith("embedding_transform_") and k.endswith(".3.weight"):  # Linear(768, d_model R) -> (24, ...)
        raw = b"".join(raw[i * shape[1] * 4:(i * shape[1] + 24) * 4] for i in range(shape[0]))
        shape = [shape[0], 24]
    tensors[k] = (v["dtype"], shape, raw)
meta, body, off = {"__metadata__": header.get("__metadata__", {})}, b"", 0
for k, (dt, shape, raw) in sorted(tensors.items()):
    meta[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
    body += raw
    off += len(raw)
h = json.dumps(meta).encode()
h += b" " * (-len(h) % 8)
os.makedirs(out)
open(os.path.join(out, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + body)
shutil.copy(os.path.join(src, "config.json"), out)
PY

"$D" import vec2text --inverter "$FX/inverter" --corrector "$T/corrector24" --out "$T/imported" >"$T/import.log" 2>&1 ||
  { cat "$T/import.log"; fail "import"; }
"$D" import vec2text --inverter "$FX/inverter" --corrector "$FX/corrector" --out "$T/imported768" >/dev/null 2>&1 ||
  fail "import of the 768-d corrector"

R=$T/toy
SET=(--config "$T/toy.yaml" --set "embedder.glove_dir=$T/glove24" --set reference.enabled=false
     --set reference.corrector=false --set cache.clean_train_reference=false
     --set inverter.d_kv=16 --set inverter.num_layers=2 --set inverter.num_decoder_layers=2 --set inverter.vocab_size=40
     --set "inverter.init_from=$T/imported/inverter" --set stage2.noisy_steps=2 --set eval.sweep=false
     --set eval.per_round=false --set eval.clean_hypotheses_reference=false)
t0=$SECONDS
"$D" corpus build "${SET[@]}" >"$T/run.log" 2>&1 || { tail -20 "$T/run.log"; fail "corpus"; }
for split in train val test; do
  clean=(); [[ $split == train ]] || clean=(--clean)
  "$D" cache build --split "$split" "${clean[@]}" "${SET[@]}" >>"$T/run.log" 2>&1 ||
    { tail -20 "$T/run.log"; fail "cache $split"; }
done

set +e
"$D" train --stage noisy-inverter "${SET[@]}" --set pretrain.enabled=true >/dev/null 2>"$T/pt.err"; rc=$?
set -e
[[ $rc == 2 ]] && grep -q "pretrain.enabled and inverter.init_from" "$T/pt.err" ||
  { cat "$T/pt.err"; fail "pretrain with init_from: exit $rc"; }

"$D" train --stage noisy-inverter "${SET[@]}" >>"$T/run.log" 2>&1 || { tail -30 "$T/run.log"; fail "noisy-inverter"; }
grep -q "\[noisy-inverter\] starts from inverter.init_from $T/imported/inverter" "$T/run.log" || fail "no init_from line"

set +e
"$D" train --stage noisy-inverter "${SET[@]}" --set "inverter.init_from=$T/imported768/inverter" \
  >/dev/null 2>"$T/guard.err"; rc=$?
set -e
[[ $rc == 2 ]] && grep -q "inverter.init_from (noisy-inverter/ holds work)" "$T/guard.err" ||
  { cat "$T/guard.err"; fail "a change of inverter.init_from was not refused (exit $rc)"; }

"$D" eval "${SET[@]}" >"$T/eval0.log" 2>&1 || { tail -30 "$T/eval0.log"; fail "eval without eval.imported"; }
cp "$R/eval/results.json" "$T/without.json"
"$D" eval "${SET[@]}" --set "eval.imported=$T/imported" >"$T/eval1.log" 2>&1 || { tail -30 "$T/eval1.log"; fail "eval"; }

one_line_refusal() {  # one_line_refusal WHAT WORD [--set ...]: eval exits non-zero with one error line naming WORD
  local what=$1 word=$2 rc
  shift 2
  set +e
  "$D" eval "${SET[@]}" "$@" >/dev/null 2>"$T/refused.err"; rc=$?
  set -e
  local lines
  lines=$(grep -c "error:" "$T/refused.err" || true)
  [[ $rc != 0 && $lines == 1 ]] && grep "error:" "$T/refused.err" | grep -F -- "$word" >/dev/null ||
    { cat "$T/refused.err"; fail "$what: exit $rc, $lines error lines"; }
}
one_line_refusal "a 768-d corrector in a 24-d run" "eval.imported: $T/imported768/corrector reads 768-dimensional" \
  --set "eval.imported=$T/imported768"
one_line_refusal "a missing folder" "eval.imported: $T/nowhere: no such folder" --set "eval.imported=$T/nowhere"

/usr/bin/python3 - "$R/eval" "$T/without.json" <<'PY'
import json, os, sys
out, without = sys.argv[1], json.load(open(sys.argv[2]))
r = json.load(open(os.path.join(out, "results.json")))
t = r["splits"]["test"]
s = t["systems"]
for name in ("imported-inverter", "imported-vec2text"):
    row = s[name]
    assert row["reference"] is True, (name, row)
    for k in ("bleu", "token_f1", "rouge_l", "cos"):
        lo, hi = row[k + "_ci"]
        assert isinstance(row[k], float) and lo <= row[k] + 1e-12 and row[k] <= hi + 1e-12, (name, k, row)
    assert 0 <= row["distinct"] <= 1, row
fv = {v["system"] for v in t["floor_verdicts"]}
assert {"imported-inverter", "imported-vec2text"} <= fv, fv
assert s["imported-inverter"]["queries_per_text"] == 0
assert s["imported-vec2text"]["queries_per_text"] >= 1, s["imported-vec2text"]
pairs = {(v["a"], v["b"]) for v in t["verdicts"]}
assert ("imported-vec2text", "imported-inverter") in pairs, pairs
# The rows an eval without eval.imported writes are the same with it.
before = without["splits"]["test"]["systems"]
assert set(s) - set(before) == {"imported-inverter", "imported-vec2text"}, (sorted(s), sorted(before))
for name, row in before.items():
    assert s[name] == row, (name, row, s[name])
md, samples = open(os.path.join(out, "results.md")).read(), open(os.path.join(out, "samples.md")).read()
assert "| imported-inverter (reference) |" in md and "| imported-vec2text (reference) |" in md
assert "- `imported-inverter`: " in samples and "- `imported-vec2text`: " in samples
print("imported rows:", {k: round(s[k]["bleu"], 4) for k in ("imported-inverter", "imported-vec2text", "noisy-inverter")})
PY
# daei invert --imported (issue 67): the imported models alone under a run name that holds nothing (the tokenizer
# named by inverter.tokenizer), imported-vec2text by default; --dump-logits writes the first round's corrector inputs
# (vec2text's layout: the decoder-start pad first) and first-step logits.
/usr/bin/python3 -c "
import json, random
r = random.Random(5)
for _ in range(3): print(json.dumps({'embedding': [r.gauss(0, 1) for _ in range(24)]}))" >"$T/emb24.jsonl"
"$D" invert "${SET[@]}" --set run.name=no-run --set "inverter.tokenizer=$R/tokenizer/spm.model" \
  --imported "$T/imported" --input "$T/emb24.jsonl" --output "$T/inv.jsonl" --dump-logits "$T/logits.safetensors" \
  >"$T/invert.log" 2>&1 || { tail -20 "$T/invert.log"; fail "invert --imported"; }
[[ $(wc -l <"$T/inv.jsonl") == 3 ]] && grep -q '"system":"imported-vec2text"' "$T/inv.jsonl" ||
  { cat "$T/inv.jsonl"; fail "invert --imported: not 3 imported-vec2text texts"; }
[[ ! -e $T/no-run/stage2 && ! -e $T/no-run/tokenizer ]] || fail "invert --imported trained something"
/usr/bin/python3 - "$T/logits.safetensors" <<'PY'
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
h = json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]])
assert h["logits"]["shape"] == [3, 40], h["logits"]
assert h["target"]["shape"] == [3, 24] and h["hypothesis_embedding"]["shape"] == [3, 24], h
ids = h["hypothesis_ids"]
b, e = ids["data_offsets"]
data = blob[8 + struct.unpack("<Q", blob[:8])[0]:]
rows, width = ids["shape"]
vals = struct.unpack("<%dq" % (rows * width), data[b:e])
assert all(vals[i * width] == 0 for i in range(rows)), vals  # the decoder-start pad first
print("invert --imported: logits", h["logits"]["shape"], "hypothesis ids", [vals[i * width:(i + 1) * width] for i in range(rows)])
PY
"$D" invert "${SET[@]}" --set run.name=no-run --set "inverter.tokenizer=$R/tokenizer/spm.model" \
  --imported "$T/imported" --system imported-inverter --input "$T/emb24.jsonl" --output "$T/inv0.jsonl" \
  >>"$T/invert.log" 2>&1 && grep -q '"system":"imported-inverter"' "$T/inv0.jsonl" ||
  { tail -20 "$T/invert.log"; fail "invert --imported --system imported-inverter"; }
echo "imported_rows_toy: OK ($((SECONDS - t0)) s for the run and evals)"
