#!/usr/bin/env python3
"""How far two toy-pipeline runs of launch/behaviour_check.sh apart are, number by number (issue 62 item 3).

  python3 studies/torch2_behaviour/compare.py KEEP_DIR [--old-label L] [--new-label L] [--out FILE.md] [--head TEXT]

KEEP_DIR is the BEHAVIOUR_KEEP folder of `launch/behaviour_check.sh` (KEEP_DIR/old/toy, KEEP_DIR/new/toy). Writes a
markdown page: every numeric field of eval/results.json that moved (grouped by field name: how many moved, largest
absolute and relative change), recoveries identical text for text per row (eval/recoveries.jsonl), and every trained
tensor's largest difference (safetensors, read here without torch). Exit 0 always: this measures, the check judges.
"""
import argparse, array, json, math, os, re, struct, sys
from collections import defaultdict


def leaves(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, path + (i,))
    else:
        yield path, x


def field(path):
    """A path's name without its list indices and its split/system keys: what kind of number it is."""
    return ".".join(str(p) for p in path if not isinstance(p, int))


def group(path):
    """results.json groups numbers by field; the split and system names are dropped so a metric reads as one row."""
    names = [p for p in path if isinstance(p, str)]
    if len(names) >= 4 and names[0] == "splits" and names[2] == "systems":
        return "systems.*." + ".".join(names[4:])
    if len(names) >= 3 and names[0] == "splits":
        return "splits.*." + ".".join(names[2:])
    return ".".join(names)


DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8), "I32": ("i", 4)}


def bf16_to_f32(raw):
    halves = array.array("H", raw)
    return array.array("f", struct.pack("<%dI" % len(halves), *[h << 16 for h in halves]))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = data[lo:hi]
        if info["dtype"] == "BF16":
            out[name] = bf16_to_f32(raw)
        elif info["dtype"] in DTYPES:
            out[name] = array.array(DTYPES[info["dtype"]][0], raw)
        else:
            out[name] = None  # a dtype this page does not compare (bytes compared instead)
            out[name + "#raw"] = raw
    return out


