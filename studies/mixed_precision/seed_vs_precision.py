#!/usr/bin/env python3
"""Is bf16's difference from fp32 more than a training seed's? (issue 47)

Reads the fp32 and bf16 columns of the quickstart's precision table (results/mixed_precision_quickstart.md, written
by studies/mixed_precision/compare_precision.py) and a second fp32 quickstart trained with another train.seed (its eval
results.json), and prints one table with both differences per row, the count of rows outside the other's 95 %
interval and the mean and largest |delta token F1| over the trained rows (the floors train nothing).

  python3 studies/mixed_precision/seed_vs_precision.py results/mixed_precision_quickstart.md results/quickstart-fp32-seed2/results.json
"""
import argparse, json, re, statistics, sys

ROW = re.compile(r"\| (\S+) / (\S+) \| ([\d.]+) \[([\d.]+), ([\d.]+)\] \| ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def both_inside(a, b):
    return b[1] <= a[0] <= b[2] and a[1] <= b[0] <= a[2]


def fmt(t):
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("precision_table")
    ap.add_argument("seed2_results")
    args = ap.parse_args()
    rows = {}
    try:
        for line in open(args.precision_table):
            m = ROW.match(line)
            if m:
                rows[(m[1], m[2])] = {"fp32": tuple(float(m[i]) for i in (3, 4, 5)),
                                      "bf16": tuple(float(m[i]) for i in (6, 7, 8))}
        seed2 = json.load(open(args.seed2_results))
        for split, s in seed2["splits"].items():
            for name, r in s["systems"].items():
                if (split, name) in rows:
                    rows[(split, name)]["seed2"] = (r["token_f1"], *r["token_f1_ci"])
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"seed_vs_precision: {e}")
    if not rows:
        sys.exit(f"seed_vs_precision: no rows in {args.precision_table}")
    out = ["| split / system | fp32 seed 1 | bf16 seed 1 | fp32 seed 2 | precision: bf16 − fp32 | seed: seed 2 − seed 1 |",
           "|---|---|---|---|---|---|"]
    deltas = {"precision": [], "seed": []}
    for key, v in sorted(rows.items()):
        if "seed2" not in v:
            continue
        a, b, c = v["fp32"], v["bf16"], v["seed2"]
        marks = ["" if both_inside(a, x) else " (outside)" for x in (b, c)]
        out.append(f"| {key[0]} / {key[1]} | {fmt(a)} | {fmt(b)} | {fmt(c)} | {b[0] - a[0]:+.3f}{marks[0]} | "
                   f"{c[0] - a[0]:+.3f}{marks[1]} |")
        if not key[1].startswith("floor-"):
            deltas["precision"].append((abs(b[0] - a[0]), both_inside(a, b)))
            deltas["seed"].append((abs(c[0] - a[0]), both_inside(a, c)))
    out.append("")
    for label, xs in deltas.items():
        out.append(f"- {label}: {len(xs)} trained rows, {sum(not ok for _, ok in xs)} outside the other's interval, "
                   f"mean |Δ F1| {statistics.mean(d for d, _ in xs):.4f}, largest {max(d for d, _ in xs):.3f}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
