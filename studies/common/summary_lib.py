"""What the study summaries share (issue 68): the machine and revision lines of their headers, the reading of a run's
evaluation (results.json, the per-text recoveries, its CPU seconds and wall time), and the paired bootstrap over
texts with which the replicate and switch summaries pool seeds. A summary imports it after putting this folder on
sys.path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
    from summary_lib import cpu_model, load_run  # noqa: E402

Every function computes what the summary it came from computed, with the same random draws in the same order: the
committed tables stay what their summaries wrote."""
import json
import os
import platform
import random
import re
import statistics
import subprocess
from datetime import datetime


# -- the header: machine and revision ------------------------------------------------------------------------------

def cpu_model():
    """/proc/cpuinfo's model name (else what platform knows, else "unknown")."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bf16_isa():
    """The bf16 instructions the CPU has (avx512_bf16, amx_bf16), "none", or "unknown" without /proc/cpuinfo."""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    have = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return ", ".join(have) if have else "none"


def git_revision():
    """The checkout's revision, 12 hex digits ("" outside a git checkout, "unknown" without git)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


# -- a run's evaluation --------------------------------------------------------------------------------------------

def load_run(run):
    """A run directory's test split: eval/results.json, the test rows of eval/recoveries.jsonl, train.seed from its
    config.yaml, and beside the directory RUN.cpu_s (CPU seconds) and RUN.log (wall time, first to last log line)."""
    res = json.load(open(os.path.join(run, "eval", "results.json")))
    rec = [json.loads(x) for x in open(os.path.join(run, "eval", "recoveries.jsonl")) if x.strip()]
    rec = [r for r in rec if r["split"] == "test"]
    cpu = None
    if os.path.exists(run + ".cpu_s"):
        cpu = float(open(run + ".cpu_s").read().strip())
    wall = None
    if os.path.exists(run + ".log"):
        stamps = re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]", open(run + ".log").read(), re.M)
        if stamps:
            f = "%Y-%m-%d %H:%M:%S"
            wall = (datetime.strptime(stamps[-1], f) - datetime.strptime(stamps[0], f)).total_seconds()
    cfg = open(os.path.join(run, "config.yaml")).read()
    seed = re.search(r"^train:\n(?:  .*\n)*?  seed: (-?\d+)", cfg, re.M)
    return {"run": run, "results": res, "test": res["splits"]["test"], "recoveries": rec, "cpu_s": cpu,
            "wall_s": wall, "seed": int(seed.group(1)) if seed else None}


def per_text(run, system, metric):
    """One row's per-text scores of a load_run() run, in the texts' order."""
    return [r["systems"][system][metric] for r in run["recoveries"] if system in r["systems"]]


# -- the paired bootstrap over texts -------------------------------------------------------------------------------

BOOT = 2000
BOOT_SEED = 20261204  # the one bootstrap seed of the shared resamples
_RESAMPLES = {}


def resamples(n):
    """BOOT resamples of n texts (index lists), drawn once from BOOT_SEED and shared by every interval. The draw
    order is that of the first interval of the earlier summary (one random.Random(BOOT_SEED), n indices a resample),
    so the headline's first interval (daei − noisy-vec2text, token F1) is the one that summary wrote."""
    if n not in _RESAMPLES:
        rng = random.Random(BOOT_SEED)
        _RESAMPLES[n] = [[rng.randrange(n) for _ in range(n)] for _ in range(BOOT)]
    return _RESAMPLES[n]


def _draws(n, rng):
    if rng is None:
        return resamples(n)
    return ([rng.randrange(n) for _ in range(n)] for _ in range(BOOT))


def boot_mean(d, rng):
    """The mean of per-text differences d with a 95 % bootstrap interval: BOOT resamples drawn from rng."""
    n = len(d)
    boots = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOT))
    return {"diff": sum(d) / n, "ci": [boots[int(0.025 * BOOT)], boots[int(0.975 * BOOT) - 1]]}


