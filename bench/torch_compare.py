#!/usr/bin/python3
"""Speed of two daei builds side by side (issue 62 item 4: libtorch 1.13 against 2.x). Every entry of
bench/runner.py whose daei side is a command of a build's bench binaries runs that same command (runner.DaeiSide:
its sizes, --quick its small ones) with build A's binaries and with build B's, alternately A, B, A, B, ... for N
rounds; medians per side and the ratio, written so that > 1 always means B slower: time(B)/time(A) for times,
rate(A)/rate(B) for rates. [min, max] are the per-round ratios (round i's B against round i's A). Verdict: ok at
<= 1.05, else "slower"; peak RSS rows (MB) are reported, not judged. The Python references are not run.

  bench/torch_compare.sh [--a DIR] [--b DIR] [--rounds N] [--quick] [--only ENTRY,...] [--out FILE.md]

--a: build A (default build-torch1.13, Debian's libtorch 1.13); --b: build B (default build, the torch wheel's
2.x); relative to the repository. --rounds: default 3 (runner.py's), 1 with --quick. --only: entry names (the
table's first column), spec names or runner.py's groups (stage2_levers, eval_loops, allreduce, ...). --out: default
bench/torch_compare.md (--quick: bench/torch_compare-quick.md), with the per-round figures in the .json beside it.
A build that lacks a bench binary, or an entry that fails on one side, is listed as "not run: <reason>". bf16
entries run where /proc/cpuinfo has avx512_bf16 or amx_bf16. A missing --a or --b folder: one line, exit 2."""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner as R  # noqa: E402
from runner import ROOT, med  # noqa: E402

T = lambda j: med(j["times"])
RSS = lambda j: j["maxrss_kb"] / 1024
LEVERS = ("none", "fast_dropout", "fused_residual", "fused_attention", "fused_norm", "fused_ce", "all", "dropout0")


class Spec:
    """One daei-side command of runner.py and the figures read off its JSON record: picks = [(entry, fn, unit)]; a
    unit of the form X/s (not s/X) is a rate, MB a memory figure, anything else a time."""

    def __init__(self, name, group, cmd, picks, unit="s/step", env=None, bf16=False, pair=False, files=()):
        self.name, self.group, self.cmd, self.env, self.bf16, self.pair, self.files = \
            name, group, cmd, env, bf16, pair, files
        self.picks = [(name, T, unit)] if picks is None else picks


