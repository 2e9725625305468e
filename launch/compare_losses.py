#!/usr/bin/python3
"""The loss lines of two runs of the same training steps (stageK/metrics.jsonl, train.log_every 1), compared step by
step: launch/gpu_check.sh's check that a CUDA run computes what the CPU run computes.

  compare_losses.py REFERENCE.jsonl OTHER.jsonl --steps N --rtol R [--label TEXT]

Prints one line a step (both losses, relative difference) and a verdict; exit 0 when every one of the first N steps
is present in both and |a - b| <= R * |a|, 1 otherwise."""
import argparse, json, math, sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j and "eval" not in j:
                out[int(j["step"])] = float(j["loss"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    ref, oth = losses(a.reference), losses(a.other)
    worst, ok = 0.0, True
    for s in range(1, a.steps + 1):
        if s not in ref or s not in oth:
            print("  step %d: missing (reference %s, other %s)" % (s, s in ref, s in oth))
            ok = False
            continue
        x, y = ref[s], oth[s]
        rel = abs(x - y) / abs(x) if x != 0 else (0.0 if y == 0 else math.inf)
        if not math.isfinite(y) or not rel <= a.rtol:
            ok = False
        worst = max(worst, rel) if math.isfinite(rel) else math.inf
        print("  step %d: %.7g vs %.7g  rel %.2e" % (s, x, y, rel))
    print("%s: %s, max relative difference %.2e over %d steps (tolerance %.1e)" % (
        a.label or "losses", "MATCH" if ok else "DIFFER", worst, a.steps, a.rtol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
