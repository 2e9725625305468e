#!/usr/bin/python3
"""Two bench/sgemm_count.c reports side by side, shape by shape (largest time first).
   /usr/bin/python3 bench/sgemm_compare.py DAEI.txt REFERENCE.txt [ROWS]"""
import sys


def load(path):
    """{(op, M, N, K): (calls, seconds, faults)}; a missing or damaged report ends the program in one line."""
    try:
        lines = open(path).read().splitlines()
        if not lines or not lines[0].startswith("total "):
            raise ValueError("no 'total' line first")
        shapes = {}
        for n, line in enumerate(lines[1:], 2):
            f = line.split()
            if len(f) != 12 or f[4] != "calls" or f[10] != "faults":
                raise ValueError("line %d is not a shape line: %r" % (n, line[:80]))
            shapes[(f[0], int(f[1]), int(f[2]), int(f[3]))] = (int(f[5]), float(f[6]), int(f[11]))
        return shapes
    except (OSError, ValueError) as e:
        sys.exit("sgemm_compare: %s: %s" % (path, e))


def flop(shape, calls):
    return 2.0 * shape[1] * shape[2] * shape[3] * calls


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip())
    a, b = load(sys.argv[1]), load(sys.argv[2])
    rows = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 30 if len(sys.argv) == 3 else None
    if rows is None:
        sys.exit("sgemm_compare: ROWS must be a whole number, not %r" % sys.argv[3])
    for name, d in (("daei", a), ("reference", b)):
        print("%-9s %8.3f s in sgemm_, %6d calls, %7.1f GFLOP, %7d faults" % (
            name, sum(v[1] for v in d.values()), sum(v[0] for v in d.values()),
            sum(flop(k, v[0]) for k, v in d.items()) / 1e9, sum(v[2] for v in d.values())))
    print("%-2s %5s %5s %5s | %-33s | %-33s" % ("op", "M", "N", "K", "daei: calls, s, GFLOP/s, faults",
                                                 "reference: calls, s, GFLOP/s, faults"))
    order = sorted(set(a) | set(b), key=lambda k: -max(a.get(k, (0, 0, 0))[1], b.get(k, (0, 0, 0))[1]))
    for k in order[:rows]:
        cells = []
        for d in (a, b):
            c, s, f = d.get(k, (0, 0.0, 0))
            cells.append("%6d %7.3f %6.1f %7d" % (c, s, flop(k, c) / s / 1e9 if s else 0.0, f))
        print("%-2s %5d %5d %5d | %-33s | %-33s" % (k[0], k[1], k[2], k[3], cells[0], cells[1]))


if __name__ == "__main__":
    main()
