#!/usr/bin/env python3
"""results/decoding.{md,json} from the evaluations studies/decoding/run.sh kept under OUT/decoding/NAME/.

  python3 studies/decoding/summary.py OUT WALL_S NAME:KEYS [NAME:KEYS ...]

OUT is the folder holding decoding/ (run.sh's OUT, default results); WALL_S the seconds all settings took, for the
header; each NAME:KEYS a setting as run.sh lists it (its eval.*/correct.* keys, comma-separated). OFF in the
environment (run.sh exports it) is the `off` setting's keys, shown as "off" in the table. Writes
OUT/decoding.{md,json} and prints the tables."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import cpu_model  # noqa: E402


def main():
    out, wall, settings = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    cpu = cpu_model()
    rows, js, rev = [], {}, "?"
    for s in settings:
        name, keys = s.split(":", 1)
        d = f"{out}/decoding/{name}"
        r = json.load(open(f"{d}/results.json"))
        rev = r["revision"]
        w = int(open(f"{d}/wall_s").read())
        S = r["splits"]["test"]["systems"]
        js[name] = {"keys": keys, "eval_wall_s": w, "systems": {n: {k: v[k] for k in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "loops", "repeat4")} for n, v in S.items()}}
    lines = ["# Decoding: beams and repetition controls on the quickstart's models (issue 34)\n",
             "- command: `studies/decoding/run.sh` (after `launch/quickstart.sh`; `daei eval` on the test split, 300 texts, "
             "one run a setting, no sweep / per-round / zsinvert / clean-hypothesis rows; the correctors keep `correct.beam` 2)",
             f"- git revision: {rev}", f"- machine: {os.cpu_count()} vCPUs ({cpu}), Debian 12",
             f"- wall time: {wall // 60} min {wall % 60} s for all settings\n",
             "Means over the inverter rows (noisy-inverter, dae-only, joint-no-corrector, dae-only-continued, wiener-inverter",
             "where present) and over the corrected rows (noisy-vec2text, dae-corrected, daei); `loops` is the share of",
             "recoveries with a word or a phrase of up to 3 words immediately repeated; the worst row's loops beside it.\n",
             "| setting | keys | daei F1 | daei BLEU | inverter rows F1 | corrected rows F1 | loops (mean / worst row) | eval wall |",
             "|---|---|---|---|---|---|---|---|"]
    inv = ("noisy-inverter", "dae-only", "joint-no-corrector", "dae-only-continued", "wiener-inverter")
    cor = ("noisy-vec2text", "dae-corrected", "daei")
    for name, j in js.items():
        S = j["systems"]
        att = [n for n in S if not n.startswith("clean-to-")]
        mi = sum(S[n]["token_f1"] for n in inv if n in S) / max(1, sum(n in S for n in inv))
        mc = sum(S[n]["token_f1"] for n in cor if n in S) / max(1, sum(n in S for n in cor))
        lo = [S[n]["loops"] for n in att]
        d = S["daei"]
        keys = j['keys'].replace(os.environ['OFF'], 'off') if os.environ.get('OFF') else j['keys']
        lines.append(f"| {name} | `{keys or '(the run config as it is)'}` | {d['token_f1']:.3f} "
                     f"[{d['token_f1_ci'][0]:.3f}, {d['token_f1_ci'][1]:.3f}] | {d['bleu']:.3f} | {mi:.3f} | {mc:.3f} | "
                     f"{100 * sum(lo) / len(lo):.1f} % / {100 * max(lo):.1f} % | {j['eval_wall_s']} s |")
    lines.append("\nPer row (token F1, loops):\n")
    names = list(next(iter(js.values()))["systems"])
    lines.append("| setting | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for name, j in js.items():
        S = j["systems"]
        lines.append(f"| {name} | " + " | ".join(f"{S[n]['token_f1']:.3f} ({100 * S[n]['loops']:.0f} %)" for n in names) + " |")
    open(f"{out}/decoding.md", "w").write("\n".join(lines) + "\n")
    json.dump({"revision": rev, "wall_s": wall, "settings": js}, open(f"{out}/decoding.json", "w"), indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main()