def specs(D):
    """The entries, in runner.py's order; D (a runner.DaeiSide) gives the sizes some picks need."""
    dflt = dict(DAEI_MALLOC="default")
    S = [Spec("stage1_sure_step", "stage1_sure_step", lambda d, f: d.sure(),
              [("stage1_sure_step", T, "s/step"), ("peak_rss_stage1_sure_step", RSS, "MB")]),
         Spec("stage1_sure_step_glibc", "stage1_sure_step", lambda d, f: d.sure(), None, env=dflt),
         Spec("sure_variant_batched", "sure_variants", lambda d, f: d.sure("batched"), None),
         Spec("sure_variant_fd", "sure_variants", lambda d, f: d.sure("fd"), None),
         Spec("stage2_matmul", "stage2_step", lambda d, f: d.matmul(),
              [("stage2_matmul", lambda j: j["flops"] / med(j["times"]) / 1e9, "GFLOP/s")]),
         Spec("stage2_step", "stage2_step", lambda d, f: d.t5("t5-step"),
              [("stage2_step", T, "s/step"), ("peak_rss_stage2_step", RSS, "MB")]),
         Spec("stage2_step_glibc", "stage2_step", lambda d, f: d.t5("t5-step"), None, env=dflt),
         Spec("stage2_levers", "stage2_levers", lambda d, f: d.t5("t5-levers", steps=d.st2 + 1),
              [("stage2_lever_" + k, (lambda k: lambda j: med(j["configs"][k]))(k), "s/step") for k in LEVERS]),
         Spec("stage2_generate", "stage2_generate", lambda d, f: d.t5("t5-generate"), None, unit="s/batch"),
         Spec("stage2_step_bf16", "stage2_step_bf16", lambda d, f: d.t5("t5-step", "bf16"), None, bf16=True),
         Spec("stage2_generate_bf16", "stage2_generate_bf16", lambda d, f: d.t5("t5-generate", "bf16"), None,
              unit="s/batch", bf16=True),
         Spec("stage2_epoch", "stage2_epoch", lambda d, f: d.t5_epoch(f.lengths), None, unit="s/epoch",
              files=("lengths",))]
    for which in ("dae", "t5"):
        S.append(Spec("allreduce_" + which, "allreduce", (lambda w: lambda d, f: d.allreduce(w)[0])(which),
                      [("allreduce_" + which, T, "s/call"),
                       ("allreduce_%s_fresh" % which, lambda j: med(j["fresh_times"]), "s/call"),
                       ("allreduce_%s_raw_mpi" % which, lambda j: med(j["raw_times"]), "s/call")]))
    for np_ in (1, 2):
        S.append(Spec("stage3_step_np%d" % np_, "stage3_step", (lambda n: lambda d, f: d.stage3(n))(np_), None))
    for stage in (1, 2):
        name = "dp_stage%d_2ranks" % stage
        batch = D.dp_cases[name][2]["batch"]
        S.append(Spec(name, "dp_stage%d" % stage, (lambda n: lambda d, f: d.dp(n, 2))(name),
                      [(name, (lambda b: lambda j: 2 * b / med(j["times"]))(batch), "rows/s")]))
        S.append(Spec("dp_stage%d_1rank_x2" % stage, "dp_stage%d" % stage, (lambda n: lambda d, f: d.dp(n, 1))(name),
                      [("dp_stage%d_1rank_x2" % stage, (lambda b: lambda js: sum(b / med(j["times"]) for j in js))(
                          batch), "rows/s")], pair=True))
    S += [Spec("cache_build", "cache_build", lambda d, f: d.cache(f.corpus, d.cache_rows, f.glove),
               [("cache_build", lambda j: j["rows"] / j["cache_s"], "rows/s"),
                ("cache_embed_only", lambda j: j["rows"] / j["embed_s"], "rows/s"),
                ("peak_rss_cache_build", RSS, "MB")], files=("corpus", "glove")),
          Spec("eval_correct_beam3_10rounds", "eval_loops", lambda d, f: d.eval_loop("correct"), None, unit="s/run"),
          Spec("eval_zsinvert", "eval_loops", lambda d, f: d.eval_loop("zsinvert"), None, unit="s/run"),
          Spec("eval_correct_chunk256", "eval_loops", lambda d, f: d.eval_loop("chunk", "256"), None, unit="s/run"),
          Spec("eval_correct_chunk1", "eval_loops", lambda d, f: d.eval_loop("chunk", "1"), None, unit="s/run"),
          Spec("adamw_fused", "adamw_fused", lambda d, f: d.adamw(),
               [("adamw_fused", T, "s/step"), ("adamw_libtorch", lambda j: med(j["ref_times"]), "s/step")]),
          Spec("eval_np2", "eval_np2", lambda d, f: d.eval_loop("np2"), None, unit="s/run"),
          Spec("eval_np1", "eval_np2", lambda d, f: d.eval_loop("np1"), None, unit="s/run")]
    return S


class Files:
    """The inputs runner.py writes before its entries (texts, their token lengths, a GloVe folder), made on first use."""

    def __init__(self, D):
        self.D, self.tmp = D, tempfile.mkdtemp(prefix="daei-torch-compare-")

    def make(self, what):
        p = lambda n: os.path.join(self.tmp, n)
        if what == "lengths" and not hasattr(self, what):
            R.make_texts(self.D.n_texts, p("texts.jsonl"), p("lengths.txt"))
            self.lengths = p("lengths.txt")
        if what in ("corpus", "glove") and not hasattr(self, "corpus"):
            R.make_texts(self.D.cache_rows * 4, p("cache_corpus.jsonl"), p("cache_lengths.txt"))
            self.corpus = p("cache_corpus.jsonl")
            self.glove = R.glove_dir_for(self.corpus, self.tmp)


