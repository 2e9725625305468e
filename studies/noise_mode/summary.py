#!/usr/bin/env python3
"""results/noise_mode.{md,json} from the evaluations studies/noise_mode/run.sh kept under OUT/noise_mode/MODE-kK/.

  python3 studies/noise_mode/summary.py OUT WALL_S K [K ...]

OUT is the folder holding noise_mode/ (run.sh's OUT, default results); WALL_S the seconds the evaluations took, for
the header; K the correct.queries_per_candidate values evaluated. Writes OUT/noise_mode.{md,json} and prints the
table."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import cpu_model  # noqa: E402


def main():
    out, wall, ks = sys.argv[1], int(sys.argv[2]), [int(k) for k in sys.argv[3:]]
    rows, js = [], {}
    cpu = cpu_model()
    for mode in ("fresh", "per_text"):
        for k in ks:
            r = json.load(open(f"{out}/noise_mode/{mode}-k{k}/results.json"))
            t = r["splits"]["test"]["systems"]
            for name in ("noisy-vec2text", "dae-corrected", "daei"):
                s = t[name]
                js.setdefault(mode, {}).setdefault(str(k), {})[name] = {x: s[x] for x in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "cos", "queries_per_text")}
            rev = r["revision"]
    lines = [f"# What `server.noise_mode: per_text` is worth to a defender\n",
             f"- command: `studies/noise_mode/run.sh` (after `launch/quickstart.sh`; eval on the test split, 300 texts, "
             f"`correct.queries_per_candidate` k = {', '.join(map(str, ks))})",
             f"- git revision: {rev}",
             f"- machine: {os.cpu_count()} vCPUs ({cpu}), Debian 12",
             f"- wall time: {wall // 60} min {wall % 60} s for the six evaluations and the per-text val/test caches\n",
             "Every corrector queries each candidate k times and scores the mean of the k answers. Against `fresh` noise the",
             "mean's noise variance is σ²/k; against `per_text` the k answers are identical, so k buys nothing, and a",
             "candidate equal to the true text returns exactly the released vector.\n",
             "| noise mode | k | system | BLEU | token F1 | cos | queries/text |", "|---|---|---|---|---|---|---|"]
    for mode in ("fresh", "per_text"):
        for k in ks:
            for name, s in js[mode][str(k)].items():
                b, f = s["bleu_ci"], s["token_f1_ci"]
                lines.append(f"| {mode} | {k} | {name} | {s['bleu']:.3f} [{b[0]:.3f}, {b[1]:.3f}] | {s['token_f1']:.3f} "
                             f"[{f[0]:.3f}, {f[1]:.3f}] | {s['cos']:.3f} | {s['queries_per_text']:.1f} |")
    open(f"{out}/noise_mode.md", "w").write("\n".join(lines) + "\n")
    json.dump({"revision": rev, "wall_s": wall, "results": js}, open(f"{out}/noise_mode.json", "w"), indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main()
