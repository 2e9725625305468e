#!/usr/bin/python3
"""The benchmark runner behind bench/run.sh: runs daei's side (build/bench_entries, build/bench_cache_throughput) and
the Python references (bench/*_reference.py, Debian python3-torch) in alternation (A, B, A, B, ...), takes medians and
writes bench/results.json and bench/results.md. Every speed figure is a ratio against a reference measured in the
same run: the machine is shared, absolute times are not comparable between runs.

  bench/run.sh [--quick] [--build DIR] [--only NAME,...]

Entry fields: name, value, reference, ratio, target, met, unit, sizes, threads, runs, spread (the relative range
(max-min)/median of the per-process medians of the daei side; of the reference side in spread_ref)."""
import argparse, json, os, platform, random, re, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's interpreter: python3-torch lives there
ENV1 = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
LOG = []


def run_json(cmd, env=None, timeout=3600):
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=env or ENV1, capture_output=True, text=True, timeout=timeout)
    LOG.append(dict(cmd=" ".join(cmd), rc=p.returncode, s=round(time.time() - t0, 1)))
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return [json.loads(l) for l in lines]


def page_fault_us():
    """Microseconds a first touch of a 4 KiB page costs here (fresh anonymous memory written once, minus the same
    write again). About 0.1–0.3 µs on bare Linux; some VMs charge 10 µs, and then an allocator that hands memory back
    to the kernel after every step (glibc's defaults, the Python side) pays it on every step."""
    import mmap
    n = 64 << 20
    buf = b"\1" * n
    m = mmap.mmap(-1, n)
    t0 = time.perf_counter()
    m.write(buf)
    first = time.perf_counter() - t0
    m.seek(0)
    t0 = time.perf_counter()
    m.write(buf)
    again = time.perf_counter() - t0
    m.close()
    return round(max(0.0, first - again) / (n / 4096) * 1e6, 2)


def openblas_core(env):
    """The kernel set OpenBLAS runs in a process with this environment (it reads OPENBLAS_CORETYPE when it loads)."""
    code = ("import ctypes; l = ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype = ctypes.c_char_p; "
            "print(l.openblas_get_corename().decode())")
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def med(xs):
    return statistics.median(xs)


def spread(xs):
    m = med(xs)
    return (max(xs) - min(xs)) / m if m and len(xs) > 1 else 0.0


def alternate(a, b, rounds, pick_a=None, pick_b=None):
    """Runs a() and b() alternately `rounds` times; each returns a JSON record; pick_* turns one record into one
    number (default: the median of its `times`). Returns (values_a, values_b, records_a, records_b)."""
    pick_a = pick_a or (lambda j: med(j["times"]))
    pick_b = pick_b or (lambda j: med(j["times"]))
    va, vb, ra, rb = [], [], [], []
    for _ in range(rounds):
        ja = a()
        ra.append(ja)
        va.append(pick_a(ja))
        jb = b()
        rb.append(jb)
        vb.append(pick_b(jb))
    return va, vb, ra, rb


def entry(name, value, reference, ratio, target, unit, sizes, threads, runs, spread_v, spread_ref=None, note="",
          extra=None):
    met = None
    if isinstance(target, (int, float)):
        met = bool(ratio >= target)
    e = dict(name=name, value=value, reference=reference, ratio=ratio, target=target, met=met, unit=unit, sizes=sizes,
             threads=threads, runs=runs, spread=round(spread_v, 3))
    if spread_ref is not None:
        e["spread_ref"] = round(spread_ref, 3)
    if note:
        e["note"] = note
    if extra:
        e.update(extra)
    return e


def kv(d):
    out = []
    for k, v in d.items():
        out += ["--" + k, str(v)]
    return out


def cpp2(d):
    """kv with the keys' underscores as dashes (--label-len): the flags of bench_entries' T5 commands."""
    return kv({k.replace("_", "-"): v for k, v in d.items()})


