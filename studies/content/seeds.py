#!/usr/bin/env python3
"""results/content_seeds.{md,json}: the quickstart's trained rows and its DAE − no-DAE pairs over training seeds.

  python3 studies/content/seeds.py RUN RUN-seed2 RUN-seed3 ... [--out results/content_seeds] [--command "..."]

RUN is a finished quickstart run, RUN-seedN the runs of studies/content/seeds.sh (the same corpus, caches and test
texts, every trained stage again with train.seed N). Each pair is given per seed and pooled: the per-text difference
averaged over the seeds, with two 95 % intervals: over texts only (the seeds fixed, as results/content.md's) and over
seeds and texts (each resample draws the seeds with replacement, then the texts), the one to read where the seeds
move a row more than the texts do.
"""
import argparse, os, random, re, statistics, sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import (BOOT, bf16_isa, cpu_model, git_revision, load_run, per_text, pooled_diff,  # noqa: E402
                         spread, write_page)

ROWS = ["noisy-inverter", "noisy-vec2text", "dae-only", "dae-corrected", "dae-only-continued", "joint-no-corrector",
        "daei"]
FLOORS = ["floor-constant", "floor-retrieval"]
# (a, b, what it asks): the DAE's contribution at each point of the chain, the headline first.
PAIRS = [("daei", "noisy-vec2text", "the headline: DAEI against the same chain without the DAE"),
         ("dae-corrected", "noisy-vec2text", "stage 2 on DAE(y) + corrector against the noisy chain"),
         ("dae-only", "noisy-inverter", "the inverter on DAE(y) against the inverter on y"),
         ("joint-no-corrector", "dae-only-continued", "stage 3 (joint, PCGrad) against stage 2 for as many steps")]
METRICS = [("content_f1", "content F1"), ("token_f1", "token F1")]
SEED_BOOT_SEED = 20261207


def seeds_and_texts(runs, a, b, metric):
    """Mean over seeds of (a − b) with a bootstrap that resamples the seeds (with replacement) and then the texts."""
    d = [[x - y for x, y in zip(per_text(r, a, metric), per_text(r, b, metric))] for r in runs]
    k, n = len(d), len(d[0])
    rng = random.Random(SEED_BOOT_SEED)
    boots = []
    for _ in range(BOOT):
        ss = [d[rng.randrange(k)] for _ in range(k)]
        idx = [rng.randrange(n) for _ in range(n)]  # the same texts for every seed drawn: the texts are shared
        boots.append(sum(s[i] for s in ss for i in idx) / (k * n))
    boots.sort()
    return [boots[int(0.025 * BOOT)], boots[int(0.975 * BOOT) - 1]]


def run_seed(run):
    """run.seed of a run's config.yaml: its training seed where train.seed is -1."""
    m = re.search(r"^run:\n(?:  .*\n)*?  seed: (\d+)", open(os.path.join(run, "config.yaml")).read(), re.M)
    return int(m.group(1)) if m else None


def read_number(path):
    try:
        return float(open(path).read().strip())
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", default="results/content_seeds")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    runs = [load_run(r) for r in a.runs]
    truths = [x["truth"] for x in runs[0]["recoveries"]]
    for r in runs[1:]:
        if [x["truth"] for x in r["recoveries"]] != truths:
            sys.exit("seeds: %s scored other test texts than %s" % (r["run"], runs[0]["run"]))
    seeds = [r["seed"] if r["seed"] not in (None, -1) else run_seed(r["run"]) for r in runs]
    n = len(truths)
    res0 = runs[0]["results"]
    md = ["# The quickstart's trained rows over training seeds: does the DAE separate?", "",
          "- command: `%s` (after `bash launch/quickstart.sh`)" % a.command,
          "- revision %s; runs %s (results.json revisions %s)" % (
              git_revision(), ", ".join(r["run"] for r in runs),
              ", ".join(r["results"].get("revision", "?")[:12] for r in runs)),
          "- machine %s, %d vCPUs, bf16 ISA: %s; %s UTC" % (cpu_model(), os.cpu_count(), bf16_isa(),
                                                           datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")),
          "- release: %s + N(0, σ²), σ = %s; test split, the first %d texts (the same texts, release answers and "
          "floors for every seed); training seeds (train.seed): %s" % (
              res0.get("embedder"), res0.get("sigma"), n, ", ".join(str(s) for s in seeds)),
          "- wall time and CPU time of each seed's training and eval: " + ", ".join(
              "%s %s" % (os.path.basename(r["run"]), ("%.0f s wall, %.0f CPU-s" % (w, c)) if w and c else "not recorded")
              for r, w, c in ((r, read_number(r["run"] + ".wall_s"), read_number(r["run"] + ".cpu_s")) for r in runs)),
          "", "## Every trained row, by seed (test, n = %d)" % n, "",
          "| row | content F1: mean ± sd (by seed) | token F1: mean ± sd (by seed) |", "|---|---|---|"]
    out = {"revision": git_revision(), "n": n, "seeds": seeds, "rows": {}, "pairs": {}}
    for row in FLOORS + ROWS:
        if not all(row in r["test"]["systems"] for r in runs):
            continue
        cells = []
        for metric, _ in METRICS:
            s = spread([r["test"]["systems"][row][metric] for r in runs])
            out["rows"].setdefault(row, {})[metric] = s
            cells.append("%.3f ± %.3f (%s)" % (s["mean"], s["sd"], ", ".join("%.3f" % v for v in s["values"])))
        md.append("| %s%s | %s | %s |" % (row, " (floor)" if row in FLOORS else "", *cells))
    md += ["", "## The DAE's pairs (paired on the same texts)", "",
           "Per seed: the difference of the two rows' means. Pooled: the mean over seeds of the per-text difference; "
           "[texts]: 95 % bootstrap over the texts with the seeds fixed; [seeds × texts]: over the seeds (drawn with "
           "replacement) and the texts. Separated: the seeds × texts interval excludes 0.", "",
           "| pair | metric | per seed | pooled | [texts] | [seeds × texts] | separated |", "|---|---|---|---|---|---|---|"]
    for x, y, what in PAIRS:
        if not all(x in r["test"]["systems"] and y in r["test"]["systems"] for r in runs):
            continue
        for metric, label in METRICS:
            per_seed = [r["test"]["systems"][x][metric] - r["test"]["systems"][y][metric] for r in runs]
            p = pooled_diff(runs, x, y, metric)
            ci2 = seeds_and_texts(runs, x, y, metric)
            sep = "**%s higher**" % x if ci2[0] > 0 else "**%s higher**" % y if ci2[1] < 0 else "no"
            md.append("| %s − %s (%s) | %s | %s | %+.3f | [%+.3f, %+.3f] | [%+.3f, %+.3f] | %s |" % (
                x, y, what, label, ", ".join("%+.3f" % v for v in per_seed), p["diff"], *p["ci"], *ci2, sep))
            out["pairs"]["%s − %s (%s)" % (x, y, metric)] = {
                "per_seed": per_seed, "pooled": p["diff"], "ci_texts": p["ci"], "ci_seeds_texts": ci2,
                "seed_sd": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0}
    md.append("")
    write_page(a.out, md, out)


if __name__ == "__main__":
    main()
