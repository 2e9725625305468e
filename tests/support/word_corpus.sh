# Sourced by e2e scripts that need a small training corpus of distinct rows without the corpus step.
# write_word_corpus FILE ROWS STRIDE: ROWS JSON lines {"id", "text", "source"} of 6 words (word (i·STRIDE + k²) of a
# fixed list) and the row number, so every text is distinct.
# shellcheck shell=bash
write_word_corpus() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
words = "the cat sat on a mat dog ran in park union state people law war peace".split()
rows, stride = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1], "w") as f:
    for i in range(rows):
        f.write(json.dumps({"id": i, "text": " ".join(words[(i * stride + k * k) % len(words)] for k in range(6)) + f" {i}",
                            "source": "x"}) + "\n")
PY
}
