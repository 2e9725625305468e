#!/usr/bin/env python3
"""Two evaluations of the same config side by side (issue 47: the quickstart in fp32 and in bf16): for every row of
every split that both have, token F1 and BLEU with their 95 % bootstrap intervals, the difference, and whether each
run's token F1 lies inside the other's interval (the acceptance rule: every row within the other's interval).

  python3 studies/mixed_precision/compare_precision.py A/eval/results.json B/eval/results.json [--labels fp32 bf16] [--out FILE]

Prints a markdown table (and writes it to FILE with --out); exits 1 when a row is outside the other's interval."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import bf16_isa, cpu_model  # noqa: E402


def inside(x, ci):
    return ci[0] <= x <= ci[1]


def with_ci(row, key):
    return f"{row[key]:.3f} [{row[key + '_ci'][0]:.3f}, {row[key + '_ci'][1]:.3f}]"


def header(path, label, res):
    return f"- {label}: `{path}` (command `{res.get('command', '?')}`, revision {res.get('revision', '?')})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--labels", nargs=2, default=["A", "B"])
    ap.add_argument("--out")
    args = ap.parse_args()
    try:
        A, B = json.load(open(args.a)), json.load(open(args.b))
    except (OSError, ValueError) as e:
        raise SystemExit(f"compare_precision: {e}")
    try:
        text, outside = table(args, A, B)
    except (KeyError, TypeError, IndexError) as e:
        raise SystemExit(f"compare_precision: not a daei eval results.json (no {e})")
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.exit(1 if outside else 0)


def table(args, A, B):
    la, lb = args.labels
    md = [f"# {la} against {lb}: every row of both evaluations", "", header(args.a, la, A), header(args.b, lb, B),
          f"- compared by `python3 studies/mixed_precision/compare_precision.py {args.a} {args.b} --labels {la} {lb}` "
          f"on "
          f"{cpu_model()} (bf16 ISA {bf16_isa()})", "",
          f"| split / system | token F1 {la} | token F1 {lb} | Δ F1 | each inside the other's 95 % | BLEU {la} | "
          f"BLEU {lb} |", "|---|---|---|---|---|---|---|"]
    outside = []
    for split, sa in A["splits"].items():
        sb = B["splits"].get(split)
        if not sb:
            continue
        for name, ra in sa["systems"].items():
            rb = sb["systems"].get(name)
            if rb is None:
                md.append(f"| {split} / {name} | {ra['token_f1']:.3f} | – (not in {lb}) | | | | |")
                continue
            fa, fb = ra["token_f1"], rb["token_f1"]
            ok = inside(fa, rb["token_f1_ci"]) and inside(fb, ra["token_f1_ci"])
            if not ok:
                outside.append(f"{split}/{name}")
            md.append(f"| {split} / {name} | {with_ci(ra, 'token_f1')} | {with_ci(rb, 'token_f1')} | {fb - fa:+.3f} | "
                      f"{'yes' if ok else '**no**'} | {with_ci(ra, 'bleu')} | {with_ci(rb, 'bleu')} |")
        for name in sb["systems"]:
            if name not in sa["systems"]:
                md.append(f"| {split} / {name} | – (not in {la}) | {sb['systems'][name]['token_f1']:.3f} | | | | |")
    md.append("")
    md.append(f"Rows outside the other's interval: {', '.join(outside) if outside else 'none'}.")
    return "\n".join(md) + "\n", outside


if __name__ == "__main__":
    main()
