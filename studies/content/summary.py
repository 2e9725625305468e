#!/usr/bin/env python3
"""results/content.{md,json}: what the quickstart's rows and the bag-of-words rows recover of the words of a text.

  python3 studies/content/summary.py RUN RUN-bow RUN-probe [--out results/content] [--command "..."]

RUN is a finished quickstart run; RUN-bow and RUN-probe the bag-of-words and probe runs of studies/content/run.sh,
which share RUN's caches, so every row is scored on the same test texts beside the same floors. Reads each run's
eval/results.json and eval/recoveries.jsonl (and appends OUT.reading.md, a reading written by hand, when present); the paired intervals resample the test texts (1,000 resamples, seed 1).
"""
import argparse, json, os, platform, random, sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import bf16_isa, cpu_model, git_revision  # noqa: E402

SPLIT = "test"
GUIDED = ["guided-noisy", "guided-dae", "guided-clean"]
MAIN = ["clean-to-clean", "noisy-inverter", "noisy-vec2text", "dae-only", "dae-corrected", "joint-no-corrector", "daei"]


def load(run):
    res = json.load(open(os.path.join(run, "eval/results.json")))
    rec = [json.loads(l) for l in open(os.path.join(run, "eval/recoveries.jsonl")) if l.strip()]
    rec = [r for r in rec if r["split"] == SPLIT]
    return res, rec


def sysname(row):
    """The system name in a run's recoveries of a row of this page: probe-X is the probe run's bow-X, bow-X@STEPS a
    --long run's bow-X, guided-copy-X@STEPS a guided_long.sh --copy run's guided-X."""
    row = row.split("@")[0]
    if row.startswith("guided-copy-"):
        return "guided-" + row[len("guided-copy-"):]
    return "bow-" + row[len("probe-"):] if row.startswith("probe-") else row


def aligned(src_a, sys_a, src_b, sys_b, metric):
    """Per-text values of two rows on the texts both scored (zsinvert rows score only the first zsinvert.max_texts)."""
    both = [(x["systems"][sys_a][metric], y["systems"][sys_b][metric]) for x, y in zip(src_a, src_b)
            if sys_a in x["systems"] and sys_b in y["systems"]]
    return [p[0] for p in both], [p[1] for p in both]