def tensor_diff(a, b):
    """(elements that differ, elements, largest |a-b|, largest |a-b| / largest |a|)."""
    if a is None or b is None or len(a) != len(b):
        return None
    moved, worst, scale = 0, 0.0, 0.0
    for x, y in zip(a, b):
        d = abs(x - y)
        if d:
            moved += 1
            worst = max(worst, d)
        scale = max(scale, abs(x))
    return moved, len(a), worst, (worst / scale if scale else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("keep")
    ap.add_argument("--old-label", default="old")
    ap.add_argument("--new-label", default="new")
    ap.add_argument("--out", default="-")
    ap.add_argument("--head", default="", help="lines put first (command, revision, machine)")
    a = ap.parse_args()
    old, new = os.path.join(a.keep, "old/toy"), os.path.join(a.keep, "new/toy")
    for d in (old, new):
        if not os.path.exists(os.path.join(d, "eval/results.json")):
            sys.exit("compare: %s has no eval/results.json (run launch/behaviour_check.sh with BEHAVIOUR_KEEP)" % d)
    md = [a.head, ""] if a.head else []

    # 1. results.json, number by number (timing and revision fields dropped as the check drops them).
    skip = re.compile(r"(revision|command|hostname|host|machine|date|time|_s$)")
    ro = dict(leaves(json.load(open(os.path.join(old, "eval/results.json")))))
    rn = dict(leaves(json.load(open(os.path.join(new, "eval/results.json")))))
    groups = defaultdict(lambda: {"n": 0, "moved": 0, "abs": 0.0, "rel": 0.0, "where": ""})
    text_moved, only = [], []
    for path in sorted(set(ro) | set(rn), key=str):
        if any(isinstance(p, str) and skip.search(p) for p in path):
            continue
        if path not in ro or path not in rn:
            only.append(field(path))
            continue
        x, y = ro[path], rn[path]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            if x != y:
                text_moved.append((field(path), x, y))
            continue
        g = groups[group(path)]
        g["n"] += 1
        if x != y:
            g["moved"] += 1
            d = abs(x - y)
            rel = d / max(abs(x), abs(y)) if (x or y) else 0.0
            if d > g["abs"]:
                g["abs"], g["where"] = d, field(path)
            g["rel"] = max(g["rel"], rel)
    moved = {k: v for k, v in groups.items() if v["moved"]}
    total = sum(v["n"] for v in groups.values())
    md += ["## eval/results.json: %d numbers, %d moved (%s → %s)" % (total, sum(v["moved"] for v in moved.values()),
                                                                  a.old_label, a.new_label), "",
           "Grouped by field (split and row names dropped); largest absolute change and where it is, largest relative "
           "change |a−b| / max(|a|, |b|).", "",
           "| field | numbers | moved | largest abs change | largest rel change | at |", "|---|---|---|---|---|---|"]
    for k in sorted(moved, key=lambda k: -moved[k]["rel"]):
        v = moved[k]
        md.append("| %s | %d | %d | %.3g | %.3g | %s |" % (k, v["n"], v["moved"], v["abs"], v["rel"], v["where"]))
    same = sorted(k for k in groups if not groups[k]["moved"])
    md += ["", "Unchanged fields (%d): %s" % (len(same), ", ".join("`%s`" % k for k in same) or "none"), ""]
    if text_moved:
        md += ["Non-numeric fields that changed: " + "; ".join("`%s` %r → %r" % t for t in text_moved[:20]), ""]
    if only:
        md += ["Fields in one run only: " + ", ".join(sorted(set(only))), ""]

    # 2. recoveries, text for text.
    def recs(d):
        return [json.loads(l) for l in open(os.path.join(d, "eval/recoveries.jsonl")) if l.strip()]
    qo, qn = recs(old), recs(new)
    md += ["## Recoveries (eval/recoveries.jsonl): identical texts per row", "", "| row | identical | texts |", "|---|---|---|"]
    rows = sorted({s for r in qo for s in r["systems"]})
    for s in rows:
        pairs = [(x["systems"][s]["text"], y["systems"][s]["text"]) for x, y in zip(qo, qn)
                 if s in x["systems"] and s in y["systems"]]
        md.append("| %s | %d | %d |" % (s, sum(p == q for p, q in pairs), len(pairs)))
    md.append("")

    # 3. trained weights.
    md += ["## Trained weights (every final/ safetensors file)", "",
           "| file | tensors | elements differing | largest abs difference | relative to the tensor's largest |",
           "|---|---|---|---|---|"]
    files = sorted(os.path.relpath(os.path.join(r, f), old) for r, _, fs in os.walk(old) for f in fs
                   if f.endswith(".safetensors") and ("/final/" in os.path.join(r, f) or r.endswith("-inverter")))
    for f in files:
        if not os.path.exists(os.path.join(new, f)):
            md.append("| %s | missing in %s | | | |" % (f, a.new_label))
            continue
        to, tn = read_safetensors(os.path.join(old, f)), read_safetensors(os.path.join(new, f))
        moved_el = total_el = 0
        worst = rel = 0.0
        for name in to:
            if name.endswith("#raw"):
                if to[name] != tn.get(name):
                    moved_el += 1
                continue
            d = tensor_diff(to[name], tn.get(name))
            if d is None:
                continue
            moved_el += d[0]
            total_el += d[1]
            if d[2] > worst:
                worst, rel = d[2], d[3]
        md.append("| %s | %d | %d of %d (%.1f %%) | %.3g | %.3g |" % (
            f, len([k for k in to if not k.endswith("#raw")]), moved_el, total_el,
            100.0 * moved_el / total_el if total_el else 0.0, worst, rel))
    md.append("")
    text = "\n".join(md) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()