def kind(unit):
    return "memory" if unit == "MB" else "rate" if unit.endswith("/s") and not unit.startswith("s/") else "time"


def shapes(cmd, env):
    """The command's flags as k=v (paths as their file names), after its binary; 2 ranks under mpirun."""
    i = next(i for i, x in enumerate(cmd) if os.path.basename(x).startswith("bench_"))
    out, rest = [], cmd[i + 1:]
    while rest:
        x = rest.pop(0)
        if x.startswith("--") and rest:
            v = rest.pop(0)
            if x not in ("--out", "--json"):
                out.append("%s=%s" % (x[2:], os.path.basename(v) if os.path.isabs(v) else v))
        else:
            out.append(os.path.basename(x) if os.path.isabs(x) else x)
    pre = ["2 ranks:"] if cmd[0] == "mpirun" else []
    return " ".join(pre + out + ["%s=%s" % kv for kv in sorted((env or {}).items())])


def binary(cmd):
    return next(x for x in cmd if os.path.basename(x).startswith("bench_"))


def cpu_bf16():
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return {f: f in flags for f in ("avx512_bf16", "amx_bf16")}


def version(d):
    """The first two lines of DIR/daei --version (daei's revision, libtorch's version) and libtorch's version."""
    exe = os.path.join(d, "daei")
    if not os.access(exe, os.X_OK):
        return ["daei not built in %s" % d], None
    try:
        p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=600, env=R.ENV1)
        lines = [l for l in p.stdout.splitlines() if l.strip()][:2] or ["daei --version: rc %d" % p.returncode]
    except (OSError, subprocess.SubprocessError) as ex:
        return ["daei --version failed: %s" % ex], None
    m = re.search(r"libtorch ([0-9][^ ,]*)", " ".join(lines))
    return lines, m.group(1) if m else None


def one_line(ex):
    s = str(ex).strip()
    lines = [l.strip() for l in s.splitlines() if l.strip()]
    head = lines[0][:160] if lines else type(ex).__name__
    tail = lines[-1][:200] if len(lines) > 1 else ""
    return (head + (" … " + tail if tail else "")).replace("|", "/")


def fmt(x):
    return "—" if x is None else "%.4g" % x


