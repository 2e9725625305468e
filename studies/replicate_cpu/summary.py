#!/usr/bin/env python3
"""The figures a replicate report quotes, computed from a run's eval/results.json (and per_round.json beside it).

    python3 studies/replicate_cpu/summary.py runs/replicate-cpu/eval/results.json [--split test]

Prints, per split: the table (BLEU, token F1, cos, queries a text, loops, repeats ≥ 4), the issue's ratios
(BLEU(daei)/BLEU(noisy-vec2text), paper 2.54; BLEU(daei)/BLEU(clean-to-clean), paper 0.78), the F1 gap
clean-to-clean − noisy-vec2text and the share of it daei recovers (paper: 67 % on GTR-base), every paired verdict
eval wrote, and each corrected row's round 0 → early stop → last round from per_round.json. Nothing is computed
that eval did not write, except the ratios and the gap share (plain arithmetic on the means).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import verdict_text  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--split", action="append", help="split(s) to print (default: all)")
    a = ap.parse_args()
    r = json.load(open(a.results))
    pr_path = os.path.join(os.path.dirname(a.results), "per_round.json")
    pr = json.load(open(pr_path))["splits"] if os.path.exists(pr_path) else {}
    print(f"revision {r.get('revision')}, sigma {r.get('sigma')}, eval wall {r.get('wall_s', 0):.0f} s")
    for split, t in r["splits"].items():
        if a.split and split not in a.split:
            continue
        S = t["systems"]
        print(f"\n## {split} (n = {t['n']})\n")
        print("| system | BLEU | token F1 | cos | queries/text | loops | repeats ≥ 4 |\n|---|---|---|---|---|---|---|")
        for name, s in S.items():
            ref = " (reference)" if s.get("reference") else ""
            b, f = s["bleu_ci"], s["token_f1_ci"]
            print(f"| {name}{ref} | {s['bleu']:.3f} [{b[0]:.3f}, {b[1]:.3f}] | {s['token_f1']:.3f} "
                  f"[{f[0]:.3f}, {f[1]:.3f}] | {s['cos']:.3f} | {s['queries_per_text']:.1f} | "
                  f"{100 * s.get('loops', float('nan')):.1f} % | {100 * s.get('repeat4', 0):.1f} % |")
        m = lambda n, k: S[n][k] if n in S else float("nan")
        print()
        if "daei" in S and "noisy-vec2text" in S:
            print(f"BLEU(daei)/BLEU(noisy-vec2text) = {m('daei', 'bleu') / m('noisy-vec2text', 'bleu'):.2f} (paper 2.54)")
        if "daei" in S and "clean-to-clean" in S:
            print(f"BLEU(daei)/BLEU(clean-to-clean) = {m('daei', 'bleu') / m('clean-to-clean', 'bleu'):.2f} (paper 0.78)")
            for c in ("clean-to-clean", "clean-to-clean-corrected"):
                if c in S and "noisy-vec2text" in S:
                    gap = m(c, "token_f1") - m("noisy-vec2text", "token_f1")
                    share = (m("daei", "token_f1") - m("noisy-vec2text", "token_f1")) / gap if gap else float("nan")
                    print(f"F1 gap {c} − noisy-vec2text = {gap:.3f}; daei recovers {100 * share:.0f} % of it "
                          f"(paper 67 %)")
        print("\npaired verdicts (a − b):")
        for v in t["verdicts"]:
            print(f"- {v['a']} − {v['b']} {v['metric']}: {verdict_text(v)}")
        if split in pr:
            print("\nper round (token F1 / BLEU; cumulative queries a text):")
            for name, blk in pr[split].items():
                R = blk["rounds"]
                es = blk["early_stop_round"]
                seq = " → ".join(f"{x['token_f1']:.3f}" for x in R)
                print(f"- {name}: F1 {seq}; BLEU round 0 {R[0]['bleu']:.3f}, early stop (round {es}) "
                      f"{R[es]['bleu']:.3f}, last {R[-1]['bleu']:.3f}; queries {R[es]['queries_per_text']:.1f} at "
                      f"the early stop, {R[-1]['queries_per_text']:.1f} at the last round")
                for v in blk.get("verdicts", []):
                    print(f"    - round {v['round']} ({v['which']}) − round 0 {v['metric']}: "
                          f"{v['diff']:+.4f} [{v['ci'][0]:+.4f}, {v['ci'][1]:+.4f}]")


if __name__ == "__main__":
    main()
