#!/usr/bin/env python3
"""results/content_probes.{md,json}: the linear probe (bow.depth 0) of two embedders side by side.

  python3 studies/content/probes.py RUN [--content results/content.json] [--out results/content_probes]
      [--stand-in-seconds S] [--total-seconds S] [--command "..."]

RUN is studies/content/probe_contextual.sh's run (the contextual stand-in: its probes as bow-clean and bow-noisy, at
the σ of results/release_sigma_contextual.json); MiniLM's probes and bag-of-words rows are read from the committed
results/content.json (the quickstart's release, σ of results/release_sigma.json).
"""
import argparse, json, os, sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from summary_lib import bf16_isa, cpu_model, git_revision, report_point, value_ci, write_page  # noqa: E402


def recall_at(report, sigma):
    """recall@1 of a release report's grid point at σ."""
    p = report_point(report, sigma)
    return p["recall_at_1"] if p else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--content", default="results/content.json")
    ap.add_argument("--minilm-report", default="results/release_sigma.json")
    ap.add_argument("--stand-in-report", default="results/release_sigma_contextual.json")
    ap.add_argument("--bow", default=None, help="the stand-in's bag-of-words run (bow.depth 1)")
    ap.add_argument("--stand-in-seconds", type=float, default=None)
    ap.add_argument("--bow-seconds", type=float, default=None)
    ap.add_argument("--total-seconds", type=float, default=None)
    ap.add_argument("--out", default="results/content_probes")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    content = json.load(open(a.content))["rows"]
    res = json.load(open(os.path.join(a.run, "eval", "results.json")))
    test = res["splits"]["test"]["systems"]
    btest = None
    if a.bow:
        bres = json.load(open(os.path.join(a.bow, "eval", "results.json")))
        btest = bres["splits"]["test"]["systems"]
        if bres["splits"]["test"].get("n") != res["splits"]["test"].get("n"):
            sys.exit("probes: %s scored %s test texts, %s %s" % (a.bow, bres["splits"]["test"].get("n"), a.run,
                                                                 res["splits"]["test"].get("n")))
    mini_rep, ctx_rep = json.load(open(a.minilm_report)), json.load(open(a.stand_in_report))
    embedders = [
        ("all-MiniLM-L6-v2 (the quickstart's release; results/content.md)", mini_rep, {
            "floor-constant": content.get("floor-constant"), "floor-retrieval": content.get("floor-retrieval"),
            "probe-clean": content.get("probe-clean"), "probe-noisy": content.get("probe-noisy"),
            "bow-clean": content.get("bow-clean"), "bow-noisy": content.get("bow-noisy")}),
        ("the contextual stand-in (%s)" % res.get("embedder"), ctx_rep, {
            "floor-constant": test.get("floor-constant"), "floor-retrieval": test.get("floor-retrieval"),
            "probe-clean": test.get("bow-clean"), "probe-noisy": test.get("bow-noisy"),
            **({"bow-clean": btest.get("bow-clean"), "bow-noisy": btest.get("bow-noisy")} if btest else {})}),
    ]
    n = res["splits"]["test"].get("n") or sum(1 for _ in open(os.path.join(a.run, "eval", "recoveries.jsonl")))
    md = ["# The linear probe: does the embedding carry the words? (issue 65 item 2)", "",
          "- command: `%s` (the MiniLM rows: `bash studies/content/run.sh runs/quickstart`, results/content.md)" % a.command,
          "- revision %s; run %s (results.json revision %s); machine %s, %d vCPUs, bf16 ISA: %s; %s UTC" % (
              git_revision(), a.run, res.get("revision", "?")[:12], cpu_model(), os.cpu_count(), bf16_isa(),
              datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")),
          "- wall time: the stand-in's two probes %s, its two bag-of-words rows %s (two at once, one rank each); "
          "the whole script %s (the first run also trained the stand-in and built its caches)" % (
              "%.0f s" % a.stand_in_seconds if a.stand_in_seconds else "not recorded",
              "%.0f s" % a.bow_seconds if a.bow_seconds else "not recorded",
              "%.0f s" % a.total_seconds if a.total_seconds else "not recorded"),
          "- the probe: the bag-of-words model without a hidden layer (bow.depth 0, the quickstart's bow.* budget), a "
          "linear map from the embedding to the 10,000 most frequent content words of the training texts; its answer "
          "is its most probable content words (the rule chosen on val). probe-clean reads clean embeddings of the "
          "training texts (a reference outside the threat model: what the embedding carries); probe-noisy the "
          "release's noisy answers. bow-*: the same with one hidden layer (bow.hidden 1,024). Test split, content F1 "
          "and token F1 with 95 % bootstrap intervals over texts.", "",
          "| embedder | release σ (recall@1 there) | row | content F1 | content recall | token F1 |",
          "|---|---|---|---|---|---|"]
    out = {"revision": git_revision(), "embedders": []}
    for name, rep, rows in embedders:
        sigma = rep["chosen_sigma"]
        entry = {"embedder": name, "sigma": sigma, "recall_at_1": recall_at(rep, sigma), "rows": {}}
        for row, v in rows.items():
            if v is None:
                continue
            entry["rows"][row] = {k: v[k] for k in ("content_f1", "content_recall", "token_f1") if k in v}
            md.append("| %s | %s (%.3f) | %s%s | %s | %.3f | %s |" % (
                name, sigma, entry["recall_at_1"], row, " (floor)" if row.startswith("floor") else
                " (reference)" if row.endswith("clean") else "", value_ci(v, "content_f1"), v["content_recall"],
                value_ci(v, "token_f1")))
        out["embedders"].append(entry)
    md += ["", "The stand-in's test rows: the first %d test texts of its run (eval.max_texts of %s)." % (
        n, "configs/contextual-frontier.yaml"), ""]
    write_page(a.out, md, out)


if __name__ == "__main__":
    main()
