#!/usr/bin/env bash
# The layering of src/ (README's layout table): a file includes its own folder and folders below it, never one above
# or beside it. The order, lowest first; folders of one rank (model/release, model/attack) may not include each other.
set -uo pipefail
SRC=${2:-$(dirname "$0")/../..}/src
declare -A rank=([core]=0 [dist]=1 [model/text]=2 [model/net]=3 [model/release]=4 [model/attack]=4 [data]=5
                 [stages/loop]=6 [stages/recipes]=7 [eval]=8 [cli]=9)
bad=0 n=0
while IFS= read -r -d '' f; do
  rel=${f#"$SRC"/}
  from=${rel%/*}
  [[ $from == model/text/spm_shim ]] && from=model/text
  [[ -n ${rank[$from]+x} ]] || { echo "FAIL: $rel: folder $from has no rank in $0"; bad=1; continue; }
  while IFS= read -r inc; do
    to=${inc%/*}
    [[ $inc == */* ]] || continue  # generated headers (build_info.h) and same-folder includes by bare name
    [[ -n ${rank[$to]+x} ]] || { echo "FAIL: $rel includes $inc: folder $to has no rank"; bad=1; continue; }
    n=$((n + 1))
    if [[ $to != "$from" ]] && ((rank[$to] >= rank[$from])); then
      echo "FAIL: $rel ($from) includes $inc ($to): not a lower layer"; bad=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done < <(find "$SRC" -name '*.h' -o -name '*.cpp' -o -name '*.inc' | tr '\n' '\0')
((n > 500)) || { echo "FAIL: only $n includes checked (the pattern is broken)"; exit 1; }
((bad == 0)) || exit 1
echo "layering: OK ($n includes, each to its own folder or a lower layer)"