def run_concurrently(cmd, n=2, env=None):
    """n processes of cmd at the same time; their JSON records (the first JSON line of each)."""
    ps = [subprocess.Popen(cmd, cwd=ROOT, env=env or ENV1, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    return [json.loads([l for l in p.communicate()[0].splitlines() if l.startswith("{")][0]) for p in ps]


class DaeiSide:
    """daei's side of the entries: one build's bench binaries and the sizes (--quick: the small ones), each command
    written once. bench/runner.py runs them against the Python references; bench/torch_compare.py runs each with two
    builds (libtorch 1.13 and 2.x) in alternation."""

    def __init__(self, build, quick):
        d = build if os.path.isabs(build) else os.path.join(ROOT, build)
        self.B, self.CT, self.EL, self.AF = (os.path.join(d, "bench_" + n) for n in
                                             ("entries", "cache_throughput", "eval_loops", "adamw_fused"))
        Q = self.quick = quick
        self.mpirun = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + \
            ["--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1"]
        # 1. stage-1 SURE step, paper sizes
        self.S1 = dict(dim=768, hidden=1024, depth=3, batch=256, probes=5) if not Q else dict(
            dim=256, hidden=256, depth=2, batch=64, probes=5)
        self.st1 = 3
        # 2, 3. stage-2 step and generation of the small inverter
        S2 = dict(dim=100, repeat=16, vocab=4096, batch=64, layers=2, heads=8, label_len=32)
        S2["d_model"], S2["d_kv"], S2["d_ff"] = (128, 16, 512) if Q else (256, 32, 1024)
        if Q:
            S2["batch"] = 16
        self.S2, self.st2 = S2, 2 if Q else 3
        self.mm_n = 512 if Q else 1024
        self.n_texts = 256 if Q else 2000  # stage-2 epoch
        # 8. a stage-3 step through the Trainer
        self.SQ3 = dict(dim=100, hidden=512, depth=2, probes=5, repeat=16, vocab=8000, d_model=128, d_kv=32,
                        d_ff=512, layers=2, heads=4, label_len=32, batch=32)
        if Q:
            self.SQ3.update(batch=8, vocab=1000)
        self.st3 = 2 if Q else 4
        # 4. data parallel: stage 1, and the quickstart's T5 inverter, 32 rows a rank
        SQ = dict(dim=100, hidden=512, depth=2, batch=256 if not Q else 64, probes=5)
        SQ2 = dict(dim=100, repeat=16, vocab=8000, d_model=128, d_kv=32, d_ff=512, layers=2, heads=4, label_len=32,
                   batch=32 if not Q else 8)
        self.dp_cases = {"dp_stage1_2ranks": ("sure", kv, SQ, 4 if Q else 10),
                         "dp_stage2_2ranks": ("t5-step", cpp2, SQ2, 3 if Q else 8)}
        # 6. cache build
        self.cache_rows, self.cache_reps = (2000, "2") if Q else (20000, "5")
        # 10, 12. eval's loops
        self.n_correct, self.n_zs, self.eval_reps = ("8", "2", "1") if Q else ("32", "4", "2")
        self.np2 = ("8", "12", "2") if Q else ("42", "64", "3")  # texts, gen_batch, rounds: two blocks of gen_batch / beam
        # 11. fused AdamW over the replicate-size inverter's parameters (configs/replicate-cpu.yaml)
        self.SA = dict(dim=100, repeat=16, vocab=8000, d_model=128, d_kv=32, heads=4, d_ff=512, layers=2)
        self.adamw_steps = 5 if Q else 20

    def precision(self):
        return [self.B, "precision"]

    def sure(self, variant="hutchinson"):
        return [self.B, "sure"] + kv(dict(self.S1, steps=self.st1, variant=variant))

    def sure_var(self):
        S1 = self.S1
        return [self.B, "sure-var"] + kv(dict(dim=S1["dim"], hidden=S1["hidden"], depth=S1["depth"],
                                              batch=16 if self.quick else 32, probes=S1["probes"],
                                              draws=6 if self.quick else 30, exact=1))

    def matmul(self):
        return [self.B, "matmul", "--n", str(self.mm_n), "--reps", "5"]

    def t5_args(self, **more):
        """The stage-2 sizes as flags (bench_entries and bench/t5_reference.py take the same); steps st2 unless given."""
        return cpp2(dict(self.S2, **dict(dict(steps=self.st2), **more)))

    def t5(self, sub, precision=None, steps=None):
        return [self.B, sub] + self.t5_args(steps=steps or self.st2) + (["--precision", precision] if precision else [])

    def t5_epoch(self, lengths):
        return [self.B, "t5-epoch"] + cpp2(dict(self.S2, lengths=lengths))

    def allreduce(self, which):
        sz = dict(dim=768, hidden=1024, depth=3) if which == "dae" else self.S2
        return self.mpirun + ["-np", "2", self.B, "allreduce", "--which", which, "--reps", "4" if self.quick else "12"] \
            + cpp2(sz), sz

    def stage3(self, np_):
        S3 = dict(self.SQ3, steps=self.st3)
        return ([self.B] if np_ == 1 else self.mpirun + ["-np", "2", self.B]) + ["stage3-step", "--mpi", str(
            int(np_ > 1))] + cpp2(dict(S3, batch=S3["batch"] * np_))

    def dp(self, name, ranks):
        """A data-parallel entry's step: on 2 ranks (ranks=2), or the command each of two independent processes runs."""
        sub, args, sizes, steps = self.dp_cases[name]
        if ranks == 2:
            return self.mpirun + ["-np", "2", self.B, sub, "--mpi", "1"] + args(dict(sizes, steps=steps))
        return [self.B, sub] + args(dict(sizes, steps=steps))

    def cache(self, corpus, rows, glove):
        return [self.CT, corpus, "--rows", str(rows), "--reps", self.cache_reps, "--out", "", "--json", "1"] + glove

    def eval_loop(self, kind, chunk="256"):
        """bench_eval_loops: 'correct' (beam 3, 10 rounds), 'zsinvert', 'chunk' (3 rounds at this embed_chunk),
        'np1' / 'np2' (eval_np2's correction at 1 and 2 ranks)."""
        if kind == "correct":
            return [self.EL, "correct", "--texts", self.n_correct, "--beam", "3", "--rounds", "10", "--reps",
                    self.eval_reps]
        if kind == "zsinvert":
            return [self.EL, "zsinvert", "--texts", self.n_zs, "--beam", "5", "--top-k", "50", "--steps", "20", "--reps",
                    self.eval_reps]
        if kind == "chunk":
            return [self.EL, "correct", "--texts", self.n_correct, "--beam", "3", "--rounds", "3", "--embed-chunk",
                    chunk, "--reps", "1"]
        n_c, gb, rd = self.np2
        args = ["correct", "--texts", n_c, "--beam", "3", "--rounds", rd, "--gen-batch", gb, "--reps", self.eval_reps]
        return self.mpirun + ["-np", "2", self.EL] + args + ["--mpi", "1"] if kind == "np2" else [self.EL] + args

    def adamw(self):
        return [self.AF] + cpp2(dict(self.SA, steps=self.adamw_steps))


# ------------------------------------------------------------------------------------------------- texts

def make_texts(n, path_corpus, path_lengths, max_len=32):
    """n sentences of varied length: WordNet glosses and examples (3–32 words; Debian wordnet-base), the short half
    of the quickstart's corpus (its GCIDE sentences are of the same lengths), written as a corpus file and as token
    lengths (≈ 1.3 sentencepiece tokens a word + eos, at most max_len). Falls back to seeded random lengths when
    WordNet is not installed."""
    glosses = []
    for pos in ("noun", "verb", "adj", "adv"):
        wn = "/usr/share/wordnet/data." + pos
        if not os.path.exists(wn):
            continue
        for l in open(wn, encoding="utf-8", errors="replace"):
            if "|" in l and not l.startswith(" "):
                for g in l.split("|", 1)[1].split(";"):
                    w = g.strip().strip('"').split()
                    if 3 <= len(w) <= 32:
                        glosses.append(" ".join(w))
                if len(glosses) >= 4 * n * (1 + ("noun", "verb", "adj", "adv").index(pos)):
                    break
    import random
    rnd = random.Random(0)
    rnd.shuffle(glosses)
    sents = glosses[:n]
    if len(sents) < n:
        sents = [" ".join("w%d" % rnd.randrange(1000) for _ in range(rnd.randint(3, 24))) for _ in range(n)]
    rnd.shuffle(sents)
    sents = sents[:n]
    with open(path_corpus, "w") as f:
        for i, s in enumerate(sents):
            f.write(json.dumps(dict(id=i, text=s)) + "\n")
    lens = [min(max_len, int(round(1.3 * len(s.split()))) + 1) for s in sents]
    with open(path_lengths, "w") as f:
        f.write("\n".join(map(str, lens)) + "\n")
    return lens


# ------------------------------------------------------------------------------------------------- entries

def glove_dir_for(corpus, tmp):
    """bench_cache_throughput's GloVe: the asset cache's glove-100d when a user converted one there, else 100-d seeded
    random vectors for the corpus's words (launch/convert_glove.py), so the cache build is timed with the same shapes."""
    assets = os.environ.get("DAEI_ASSETS") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                            os.path.join(os.path.expanduser("~"), ".cache"), "daei")
    if os.path.isfile(os.path.join(assets, "glove-100d", "asset.json")):
        return []
    words = set()
    for line in open(corpus, encoding="utf-8"):
        words.update(re.findall(r"[a-z]+", json.loads(line)["text"].lower()))
    rng = random.Random(100)
    txt, out = os.path.join(tmp, "glove-synthetic.txt"), os.path.join(tmp, "glove-100d")
    with open(txt, "w", encoding="utf-8") as f:
        for w in sorted(words):
            f.write(w + " " + " ".join("%.5f" % rng.gauss(0, 0.4) for _ in range(100)) + "\n")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch",
                                                 "convert_glove.py"), txt, out], check=True, stdout=subprocess.DEVNULL)
    return ["--glove-dir", out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="bench")
    ap.add_argument("--blas", choices=("machine", "native"), default="machine",
                    help="machine: OpenBLAS as this machine's environment sets it (OPENBLAS_CORETYPE may pin a kernel "
                         "set); native: both sides without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE, OpenBLAS's own choice")
    a = ap.parse_args()
    pinned = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if a.blas == "native":
        for k in pinned:
            ENV1.pop(k, None)
    blas_meta = dict(mode=a.blas, core=openblas_core(ENV1), machine_env=pinned)
    faults_us = page_fault_us()
    Q = a.quick
    D = DaeiSide(a.build, Q)
    only = set(x for x in a.only.split(",") if x)
    want = lambda n: not only or n in only
    rounds = 1 if Q else 3
    # On glibc's allocator settings both sides hand memory back to the kernel after each step; where page faults are
    # slow (page_fault_us) a process's step time then wanders by ±30 % from one process to the next (bench/notes.md),
    # so the _glibc entries alternate five processes a side.
    glibc_rounds = 1 if Q else 5

    def glibc_entry(name, daei_cmd, ref_cmd, sizes, steps):
        """daei with DAEI_MALLOC=default against the reference (glibc's defaults): both sides on one allocator, the
        implementations alone (daei's allocator setting decides the headline ratio where page faults are slow)."""
        env_d = dict(ENV1, DAEI_MALLOC="default")
        va, vb, ra, rb = alternate(lambda: run_json(daei_cmd, env_d)[0], lambda: run_json(ref_cmd)[0], glibc_rounds)
        add(entry(name, med(va), med(vb), med(vb) / med(va), 1.0, "s/step, DAEI_MALLOC=default (ratio = reference/daei)",
                  sizes, 1, "%d processes × %d steps each side" % (glibc_rounds, steps), spread(va), spread(vb),
                  extra=dict(minflt=med([r["minflt"] for r in ra]), minflt_ref=med([r["minflt"] for r in rb]),
                             pair_ratios=[round(b / a, 3) for a, b in zip(va, vb)])))
    tmp = tempfile.mkdtemp(prefix="daei-bench-")
    try:  # this CPU's bf16 products as daei's probe sees them (the bf16 entries run only where they are native)
        bf16_meta = run_json(D.precision())[0]
    except (OSError, RuntimeError, IndexError) as ex:
        bf16_meta = dict(isa="unknown", native=False, missing="bench_entries precision failed: %s" % str(ex)[-200:])
    t_start = time.time()
    load0 = open("/proc/loadavg").read().split()[:3]
    entries = []

    suffix = "-quick" if Q else ""
    os.makedirs(os.path.join(ROOT, a.out), exist_ok=True)
    jpath = os.path.join(ROOT, a.out, "results%s.json" % suffix)
    kept, earlier = [], None
    if only and os.path.exists(jpath):  # --only: keep the other entries of the earlier run, marked as such
        try:
            old = json.load(open(jpath))
            kept = [dict(e, from_earlier_run=e.get("from_earlier_run") or old["meta"]["git_revision"])
                    for e in old["entries"] if not any(e["name"].startswith(o.rstrip("s")) for o in only)]
            earlier = old["meta"].get("earlier_run") or {k: old["meta"][k] for k in (
                "command", "git_revision", "load_average_start", "load_average_end", "wall_s", "page_fault_us", "blas")
                if k in old["meta"]}
        except (OSError, ValueError, KeyError):
            kept, earlier = [], None

    def save(final=False):
        wall = time.time() - t_start
        meta = dict(command=(f"nice -n {os.nice(0)} " if os.nice(0) > 0 else "") + "bench/run.sh" + (" --quick" if Q else "") + (" --only " + a.only if a.only else "") + (" --blas native" if a.blas == "native" else ""),
                    git_revision=subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                                                text=True).stdout.strip(),
                    dirty=subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "bench", ":!bench/results*",
                                          ":!bench/notes.md"], cwd=ROOT).returncode != 0,
                    machine=machine(), load_average_start=load0, load_average_end=open("/proc/loadavg").read().split()[:3],
                    wall_s=round(wall, 1), quick=Q, complete=final, malloc_default="tuned",
                    env=dict(OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1), blas=blas_meta, page_fault_us=faults_us,
                    bf16=dict(isa=bf16_meta.get("isa"), native=bool(bf16_meta.get("native"))))
        if kept and earlier:
            meta["earlier_run"] = earlier
        allE = latest_by_name(kept + entries)
        with open(jpath, "w") as f:
            json.dump(dict(meta=meta, entries=allE, log=LOG), f, indent=1)
        with open(os.path.join(ROOT, a.out, "results%s.md" % suffix), "w") as f:
            f.write(markdown(meta, allE))
        return wall

    def add(e):
        entries.append(e)
        save()
        print("%-28s value %-10.4g ref %-10.4g ratio %-7.3f target %s met %s" % (
            e["name"], e["value"] or 0, e["reference"] or 0, e["ratio"] or 0, e["target"], e["met"]), flush=True)

    def guarded(name, fn):
        if not want(name):
            return
        try:
            fn()
        except Exception as ex:  # an entry that fails is reported, the others still run
            add(entry(name, None, None, None, "error", "", {}, 1, 0, 0.0, note="failed: %s" % str(ex)[-600:]))

    # 1. stage-1 SURE step, paper sizes
    S1, st1 = D.S1, D.st1

    def e1():
        va, vb, ra, rb = alternate(lambda: run_json(D.sure())[0],
                                   lambda: [j for j in run_json([PY, "bench/sure_reference.py", "--only", "hutchinson"]
                                                                + kv(dict(S1, steps=st1)))][0], rounds)
        add(entry("stage1_sure_step", med(va), med(vb), med(vb) / med(va), 1.2, "s/step (ratio = reference/daei)",
                  S1, 1, "%d processes × %d steps each side" % (rounds, st1), spread(va), spread(vb),
                  extra=dict(maxrss_kb=max(r["maxrss_kb"] for r in ra))))
        # The same with glibc's own malloc settings on daei's side too (issue 24 item 1): both sides on one allocator.
        glibc_entry("stage1_sure_step_glibc", D.sure(),
                    [PY, "bench/sure_reference.py", "--only", "hutchinson"] + kv(dict(S1, steps=st1)), S1, st1)

    # 9. SURE variants at equal K: time of a training step (same sizes) and the variance of the estimate
    def e9():
        var = run_json(D.sure_var())[0]
        times = {}
        for v in ("batched", "fd"):
            va, vb, _, _ = alternate(lambda: run_json(D.sure(v))[0], lambda: run_json(D.sure())[0],
                                     max(1, rounds - 1))
            times[v] = (va, vb)
            est = dict(mean=var[v]["mean"], std=var[v]["std"], exact=var["exact_div"],
                       hutchinson_mean=var["hutchinson"]["mean"], hutchinson_std=var["hutchinson"]["std"])
            add(entry("sure_variant_" + v, med(va), med(vb), med(vb) / med(va), "report",
                      "s/step (reference = hutchinson, K separate VJPs; ratio = speed-up)", S1, 1,
                      "%d alternations × %d steps" % (len(va), st1), spread(va), spread(vb),
                      extra=dict(estimate=est, estimate_sizes=dict(batch=var["batch"], draws=var["draws"]))))

    # 2, 3. stage-2 step and generation of the small inverter
    S2, st2 = D.S2, D.st2
    flop = {}

    def e2():
        mm_n = D.mm_n
        mm = []
        va, vb, ra, rb = [], [], [], []
        for _ in range(rounds):  # matmul rate, daei step, Python step, alternating
            j = run_json(D.matmul())[0]
            mm.append(j["flops"] / med(j["times"]))
            ja = run_json(D.t5("t5-step"))[0]
            ra.append(ja)
            va.append(med(ja["times"]))
            jb = run_json([PY, "bench/t5_reference.py", "step"] + D.t5_args())[0]
            rb.append(jb)
            vb.append(med(jb["times"]))
        add(entry("stage2_step", med(va), med(vb), med(vb) / med(va), 1.5, "s/step (ratio = reference/daei)", S2, 1,
                  "%d processes × %d steps each side" % (rounds, st2), spread(va), spread(vb),
                  extra=dict(minflt_daei=med([r["minflt"] for r in ra]), minflt_ref=med([r["minflt"] for r in rb]),
                             maxrss_kb=max(r["maxrss_kb"] for r in ra), params=ra[0]["params"])))
        F = ra[0]["flops"]
        rate = [F / v for v in va]
        rate_ref = [F / v for v in vb]
        add(entry("stage2_flop_rate", med(rate) / 1e9, med(mm) / 1e9, med(rate) / med(mm), 0.6,
                  "GFLOP/s (counted matmul FLOPs of the step / time; reference = torch::mm %d³ fp32, 1 thread)" % mm_n,
                  dict(S2, step_gflop=round(F / 1e9, 3)), 1, "%d × (matmul, daei step, python step)" % rounds,
                  spread(rate), spread(mm), extra=dict(python_step_rate_gflops=med(rate_ref) / 1e9,
                                                       python_ratio=med(rate_ref) / med(mm))))
        flop["mm"] = med(mm)
        glibc_entry("stage2_step_glibc", D.t5("t5-step"), [PY, "bench/t5_reference.py", "step"] + D.t5_args(), S2, st2)
    guarded("stage2_step", e2)

    # Issue 24 item 2: the T5 step's fused kernels one at a time (bench_entries t5-levers: one process, one model,
    # the configurations interleaved step by step). value = s/step with that lever alone, reference = s/step with
    # none (libtorch op chains), ratio = speed-up; "all" is the default build, "dropout0" all levers at dropout 0.
    def e2l():
        per = {}
        for _ in range(rounds):
            j = run_json(D.t5("t5-levers", steps=st2 + 1))[0]
            for k, v in j["configs"].items():
                per.setdefault(k, []).append(med(v))
        none = per["none"]
        for k in ("fast_dropout", "fused_residual", "fused_attention", "fused_norm", "fused_ce", "all", "dropout0"):
            add(entry("stage2_lever_" + k, med(per[k]), med(none), med(none) / med(per[k]), "report",
                      "s/step with this lever alone (reference: no lever; ratio = speed-up)", S2, 1,
                      "%d processes × %d interleaved rounds" % (rounds, st2 + 1), spread(per[k]), spread(none)))
    guarded("stage2_levers", e2l)

    def e2g():
        va, vb, ra, rb = alternate(lambda: run_json(D.t5("t5-generate"))[0],
                                   lambda: run_json([PY, "bench/t5_reference.py", "generate"] + D.t5_args())[0],
                                   rounds)
        assert ra[0]["tokens"] == rb[0]["tokens"], "different generated lengths"
        add(entry("stage2_generate", med(va), med(vb), med(vb) / med(va), 1.1,
                  "s per batch (greedy, %d tokens; ratio = reference/daei)" % ra[0]["tokens"], S2, 1,
                  "%d processes × %d generations each side" % (rounds, st2), spread(va), spread(vb)))
    guarded("stage2_generate", e2g)

    # bf16 matrix products (train.precision bf16, src/model/net/precision.h) where the CPU multiplies bf16 natively: the
    # step against daei's fp32 step and against the Python reference under torch.autocast bf16, and generation
    # against daei's fp32 generation. Same model, data and seeds in both precisions: the losses and tokens compare.
    def bf16_skipped(name):
        add(entry(name, None, None, None, "skipped", "", S2, 1, "0", 0.0,
                  note="skipped: no native bf16 here (%s)" % (bf16_meta.get("missing") or "unknown")))

    def t5_bf16(sub, prec):
        return run_json(D.t5(sub, prec))[0]

    def e2b():
        if not bf16_meta.get("native"):
            return bf16_skipped("stage2_step_bf16")
        va, vb, ra, rb = alternate(lambda: t5_bf16("t5-step", "bf16"), lambda: t5_bf16("t5-step", "fp32"), rounds)
        dl = max(abs(x - y) / abs(y) for a_, b_ in zip(ra, rb) for x, y in zip(a_["losses"], b_["losses"]))
        add(entry("stage2_step_bf16", med(va), med(vb), med(vb) / med(va), 2.0,
                  "s/step, train.precision bf16 (reference: daei fp32; ratio = speed-up)", S2, 1,
                  "%d processes × %d steps each side" % (rounds, st2), spread(va), spread(vb),
                  extra=dict(bf16_isa=bf16_meta["isa"], max_rel_loss_diff=dl,
                             losses_bf16=ra[0]["losses"], losses_fp32=rb[0]["losses"])))
    guarded("stage2_step_bf16", e2b)

    def e2br():
        if not bf16_meta.get("native"):
            return bf16_skipped("stage2_step_bf16_ref")
        ref = lambda: run_json([PY, "bench/t5_reference.py", "step"] + D.t5_args() + ["--amp", "bf16"])[0]
        va, vb, ra, rb = alternate(lambda: t5_bf16("t5-step", "bf16"), ref, rounds)
        add(entry("stage2_step_bf16_ref", med(va), med(vb), med(vb) / med(va), 1.3,
                  "s/step, train.precision bf16 (reference: the Python step under torch.autocast('cpu', bfloat16); "
                  "ratio = reference/daei)", S2, 1, "%d processes × %d steps each side" % (rounds, st2), spread(va),
                  spread(vb), extra=dict(bf16_isa=bf16_meta["isa"])))
    guarded("stage2_step_bf16_ref", e2br)

    def e2gb():
        if not bf16_meta.get("native"):
            return bf16_skipped("stage2_generate_bf16")
        va, vb, ra, rb = alternate(lambda: t5_bf16("t5-generate", "bf16"), lambda: t5_bf16("t5-generate", "fp32"),
                                   rounds)
        same = sum(x == y for x, y in zip(ra[0]["ids"], rb[0]["ids"])) / max(1, len(rb[0]["ids"]))
        add(entry("stage2_generate_bf16", med(va), med(vb), med(vb) / med(va), 1.5,
                  "s per batch (greedy, %d tokens), train.precision bf16 (reference: daei fp32; ratio = speed-up)"
                  % ra[0]["tokens"], S2, 1, "%d processes × %d generations each side" % (rounds, st2), spread(va),
                  spread(vb), extra=dict(bf16_isa=bf16_meta["isa"], same_tokens_share=round(same, 4))))
    guarded("stage2_generate_bf16", e2gb)

    # 3b. stage-2 epoch over real-length texts
    n_texts = D.n_texts
    lens = make_texts(n_texts, os.path.join(tmp, "texts.jsonl"), os.path.join(tmp, "lengths.txt"))

    def e3b():
        cmd = D.t5_epoch(os.path.join(tmp, "lengths.txt"))
        r3 = 1 if Q else 2
        va, vb, ra, rb = alternate(lambda: run_json(cmd)[0],
                                   lambda: run_json([PY, "bench/t5_reference.py", "epoch"] + cmd[2:])[0], r3)
        real = sum(lens)
        add(entry("stage2_epoch", med(va), med(vb), med(vb) / med(va), 1.5, "s/epoch (ratio = reference/daei)",
                  dict(S2, texts=n_texts, mean_len=round(real / len(lens), 1), max_len=32), 1,
                  "%d epochs each side" % r3, spread(va), spread(vb),
                  extra=dict(real_tokens=real, daei_padded_positions=ra[0]["padded_positions"],
                             ref_padded_positions=32 * len(lens))))
    guarded("stage2_epoch", e3b)

    # allocator: the same steps with glibc's default and with the tuned setting (the default)
    def ealloc():
        env_d = dict(ENV1, DAEI_MALLOC="default")
        env_t = dict(ENV1, DAEI_MALLOC="tuned")
        for nm, cmd in (("malloc_sure_step", D.sure()), ("malloc_t5_step", D.t5("t5-step"))):
            va, vb, ra, rb = alternate(lambda: run_json(cmd, env_t)[0], lambda: run_json(cmd, env_d)[0], rounds)
            add(entry(nm, med(va), med(vb), med(vb) / med(va), "report",
                      "s/step with DAEI_MALLOC=tuned (reference: DAEI_MALLOC=default; ratio = speed-up)",
                      S1 if "sure" in nm else S2, 1, "%d processes × steps each side" % rounds, spread(va), spread(vb),
                      extra=dict(minflt_tuned=med([r["minflt"] for r in ra]),
                                 minflt_default=med([r["minflt"] for r in rb]))))
    guarded("malloc", ealloc)

    # 5. GradReducer vs raw MPI_Allreduce (2 ranks), each call right after a real training backward (stage 1's SURE
    #    step, stage 2's cross-entropy); the fresh-gradients case (a trivial backward just before) is report-only.
    def e5():
        for which in ("dae", "t5"):
            cmd, sz = D.allreduce(which)
            j = run_json(cmd)[0]
            t, r, f = med(j["times"]), med(j["raw_times"]), med(j["fresh_times"])
            gb = j["bytes"] / 1e9
            sizes = dict(sz, bytes=j["bytes"], buckets=j["buckets"], batch=j["batch"])
            runs = "2 ranks, %d alternations" % len(j["times"])
            add(entry("allreduce_" + which, gb / t, gb / r, r / t, 0.8,
                      "GB/s after a real training backward (GradReducer::reduce vs raw MPI_Allreduce of the same "
                      "bytes, each after the same backward)", sizes, 1, runs,
                      spread(j["times"]), spread(j["raw_times"]),
                      extra=dict(reduce_s=t, raw_s=r, reduce_with_copy_in_s=med(j["copy_times"]))))
            add(entry("allreduce_%s_fresh" % which, gb / f, gb / r, r / f, "report",
                      "GB/s with gradients just written by a trivial backward (reference: raw MPI_Allreduce after "
                      "a real backward)", sizes, 1, runs, spread(j["fresh_times"]), spread(j["raw_times"]),
                      extra=dict(reduce_s=f)))
    guarded("allreduce", e5)

    # 8. a stage-3 step through the Trainer split into its phases, at 1 and 2 ranks (same per-rank batch)
    def e8():
        S3 = dict(D.SQ3, steps=D.st3)
        for np_ in (1, 2):
            runs = [run_json(D.stage3(np_))[0] for _ in range(rounds)]
            tot = [r["times"][0] for r in runs]
            phases = {k: med([r["phases"][k] for r in runs]) for k in runs[0]["phases"]}
            share = {k: round(v / med(tot), 3) for k, v in phases.items()}
            add(entry("stage3_step_np%d" % np_, med(tot), None, None, "report",
                      "s/step on rank 0 (per-rank batch %d); phases in `phases_s`, shares in `phase_share`" % S3["batch"],
                      dict(S3, ranks=np_), 1, "%d processes × %d steps" % (rounds, S3["steps"]), spread(tot),
                      extra=dict(phases_s=phases, phase_share=share)))
    guarded("stage3_step", e8)

    # 4. stages 1 and 2 on 2 ranks × 1 thread vs two independent 1-rank processes doing the same per-rank work
    def data_parallel(name):
        _, _, sizes, steps = D.dp_cases[name]

        def dp():
            j = run_json(D.dp(name, 2))[0]
            j["rate"] = 2 * sizes["batch"] / med(j["times"])
            return j

        def indep():
            return dict(rate=sum(sizes["batch"] / med(o["times"]) for o in run_concurrently(D.dp(name, 1))))

        va, vb, ra, rb = alternate(dp, indep, rounds, lambda j: j["rate"], lambda j: j["rate"])
        red = med([med(r["reduce_times"]) for r in ra])
        add(entry(name, med(va), med(vb), med(va) / med(vb), 0.9,
                  "rows/s, both ranks together (reference: two independent 1-rank processes at the same time)",
                  sizes, 1, "%d alternations × %d steps" % (rounds, steps), spread(va), spread(vb),
                  extra=dict(reduce_s=red, reduce_share=red / med([med(r["times"]) for r in ra]))))

    guarded("dp_stage1", lambda: data_parallel("dp_stage1_2ranks"))
    guarded("dp_stage2", lambda: data_parallel("dp_stage2_2ranks"))  # the quickstart's T5 inverter, 32 rows a rank

    # 6. cache build vs embedder only (same rows); 7. peak RSS of the cache build at 1× and 4× rows
    def e6():
        rows = D.cache_rows
        corpus = os.path.join(tmp, "cache_corpus.jsonl")
        make_texts(rows * 4, corpus, os.path.join(tmp, "cache_lengths.txt"))
        # three processes at 1× rows (the ratio's process-to-process spread is larger than the best-of-5 within one
        # process: 0.935–0.987 on one machine), the median process reported; one at 4× rows for the RSS
        glove = glove_dir_for(corpus, tmp)
        ones = [run_json(D.cache(corpus, rows, glove))[0] for _ in range(rounds)]
        ratios = [o["embed_s"] / o["cache_s"] for o in ones]
        j = sorted(ones, key=lambda o: o["embed_s"] / o["cache_s"])[len(ones) // 2]
        res = {1: j, 4: run_json(D.cache(corpus, rows * 4, glove))[0]}
        add(entry("cache_build", j["rows"] / j["cache_s"], j["rows"] / j["embed_s"], j["embed_s"] / j["cache_s"], 0.95,
                  "rows/s (reference: embedder only on the same rows)", dict(rows=j["rows"], dtype="float16",
                                                                            embedder="glove-100d"),
                  1, "%d processes × best of %d alternating runs each; the median process" % (rounds, j["reps"]),
                  spread(ratios),
                  extra=dict(maxrss_kb=j["maxrss_kb"], rows_4x=res[4]["rows"], rate_4x=res[4]["rows"] / res[4]["cache_s"],
                             maxrss_kb_4x=res[4]["maxrss_kb"], process_ratios=[round(r, 3) for r in ratios])))
        add(entry("peak_rss_cache_build", res[4]["maxrss_kb"] / 1024, j["maxrss_kb"] / 1024,
                  j["maxrss_kb"] / res[4]["maxrss_kb"], "report", "MB peak RSS at 4× rows (reference: 1× rows; "
                  "ratio = 1× / 4×, 1.0 = flat)", dict(rows_1x=j["rows"], rows_4x=res[4]["rows"]), 1, "1 each", 0.0))
    guarded("cache_build", e6)

    # 7. peak RSS per rank of the stage steps measured above
    def e7():
        for e in list(entries):
            if e["name"] in ("stage1_sure_step", "stage2_step") and e.get("maxrss_kb"):
                add(entry("peak_rss_" + e["name"], e["maxrss_kb"] / 1024, None, None, "report",
                          "MB peak RSS of the daei process (one rank)", e["sizes"], 1, e["runs"], 0.0))
    guarded("stage1_sure_step", e1)
    guarded("sure_variants", e9)
    guarded("peak_rss", e7)

    # 10. eval's loops (issue 24 item 3): the correction at beam 3 and 10 rounds (no early stop) and zsinvert, the
    # replicate-cpu model sizes with random weights and a bag-of-hashed-words black box (bench/eval_loops.cpp).
    # value texts/s, reference queries/s, ratio the share of the time outside the black box. Then the batched
    # candidate embedding: embed_chunk 256 against one text a black-box call.
    def e10():
        n_c = D.n_correct
        for nm, kind in (("eval_correct_beam3_10rounds", "correct"), ("eval_zsinvert", "zsinvert")):
            j = run_json(D.eval_loop(kind))[0]
            t, q = med(j["times"]), med(j["query_s"])
            add(entry(nm, j["texts"] / t, j["queries"] / t, (t - q) / t, "report",
                      "texts/s (reference column: black-box queries/s; ratio: share of the time outside the black box)",
                      {k: j[k] for k in ("texts", "beam", "vocab", "embed_chunk") if k in j}, 1,
                      "%d repetitions after a warm-up" % len(j["times"]), spread(j["times"]),
                      extra=dict(queries_per_text=j["queries"] / j["texts"], seconds=t, query_s=q)))
        one = lambda chunk: run_json(D.eval_loop("chunk", chunk))[0]
        va, vb, ra, rb = alternate(lambda: one("256"), lambda: one("1"), rounds)
        add(entry("eval_correct_batched_embedding", med(va), med(vb), med(vb) / med(va), "report",
                  "s per correction, embed_chunk 256 (reference: 1 text a black-box call; ratio = speed-up)",
                  dict(texts=int(n_c), beam=3, rounds=3), 1, "%d processes each side" % rounds, spread(va), spread(vb),
                  extra=dict(query_s=med([med(r["query_s"]) for r in ra]), query_s_ref=med([med(r["query_s"]) for r in rb]))))
    guarded("eval_loops", e10)

    # 11. the fused AdamW step (issue 35 item 3) against libtorch's AdamW over the replicate-size inverter's
    # parameters (configs/replicate-cpu.yaml), the two alternating step by step in one process
    def e11():
        SA, n = D.SA, D.adamw_steps
        runs = [run_json(D.adamw())[0] for _ in range(rounds)]
        va, vb = [med(r["times"]) for r in runs], [med(r["ref_times"]) for r in runs]
        add(entry("adamw_fused", med(va), med(vb), med(vb) / med(va), 2.0,
                  "s/step (reference: libtorch's AdamW::step, same parameters and gradients, alternating in one "
                  "process; ratio = reference/fused)", dict(SA, params=runs[0]["params"], tensors=runs[0]["tensors"]),
                  1, "%d processes × %d steps each side" % (rounds, n), spread(va), spread(vb)))
    guarded("adamw_fused", e11)

    # 12. eval on every rank (issue 35): the correction loop, eval's main cost, its texts split over 2 ranks as
    # `daei eval` splits them, against 1 rank (bench_eval_loops correct --mpi 1: random weights at the replicate-cpu
    # sizes). Not the pipeline's whole eval step: that needs a trained run, which the bench does not have.
    def e12():
        n_c, gb, rd = D.np2
        va, vb, ra, rb = alternate(lambda: run_json(D.eval_loop("np2"))[0], lambda: run_json(D.eval_loop("np1"))[0],
                                   rounds)
        assert ra[0]["queries"] == rb[0]["queries"], "2 ranks asked other queries than 1"
        add(entry("eval_np2", med(va), med(vb), med(vb) / med(va), 1.7,
                  "s per correction at 2 ranks (reference: the same at 1 rank; ratio = speed-up)",
                  dict(texts=int(n_c), beam=3, rounds=int(rd), gen_batch=int(gb), ranks=2), 1,
                  "%d alternations" % rounds, spread(va), spread(vb),
                  note="the correction loop of eval with random weights, not the whole eval step (no trained run)"))
    guarded("eval_np2", e12)

    wall = save(final=True)
    print("wrote %s/results%s.{json,md} (%.0f s)" % (a.out, suffix, wall))
    return 0 if all(e["target"] != "error" for e in entries) else 1


def latest_by_name(entries):
    """Each entry once, with its latest measurement (the last in the list), where its name first appeared: a group
    re-run with --only replaces the entries it produces, also those not named after the group (stage2_flop_rate)."""
    last = {e["name"]: e for e in entries}
    seen, out = set(), []
    for e in entries:
        if e["name"] not in seen:
            seen.add(e["name"])
            out.append(last[e["name"]])
    return out


def machine():
    """The CPU as a reader needs it to compare runs: its name, and family/model with the widest vector unit
    ("AMD EPYC" alone names both Zen 1 and Zen 5, whose BLAS kernels differ)."""
    model = cores = family = number = ""
    flags = []
    try:
        for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            key, _, val = l.partition(":")
            val = val.strip()
            if key == "Model name":
                model = val
            elif key == "CPU(s)":
                cores = val
            elif key == "CPU family":
                family = val
            elif key == "Model":
                number = val
            elif key == "Flags":
                flags = val.split()
    except OSError:
        pass
    vec = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    if family:
        model = "%s (family %s model %s, %s)" % (model, family, number, vec)
    mem = [l for l in open("/proc/meminfo") if l.startswith("MemTotal")][0].split()[1]
    blas = os.path.realpath("/etc/alternatives/libblas.so.3-x86_64-linux-gnu")
    return "%s, %s CPUs, %.1f GiB RAM, %s, BLAS %s" % (model, cores, int(mem) / 2 ** 20, platform.platform(), blas)


def fmt(x):
    if x is None:
        return "—"
    if isinstance(x, float):
        return "%.4g" % x
    return str(x)


def peers_section():
    """The table of results/peers_bench.md (bench/peers/run.sh, issue 66): daei against the peers' own code, shown
    first; the entries below are regression guards against the repository's own reimplementations."""
    path = os.path.join(ROOT, "results", "peers_bench.md")
    if not os.path.exists(path):
        return []
    text = open(path, encoding="utf-8").read()
    if "<!-- peers-table-start -->" not in text:
        return []
    head = [l for l in text.split("<!-- peers-table-start -->")[0].splitlines() if l.startswith("- ")][:5]
    table = text.split("<!-- peers-table-start -->")[1].split("<!-- peers-table-end -->")[0].strip()
    return ["", "## Against the peers' own code (`results/peers_bench.md`, `bash bench/run.sh --peers`)", ""] + head + \
        ["", table]


def markdown(meta, entries):
    L = ["# daei benchmarks%s" % (" (quick mode: small sizes, smoke test only)" if meta["quick"] else ""), "",
         "- command: `%s`" % meta["command"],
         "- git revision: %s%s" % (meta["git_revision"], " (+ uncommitted changes)" if meta["dirty"] else ""),
         "- machine: %s" % meta["machine"],
         "- load average: %s at the start, %s at the end (shared machine)" % (" ".join(meta["load_average_start"]),
                                                                                 " ".join(meta["load_average_end"])),
         "- wall time: %.0f s; threads: 1 torch thread, OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1 in every process" %
         meta["wall_s"],
         "- medians of alternating runs (A, B, A, B, ...); spread = (max − min)/median of the per-process medians",
         "- references: regression guards, in-repo reimplementations — \"Python reference\" is the project's own "
         "re-implementation of the same computation "
         "(`bench/*_reference.py`, on Debian's python3-torch, the same libtorch 1.13 as daei), not Hugging Face's code "
         "(`transformers` is not a dependency and is not installed here). \"raw MPI_Allreduce\" is one "
         "call on the same bytes. Ratios are reference time / daei time (or daei rate / reference rate).",
         "- allocator: daei's side runs with `DAEI_MALLOC=%s` (glibc mallopt: mmap threshold 32 MB, trim threshold "
         "1 GB, top pad 64 MB; `src/core/allocator.cpp`) unless an entry says `default` (glibc's own settings); the "
         "Python side always runs with glibc's defaults" % meta.get("malloc_default", "tuned")]
    if meta.get("blas"):
        b = meta["blas"]
        pin = ", ".join("%s=%s" % kv for kv in sorted(b["machine_env"].items()))
        L.append("- BLAS kernels: OpenBLAS core `%s` in every process (%s)" % (
            b["core"], ("this machine's environment sets " + pin if pin else "OpenBLAS's own choice")
            if b["mode"] == "machine" else "`--blas native`: " + (pin + " removed" if pin else "nothing pinned")))
    if meta.get("bf16"):
        b = meta["bf16"]
        L.append("- bf16 products: %s (`bench_entries precision`, the cpuid probe of `src/model/net/precision.h`)%s" % (
            b["isa"], "" if b["native"] else "; not native here: the `_bf16` entries are skipped"))
    if meta.get("page_fault_us") is not None:
        L.append("- page faults: %.2f µs per first touch of a 4 KiB page (bare Linux: 0.1–0.3 µs); the `_glibc` "
                 "entries compare both sides on glibc's own allocator settings" % meta["page_fault_us"])
    if meta.get("earlier_run"):
        er = meta["earlier_run"]
        L.append("- entries marked † come from earlier runs (each names its revision as `from_earlier_run` below); the "
                 "full run they started from: `%s` at %s (load %s → %s, wall %.0f s%s%s); the lines above describe only "
                 "this run" % (er["command"], er["git_revision"], " ".join(er["load_average_start"]),
                               " ".join(er["load_average_end"]), er["wall_s"],
                               ", OpenBLAS core `%s`" % er["blas"]["core"] if er.get("blas") else "",
                               ", page faults %.2f µs" % er["page_fault_us"] if "page_fault_us" in er else ""))
    L += peers_section()
    L += ["", "## Regression guards, in-repo reimplementations", "",
         "| entry | value | reference | ratio | target | met | unit | runs | spread (daei / ref) |",
         "|---|---:|---:|---:|---:|---|---|---|---|"]
    for e in entries:
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            e["name"] + (" †" if e.get("from_earlier_run") else ""), fmt(e["value"]), fmt(e["reference"]), fmt(e["ratio"]), fmt(e["target"]),
            {True: "yes", False: "**no**", None: "—"}[e["met"]], e["unit"], e["runs"], fmt(e["spread"]),
            fmt(e.get("spread_ref"))))
    split = [e for e in entries if e["name"].startswith("stage3_step_np") and e.get("phases_s")]
    if split:
        keys = sorted(split[0]["phases_s"])
        L += ["", "### Stage-3 step split (entry 8; seconds per step on rank 0, share of the step)", "",
              "| ranks | step | " + " | ".join(keys) + " |", "|---|---:|" + "---:|" * len(keys)]
        for e in split:
            L.append("| %d | %s | " % (e["sizes"]["ranks"], fmt(e["value"])) + " | ".join(
                "%s (%.0f %%)" % (fmt(e["phases_s"][k]), 100 * e["phase_share"][k]) for k in keys) + " |")
    notes = os.path.join(ROOT, "bench", "notes.md")  # explanations of missed targets, written by hand after a run
    if os.path.exists(notes) and not meta["quick"]:
        L += ["", open(notes).read().rstrip()]
    L += ["", "## Sizes and details", ""]
    for e in entries:
        d = {k: v for k, v in e.items() if k not in ("name", "value", "reference", "ratio", "target", "met", "unit",
                                                   "runs", "spread", "spread_ref", "threads")}
        L.append("- **%s**: `%s`" % (e["name"], json.dumps(d)))
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
