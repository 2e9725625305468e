# Sourced by tests/e2e/pipeline_toy.sh and launch/behaviour_check.sh: the toy run (real GloVe embeddings, tiny
# models, a few steps a stage). write_toy_config DIR [EXTRA_YAML] writes DIR/corpus.txt (700 random lines of 50
# words) and DIR/toy.yaml (run toy under DIR), EXTRA_YAML appended.
# shellcheck shell=bash
write_toy_config() {
  local T=$1 extra=${2:-}
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
embedder: {kind: glove, sigma: 0.04}
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
