#!/usr/bin/env bash
# Behaviour of two daei binaries compared on the toy pipeline (every step and row, zsinvert, per-round, sweep):
#   launch/behaviour_check.sh OLD_BINARY NEW_BINARY
# Builds the toy corpus of tests/e2e/pipeline_toy.sh, runs `pipeline` on 2 ranks with each binary, and compares
# eval/results.json without its timing and revision fields, the list of files written, and the trained weights.
# Exit 0 when identical. (HDF5 shards differ byte-wise between any two runs, timestamps; their digests are in the
# manifests, compared through results.json's inputs and the weights trained on them.)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 { if (!/^#/ || /^#SBATCH/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0
fi
set -euo pipefail
[[ $# == 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
# shellcheck source=tests/support/toy_config.sh
source "$(dirname "$0")/../tests/support/toy_config.sh"
# BEHAVIOUR_KEEP=DIR keeps both runs there (DIR/old, DIR/new) for studies/torch2_behaviour/compare.py.
if [[ -n ${BEHAVIOUR_KEEP:-} ]]; then
  W=$BEHAVIOUR_KEEP
  rm -rf "$W/old" "$W/new"
  mkdir -p "$W"
else
  W=$(mktemp -d)
  trap 'rm -rf "$W"' EXIT
fi
run() {  # BINARY DIR
  local D=$1 T=$2
  mkdir -p "$T"
  write_toy_config "$T" "zsinvert: {enabled: true, max_texts: 4, beam: 2, top_k: 4, max_steps: 3}
lm: {steps: 4, batch_size: 16}"
  local root=()
  [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
  mpirun "${root[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -np 2 \
    "$D" pipeline --config "$T/toy.yaml" >"$T/run.log" 2>&1 || { tail -30 "$T/run.log"; exit 1; }
  /usr/bin/python3 - "$T/toy/eval/results.json" >"$T/results.norm.json" <<'PY'
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items()
                if k not in ("revision", "command", "hostname", "host", "machine", "date") and not k.endswith("_s")
                and "time" not in k}
    return [strip(v) for v in x] if isinstance(x, list) else x
print(json.dumps(strip(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
  (cd "$T/toy" && find . -type f ! -name '*.log' ! -path '*archive*' | sort) >"$T/files.txt"
}
run "$1" "$W/old"
run "$2" "$W/new"
status=0
if diff "$W/old/results.norm.json" "$W/new/results.norm.json"; then echo "results.json: identical"; else status=1; fi
if diff "$W/old/files.txt" "$W/new/files.txt"; then echo "files written: identical ($(wc -l <"$W/old/files.txt"))"; else status=1; fi
while read -r f; do
  case $f in *.safetensors|*/samples.md) ;; *) continue ;; esac  # the other .md tables head with command, revision
  cmp -s "$W/old/toy/$f" "$W/new/toy/$f" || { echo "differs: $f"; status=1; }
done <"$W/old/files.txt"
[[ $status == 0 ]] && echo "weights and samples: identical"
exit $status
