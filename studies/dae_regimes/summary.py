#!/usr/bin/env python3
"""Summary of studies/dae_regimes/run.sh: per (regime, σ) the test scores of noisy-inverter, dae-only and
wiener-inverter with their 95 % intervals, the paired verdicts between them, each inverter's training CE (mean of the last 5 logged
intervals) and held-out CE (last and lowest), and the DAE table's MSE reductions.
  python3 studies/dae_regimes/summary.py OUT.json REGIME:SIGMA:RUN_DIR ..."""
import json
import sys

SYSTEMS = {"noisy-inverter": "noisy-inverter", "dae-only": "stage2", "wiener-inverter": "wiener-inverter"}


def curves(path):
    train, held = [], []
    for line in open(path):
        j = json.loads(line)
        if "loss" in j:
            train.append((j["step"], j["loss"]))
        if "eval" in j and "heldout_ce" in j["eval"]:
            held.append((j["step"], j["eval"]["heldout_ce"]))
    return train, held


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    out, rows = sys.argv[1], []
    for spec in sys.argv[2:]:
        regime, sigma, run = spec.split(":", 2)
        r = json.load(open(run + "/eval/results.json"))
        t = r["splits"]["test"]
        row = {"regime": regime, "sigma": float(sigma), "run": run, "n": t["n"], "revision": r.get("revision"),
               "dae": {k: r["dae"]["test"][k] for k in ("mse_noisy", "mse_reduction_dae", "mse_reduction_wiener_noisy_only",
                                                        "mse_reduction_wiener_oracle")},
               "systems": {}, "verdicts": []}
        corpus = json.load(open(run + "/corpus/stats.json"))
        row["train_texts"] = corpus.get("splits", corpus).get("train", corpus.get("train"))
        for name, folder in SYSTEMS.items():
            s = t["systems"][name]
            train, held = curves(f"{run}/{folder}/metrics.jsonl")
            tail = [v for _, v in train[-5:]]
            row["systems"][name] = {"bleu": s["bleu"], "bleu_ci": s["bleu_ci"], "token_f1": s["token_f1"],
                                    "token_f1_ci": s["token_f1_ci"], "cos": s["cos"], "repeat4": s["repeat4"],
                                    "train_ce": sum(tail) / len(tail), "heldout_ce": held[-1][1],
                                    "heldout_ce_min": min(v for _, v in held),
                                    "heldout_ce_min_step": min(held, key=lambda x: x[1])[0],
                                    "heldout_curve": held}
        for v in t["verdicts"]:
            if v["a"] in SYSTEMS and v["b"] in SYSTEMS:
                row["verdicts"].append(v)
        rows.append(row)
    json.dump({"runs": rows}, open(out, "w"), indent=1)
    print("| regime | σ | system | BLEU | token F1 [95 % CI] | train CE | held-out CE (last / min @ step) | gap |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for name, s in row["systems"].items():
            lo, hi = s["token_f1_ci"]
            print(f"| {row['regime']} | {row['sigma']} | {name} | {s['bleu']:.3f} | {s['token_f1']:.3f} [{lo:.3f}, {hi:.3f}] | "
                  f"{s['train_ce']:.3f} | {s['heldout_ce']:.3f} / {s['heldout_ce_min']:.3f} @ {s['heldout_ce_min_step']} | "
                  f"{s['heldout_ce'] - s['train_ce']:+.3f} |")
    print("\n| regime | σ | a − b | token F1 diff [95 % CI] | BLEU diff [95 % CI] |")
    print("|---|---|---|---|---|")
    for row in rows:
        by = {}
        for v in row["verdicts"]:
            by.setdefault((v["a"], v["b"]), {})[v["metric"]] = v
        for (a, b), m in by.items():
            f, bl = m["token_f1"], m["bleu"]
            print(f"| {row['regime']} | {row['sigma']} | {a} − {b} | {f['diff']:+.3f} [{f['ci'][0]:+.3f}, {f['ci'][1]:+.3f}] | "
                  f"{bl['diff']:+.3f} [{bl['ci'][0]:+.3f}, {bl['ci'][1]:+.3f}] |")
    print("\n| regime | σ | MSE(y) | DAE MSE reduction | noisy-only Wiener | oracle Wiener |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        d = row["dae"]
        print(f"| {row['regime']} | {row['sigma']} | {d['mse_noisy']:.4f} | {d['mse_reduction_dae']:.1%} | "
              f"{d['mse_reduction_wiener_noisy_only']:.1%} | {d['mse_reduction_wiener_oracle']:.1%} |")


if __name__ == "__main__":
    try:
        main()
    except (OSError, KeyError, ValueError, IndexError) as e:  # a run not finished, a spec not REGIME:SIGMA:DIR
        sys.exit("dae_regimes_summary: %s: %s" % (type(e).__name__, e))
