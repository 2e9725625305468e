#!/usr/bin/env bash
# `bench/run.sh --quick` produces every benchmark entry with all its fields (it checks presence, never speed).
set -uo pipefail
BUILD=$(cd "$1" && pwd)
SRC=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "FAIL: the Python references need Debian's python3-torch"; exit 1
fi
bash "$SRC/bench/run.sh" --quick --build "$BUILD" --out "$out" >"$out/log" 2>&1; rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: bench/run.sh --quick exited $rc"; tail -30 "$out/log"; }
/usr/bin/python3 - "$out/results-quick.json" "$out/results-quick.md" <<'PY'
import json, os, sys
want = ["stage1_sure_step", "sure_variant_batched", "sure_variant_fd", "stage2_step", "stage2_step_glibc", "stage2_flop_rate",
        "stage2_generate", "stage2_epoch", "malloc_sure_step", "malloc_t5_step", "allreduce_dae", "allreduce_t5",
        "dp_stage1_2ranks", "cache_build", "peak_rss_cache_build", "peak_rss_stage1_sure_step", "peak_rss_stage2_step",
        "stage3_step_np1", "stage3_step_np2", "dp_stage2_2ranks"]
fields = ["name", "value", "reference", "ratio", "target", "met", "unit", "sizes", "threads", "runs", "spread"]
fails = 0
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL: no results json:", e); sys.exit(1)
got = {e["name"]: e for e in r["entries"]}
for n in want:
    e = got.get(n)
    if e is None:
        print("FAIL: entry %s missing" % n); fails += 1; continue
    miss = [f for f in fields if f not in e]
    if miss:
        print("FAIL: %s lacks %s" % (n, miss)); fails += 1
    if e["target"] == "error" or e["value"] is None:
        print("FAIL: %s: %s" % (n, e.get("note", "no value"))); fails += 1
phases = {"forward", "backward sure", "backward ce", "reduce sure", "reduce ce", "reduce counts", "combine", "optimizer"}
for n in ("stage3_step_np1", "stage3_step_np2"):
    p = got.get(n, {}).get("phases_s", {})
    if set(p) != phases or not all(v >= 0 for v in p.values()) or p.get("forward", 0) <= 0:
        print("FAIL: %s phases %s, want %s" % (n, sorted(p), sorted(phases))); fails += 1
b = r["meta"].get("blas", {})
if not b.get("core") or b["core"] == "unknown" or b.get("mode") != "machine":
    print("FAIL: meta.blas names no OpenBLAS core:", b); fails += 1
if not isinstance(r["meta"].get("page_fault_us"), (int, float)) or r["meta"]["page_fault_us"] < 0:
    print("FAIL: meta.page_fault_us:", r["meta"].get("page_fault_us")); fails += 1
if "- BLAS kernels: OpenBLAS core `%s`" % b.get("core") not in open(sys.argv[2]).read():
    print("FAIL: results-quick.md does not name the OpenBLAS core"); fails += 1
for k in ("command", "git_revision", "machine", "wall_s", "load_average_start"):
    if k not in r["meta"]:
        print("FAIL: meta lacks", k); fails += 1
if not os.path.getsize(sys.argv[2]):
    print("FAIL: empty results-quick.md"); fails += 1
print("bench_quick: %d entries, %d failures, %.0f s" % (len(got), fails, r["meta"]["wall_s"]))
sys.exit(1 if fails else 0)
PY
