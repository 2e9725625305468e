#!/usr/bin/env python3
"""results/paper_gap.{md,json} from the four runs of studies/paper_gap/run.sh (issue 36).

    python3 studies/paper_gap/summary.py [--runs runs] [--out results/paper_gap]
    python3 studies/paper_gap/summary.py --pilot SIGMA ...     (studies/paper_gap/sigma_pilot.sh's table)

A condition whose run directory is not on this machine is read from the copy committed with the study
(results/paper_gap/CONDITION/results.json, and its pipeline wall time from results/paper_gap.json).

For each condition ({GloVe, contextual} x {threat model, paper protocol}) it reads runs/gap-*/eval/results.json and
writes: noisy-vec2text, dae-corrected, daei, clean-to-clean (and the round-0 rows) with BLEU and token F1 and their
intervals; the paired verdicts daei - noisy-vec2text and daei - dae-corrected that eval computed; BLEU(daei) /
BLEU(noisy-vec2text); the share of the clean-to-clean - noisy-vec2text gap daei recovers; the DAE's and the
noisy-only Wiener filter's MSE cut with intervals. Then the single switches that the runs isolate (each the
difference of two rows eval measured). Nothing is computed that eval did not write, except ratios and differences
of means. The prose of the attribution is written by hand under the tables (results/paper_gap.md, "Attribution").
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import verdict_text  # noqa: E402

CONDITIONS = [("glove", "threat"), ("glove", "paper"), ("contextual", "threat"), ("contextual", "paper")]
ROWS = ["clean-to-clean", "noisy-inverter", "dae-only", "joint-no-corrector", "noisy-vec2text", "dae-corrected",
        "daei", "daei-clean-hyp"]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
COMMITTED = os.path.join(ROOT, "results", "paper_gap")


def first_json(paths):
    """The first of these JSON files that exists, read; None if none does."""
    for path in paths:
        if os.path.exists(path):
            try:
                return json.load(open(path))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise SystemExit(f"paper_gap_summary.py: {path} is damaged ({e}); restore it from git or re-run its step")
    return None


def stage3_best(runs, emb):
    """The paper run's stage-3 selection record (best.json: step, held-out BLEU), or None where it kept the last."""
    found = glob.glob(os.path.join(runs, f"gap-{emb}-paper", "stage3", "**", "best.json"), recursive=True)
    return first_json(sorted(found) + [os.path.join(COMMITTED, f"{emb}-paper", "stage3_best.json")])


def load(runs, emb, proto):
    return first_json([os.path.join(runs, f"gap-{emb}-{proto}", "eval", "results.json"),
                       os.path.join(COMMITTED, f"{emb}-{proto}", "results.json")])


PILOT_RULE = 0.15  # studies/paper_gap/sigma_pilot.sh: the 0.10 plus 0.05 for what the corrector gives back