def paired(a, b, resamples=1000, seed=1):
    assert len(a) == len(b) and a, (len(a), len(b))
    rng = random.Random(seed)
    n = len(a)
    d = [x - y for x, y in zip(a, b)]
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return sum(d) / n, means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def curve(run, stage, seconds):
    """(step, core-hours to reach it, held-out content F1) at each of the stage's evaluations: one rank, so the
    stage's wall time is its core time, spread evenly over its steps."""
    path = os.path.join(run, stage, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    lines = [json.loads(l) for l in open(path) if l.strip()]
    last = max(j["step"] for j in lines)
    return [(j["step"], seconds * j["step"] / last / 3600 if seconds else float("nan"),
             j["eval"]["heldout_content_f1"]) for j in lines if "eval" in j]


def guided_target(rows):
    """The target row 'guided inverter above bow on the same input in token F1, with clean BLEU >= 0.10'."""
    if not any(g in rows for g in GUIDED):
        return "| guided inverter above bow on the same input (token F1), clean BLEU ≥ 0.10 | not run | **no** |"
    parts, ok = [], True
    for g in GUIDED:
        b = g.replace("guided-", "bow-")
        if g in rows and b in rows:
            d = paired(*aligned(rows[g][1], g, rows[b][1], b, "token_f1"))
            parts.append("%s − %s %+.3f [%+.3f, %+.3f]" % (g, b, *d))
            ok = ok and d[1] > 0
        else:
            ok = False
    bleu = rows["guided-clean"][0]["bleu"] if "guided-clean" in rows else float("nan")
    parts.append("guided-clean BLEU %.3f" % bleu)
    ok = ok and bleu >= 0.10
    return "| guided inverter above bow on the same input (token F1), clean BLEU ≥ 0.10 | %s | %s |" % (
        "; ".join(parts), "yes" if ok else "**no**")


def sigma_target_note(sigma_file="results/content_sigma.json"):
    """Where the noisy content target is met: the bag of words retrained on a σ grid (studies/content/sigma_bow.sh),
    once its page has been written; else nothing."""
    if not os.path.exists(sigma_file):
        return []
    p = json.load(open(sigma_file))
    pts = ", ".join("σ %s: %.3f" % (q["sigma"], q["bow-noisy"]["content_f1"]) for q in p["points"])
    met = "at σ ≤ %s" % max(p["reached_at_sigmas"]) if p["reached_at_sigmas"] else "at no σ of its grid"
    line = ("Where the noisy content target is met (results/content_sigma.md, bow-noisy retrained at each σ of a grid "
            "at this page's bow budget): content F1 %s; ≥ %.2f %s." % (pts, p["target_content_f1"], met))
    for c in p.get("chains", []):  # the quickstart's whole attack (and guided-noisy) at one of those σ
        rows = {k: v for k, v in c["rows"].items() if not k.startswith("floor-")}
        best = max(rows, key=lambda k: rows[k]["token_f1"])
        goal = c["rows"]["floor-constant"]["token_f1"] + 0.20
        line += (" At σ %s the quickstart's chain%s reaches token F1 %.3f at best (%s; the target floor-constant + "
                 "0.20 = %.3f %s)." % (c["sigma"], " (with guided-noisy)" if "guided-noisy" in rows else "",
                                       rows[best]["token_f1"], best, goal,
                                       "met" if rows[best]["token_f1"] >= goal else "not met"))
    return [line, ""]


def headline_seeds_target(pairs, seeds_file="results/content_seeds.json"):
    """The target row 'the headline pairs with 3 training seeds': the gated guided pair's seeds from this page, daei −
    noisy-vec2text's from studies/content/seeds.py's page (results/content_seeds.json) where it has been written."""
    guided = next(("gated guided-dae − guided-noisy: %d seeds" % int(k.split(", mean of ")[1].split()[0])
                   for k in pairs if ", mean of " in k and k.endswith("(content_f1)")), "guided-dae − guided-noisy: one seed")
    n_guided = int(guided.split(": ")[1].split()[0]) if "seeds" in guided else 1
    n_daei = 1
    daei = "daei − noisy-vec2text: one seed"
    if os.path.exists(seeds_file):
        p = json.load(open(seeds_file))["pairs"].get("daei − noisy-vec2text (content_f1)")
        if p:
            n_daei = len(p["per_seed"])
            daei = "daei − noisy-vec2text: %d seeds (results/content_seeds.md: %+.3f content F1, [%+.3f, %+.3f] over seeds × texts)" % (
                n_daei, p["pooled"], *p["ci_seeds_texts"])
    return "| headline pairs with 3 training seeds | %s; %s | %s |" % (guided, daei, "yes" if min(n_guided, n_daei) >= 3 else "**no**")


LONG_KINDS = {"bow": "bow-", "guided": "guided-", "copy": "guided-", "clean": "clean-to-clean"}


def long_kind(run):
    """What a --long run NAME-KIND[-seedN]-STEPS trained: the bow stages, guided-clean (guided_long.sh) or the
    unguided clean inverter (its control); its rows of that kind are the page's KIND@STEPS rows (KIND@STEPS/sN for
    another training seed; the rest are links to other runs)."""
    parts = os.path.basename(run).rsplit("-", 3)
    return parts[-3] if parts[-2].startswith("seed") else parts[-2]


def long_seed(run):
    """N of a run NAME-KIND-seedN-STEPS (guided_long.sh SEED=N), else None."""
    part = os.path.basename(run).rsplit("-", 2)[-2]
    return part[len("seed"):] if part.startswith("seed") else None


def fmt_ci(s, k):
    lo, hi = s[k + "_ci"]
    return "%.3f [%.3f, %.3f]" % (s[k], lo, hi)


def machine():
    return "%s, %d vCPUs, %s, bf16 ISA: %s" % (cpu_model(), os.cpu_count(), platform.platform(terse=True), bf16_isa())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("bow")
    ap.add_argument("probe")
    ap.add_argument("--long", action="append", default=[],
                    help="a run of the same bow stages at a larger bow.steps (frontier points only)")
    ap.add_argument("--out", default="results/content")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    q_res, q_rec = load(a.run)
    b_res, b_rec = load(a.bow)
    p_res, p_rec = load(a.probe)
    truths = [r["truth"] for r in q_rec]
    for other, name in ((b_rec, a.bow), (p_rec, a.probe)):
        if [r["truth"] for r in other] != truths:
            sys.exit("content: %s scored other test texts than %s" % (name, a.run))
    tf = os.path.join(a.bow, "timing.jsonl")
    timing = {j["step"]: j["seconds"] for j in map(json.loads, open(tf))} if os.path.exists(tf) else {}
    S = dict(q_res["splits"][SPLIT]["systems"])
    rows = {k: (S[k], q_rec) for k in S}
    for k, v in b_res["splits"][SPLIT]["systems"].items():
        if k.startswith(("bow-", "guided-")):
            rows[k] = (v, b_rec)
    for k, v in p_res["splits"][SPLIT]["systems"].items():
        if k.startswith("bow-"):
            rows["probe-" + k[len("bow-"):]] = (v, p_rec)
    long_rows = []
    for run in a.long:
        if not os.path.exists(os.path.join(run, "eval/results.json")):
            continue
        l_res, l_rec = load(run)
        if [r["truth"] for r in l_rec] != truths:
            sys.exit("content: %s scored other test texts than %s" % (run, a.run))
        steps = os.path.basename(run).rsplit("-", 1)[-1]
        kind = long_kind(run)
        prefix = LONG_KINDS[kind]  # a guided run links its bow stage: not a row of it
        for k, v in l_res["splits"][SPLIT]["systems"].items():
            if k == prefix or (prefix.endswith("-") and k.startswith(prefix)):
                # guided_long.sh --copy: guided-clean with the copy gate, guided-copy-clean@STEPS
                seed = long_seed(run)
                name = ("guided-copy-" + k[len("guided-"):] if kind == "copy" else k) + "@" + steps + \
                    ("/s" + seed if seed else "")
                rows[name] = (v, l_rec)
                long_rows.append(name)
    order = ["floor-constant", "floor-retrieval"] + [k for k in MAIN if k in rows] + \
            [k for k in ("bow-noisy", "bow-dae", "bow-clean", "probe-noisy", "probe-clean") if k in rows] + long_rows + \
            [k for k in GUIDED if k in rows] + \
            [k for k in sorted(rows) if k not in MAIN and not k.startswith(("bow-", "probe-", "floor-", "guided-"))
             and "@" not in k]
    rev = git_revision()
    n = len(truths)
    md = ["# Content words: what each row recovers of what a text is about", "",
          "- command: `%s` (after `bash launch/quickstart.sh`)" % a.command,
          "- revision %s; run %s (results.json revision %s); machine %s; %s UTC" %
          (rev, a.run, q_res.get("revision", "?"), machine(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")),
          "- release: %s + N(0, σ²), σ = %s; test split, the first %d texts; every row beside both floors" %
          (q_res.get("embedder"), q_res.get("sigma"), n),
          "- content F1: token F1 on the words left once NLTK's 179 English stop words, word_tokenize's clitics and "
          "punctuation are removed, case ignored (`src/model/text/words.h`); content recall: share of the truth's "
          "content words recovered. Intervals: bootstrap over texts (1,000 resamples), not over training seeds.",
          "- wall time of each step (1 rank; the bow steps two at a time, the guided ones three at a time on the 2 "
          "cores, so upper bounds): " + (", ".join("%s %.0f s" % (k, v) for k, v in timing.items()) or "not recorded"),
          "", "## Every row (test, n = %d)" % n, "",
          "| row | token F1 | content F1 | content recall | BLEU | distinct | top template |", "|---|---|---|---|---|---|---|"]
    for k in order:
        s = rows[k][0]
        label = k + (" (reference)" if s.get("reference") or sysname(k) == "bow-clean" else "") + \
            (" (floor)" if s.get("floor") else "")
        md.append("| %s | %s | %s | %.3f | %s | %.1f %% | %.1f %% |" % (label, fmt_ci(s, "token_f1"), fmt_ci(s, "content_f1"),
                  s["content_recall"], fmt_ci(s, "bleu"), 100 * s["distinct"], 100 * s["top_template"]))
    md += ["", "`probe-*`: the bag-of-words model without a hidden layer (bow.depth 0), a linear map from the embedding "
           "to the words: does the embedding carry the words at all? `bow-*`: one hidden layer (bow.hidden). Both "
           "answer with their most probable content words (no function words, no order), the rule chosen on val "
           "texts (`final/bow/k_choice.json`). `bow-X@STEPS`: the same stage at bow.steps STEPS (`--long`), a point "
           "of the frontier below, not a row of the one budget. `guided-*`: a T5 inverter of stage 2's shape and "
           "budget that also reads the matching bow row's top guided.words words (stages/recipes/guided.h); on the "
           "training texts those words come from fold models that did not train on them.", ""]
    # Above the floors, on content F1 and token F1.
    md += ["## Above the floors (paired on the same texts)", "", "| row | content F1 − floor-retrieval | content F1 − "
           "floor-constant | token F1 − floor-retrieval | token F1 − floor-constant |", "|---|---|---|---|---|"]
    out = {"revision": rev, "n": n, "rows": {k: rows[k][0] for k in order}, "pairs": {}}
    for k in order:
        if k.startswith("floor-"):
            continue
        cells = []
        for metric in ("content_f1", "token_f1"):
            for fl in ("floor-retrieval", "floor-constant"):
                va, vb = aligned(rows[k][1], sysname(k), q_rec, fl, metric)
                d = paired(va, vb)
                out["pairs"]["%s − %s (%s)" % (k, fl, metric)] = d
                cells.append("%+.3f [%+.3f, %+.3f]%s" % (d[0], d[1], d[2], " **above**" if d[1] > 0 else ""))
        note = "" if len(va) == n else " (first %d texts)" % len(va)
        md.append("| %s%s | %s |" % (k, note, " | ".join([cells[0], cells[1], cells[2], cells[3]])))
    # Headline pairs.
    md += ["", "## Pairs (paired on the same texts)", "", "| pair | content F1 diff [95 % CI] | token F1 diff [95 % CI] |",
           "|---|---|---|"]
    copy_rows = [k for k in long_rows if k.startswith("guided-copy-")]
    long_rows_plain = [k for k in long_rows if k not in copy_rows]
    # A copy-gate row against guided-clean at its steps (the bow run's at stage 2's budget), its guide, clean-to-clean.
    # The headline pair of the gated rows: guided-copy-dae − guided-copy-noisy at the same steps.
    copy_pairs = [(k, k.replace("guided-copy-dae", "guided-copy-noisy")) for k in copy_rows
                  if k.startswith("guided-copy-dae@") and k.replace("-dae@", "-noisy@") in rows] + \
                 [(k, k.replace("guided-copy-", "guided-") if k.replace("guided-copy-", "guided-") in rows
                   else k.split("@")[0].replace("guided-copy-", "guided-")) for k in copy_rows if "/s" not in k] + \
                 [(k, k.split("@")[0].replace("guided-copy-", "bow-")) for k in copy_rows] + \
                 [(k, "clean-to-clean") for k in copy_rows if k.startswith("guided-copy-clean@") and "/s" not in k]
    long_pairs = copy_pairs + \
                 [(k, k.replace("bow-dae", "bow-noisy")) for k in long_rows_plain if k.startswith("bow-dae@")] + \
                 [(k, k.split("@")[0]) for k in long_rows_plain] + \
                 [(k, k.split("@")[0].replace("guided-", "bow-")) for k in long_rows_plain if k.startswith("guided-")] + \
                 [(k, "clean-to-clean") for k in long_rows_plain if k.startswith("guided-clean@")] + \
                 [(k, "clean-to-clean" + k[len("guided-clean"):]) for k in long_rows_plain if k.startswith("guided-clean@")]
    for x, y in (("bow-dae", "bow-noisy"), ("daei", "noisy-vec2text"), ("bow-noisy", "daei"),
                 ("bow-noisy", "noisy-vec2text"), ("bow-clean", "clean-to-clean"), ("bow-clean", "probe-clean"),
                 ("guided-dae", "guided-noisy"), ("guided-noisy", "bow-noisy"), ("guided-dae", "bow-dae"),
                 ("guided-clean", "bow-clean"), ("guided-noisy", "noisy-inverter"), ("guided-dae", "dae-only"),
                 ("guided-clean", "clean-to-clean"), *long_pairs):
        if x in rows and y in rows:
            cells = []
            for metric in ("content_f1", "token_f1"):
                d = paired(*aligned(rows[x][1], sysname(x), rows[y][1], sysname(y), metric))
                out["pairs"]["%s − %s (%s)" % (x, y, metric)] = d
                cells.append("%+.3f [%+.3f, %+.3f]" % d)
            md.append("| %s − %s | %s | %s |" % (x, y, cells[0], cells[1]))
    # The gated headline pair over its training seeds: per text, the difference averaged over the seeds that ran
    # (the bow run's run.seed and each SEED=N run), then the bootstrap over texts.
    for base in sorted(k for k in copy_rows if k.startswith("guided-copy-dae@") and "/s" not in k):
        other = base.replace("-dae@", "-noisy@")
        seeds = [""] + sorted({k.split("/s")[1] for k in copy_rows if k.startswith(base + "/s")})
        runs = [(base + ("/s" + n if n else ""), other + ("/s" + n if n else "")) for n in seeds]
        runs = [(x, y) for x, y in runs if x in rows and y in rows]
        if len(runs) < 2:
            continue
        cells = []
        for metric in ("content_f1", "token_f1"):
            pairs = [aligned(rows[x][1], sysname(x), rows[y][1], sysname(y), metric) for x, y in runs]
            mean = lambda cols: [sum(c) / len(c) for c in zip(*cols)]
            d = paired(mean([p[0] for p in pairs]), mean([p[1] for p in pairs]))
            out["pairs"]["%s − %s, mean of %d seeds (%s)" % (base, other, len(runs), metric)] = d
            cells.append("%+.3f [%+.3f, %+.3f]" % d)
        md.append("| %s − %s, mean of %d training seeds (run.seed %s; intervals over texts) | %s | %s |" %
                  (base, other, len(runs), ", ".join(n or "of the config" for n in seeds), cells[0], cells[1]))
    # Targets of issue 65.
    noisy = [k for k in order if not k.startswith(("floor-", "probe-")) and k not in ("clean-to-clean", "bow-clean")
             and not rows[k][0].get("reference") and "@" not in k]  # targets at the one budget; @STEPS rows are frontier
    noisy = [k for k in noisy if len(aligned(rows[k][1], k, q_rec, "floor-constant", "content_f1")[0]) == n]
    best_c = max(noisy, key=lambda k: rows[k][0]["content_f1"])
    best_t = max(noisy, key=lambda k: rows[k][0]["token_f1"])
    fc = rows["floor-constant"][0]["token_f1"]
    bc = rows["bow-clean"][0]["content_f1"] if "bow-clean" in rows else float("nan")
    md += ["", "## Targets (issue 65 item 5)", "", "| target | measured | met |", "|---|---|---|",
           "| bow-clean content F1 ≥ 0.40 | %.3f | %s |" % (bc, "yes" if bc >= 0.40 else "**no**"),
           "| best noisy attack content F1 ≥ 0.30 | %.3f (%s) | %s |" % (rows[best_c][0]["content_f1"], best_c,
                                                                     "yes" if rows[best_c][0]["content_f1"] >= 0.30 else "**no**"),
           "| best noisy attack token F1 ≥ floor-constant + 0.20 = %.3f | %.3f (%s) | %s |" %
           (fc + 0.20, rows[best_t][0]["token_f1"], best_t, "yes" if rows[best_t][0]["token_f1"] >= fc + 0.20 else "**no**"),
           guided_target(rows),
           "| distinct ≥ 90 %% (best content row %s) | %.1f %% | %s |" % (best_c, 100 * rows[best_c][0]["distinct"],
                                                                     "yes" if rows[best_c][0]["distinct"] >= 0.9 else "**no**"),
           headline_seeds_target(out["pairs"]), ""] + sigma_target_note()
    # Frontier: held-out content F1 (val texts, top 3 words) against core-hours, every bow run.
    md += ["## Frontier: held-out content F1 against CPU time", "",
           "Each bag-of-words stage's held-out content F1 (its top 3 words on train.heldout_rows val texts, logged at "
           "every bow.eval_every steps) against the core-hours spent to reach it (one rank, the step's wall time spread "
           "evenly over its steps; two steps ran at a time, so a core each). The quickstart's own rows: see the wall "
           "time of each step in results/quickstart.md (2 ranks).", "",
           "| run | stage | bow.steps | step | core-hours | held-out content F1 |", "|---|---|---|---|---|---|"]
    out["frontier"] = []
    for run in [a.bow, a.probe] + [r for r in a.long if long_kind(r) == "bow"]:
        tfile = os.path.join(run, "timing.jsonl")
        secs = dict(timing)  # the probe's steps are timed in the bow run's file, under the probe run's name
        if os.path.exists(tfile):
            secs.update({j["step"]: j["seconds"] for j in map(json.loads, open(tfile))})
        secs = {k.split("/")[-1]: v for k, v in secs.items() if k.split("/")[0] == os.path.basename(run)}
        for stage in ("bow-noisy", "bow-dae", "bow-clean"):
            pts = curve(run, stage, secs.get(stage))
            for step, hours, f1 in pts:
                md.append("| %s | %s | %d | %d | %.2f | %.3f |" % (os.path.basename(run), stage, pts[-1][0] if pts else 0,
                                                                   step, hours, f1))
                out["frontier"].append({"run": os.path.basename(run), "stage": stage, "step": step,
                                        "core_hours": hours, "heldout_content_f1": f1})
    md.append("")
    # Samples: every 30th text.
    show = [k for k in ("floor-retrieval", "clean-to-clean", "noisy-vec2text", "daei", "bow-noisy", "bow-dae", "bow-clean",
                        *GUIDED) if k in rows]
    md += ["## Samples (every 30th test text, i = 0, 30, …: a fixed rule; each recovery with its content F1; "
           "eval/samples.md of each run marks the recovered content words)", ""]
    for i in range(0, n, 30):
        truth = truths[i]
        md.append("**%d.** %s" % (i, truth))
        md.append("")
        for k in show:
            src = rows[k][1]
            text = src[i]["systems"][k]["text"]
            cf = src[i]["systems"][k]["content_f1"]
            md.append("- `%s` (content F1 %.2f): %s" % (k, cf, text))
        md.append("")
    # A reading written by hand (dated, naming what it reads) is kept beside the generated page and appended to it.
    reading = a.out + ".reading.md"
    if os.path.exists(reading):
        md += ["", open(reading, encoding="utf-8").read().rstrip("\n")]
    text = "\n".join(md) + "\n"
    open(a.out + ".md", "w").write(text)
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    print(text)


if __name__ == "__main__":
    main()