def markdown(meta, rows):
    la, lb = meta["label_a"], meta["label_b"]
    L = ["# daei speed, two builds side by side%s" % (" (quick mode: small sizes, smoke test only)" if meta["quick"]
                                                      else ""), "",
         "- command: `%s`" % meta["command"],
         "- git revision: %s%s" % (meta["git_revision"], " (+ uncommitted changes under src/ or bench/)"
                                   if meta["dirty"] else ""),
         "- machine: %s; bf16 flags in /proc/cpuinfo: %s (bf16 entries %s)" % (
             meta["machine"], ", ".join("%s %s" % (k, "yes" if v else "no") for k, v in meta["bf16_flags"].items()),
             "run" if meta["bf16_native"] else "not run"),
         "- A = `%s`: %s" % (meta["a"], " / ".join("`%s`" % l for l in meta["version_a"])),
         "- B = `%s`: %s" % (meta["b"], " / ".join("`%s`" % l for l in meta["version_b"])),
         "- wall time: %.0f s%s; load average %s at the start, %s at the end" % (
             meta["wall_s"], "" if meta["complete"] else " (incomplete: still running or stopped)",
             " ".join(meta["load_start"]), " ".join(meta["load_end"])),
         "- method: each entry is bench/runner.py's daei-side command (runner.DaeiSide, %s sizes) run with A's and "
         "B's binaries alternately A, B, A, B, … for %d round(s), one process a side at a time (mpirun entries: "
         "2 ranks); medians per side. 1 thread: OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1, MKL_NUM_THREADS=1, one "
         "torch thread; DAEI_MALLOC tuned unless the shapes say default%s" % (
             "--quick's" if meta["quick"] else "its", meta["rounds"],
             "; OpenBLAS pinned by the environment: " + ", ".join("%s=%s" % kv for kv in sorted(
                 meta["openblas_env"].items())) if meta["openblas_env"] else ""),
         "- ratio: time(B)/time(A) for times, rate(A)/rate(B) for rates (rows/s, GFLOP/s): **> 1 means B (%s) "
         "slower**; [min, max] of the per-round ratios; verdict ok at ≤ 1.05, else slower; MB rows (peak RSS of "
         "the process) are reported, not judged" % meta["torch_b"],
         "- not compared: runner.py's sure-var (variance of the estimates, no timing), the cache build at 4× rows "
         "(peak RSS only), the Python references", "",
         "| entry | shapes | %s median | %s median | unit | ratio [min, max] | verdict |" % (la, lb),
         "|---|---|---:|---:|---|---|---|"]
    for r in rows:
        if r.get("reason"):
            L.append("| %s | %s | — | — | %s | — | not run: %s |" % (r["entry"], r["shapes"], r["unit"], r["reason"]))
        else:
            L.append("| %s | %s | %s | %s | %s | %.3f [%.3f, %.3f] | %s |" % (
                r["entry"], r["shapes"], fmt(r["a_med"]), fmt(r["b_med"]), r["unit"], r["ratio"], r["ratio_min"],
                r["ratio_max"], r["verdict"]))
    done = [r for r in rows if not r.get("reason") and r["kind"] != "memory"]
    slow = [r["entry"] for r in done if r["verdict"] == "slower"]
    skipped = [r["entry"] for r in rows if r.get("reason")]
    L += ["", "- %d speed entries compared, %d more than 5 %% slower on B%s" % (
        len(done), len(slow), (": " + ", ".join(slow)) if slow else ""),
        "- not run: %s" % (", ".join(skipped) if skipped else "none")]
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", default="build-torch1.13")
    ap.add_argument("--b", default="build")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    for flag in ("a", "b"):
        d = getattr(a, flag)
        if not os.path.isdir(d if os.path.isabs(d) else os.path.join(ROOT, d)):
            print("torch_compare: --%s %s: no such build folder" % (flag, d), file=sys.stderr)
            return 2
    rounds = a.rounds if a.rounds is not None else 1 if a.quick else 3
    if rounds < 1:
        print("torch_compare: --rounds must be at least 1", file=sys.stderr)
        return 2
    DA, DB = R.DaeiSide(a.a, a.quick), R.DaeiSide(a.b, a.quick)
    sides = (("A", DA), ("B", DB))
    S = specs(DA)
    only = set(x for x in a.only.split(",") if x)
    known = {n for s in S for n in [s.name, s.group] + [p[0] for p in s.picks]}
    if only - known:
        print("torch_compare: --only: unknown %s (known: %s)" % (",".join(sorted(only - known)),
                                                                 ",".join(sorted(known))), file=sys.stderr)
        return 2
    S = [s for s in S if not only or only & ({s.name, s.group} | {p[0] for p in s.picks})]
    out = a.out or os.path.join("bench", "torch_compare%s.md" % ("-quick" if a.quick else ""))
    out = out if os.path.isabs(out) else os.path.join(ROOT, out)
    jout = os.path.splitext(out)[0] + ".json"
    os.makedirs(os.path.dirname(out), exist_ok=True)

    t0 = time.time()
    flags = cpu_bf16()
    va, lab_a = version(os.path.dirname(DA.B))
    vb, lab_b = version(os.path.dirname(DB.B))
    nice = os.nice(0)
    meta = dict(command=("nice -n %d " % nice if nice > 0 else "") + "bench/torch_compare.sh " + " ".join(sys.argv[1:]),
                git_revision=subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                            text=True).stdout.strip(),
                dirty=subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "bench"], cwd=ROOT).returncode != 0,
                machine=R.machine(), bf16_flags=flags, bf16_native=any(flags.values()), a=a.a, b=a.b,
                version_a=va, version_b=vb, label_a="A: " + (lab_a or a.a), label_b="B: " + (lab_b or a.b),
                torch_a="libtorch " + lab_a if lab_a else a.a, torch_b="libtorch " + lab_b if lab_b else a.b,
                quick=a.quick, rounds=rounds, load_start=open("/proc/loadavg").read().split()[:3],
                openblas_env={k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ})
    rows = []
    files = Files(DA)

    def save(final):
        meta.update(wall_s=round(time.time() - t0, 1), complete=final, load_end=open("/proc/loadavg").read().split()[:3])
        with open(out, "w") as f:
            f.write(markdown(meta, rows))
        with open(jout, "w") as f:
            json.dump(dict(meta=meta, rows=rows, log=R.LOG), f, indent=1)

    try:
        for s in S:
            t1 = time.time()
            for f in s.files:
                files.make(f)
            cmds = {label: s.cmd(D, files) for label, D in sides}
            sh = shapes(cmds["A"], s.env)
            missing = [binary(c) for c in cmds.values() if not os.access(binary(c), os.X_OK)]
            reason = None
            if s.bf16 and not meta["bf16_native"]:
                reason = "no avx512_bf16 or amx_bf16 in /proc/cpuinfo flags"
            elif missing:
                reason = ", ".join(os.path.relpath(m, ROOT) for m in missing) + " missing"
            elif cmds["A"][0] == "mpirun" and not shutil.which("mpirun"):
                reason = "mpirun not found"
            else:
                env = dict(R.ENV1, **(s.env or {}))

                def side(label):
                    def go():
                        try:
                            if s.pair:
                                return R.run_concurrently(cmds[label], 2, env)
                            return R.run_json(cmds[label], env)[0]
                        except Exception as ex:  # the reason goes in the table, the other entries still run
                            raise RuntimeError("%s failed: %s" % (label, one_line(ex)))
                    return go
                try:
                    ra_, rb_ = R.alternate(side("A"), side("B"), rounds, lambda j: j, lambda j: j)[2:]
                except RuntimeError as ex:
                    reason = str(ex)
            for entry, fn, unit in s.picks:
                row = dict(entry=entry, spec=s.name, group=s.group, shapes=sh, unit=unit, kind=kind(unit))
                if reason is None:
                    try:
                        xa, xb = [fn(j) for j in ra_], [fn(j) for j in rb_]
                    except (KeyError, IndexError, TypeError, ZeroDivisionError) as ex:
                        row["reason"] = "no %s in the output: %s" % (unit, one_line(ex))
                        rows.append(row)
                        continue
                    inv = row["kind"] == "rate"
                    q = lambda x, y: (x / y) if inv else (y / x)  # > 1: B slower
                    per = [q(x, y) for x, y in zip(xa, xb)]
                    row.update(a=xa, b=xb, a_med=med(xa), b_med=med(xb), ratio=q(med(xa), med(xb)),
                               ratio_min=min(per), ratio_max=max(per), per_round=per, s=round(time.time() - t1, 1))
                    row["verdict"] = "report" if row["kind"] == "memory" else "ok" if row["ratio"] <= 1.05 else "slower"
                    print("%-32s A %-10.4g B %-10.4g %-8s ratio %.3f [%.3f, %.3f] %s" % (
                        entry, row["a_med"], row["b_med"], unit, row["ratio"], row["ratio_min"], row["ratio_max"],
                        row["verdict"]), flush=True)
                else:
                    row["reason"] = reason
                    print("%-32s not run: %s" % (entry, reason), flush=True)
                rows.append(row)
            save(False)
    finally:
        shutil.rmtree(files.tmp, ignore_errors=True)
    save(True)
    print("wrote %s and its .json (%.0f s)" % (out, meta["wall_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
