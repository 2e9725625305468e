#!/usr/bin/env python3
"""The contextual replicate's tables (issue 46) from the runs of studies/contextual_replicate/run.sh, one a training
seed: every row's token F1 and BLEU as the mean over seeds with the seed spread beside it, the floors, the text-shape
columns, the headline differences (daei against noisy-vec2text, dae-corrected and dae-corrected-continued) per seed with
eval's paired intervals and pooled over seeds, the BLEU ratio with a bootstrap interval, and the targets of the issue.

  python3 studies/contextual_replicate/summary.py [--out results/contextual_replicate] RUN_DIR [RUN_DIR ...]

Reads each RUN_DIR's eval/results.json, eval/recoveries.jsonl and config.yaml, RUN_DIR.cpu_s and RUN_DIR.log.
Writes OUT.json, OUT.table.md (the tables that OUT.md quotes) and OUT/samples.md (the first 20 test texts, every row, the first run's recoveries and daei's
of the others). Pooled intervals resample the texts (paired: the same texts for both rows and every seed), not the
training seeds: they hold the seeds fixed, so where the per-seed values spread wider than an interval the tables say
so. Every interval uses the same BOOT resamples of the texts, drawn once from BOOT_SEED (resamples() of
studies/common/summary_lib.py), so a difference or ratio gets the same interval whatever else is computed before it,
and another summary that uses resamples() can quote the same interval for the same quantity. floor-retrieval's index
queries (eval's "index_queries", spent once before any text) are carried through and shown as "X + N once", as eval's own
table does; the top template's 3-gram is each seed's own. Nothing is computed that eval did not score except means
over seeds, differences, ratios and intervals."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import (BOOT, BOOT_SEED, bf16_isa, cpu_model, fmt_spread, git_revision, load_run,  # noqa: E402
                         pooled_diff, pooled_ratio, spread)

HEADLINE = [("daei", "noisy-vec2text"), ("daei", "dae-corrected"), ("daei", "dae-corrected-continued"),
            ("dae-corrected-continued", "dae-corrected"), ("noisy-vec2text", "noisy-inverter"),
            ("daei", "joint-no-corrector")]
NOISY_ROWS = ["noisy-inverter", "noisy-vec2text", "dae-only", "dae-corrected", "dae-only-continued",
              "dae-corrected-continued", "joint-no-corrector", "daei"]


def wider_than_interval(per_seed, ci):
    """Whether the seeds' values spread wider than the pooled interval (which resamples texts, not seeds)."""
    vals = [v for v in per_seed if v is not None]
    return len(vals) > 1 and max(vals) - min(vals) > ci[1] - ci[0]


def fmt_queries(r):
    """queries/text as eval's own table writes it: "X" or, with queries spent once before any text, "X + N once"."""
    q = f"{r['queries_per_text']:.1f}"
    return f"{q} + {r['index_queries']:.0f} once" if r.get("index_queries", 0) > 0 else q


def fmt_shape(r, key):
    """A shape share: the mean over seeds, and each seed's value where they differ."""
    per = r.get(f"{key}_per_seed") or [r[key]]
    out = f"{100 * r[key]:.1f} %"
    if len(set(per)) > 1:
        out += " (" + ", ".join(f"{100 * v:.1f}" for v in per) + ")"
    return out


