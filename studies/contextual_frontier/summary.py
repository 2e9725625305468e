#!/usr/bin/env python3
"""The contextual frontier's table (issue 46): every setting that studies/contextual_frontier/run.sh ran
(runs/ctxf-*.row), clean-to-clean token F1 and BLEU against the CPU-hours of its training, beside the floors of the
same evaluation.

  python3 studies/contextual_frontier/summary.py [--runs runs] [--out results/contextual_frontier] [--command TEXT]

Writes OUT.json and OUT.table.md (the table that OUT.md quotes). CPU-hours = the training's measured CPU time (user + system, every rank); rows without
that measurement show wall time x ranks and say so."""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import bf16_isa, cpu_model, git_revision  # noqa: E402


def ci(v):
    return f"{v[0]:.3f}, {v[1]:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs")
    ap.add_argument("--out", default="results/contextual_frontier")
    ap.add_argument("--command", default="studies/contextual_frontier/run.sh (see the rows' sets)")
    a = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(a.runs, "ctxf-*.row")), key=os.path.getmtime):
        try:
            row = json.loads(open(path).read())
            res = json.load(open(row["results"]))
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"contextual_frontier_summary: {path}: {e}")
        t = res["splits"]["test"]
        S = t["systems"]
        steps = None
        try:
            last = [json.loads(x) for x in open(row["metrics"]) if '"step"' in x]
            steps = max(x["step"] for x in last) if last else None
        except (OSError, ValueError):
            pass
        # CPU-hours: the training's measured CPU seconds (every rank's user + system time); rows written before
        # that was measured fall back to wall time x ranks, which overstates the cost on a shared machine.
        cpu_s = row.get("train_cpu_s")
        out = {"name": row["name"], "sets": row["sets"], "train_wall_s": row["train_wall_s"], "ranks": row["ranks"],
               "cpu_hours": (cpu_s if cpu_s is not None else row["train_wall_s"] * row["ranks"]) / 3600.0,
               "cpu_measured": cpu_s is not None, "steps": steps, "n": t["n"],
               "sigma": res.get("sigma"), "revision": res.get("revision"), "embedder": res.get("embedder"),
               "rows": {}, "floor_verdicts": t.get("floor_verdicts", [])}
        for k in ("clean-to-clean", "clean-to-noisy", "floor-constant", "floor-retrieval"):
            if k in S:
                out["rows"][k] = {m: S[k].get(m) for m in ("token_f1", "token_f1_ci", "bleu", "bleu_ci", "cos",
                                                             "distinct", "top_template", "template_ngram", "loops",
                                                             "artefacts")}
        rows.append(out)
    if not rows:
        raise SystemExit("contextual_frontier_summary: no runs/ctxf-*.row "
                         "(run studies/contextual_frontier/run.sh first)")
    rev = git_revision()
    head = {"command": a.command, "git_revision": rev, "machine": f"{cpu_model()}, {os.cpu_count()} cores, bf16 ISA: "
            f"{bf16_isa()}", "total_train_wall_s": sum(r["train_wall_s"] for r in rows)}
    json.dump({"header": head, "settings": rows}, open(a.out + ".json", "w"), indent=1)
    md = [f"| setting | sets | steps | CPU-h | clean-to-clean F1 [95 %] | BLEU [95 %] | distinct | top template | "
          f"clean-to-noisy F1 | floor-constant F1 | floor-retrieval F1 / BLEU | above both floors |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        R = r["rows"]
        c = R.get("clean-to-clean", {})
        n = R.get("clean-to-noisy", {})
        fc = R.get("floor-constant", {})
        fr = R.get("floor-retrieval", {})
        above = next((v["above_both"] for v in r["floor_verdicts"] if v["system"] == "clean-to-clean"), None)
        md.append(f"| {r['name']} | `{r['sets'] or '-'}` | {r['steps']} | {r['cpu_hours']:.3f}"
                  f"{'' if r['cpu_measured'] else ' (wall × ranks)'} | "
                  f"{c['token_f1']:.3f} [{ci(c['token_f1_ci'])}] | {c['bleu']:.3f} [{ci(c['bleu_ci'])}] | "
                  f"{100 * c['distinct']:.0f} % | {100 * c['top_template']:.0f} % \"{c['template_ngram']}\" | "
                  f"{n.get('token_f1', float('nan')):.3f} | {fc.get('token_f1', float('nan')):.3f} | "
                  f"{fr.get('token_f1', float('nan')):.3f} / {fr.get('bleu', float('nan')):.3f} | "
                  f"{'yes' if above else 'no'} |")
    text = (f"`{head['command']}` · revision {rev} · {head['machine']} · training wall "
            f"{head['total_train_wall_s'] / 60:.1f} min in all\n\n" + "\n".join(md) + "\n")
    open(a.out + ".table.md", "w").write(text)  # pasted into OUT.md, whose prose is written by hand
    print(text)


if __name__ == "__main__":
    main()
