#!/usr/bin/env python3
"""One switch on seeded runs (issue 46 item 4; studies/budget_switch/run.sh): the base runs and their switched copies,
paired by seed, in one table. For the switched rows (the noisy chain: noisy-inverter, noisy-vec2text) the switch's
effect, switched − base, per seed and pooled over seeds with a paired bootstrap over the texts; for the headline,
daei − noisy-vec2text and BLEU(daei) / BLEU(noisy-vec2text) on either side of the switch. Every row the switch does not
touch must score the same text by text in both runs of a seed (the copy kept its models); that is checked, not
assumed.

  python3 studies/budget_switch/summary.py --out results/NAME --title TITLE --switch-label "budget cut" \\
      --base runs/ctxr-s1 runs/ctxr-s2 --switched runs/ctxr-cut-s1 runs/ctxr-cut-s2

Writes OUT.json and OUT.md (tables; the prose that reads them is the study's own page)."""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import (bf16_isa, boot_mean, cpu_model, fmt_spread, git_revision, load_run, per_text,  # noqa: E402
                         pooled_ratio, spread)

SWITCHED = ["noisy-inverter", "noisy-vec2text"]
FLOORS = ["floor-constant", "floor-retrieval"]
METRICS = ("token_f1", "bleu")


def paired_across(pairs, system_a, system_b, metric, rng):
    """Mean over seeds of (A's system_a − B's system_b) text by text, for pairs of runs (A, B) of one seed."""
    cols = [(per_text(a, system_a, metric), per_text(b, system_b, metric)) for a, b in pairs]
    n = len(cols[0][0])
    d = [sum(ca[i] - cb[i] for ca, cb in cols) / len(cols) for i in range(n)]
    out = boot_mean(d, rng)
    out["per_seed"] = [sum(ca) / n - sum(cb) / n for ca, cb in cols]
    return out