def fmt_ngrams(r):
    per = r.get("template_ngram_per_seed") or [r.get("template_ngram", "")]
    if len(set(per)) == 1:
        return f"(\"{per[0]}\"{', every seed' if len(per) > 1 else ''})"
    return "(" + " / ".join(f"\"{g}\"" for g in per) + ")"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/contextual_replicate")
    ap.add_argument("--command", default=None)
    ap.add_argument("--title", default="The contextual replicate: the whole attack on the contextual embedder",
                    help="the tables' heading (the GloVe replicate, a switch's runs)")
    ap.add_argument("--config", default="configs/contextual-replicate.yaml", help="the runs' config, for the header")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    try:
        runs = [load_run(r) for r in a.runs]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"contextual_replicate_summary: {e}")
    first = runs[0]
    n = first["test"]["n"]
    systems = list(first["test"]["systems"])
    for r in runs[1:]:
        systems += [s for s in r["test"]["systems"] if s not in systems]
    rows = {}
    for s in systems:
        have = [r for r in runs if s in r["test"]["systems"]]
        S = [r["test"]["systems"][s] for r in have]
        rows[s] = {"seeds": len(have), "reference": S[0].get("reference", False), "floor": S[0].get("floor", False),
                   "token_f1": spread([x["token_f1"] for x in S]), "bleu": spread([x["bleu"] for x in S]),
                   "cos": statistics.mean(x["cos"] for x in S),
                   "token_f1_ci_first": S[0]["token_f1_ci"], "bleu_ci_first": S[0]["bleu_ci"],
                   "queries_per_text": statistics.mean(x["queries_per_text"] for x in S),
                   # queries spent once before any text (floor-retrieval: one a training answer it searches)
                   "index_queries": statistics.mean(x.get("index_queries", 0.0) for x in S)}
        for k in ("distinct", "top_template", "loops", "artefacts"):
            rows[s][k] = statistics.mean(x[k] for x in S)
        rows[s]["top_template_max"] = max(x["top_template"] for x in S)
        rows[s]["distinct_min"] = min(x["distinct"] for x in S)
        rows[s]["template_ngram"] = S[0].get("template_ngram", "")  # the first seed's (kept for older readers)
        rows[s]["template_ngram_per_seed"] = [x.get("template_ngram", "") for x in S]
        rows[s]["top_template_per_seed"] = [x["top_template"] for x in S]
        rows[s]["distinct_per_seed"] = [x["distinct"] for x in S]
        rows[s]["seed_list"] = [r["seed"] for r in have]
    per_seed = []
    for r in runs:
        per_seed.append({"run": r["run"], "seed": r["seed"], "cpu_s": r["cpu_s"], "wall_s": r["wall_s"],
                         "revision": r["results"].get("revision"), "command": r["results"].get("command")})
    headline = {}
    for x, y in HEADLINE:
        headline[f"{x} − {y}"] = {m: pooled_diff(runs, x, y, m) for m in ("token_f1", "bleu")}
        headline[f"{x} − {y}"]["per_seed_token_f1"] = [
            r["test"]["systems"][x]["token_f1"] - r["test"]["systems"][y]["token_f1"] for r in runs
            if x in r["test"]["systems"] and y in r["test"]["systems"]]
        headline[f"{x} − {y}"]["per_seed_bleu"] = [
            r["test"]["systems"][x]["bleu"] - r["test"]["systems"][y]["bleu"] for r in runs
            if x in r["test"]["systems"] and y in r["test"]["systems"]]
    ratio = pooled_ratio(runs, "daei", "noisy-vec2text")
    floors = {f: rows[f] for f in ("floor-constant", "floor-retrieval") if f in rows}
    above = {}
    for s in systems:
        if rows[s]["floor"]:
            continue
        above[s] = {f"{fl}/{m}": pooled_diff([r for r in runs if s in r["test"]["systems"]], s, fl, m)
                    for fl in floors for m in ("token_f1", "bleu")}
    # The issue's targets.
    fc = rows["floor-constant"]["token_f1"]["mean"] if "floor-constant" in rows else None
    cc = rows.get("clean-to-clean")
    trained = [s for s in systems if not rows[s]["floor"]]
    noisy_present = [s for s in NOISY_ROWS if s in rows]
    # The noise's cost: one model fed clean and noisy answers (clean-to-clean − clean-to-noisy, the same weights), and
    # the noisy-trained inverter against the clean one (stage 3's extra steps included, so not an equal budget).
    cost = (cc["token_f1"]["mean"] - rows["clean-to-noisy"]["token_f1"]["mean"]) if cc and "clean-to-noisy" in rows \
        else None
    cost_trained = (cc["token_f1"]["mean"] - rows["noisy-inverter"]["token_f1"]["mean"]) \
        if cc and "noisy-inverter" in rows else None
    best_noisy = max(noisy_present, key=lambda s: rows[s]["token_f1"]["mean"]) if noisy_present else None
    targets = {
        "clean-to-clean F1 ≥ floor-constant + 0.25": (cc["token_f1"]["mean"], fc + 0.25,
                                                      cc["token_f1"]["mean"] >= fc + 0.25) if cc and fc else None,
        "clean-to-clean BLEU ≥ 0.10": (cc["bleu"]["mean"], 0.10, cc["bleu"]["mean"] >= 0.10) if cc else None,
        "every noisy row above floor-retrieval (F1, pooled interval above 0)": [
            (s, above[s].get("floor-retrieval/token_f1", {}) and above[s]["floor-retrieval/token_f1"]["ci"][0] > 0)
            for s in noisy_present],
        "distinct ≥ 90 % in every trained row (worst seed)": [(s, rows[s]["distinct_min"],
                                                              rows[s]["distinct_min"] >= 0.9) for s in trained],
        "top template ≤ 5 % in every trained row (worst seed)": [(s, rows[s]["top_template_max"],
                                                                 rows[s]["top_template_max"] <= 0.05) for s in trained],
        "the noise costs ≥ 0.10 F1 (clean-to-clean − clean-to-noisy: the same model)": (cost, 0.10, cost >= 0.10)
        if cost is not None else None,
        "the noise costs ≥ 0.10 F1 (clean-to-clean − noisy-inverter: a model trained on the noise)":
        (cost_trained, 0.10, cost_trained >= 0.10) if cost_trained is not None else None,
    }
    rev = git_revision()
    command = a.command or ("studies/contextual_replicate/run.sh " + " ".join(str(r["seed"]) for r in runs))
    out = {"command": command, "summary_revision": rev, "machine": f"{cpu_model()}, {os.cpu_count()} CPUs, bf16 ISA "
           f"{bf16_isa()}", "runs": per_seed, "n": n, "rows": rows, "headline": headline,
           "bootstrap": {"resamples": BOOT, "seed": BOOT_SEED, "over": "texts (the seeds are not resampled)"},
           "bleu_ratio_daei_over_noisy_vec2text": ratio, "above_floors": above, "targets": targets,
           "protocol": "threat model, equal by construction: every inverter has stage 2's steps (the noisy inverter, "
                       "stage2-continued and stage 3's inverter also stage 3's), every corrector stage 4's; one config "
                       "for every system, no budget set per system"}
    os.makedirs(a.out, exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    out["title"], out["config"] = a.title, a.config
    write_md(a.out, out, runs, systems)
    write_samples(a.out, runs, systems, a.title)
    print(f"wrote {a.out}.json, {a.out}.table.md, {a.out}/samples.md")


def write_md(prefix, out, runs, systems):
    rows, H = out["rows"], out["headline"]
    cpu = [r["cpu_s"] for r in out["runs"] if r["cpu_s"]]
    wall = [r["wall_s"] for r in out["runs"] if r["wall_s"]]
    md = [f"# {out['title']}, {len(runs)} training seeds", "",
          f"- command: `{out['command']}` ({out['config']}; summary: "
          f"`python3 studies/contextual_replicate/summary.py {' '.join(r['run'] for r in out['runs'])}`)",
          f"- revision: {', '.join(sorted({str(r['revision']) for r in out['runs']}))} (eval); summary at "
          f"{out['summary_revision']}",
          f"- machine: {out['machine']}",
          f"- wall time: {', '.join(f'{w / 60:.1f}' for w in wall)} min a seed (pipeline, first to last log line); "
          f"training and eval CPU time {sum(cpu) / 3600:.2f} CPU-h in all" if wall else "- wall time: not recorded",
          f"- test split, n = {out['n']} texts a seed (the same texts for every seed and row); seeds "
          f"{', '.join(str(r['seed']) for r in out['runs'])} (train.seed)",
          f"- protocol: {out['protocol']}", "",
          "## Every row: mean over seeds ± sd (each seed's value)", "",
          "| system | token F1 | BLEU | cos | queries/text | distinct | top template | loops ≤ 8 |",
          "|---|---|---|---|---|---|---|---|"]
    for s in systems:
        r = rows[s]
        seeds = r.get("seed_list") or []
        only = f"seed {seeds[0]} only" if len(seeds) == 1 and seeds[0] is not None else "one seed only"
        tag = " (floor)" if r["floor"] else f" (reference, {only})" if r["reference"] and r["seeds"] == 1 else \
            " (reference)" if r["reference"] else ""
        md.append(f"| {s}{tag} | {fmt_spread(r['token_f1'])} | {fmt_spread(r['bleu'])} | {r['cos']:.3f} | "
                  f"{fmt_queries(r)} | {fmt_shape(r, 'distinct')} | {fmt_shape(r, 'top_template')} "
                  f"{fmt_ngrams(r)} | {100 * r['loops']:.1f} % |")
    md += ["", "distinct, top template and loops: means over seeds (`src/eval/text_shape.h`), each seed's value in "
           "brackets where seeds differ; the top template is each seed's own most common 3-gram, named per seed in "
           "seed order when the seeds' 3-grams differ; queries/text: \"+ N once\" are queries spent once before any "
           "text (floor-retrieval's index of the training answers). The floors are the same for every seed (they read "
           "the training texts and the release's answers only).", "",
           "## The headline: differences, per seed and pooled", "",
           "Pooled: the mean over seeds of the per-text difference, 95 % paired bootstrap over the texts "
           f"({BOOT} resamples drawn once from seed {BOOT_SEED} and shared by every interval; the same texts for every "
           "seed). The bootstrap resamples texts, not training seeds: † marks an interval that the seeds' own values "
           "spread wider than, where it understates the uncertainty over seeds. Per seed: each seed's difference of "
           "means.", "",
           "| difference | token F1 pooled [95 %] | token F1 per seed | BLEU pooled [95 %] | BLEU per seed |",
           "|---|---|---|---|---|"]
    for k, v in H.items():
        if not v["token_f1"]:
            continue
        f, b = v["token_f1"], v["bleu"]
        df = "†" if wider_than_interval(v["per_seed_token_f1"], f["ci"]) else ""
        db = "†" if wider_than_interval(v["per_seed_bleu"], b["ci"]) else ""
        md.append(f"| {k} | {f['diff']:+.3f} [{f['ci'][0]:+.3f}, {f['ci'][1]:+.3f}]{df} | "
                  f"{', '.join(f'{x:+.3f}' for x in v['per_seed_token_f1'])} | {b['diff']:+.3f} [{b['ci'][0]:+.3f}, "
                  f"{b['ci'][1]:+.3f}]{db} | {', '.join(f'{x:+.3f}' for x in v['per_seed_bleu'])} |")
    r = out["bleu_ratio_daei_over_noisy_vec2text"]
    if r:
        dr = "†" if wider_than_interval(r["per_seed"], r["ci"]) else ""
        md += ["", f"BLEU(daei) / BLEU(noisy-vec2text): **{r['ratio']:.2f}** [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]{dr} "
               f"(bootstrap over texts, seeds pooled; per seed {', '.join(f'{x:.2f}' for x in r['per_seed'] if x)}; "
               "the paper: 2.54)."]
    md += ["", "## Above the floors (pooled over seeds, paired)", "",
           "| system | − floor-constant F1 | − floor-retrieval F1 | − floor-retrieval BLEU |", "|---|---|---|---|"]
    for s, v in out["above_floors"].items():
        def c(key):
            x = v.get(key)
            return f"{x['diff']:+.3f} [{x['ci'][0]:+.3f}, {x['ci'][1]:+.3f}]" if x else "–"
        md.append(f"| {s} | {c('floor-constant/token_f1')} | {c('floor-retrieval/token_f1')} | "
                  f"{c('floor-retrieval/bleu')} |")
    md += ["", "## The issue's targets", ""]
    for k, v in out["targets"].items():
        if v is None:
            md.append(f"- {k}: not measured")
        elif isinstance(v, tuple) or (isinstance(v, list) and len(v) == 3 and not isinstance(v[0], (list, tuple))):
            md.append(f"- {k}: {v[0]:.3f} against {v[1]:.3f}: **{'met' if v[2] else 'not met'}**")
        else:
            bad = [x[0] for x in v if not x[-1]]
            md.append(f"- {k}: **{'met' if not bad else 'not met'}**" + (f" (not by: {', '.join(bad)})" if bad else ""))
    with open(prefix + ".table.md", "w") as f:
        f.write("\n".join(md) + "\n")


def write_samples(prefix, runs, systems, title):
    first = runs[0]
    lines = [f"# {title}: recovered texts", "",
             f"The first 20 test texts; every row of the first seed's run ({first['run']}), then daei of the other "
             "seeds. *(loops)* and *(artefact)* marks: see the run's own eval/samples.md.", ""]
    for i, r in enumerate(first["recoveries"][:20]):
        lines.append(f"### {i + 1}. {r['truth']}")
        lines.append("")
        for s in systems:
            if s in r["systems"]:
                lines.append(f"- `{s}`: {r['systems'][s]['text']}")
        for other in runs[1:]:
            o = other["recoveries"][i]["systems"].get("daei")
            if o:
                lines.append(f"- `daei` (seed {other['seed']}): {o['text']}")
        lines.append("")
    with open(os.path.join(prefix, "samples.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
