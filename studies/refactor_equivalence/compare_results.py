# Compares eval/results.json of the quickstart run made after issue 25 (runs/qs-after) with the runs made before it:
# runs/quickstart (c8b4782, every row but zsinvert) and runs/qs-zs (the zsinvert rows). Timing, command and revision
# fields are dropped. Prints the differences, one a line.
import json, sys
sys.path.insert(0, '/work/logs')
DROP_KEYS = ("revision", "command", "command_line", "hostname", "host", "machine", "date")
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in DROP_KEYS and not k.endswith("_s") and "time" not in k}
    return [strip(v) for v in x] if isinstance(x, list) else x
R = '/work/main/runs/'
old = strip(json.load(open(R + 'quickstart/eval/results.json')))
zs = strip(json.load(open(R + 'qs-zs/eval/results.json')))
new = strip(json.load(open(R + 'qs-after/eval/results.json')))
diffs = []
def cmp(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b: diffs.append(path + "/" + k + (" only in old" if k in a else " only in new")); continue
            cmp(a[k], b[k], path + "/" + k)
    elif a != b:
        diffs.append(f"{path}: {a!r} != {b!r}"[:200])
for split in new["splits"]:
    so, sn = old["splits"][split], new["splits"][split]
    for name, row in sn["systems"].items():
        ref = so["systems"].get(name) if not name.startswith("zsinvert") else zs["splits"][split]["systems"].get(name)
        if ref is None: diffs.append(f"{split}/{name}: no row to compare"); continue
        cmp(ref, row, f"{split}/{name}")
    # Verdicts by pair: those of the zsinvert rows against qs-zs's, the others against the old run's.
    key = lambda v: (v["a"], v["b"], v["metric"])
    for v in sn["verdicts"]:
        pool = zs["splits"][split]["verdicts"] if v["a"].startswith("zsinvert") else so["verdicts"]
        ref = [w for w in pool if key(w) == key(v)]
        if not ref: diffs.append(f"{split}/verdict {key(v)}: no verdict to compare")
        else: cmp(ref[0], v, f"{split}/verdict {key(v)}")
    for k in sn:
        if k not in ("systems", "verdicts"): cmp(so.get(k), sn.get(k), f"{split}/{k}")
for k in new:
    if k != "splits": cmp(old.get(k), new.get(k), k)
print(len(diffs), "differences")
for d in diffs[:60]: print(d)