def fmt_diff(x):
    lo, hi = x["ci"]
    mark = "**" if lo > 0 or hi < 0 else ""
    return f"{mark}{x['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", required=True)
    ap.add_argument("--switch-label", required=True, help="what the switch does, e.g. 'the baseline's budget cut'")
    ap.add_argument("--command", default="")
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--switched", nargs="+", required=True)
    a = ap.parse_args()
    if len(a.base) != len(a.switched):
        raise SystemExit("budget_switch_summary: --base and --switched need one run each a seed, in the same order")
    try:
        base = [load_run(r) for r in a.base]
        switched = [load_run(r) for r in a.switched]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"budget_switch_summary: {e}")
    for r in base + switched:
        missing = [x for x in SWITCHED + ["daei"] + FLOORS if x not in r["test"]["systems"]]
        if missing:
            raise SystemExit(f"budget_switch_summary: {r['run']}/eval/results.json has no {', '.join(missing)} row")
    rng = random.Random(20261205)
    pairs = list(zip(switched, base))
    # The texts and every row the switch does not touch: the same, text by text.
    untouched = {}
    for s_run, b_run in pairs:
        if [r["truth"] for r in s_run["recoveries"]] != [r["truth"] for r in b_run["recoveries"]]:
            raise SystemExit(f"budget_switch_summary: {s_run['run']} and {b_run['run']} evaluated different texts")
        for system in b_run["test"]["systems"]:
            if system in SWITCHED or system not in s_run["test"]["systems"]:
                continue
            same = all(per_text(s_run, system, m) == per_text(b_run, system, m) for m in METRICS)
            untouched.setdefault(system, []).append(same)
    untouched_equal = {k: all(v) for k, v in untouched.items()}
    rows = {}
    for side, runs in (("base", base), ("switched", switched)):
        for system in SWITCHED + ["daei"] + (FLOORS if side == "base" else []):
            rows[f"{system} ({side})"] = {m: spread([r["test"]["systems"][system][m] for r in runs]) for m in METRICS}
    effect = {s: {m: paired_across(pairs, s, s, m, rng) for m in METRICS} for s in SWITCHED}
    headline = {}
    for side, runs in (("base", base), ("switched", switched)):
        same_seed = [(r, r) for r in runs]
        headline[side] = {m: paired_across(same_seed, "daei", "noisy-vec2text", m, rng) for m in METRICS}
        headline[side]["bleu_ratio"] = pooled_ratio(runs, "daei", "noisy-vec2text", rng)
    # Whether a row recovers anything: its margin over each floor (the floors train nothing: the same in every run).
    # Drawn after the headline's bootstrap, so that adding it left the headline's intervals as they were.
    above = {f"{system} ({side})": {f"{fl}/{m}": paired_across([(r, r) for r in runs], system, fl, m, rng)
                                    for fl in FLOORS for m in METRICS}
             for side, runs in (("base", base), ("switched", switched)) for system in ("noisy-vec2text", "daei")}
    rev = git_revision()
    out = {"title": a.title, "switch": a.switch_label, "command": a.command, "summary_revision": rev,
           "machine": f"{cpu_model()}, {os.cpu_count()} CPUs, bf16 ISA {bf16_isa()}",
           "base": [{"run": r["run"], "seed": r["seed"], "revision": r["results"].get("revision"),
                     "command": r["results"].get("command")} for r in base],
           "switched": [{"run": r["run"], "seed": r["seed"], "revision": r["results"].get("revision"),
                         "command": r["results"].get("command"), "cpu_s": r["cpu_s"], "wall_s": r["wall_s"]}
                        for r in switched],
           "n": base[0]["test"]["n"], "untouched_rows_equal_text_by_text": untouched_equal, "rows": rows,
           "above_floors": above, "effect_switched_minus_base": effect, "daei_minus_noisy_vec2text": headline}
    with open(a.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    write_md(a.out + ".md", out)
    print(f"wrote {a.out}.json, {a.out}.md")


def write_md(path, out):
    seeds = ", ".join(str(r["seed"]) for r in out["base"])
    cpu = [r["cpu_s"] for r in out["switched"] if r["cpu_s"]]
    wall = [r["wall_s"] for r in out["switched"] if r["wall_s"]]
    md = [f"# {out['title']}", "",
          f"- command: `{out['command']}`; summary: `python3 studies/budget_switch/summary.py --base "
          f"{' '.join(r['run'] for r in out['base'])} --switched {' '.join(r['run'] for r in out['switched'])}`",
          f"- revision: eval of the base runs {', '.join(sorted({str(r['revision']) for r in out['base']}))}, of "
          f"the switched runs {', '.join(sorted({str(r['revision']) for r in out['switched']}))}; summary at "
          f"{out['summary_revision']}",
          f"- machine: {out['machine']}",
          f"- wall time of the switched runs: {', '.join(f'{w / 60:.1f}' for w in wall)} min a seed "
          f"({sum(cpu) / 3600:.2f} CPU-h in all)" if wall else "- wall time: not recorded",
          f"- test split, n = {out['n']} texts, seeds {seeds} (train.seed); the switch: {out['switch']}",
          "- every row the switch does not touch scores the same text by text in both runs of each seed: " +
          ("**yes** (" + ", ".join(sorted(out["untouched_rows_equal_text_by_text"])) + ")"
           if all(out["untouched_rows_equal_text_by_text"].values()) else
           "**no**: " + ", ".join(k for k, v in out["untouched_rows_equal_text_by_text"].items() if not v)),
          "", "## The rows, mean over seeds ± sd (each seed's value)", "",
          "| row | token F1 | BLEU |", "|---|---|---|"]
    for k, r in out["rows"].items():
        md.append(f"| {k} | {fmt_spread(r['token_f1'])} | {fmt_spread(r['bleu'])} |")
    md += ["", "## Above the floors (pooled over seeds, paired 95 % bootstrap over texts; bold: the interval excludes 0)",
           "", "| row | − floor-constant F1 | − floor-retrieval F1 | − floor-constant BLEU | − floor-retrieval BLEU |",
           "|---|---|---|---|---|"]
    for k, a in out["above_floors"].items():
        md.append(f"| {k} | {fmt_diff(a['floor-constant/token_f1'])} | {fmt_diff(a['floor-retrieval/token_f1'])} | "
                  f"{fmt_diff(a['floor-constant/bleu'])} | {fmt_diff(a['floor-retrieval/bleu'])} |")
    md += ["", "## The switch's effect: switched − base (pooled over seeds, paired 95 % bootstrap over texts; "
           "bold: the interval excludes 0)", "",
           "| row | token F1 | per seed | BLEU | per seed |", "|---|---|---|---|---|"]
    for s, e in out["effect_switched_minus_base"].items():
        md.append(f"| {s} | {fmt_diff(e['token_f1'])} | "
                  f"{', '.join(f'{v:+.3f}' for v in e['token_f1']['per_seed'])} | {fmt_diff(e['bleu'])} | "
                  f"{', '.join(f'{v:+.3f}' for v in e['bleu']['per_seed'])} |")
    md += ["", "## The headline on either side of the switch", "",
           "| side | daei − noisy-vec2text, token F1 | per seed | BLEU | per seed | BLEU(daei)/BLEU(noisy-vec2text) "
           "[95 %] | per seed |", "|---|---|---|---|---|---|---|"]
    for side, h in out["daei_minus_noisy_vec2text"].items():
        r = h["bleu_ratio"] or {"ratio": float("nan"), "ci": [float("nan")] * 2, "per_seed": []}  # None: BLEU 0
        md.append(f"| {side} | {fmt_diff(h['token_f1'])} | "
                  f"{', '.join(f'{v:+.3f}' for v in h['token_f1']['per_seed'])} | {fmt_diff(h['bleu'])} | "
                  f"{', '.join(f'{v:+.3f}' for v in h['bleu']['per_seed'])} | {r['ratio']:.2f} "
                  f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] | {', '.join('–' if v is None else f'{v:.2f}' for v in r['per_seed'])} |")
    with open(path, "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
