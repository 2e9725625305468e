#!/usr/bin/env bash
# The threat model at link level (DESIGN.md): the clean-embedding reader (CleanCache, open_eval_split) is defined in
# daei_eval only, and so are the clean-hypothesis query of the daei-clean-hyp reference (clean_hypothesis_query) and
# the clean corrector's data (clean_rows_as_dataset, clean_rows_reader, clean_hypothesis_embedder). The
# libraries an attack stage links (core, dist, model, data, stages) define none of it, so a
# training stage can neither name nor link it. The positive check on daei_eval keeps the pattern honest.
set -uo pipefail
BUILD=$1
L=$BUILD/src
pattern='CleanCache::|open_eval_split|clean_hypothesis_query|clean_rows_as_dataset|clean_rows_reader|clean_hypothesis_embedder'
for lib in core dist model data stages; do
  f=$L/libdaei_$lib.a
  [[ -f $f ]] || { echo "FAIL: $f missing"; exit 1; }
  hits=$(nm -C --defined-only "$f" 2>/dev/null | grep -E "$pattern")
  [[ -z $hits ]] || { echo "FAIL: libdaei_$lib.a defines the clean reader:"; sed -n 1,5p <<<"$hits"; exit 1; }
done
defs=$(nm -C --defined-only "$L/libdaei_eval.a")  # not piped into grep -q: nm's SIGPIPE would fail the pipeline
for sym in "CleanCache::open" "clean_hypothesis_query" "clean_rows_as_dataset" "clean_rows_reader" \
           "clean_hypothesis_embedder"; do
  grep -q "$sym" <<<"$defs" ||
    { echo "FAIL: libdaei_eval.a does not define $sym (the check above would prove nothing)"; exit 1; }
done
echo "threat_model_link: OK (clean reader defined in libdaei_eval.a only)"