def pilot(runs, sigmas, out):
    """The σ pilot: clean inverter vs noisy inverter on the val split at each σ, and the σ the rule picks."""
    rows, md = [], ["# The contextual condition's σ pilot (val split)", "",
                    "`studies/paper_gap/sigma_pilot.sh %s` (then `python3 studies/paper_gap/summary.py --pilot ...`)"
                    % " ".join(sigmas), ""]
    # Points of earlier sessions whose runs are not on this machine are kept from the committed table.
    committed = {p["sigma"]: p for p in (first_json([out + ".json"]) or {}).get("points", [])}
    given = {float(s) for s in sigmas}
    kept = [p for sg, p in sorted(committed.items()) if sg not in given]
    for s in sigmas:
        path = os.path.join(runs, f"sigma-pilot-{s}", "eval", "results.json")
        if not os.path.exists(path):
            if float(s) in committed:
                rows.append(committed[float(s)])
            else:
                md.append(f"- σ {s}: not run")
            continue
        r = json.load(open(path))
        S = r["splits"]["val"]["systems"]
        row = {"sigma": float(s), "n": r["splits"]["val"]["n"], "revision": r["revision"], "eval_wall_s": r.get("wall_s")}
        for name in ("clean-to-clean", "clean-to-noisy", "noisy-inverter"):
            if name in S:
                row[name] = {k: S[name][k] for k in ("token_f1", "token_f1_ci", "bleu", "cos") if k in S[name]}
        if "clean-to-clean" in row and "noisy-inverter" in row:
            row["noise_cost_token_f1"] = row["clean-to-clean"]["token_f1"] - row["noisy-inverter"]["token_f1"]
        d = r.get("dae", {}).get("val") or {}
        if "cos_noisy" in d:
            row["cos_noisy_clean"] = d["cos_noisy"]
        rows.append(row)
    rows = sorted(rows + kept, key=lambda r: r["sigma"])
    reused = [r["sigma"] for r in rows if any(r is c for c in committed.values())]
    if reused:
        md += ["Points σ %s are an earlier session's (their runs are not on this machine; rows as committed)."
               % ", ".join("%g" % x for x in reused), ""]
    chosen = next((r["sigma"] for r in rows if r.get("noise_cost_token_f1", -1) >= PILOT_RULE), None)
    md += ["| σ | n | clean-to-clean F1 | clean-to-noisy F1 | noisy-inverter F1 [95 % CI] | noise costs (clean − noisy inverter) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        ni = r.get("noisy-inverter", {})
        ci = ni.get("token_f1_ci", [float("nan")] * 2)
        md.append(f"| {r['sigma']:g} | {r['n']} | {r.get('clean-to-clean', {}).get('token_f1', float('nan')):.3f} | "
                  f"{r.get('clean-to-noisy', {}).get('token_f1', float('nan')):.3f} | "
                  f"{ni.get('token_f1', float('nan')):.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | "
                  f"{r.get('noise_cost_token_f1', float('nan')):+.3f} |")
    md += ["", f"Rule (fixed before the pilot ran): the smallest σ whose cost is at least {PILOT_RULE:.2f} F1. "
           + (f"Chosen: **σ = {chosen:g}**." if chosen is not None else
              "No σ run (%s) meets it." % ", ".join("%g" % r["sigma"] for r in rows))]
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    json.dump({"rule_min_cost_token_f1": PILOT_RULE, "chosen_sigma": chosen, "points": rows},
              open(out + ".json", "w"), indent=1)
    open(out + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


def verdict(t, a, b, metric):
    for v in t["verdicts"]:
        if v["a"] == a and v["b"] == b and v["metric"] == metric:
            return v
    return None


def fmt_v(v):
    return "n/a" if v is None else verdict_text(v)


def isolated_switches(emb, T, P, best):
    """The switches the runs isolate for one embedder, from the test rows of its threat (T) and paper (P) runs."""
    iso = []

    def d(x, y, m):
        return x[m] - y[m]

    for m in ("token_f1", "bleu"):
        if best is not None and "joint-no-corrector" in P and "joint-no-corrector" in T:
            iso.append((emb, m, "stage 3 kept at its best held-out BLEU (step %d) instead of its last step "
                                "(joint-no-corrector: paper − threat)" % best["step"],
                        d(P["joint-no-corrector"], T["joint-no-corrector"], m)))
        if "daei-clean-hyp" in T and "daei" in T:
            iso.append((emb, m, "clean hypotheses at evaluation alone (threat run: daei-clean-hyp − daei)",
                        d(T["daei-clean-hyp"], T["daei"], m)))
        if not P:
            continue
        if "noisy-inverter" in P and "noisy-inverter" in T:
            iso.append((emb, m, "the baseline's budget alone on its inverter (noisy-inverter: paper − threat)",
                        d(P["noisy-inverter"], T["noisy-inverter"], m)))
        if "noisy-vec2text" in P and "noisy-vec2text" in T:
            iso.append((emb, m, "budget + fresh corrector + 10 rounds beam 3 on noisy-vec2text (paper − threat)",
                        d(P["noisy-vec2text"], T["noisy-vec2text"], m)))
        if "dae-corrected" in P and "dae-corrected" in T:
            iso.append((emb, m, "fresh corrector + 10 rounds beam 3 on dae-corrected (paper − threat; same "
                                "inverter and hypotheses)", d(P["dae-corrected"], T["dae-corrected"], m)))
        if "daei" in P and "daei" in T:
            iso.append((emb, m, "fresh corrector + clean hypotheses + 10 rounds beam 3 on daei (paper − threat)",
                        d(P["daei"], T["daei"], m)))
        rows = ("daei", "joint-no-corrector", "dae-corrected", "dae-only")
        if all(k in P for k in rows) and all(k in T for k in rows):
            # Each corrected row against its own round 0, so that stage 3's selection (in joint-no-corrector) and the
            # corrector switches (in dae-corrected − dae-only) both drop out (issue 46's review).
            iso.append((emb, m, "clean hypotheses in training and evaluation, net of the corrector switches and of "
                                "stage 3's selection (((daei − joint-no-corrector) − (dae-corrected − dae-only)) "
                                "paper − threat)",
                        (d(P["daei"], P["joint-no-corrector"], m) - d(P["dae-corrected"], P["dae-only"], m))
                        - (d(T["daei"], T["joint-no-corrector"], m) - d(T["dae-corrected"], T["dae-only"], m))))
    return iso


def switches_md(iso):
    md = ["\n### Switches isolated by the runs (differences of means, test split)\n",
          "| embedder | metric | switch | difference |\n|---|---|---|---|"]
    return md + [f"| {e} | {m} | {s} | {v:+.4f} |" for e, m, s, v in iso]


def rederive(path):
    """Recompute the isolated switches of a committed summary from its own rows (no run directories needed)."""
    out = json.load(open(path + ".json"))
    C = out["conditions"]
    iso = []
    for emb in ("glove", "contextual"):
        if f"{emb}-threat" not in C:
            continue
        P = C.get(f"{emb}-paper", {})
        iso += isolated_switches(emb, C[f"{emb}-threat"]["rows"], P.get("rows", {}), P.get("stage3_selected"))
    out["isolated_switches"] = [{"embedder": e, "metric": m, "switch": s, "diff": v} for e, m, s, v in iso]
    with open(path + ".json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("\n".join(switches_md(iso)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs")
    ap.add_argument("--out", default="results/paper_gap")
    ap.add_argument("--pilot", nargs="+", metavar="SIGMA", help="the σ pilot's table instead of the study's")
    ap.add_argument("--rederive", action="store_true",
                    help="recompute the isolated switches of the committed results/paper_gap.json from its rows")
    a = ap.parse_args()
    if a.rederive:
        return rederive(COMMITTED)
    if a.pilot:
        for x in a.pilot:
            try:
                ok = float(x) > 0
            except ValueError:
                ok = False
            if not ok:
                ap.error(f"--pilot takes positive noise levels, got '{x}'")
        return pilot(a.runs, a.pilot, os.path.join(a.out, "contextual_sigma_pilot"))
    walls = {}
    wall_log = os.path.join(a.runs, "paper_gap_walls.log")
    if os.path.exists(wall_log):
        for line in open(wall_log):
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "[paper-gap]":
                walls[os.path.basename(parts[1].rstrip(":")).replace(".yaml", "")] = int(parts[2])
    committed_json = COMMITTED + ".json"
    if os.path.exists(committed_json):  # the wall times of conditions not re-run on this machine
        for key, c in json.load(open(committed_json)).get("conditions", {}).items():
            if c.get("pipeline_wall_s") is not None:
                walls.setdefault(key, c["pipeline_wall_s"])
    out = {"conditions": {}}
    md = []
    for emb, proto in CONDITIONS:
        r = load(a.runs, emb, proto)
        key = f"{emb}-{proto}"
        if r is None:
            md.append(f"\n### {key}: not run\n")
            continue
        t = r["splits"]["test"]
        S = t["systems"]
        c = {"embedder": r["embedder"], "sigma": r["sigma"], "revision": r["revision"], "command": r["command"],
             "eval_wall_s": r.get("wall_s"), "pipeline_wall_s": walls.get(key), "n": t["n"], "rows": {},
             "verdicts": {}}
        md.append(f"\n### {key}: {r['embedder']}, σ {r['sigma']}, n = {t['n']} test texts\n")
        md.append(f"`{r['command']}` · revision {r['revision']} · pipeline wall "
                  f"{walls.get(key, 'n/a')} s · eval wall {r.get('wall_s', 0):.0f} s\n")
        md.append("| system | BLEU [95 % CI] | token F1 [95 % CI] | cos | loops |\n|---|---|---|---|---|")
        for name in ROWS:
            if name not in S:
                continue
            s = S[name]
            c["rows"][name] = {k: s[k] for k in ("bleu", "bleu_ci", "token_f1", "token_f1_ci", "cos", "loops",
                                                 "reference") if k in s}
            mark = " (outside the threat model)" if s.get("reference") else ""
            md.append(f"| {name}{mark} | {s['bleu']:.3f} [{s['bleu_ci'][0]:.3f}, {s['bleu_ci'][1]:.3f}] | "
                      f"{s['token_f1']:.3f} [{s['token_f1_ci'][0]:.3f}, {s['token_f1_ci'][1]:.3f}] | "
                      f"{s['cos']:.3f} | {100 * s.get('loops', 0):.0f} % |")
        md.append("")
        for a_, b_ in [("daei", "noisy-vec2text"), ("daei", "dae-corrected"), ("joint-no-corrector", "noisy-inverter"),
                       ("dae-only-continued", "noisy-inverter"), ("dae-only", "noisy-inverter")]:
            for m in ("bleu", "token_f1"):
                v = verdict(t, a_, b_, m)
                if v is not None:
                    c["verdicts"][f"{a_} - {b_} ({m})"] = {"diff": v["diff"], "ci": v["ci"]}
                    md.append(f"- {a_} − {b_}, {m}: {fmt_v(v)}")
        if "daei" in S and "noisy-vec2text" in S:
            ratio = S["daei"]["bleu"] / S["noisy-vec2text"]["bleu"] if S["noisy-vec2text"]["bleu"] > 0 else None
            c["bleu_ratio_daei_over_noisy_vec2text"] = ratio
            md.append(f"- BLEU(daei)/BLEU(noisy-vec2text): **{ratio:.2f}** (paper: 2.54)" if ratio else
                      "- BLEU ratio: noisy-vec2text BLEU is 0")
            if "clean-to-clean" in S:
                for m in ("bleu", "token_f1"):
                    gap = S["clean-to-clean"][m] - S["noisy-vec2text"][m]
                    share = (S["daei"][m] - S["noisy-vec2text"][m]) / gap if gap > 0 else None
                    c[f"noise_cost_{m}"] = gap
                    c[f"gap_share_daei_{m}"] = share
                    md.append(f"- {m}: the noise costs {gap:+.3f} (clean-to-clean − noisy-vec2text); daei recovers "
                              + (f"**{100 * share:+.0f} %** of it (paper: +67 %)" if share is not None else "n/a"))
        d = r.get("dae", {}).get("test")
        if d:
            c["dae"] = {k: d[k] for k in d if k.startswith(("mse_reduction", "cos_"))}
            ci = d.get("mse_reduction_dae_ci")
            wci = d.get("mse_reduction_wiener_noisy_only_ci")
            dci = d.get("mse_reduction_dae_minus_wiener_ci")
            md.append(f"- MSE to the clean embedding cut by the stage-1 DAE: {100 * d['mse_reduction_dae']:.1f} %"
                      + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")
                      + f"; by the noisy-only Wiener filter: {100 * d['mse_reduction_wiener_noisy_only']:.1f} %"
                      + (f" [{100 * wci[0]:.1f}, {100 * wci[1]:.1f}]" if wci else "")
                      + (f"; DAE − Wiener {100 * (d['mse_reduction_dae'] - d['mse_reduction_wiener_noisy_only']):+.1f}"
                         f" points [{100 * dci[0]:+.1f}, {100 * dci[1]:+.1f}]" if dci else "")
                      + f" (2,000 test rows; noisy/clean cos {d['cos_noisy']:.3f})")
        out["conditions"][key] = c
    # The switches the runs isolate, each a difference of measured means (test split, token F1 and BLEU).
    iso = []
    for emb in ("glove", "contextual"):
        th, pa = load(a.runs, emb, "threat"), load(a.runs, emb, "paper")
        if th is None:
            continue
        best = stage3_best(a.runs, emb) if pa else None
        if best is not None:
            out["conditions"][f"{emb}-paper"]["stage3_selected"] = best
        iso += isolated_switches(emb, th["splits"]["test"]["systems"], pa["splits"]["test"]["systems"] if pa else {},
                                 best)
    out["isolated_switches"] = [{"embedder": e, "metric": m, "switch": s, "diff": v} for e, m, s, v in iso]
    if iso:
        md += switches_md(iso)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    with open(a.out + ".tables.md", "w") as f:  # pasted under "The four conditions" in paper_gap.md
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