def pooled_diff(runs, a, b, metric, rng=None):
    """Mean over seeds of (a − b), with a paired bootstrap over texts (every seed resampled with the same texts; the
    seeds are not resampled). rng None: the shared resamples(); a random.Random: its own draws (the old behaviour)."""
    pairs = [(per_text(r, a, metric), per_text(r, b, metric)) for r in runs
             if a in r["test"]["systems"] and b in r["test"]["systems"]]
    if not pairs:
        return None
    n = len(pairs[0][0])
    d = [sum(pa[i] - pb[i] for pa, pb in pairs) / len(pairs) for i in range(n)]
    boots = []
    for idx in _draws(n, rng):
        boots.append(sum(d[i] for i in idx) / n)
    boots.sort()
    return {"diff": sum(d) / n, "ci": [boots[int(0.025 * BOOT)], boots[int(0.975 * BOOT) - 1]], "seeds": len(pairs)}


def pooled_ratio(runs, a, b, rng=None):
    """BLEU(a) / BLEU(b), BLEU averaged over texts and seeds, with a bootstrap interval over texts (seeds not
    resampled). rng as in pooled_diff."""
    pairs = [(per_text(r, a, "bleu"), per_text(r, b, "bleu")) for r in runs
             if a in r["test"]["systems"] and b in r["test"]["systems"]]
    if not pairs:
        return None
    n = len(pairs[0][0])
    va = [sum(p[0][i] for p in pairs) / len(pairs) for i in range(n)]
    vb = [sum(p[1][i] for p in pairs) / len(pairs) for i in range(n)]
    if sum(vb) == 0:
        return None
    boots = []
    for idx in _draws(n, rng):
        sb = sum(vb[i] for i in idx)
        if sb > 0:
            boots.append(sum(va[i] for i in idx) / sb)
    boots.sort()
    k = len(boots)
    per_seed = [sum(p[0]) / sum(p[1]) if sum(p[1]) > 0 else None for p in pairs]
    return {"ratio": sum(va) / sum(vb), "ci": [boots[int(0.025 * k)], boots[int(0.975 * k) - 1]],
            "per_seed": per_seed}


# -- values over seeds, and eval's verdicts, as the tables write them ------------------------------------------------

def spread(values):
    return {"mean": statistics.mean(values), "min": min(values), "max": max(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0, "values": values}


def fmt_spread(s):
    if len(s["values"]) == 1:
        return f"{s['mean']:.3f}"
    return f"{s['mean']:.3f} ± {s['sd']:.3f} ({', '.join(f'{v:.3f}' for v in s['values'])})"


def verdict_text(v):
    """One of eval's paired verdicts (results.json "verdicts"): the difference, its interval and which row is higher."""
    lo, hi = v["ci"]
    tag = f"**{v['a']} higher**" if lo > 0 else f"**{v['b']} higher**" if hi < 0 else "not separated"
    return f"{v['diff']:+.4f} [{lo:+.4f}, {hi:+.4f}] {tag}"


def value_ci(row, metric):
    """A row's metric with its interval where results.json has one ("0.123 [0.100, 0.145]"); "—" for no row."""
    if row is None:
        return "—"
    c = row.get(metric + "_ci")
    return "%.3f [%.3f, %.3f]" % (row[metric], *c) if c else "%.3f" % row[metric]


def report_point(report, sigma):
    """The grid point of a release report (daei release-report's JSON) at σ, or None."""
    return next((p for p in report["points"] if abs(p["sigma"] - sigma) < 1e-9), None)


# -- the page -------------------------------------------------------------------------------------------------------

def write_page(out, lines, data):
    """OUT.md from the lines (with OUT.reading.md, a reading written by hand, appended when present) and OUT.json from
    data; the page is printed too."""
    text = "\n".join(lines) + "\n"
    reading = out + ".reading.md"
    if os.path.exists(reading):
        text += "\n" + open(reading, encoding="utf-8").read().rstrip("\n") + "\n"
    open(out + ".md", "w").write(text)
    json.dump(data, open(out + ".json", "w"), indent=1)
    print(text)
