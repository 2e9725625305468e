"""Where an entry of bench/peers/run.py spends its time, both sides: each side's process under `perf record -e
cpu-clock` (perf's control fifo enabled only during the timed repetitions: DAEI_PERF_CTL, bench/peers/perfctl.py;
the daei side of embed_st, bench_embed_bench, is recorded whole), the samples' symbols grouped into families (MKL
GEMM, oneDNN JIT code, each ATen element-wise kernel, the kernel's page faults, the Python interpreter, malloc, ...)
and printed side by side as milliseconds per repetition.

  python3 bench/peers/perf_profile.py ENTRY [--steps 4] [--top 14] [--quick] [--malloc tuned|default] [--build build]
The peers' side runs in bench/peers/setup.sh's venv; needs perf (linux-perf) and build/bench_peers."""
import argparse, collections, json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (bench/peers/run.py: the entries' commands and sizes)

FREQ = 999


def family(dso, sym):
    if dso.startswith("[kernel"):
        return "kernel: " + ("page faults / zeroing" if re.search(r"fault|clear_page|anonymous_page|memcg|lru|folio|"
                                                                  r"pte|zap|rmqueue|page", sym) else "other")
    if dso.startswith("[JIT]") or sym.startswith("0x"):
        return "JIT code (oneDNN/brgemm kernels)"
    if "mkl_blas" in sym or "mkl_" in sym:
        kind = "bf16 gemm" if "bf16" in sym or "gemm_s16" in sym else "sgemm" if "sgemm" in sym else "sgemv" if \
            "sgemv" in sym else "other"
        return "MKL " + kind
    if "dnnl" in sym:
        return "oneDNN (non-JIT)"
    if "python" in dso:
        return "Python interpreter"
    if dso.startswith("libc"):
        if re.search(r"malloc|free|_int_|consolidate|tcache|realloc|memalign|unlink", sym):
            return "glibc malloc/free"
        if re.search(r"mem(cpy|move|set)", sym):
            return "memcpy/memset"
        return "libc other"
    if re.search(r"random64|random\b|mt19937|bernoulli", sym):
        return "ATen RNG / bernoulli (dropout masks)"
    generic = {"cpu_serial_kernel", "cpu_kernel", "cpu_kernel_vec", "vectorized_loop_kernel"}
    names = [n for n in re.findall(r"([a-z][a-z0-9]*(?:_[a-z0-9]+)*_kernel|[A-Z][A-Za-z]*Kernel[A-Za-z]*)", sym)
             if n not in generic]
    if names:
        return "ATen " + names[0]
    name = re.sub(r"operator\(\)", "operator", sym).split("(")[0].split("<")[0].strip()
    name = name.split("::")[-1] or name
    if "c10::" in sym or "at::" in sym or "torch::" in sym:
        return "ATen/c10 " + name[:50]
    return "%s %s" % (dso, name[:50])


def record(cmd, env, data, ctl):
    env = dict(env)
    pre = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQ), "-o", data]
    if ctl:
        fifo = data + ".ctl"
        os.mkfifo(fifo)
        pre += ["-D", "-1", "--control", "fifo:" + fifo]
        env["DAEI_PERF_CTL"] = fifo
    p = subprocess.run(pre + ["--"] + cmd, cwd=R.ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("profile: %s failed: %s" % (" ".join(cmd), p.stderr[-1500:]))
    rec = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio", "-g",
                          "none", "-F", "sample,dso,symbol"], capture_output=True, text=True).stdout
    fam = collections.Counter()
    for l in rep.splitlines():
        m = re.match(r"\s*(\d+)\s+(.+?)\s+\[[.k]\]\s+(.*\S)", l)
        if m:
            fam[family(m.group(2), m.group(3))] += int(m.group(1))
    return rec, fam


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("entry")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--malloc", choices=("tuned", "default"), default="tuned")
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    build = a.build if os.path.isabs(a.build) else os.path.join(R.ROOT, a.build)
    T5, SURE, st = R.sizes(a.quick)
    st = {k: (a.steps if k in ("t5", "gen", "beam", "sure") else v) for k, v in st.items()}
    st["embed_reps"] = max(2, a.steps)
    tmp = tempfile.mkdtemp(prefix="daei-peers-prof-")
    W = os.path.join(tmp, "w")
    R.run_json([os.path.join(build, "bench_peers"), "save", "--dir", W] + R.flags(T5) + R.flags(SURE), R.ENV1)
    texts = os.path.join(tmp, "texts.txt")
    rows = [json.loads(l) for l in open(os.path.join(R.ROOT, "tests/fixtures/minilm/texts.jsonl"), encoding="utf-8")]
    with open(texts, "w", encoding="utf-8") as f:
        f.write("".join(r["text"].replace("\n", " ") + "\n" for r in rows[1:st["texts"] + 1]))
    E = R.entries(build, W, T5, SURE, st, texts, os.path.join(R.ASSETS, "all-MiniLM-L6-v2"), True)
    if a.entry not in E:
        raise SystemExit("profile: entry must be one of " + ", ".join(E))
    dcmd, pcmd, unit, what = E[a.entry]
    de, pe = R.envs(a.malloc)
    out = {}
    for side, cmd, env in (("daei", dcmd, de), ("peer", pcmd, pe)):
        whole = side == "daei" and a.entry == "embed_st"
        rec, fam = record(cmd, env, os.path.join(tmp, side + ".data"), not whole)
        # recorded repetitions: the timed ones (st_embed times every pass but records from the second on); the
        # daei side of embed_st is recorded whole (its start-up and all its passes)
        reps = len(rec["times"]) - (1 if a.entry == "embed_st" and not whole else 0)
        out[side] = (rec, fam, reps, whole)
    print("## %s (%s): perf cpu-clock samples at %d Hz, ms per repetition (%s)\n" % (a.entry, what, FREQ, unit))
    for side, (rec, fam, reps, whole) in out.items():
        tot = sum(fam.values())
        print("- %s: %d repetitions%s, median %.4g s; %.0f ms of samples a repetition" % (
            side, reps, " (whole process, start-up included)" if whole else "",
            sorted(rec["times"])[len(rec["times"]) // 2], 1e3 * tot / FREQ / reps))
    keys = collections.Counter()
    for side, (_, fam, reps, _) in out.items():
        for k, v in fam.items():
            keys[k] += v / reps
    print("\n| family | daei ms | peer ms | peer − daei |\n|---|---:|---:|---:|")
    for k, _ in keys.most_common(a.top):
        d = 1e3 * out["daei"][1][k] / FREQ / out["daei"][2]
        p = 1e3 * out["peer"][1][k] / FREQ / out["peer"][2]
        print("| %s | %.1f | %.1f | %+.1f |" % (k, d, p, p - d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
