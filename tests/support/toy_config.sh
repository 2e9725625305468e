# Sourced by tests/e2e/pipeline_toy.sh and launch/behaviour_check.sh: the toy run (GloVe-style embeddings of the
# toy's words, tiny models, a few steps a stage). write_toy_config DIR [EXTRA_YAML] writes DIR/corpus.txt (700 random
# lines of 50 words) and DIR/toy.yaml (run toy under DIR), EXTRA_YAML appended. The run's GloVe is TOY_GLOVE_DIR when
# set, else DIR/toy-glove written by write_toy_glove (seeded random 100-d vectors: real GloVe is not installed by the
# set-up any more).
# shellcheck shell=bash
write_toy_config() {
  local T=$1 extra=${2:-} gdir=${TOY_GLOVE_DIR:-$1/toy-glove}
  [[ -f "$gdir/asset.json" ]] || write_toy_glove "$gdir"
  local glove=", glove_dir: $gdir"
  /usr/bin/python3 - "$T/corpus.txt" <<'PY'
import random, sys
words = ("the a cat dog sat ran on under big small red blue house tree river old new man woman city war peace "
         "people nation law state time year day work water fire light dark cold warm land sea king queen great "
         "little good bad first last long short high low free strong music art").split()
r = random.Random(7)
lines = set()
while len(lines) < 700:
    lines.add(" ".join(r.choice(words) for _ in range(r.randint(3, 9))))
open(sys.argv[1], "w").write("\n".join(sorted(lines)) + "\n")
PY
  cat >"$T/toy.yaml" <<YAML
run: {name: toy, root: $T}
embedder: {kind: glove, sigma: 0.04$glove}
corpus: {sources: ["$T/corpus.txt"], ood: [], test_size: 40, val_size: 40, min_words: 3}
cache: {shard_rows: 256, clean_train_reference: true}
reference: {enabled: true, corrector: true}
dae: {hidden: 32, depth: 2}
stage1: {steps: 4, batch_size: 32, warmup_steps: 1, eval_every: 2, eval_rows: 40}
inverter: {d_model: 32, d_kv: 8, d_ff: 64, num_layers: 1, num_decoder_layers: 1, num_heads: 2, repeat_tokens: 4,
           vocab_size: 80, max_length_train: 16, max_length_eval: 12}
stage2: {steps: 6, batch_size: 16, warmup_steps: 1, eval_every: 3, wiener_inverter: true}
stage3: {steps: 3, batch_size: 16, warmup_steps: 1, lambda_warmup_steps: 1, eval_every: 3}
stage4: {steps: 3, batch_size: 16, warmup_steps: 1, eval_every: 3}
hypotheses: {max_rows: 64, batch_size: 32}
eval: {splits: [test], max_texts: 24, batch_size: 12, bootstrap: 100, sweep: true, sweep_sigmas: [0.02, 0.06],
       per_round: true, clean_hypotheses_reference: true}
correct: {max_steps: 2, beam: 2}
train: {log_every: 1, ckpt_every: 100, progress_every_s: 100.0, heldout_rows: 20}
$extra
YAML
}

# write_toy_glove DIR: a GloVe asset (asset.json, vocab.txt, vectors.safetensors) of seeded random 100-d vectors for
# the toy corpus's words, for the tests that need an embedder but not GloVe's meaning (tests/e2e/cli_surface.sh,
# eval_dae_only.sh): it loads in milliseconds and needs no download.
write_toy_glove() {
  mkdir -p "$1"
  /usr/bin/python3 - "$1" <<'PY'
import hashlib, json, os, random, struct, sys
d = sys.argv[1]
words = ("the a cat dog sat ran on under big small red blue house tree river old new man woman city war peace "
         "people nation law state time year day work water fire light dark cold warm land sea king queen great "
         "little good bad first last long short high low free strong music art . ,").split()
r = random.Random(11)
data = b"".join(struct.pack("<100f", *[r.gauss(0, 0.4) for _ in range(100)]) for _ in words)
header = json.dumps({"vectors": {"dtype": "F32", "shape": [len(words), 100], "data_offsets": [0, len(data)]}})
header += " " * (-len(header) % 8)
with open(os.path.join(d, "vectors.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header.encode() + data)
with open(os.path.join(d, "vocab.txt"), "w") as f:
    f.write("\n".join(words) + "\n")
files = {}
for name in ("vectors.safetensors", "vocab.txt"):
    b = open(os.path.join(d, name), "rb").read()
    files[name] = {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}
json.dump({"dim": 100, "files": files, "name": "glove-100d", "rows": len(words)}, open(os.path.join(d, "asset.json"), "w"))
PY
}
