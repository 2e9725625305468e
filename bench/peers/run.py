"""daei against the peers' own code (issue 66), alternated in one run: paired rounds, each running daei's process and
the peer's process of every entry back to back (the order swapped every other round), 1 thread a process
(OMP/MKL/OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)), the same shapes as bench/runner.py's entries, and under
each allocator setting on both sides at once:
  tuned    daei's default (DAEI_MALLOC=tuned: mallopt mmap threshold 32 MiB, trim threshold 1 GiB, top pad 64 MiB)
           and the peer with the same three values through GLIBC_TUNABLES;
  default  glibc's own settings on both sides (DAEI_MALLOC=default, no tunables).
Entries (ratio = peer time / daei time, i.e. daei's speed over the peer's; the median of the paired rounds):
  t5_step_hf_fp32, t5_step_hf_bf16  the inverter train step (forward, backward, AdamW) vs transformers'
                                    T5ForConditionalGeneration with inputs_embeds (bf16: under torch.autocast)
  generate_hf_greedy, generate_hf_beam4  greedy / beam 4 (no_repeat_ngram_size 3, repetition_penalty 2.0), 32 tokens
                                    with the KV cache vs generate(); same weights, outputs compared token for token
  sure_step_ref                     the SURE step vs the DAEI public code's form in PyTorch; eval-mode losses compared
  embed_st                          all-MiniLM-L6-v2 encode of 500 texts vs sentence-transformers
Run through bench/peers/run.sh (checks the venv and the build); writes OUT.json and OUT.md.

  bench/peers/run.sh [--rounds 5] [--quick] [--only ENTRY,...] [--malloc both|tuned|default] [--out results/peers_bench]
"""
import argparse, json, os, shlex, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "peers")
ASSETS = os.environ.get("DAEI_ASSETS") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(
    os.path.expanduser("~"), ".cache"), "daei")
VENV_PY = os.path.join(ASSETS, "venv-st-5.1.2", "bin", "python")  # bench/peers/setup.sh's venv
PY = VENV_PY if os.access(VENV_PY, os.X_OK) else sys.executable  # the peers' scripts run in the venv
ENV1 = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
ENV1.pop("GLIBC_TUNABLES", None)
TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864"
LOG = []


def run_json(cmd, env, timeout=1800):
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    LOG.append(dict(cmd=" ".join(cmd), rc=p.returncode, s=round(time.time() - t0, 1)))
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-1500:]))
    return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])


def envs(setting):
    """(daei's environment, the peer's) under one allocator setting."""
    if setting == "tuned":
        return dict(ENV1, DAEI_MALLOC="tuned"), dict(ENV1, GLIBC_TUNABLES=TUNABLES)
    return dict(ENV1, DAEI_MALLOC="default"), dict(ENV1)


def peer_versions():
    code = ("import json; from importlib.metadata import version; print(json.dumps({k: version(k) for k in "
            "('torch', 'transformers', 'sentence-transformers', 'tokenizers')}))")
    return json.loads(subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout)


def cpu_info():
    flags, model, cores = set(), "", os.cpu_count()
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name") and not model:
            model = l.split(":", 1)[1].strip()
        elif l.startswith("flags") and not flags:
            flags = set(l.split(":", 1)[1].split())
    bf16 = [f for f in ("avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16") if f in flags]
    return model, cores, bf16


def sizes(quick):
    T5 = dict(dim=100, repeat=16, vocab=4096, batch=64, layers=2, heads=8, label_len=32, d_model=256, d_kv=32, d_ff=1024)
    SURE = dict(dae_dim=768, dae_hidden=1024, dae_depth=3, dae_batch=256, probes=5)
    steps = dict(t5=3, gen=3, beam=2, sure=3, embed_reps=3, texts=500)
    if quick:
        T5.update(batch=16, d_model=128, d_kv=16, d_ff=512)
        SURE.update(dae_dim=256, dae_hidden=256, dae_depth=2, dae_batch=64)
        steps = dict(t5=2, gen=1, beam=1, sure=2, embed_reps=2, texts=64)
    return T5, SURE, steps


def flags(d):
    return [x for k, v in d.items() for x in ("--" + k.replace("_", "-"), str(v))]


def entries(build, W, T5, SURE, st, texts, model, native_bf16):
    """name -> (daei command, peer command, unit, what)."""
    bp = os.path.join(build, "bench_peers")
    hf = [PY, os.path.join(HERE, "hf_t5.py")]
    t5d = ["--dir", W, "--batch", str(T5["batch"]), "--label-len", str(T5["label_len"])]
    E = {"t5_step_hf_fp32": ([bp, "t5-step", "--steps", str(st["t5"]), "--precision", "fp32"] + t5d,
                             hf + ["step", "--steps", str(st["t5"])] + t5d, "s/step", "T5 train step, fp32")}
    if native_bf16:
        E["t5_step_hf_bf16"] = ([bp, "t5-step", "--steps", str(st["t5"]), "--precision", "bf16"] + t5d,
                                hf + ["step", "--steps", str(st["t5"]), "--amp", "bf16"] + t5d, "s/step",
                                "T5 train step, bf16 (peer: torch.autocast)")
    beam = ["--beams", "4", "--no-repeat-ngram", "3", "--repetition-penalty", "2.0"]
    E["generate_hf_greedy"] = ([bp, "t5-generate", "--steps", str(st["gen"])] + t5d, hf + ["generate", "--steps",
                               str(st["gen"])] + t5d, "s/batch", "greedy, %d tokens, KV cache" % T5["label_len"])
    E["generate_hf_beam4"] = ([bp, "t5-generate", "--steps", str(st["beam"])] + t5d + beam,
                              hf + ["generate", "--steps", str(st["beam"])] + t5d + beam, "s/batch",
                              "beam 4, no_repeat_ngram 3, repetition_penalty 2.0, %d tokens" % T5["label_len"])
    E["sure_step_ref"] = ([bp, "sure", "--dir", W, "--steps", str(st["sure"])],
                          [PY, os.path.join(HERE, "sure_daei.py"), "--dir", W, "--steps", str(st["sure"])], "s/step",
                          "SURE step (K=%d VJPs, backward, AdamW)" % SURE["probes"])
    E["embed_st"] = ([os.path.join(build, "bench_embed_bench"), "--model", model, "--texts", texts, "--batch", "64",
                      "--max-length", "256", "--rounds", str(st["embed_reps"])],
                     [PY, os.path.join(HERE, "st_embed.py"), "--model", model, "--texts", texts, "--batch", "64",
                      "--reps", str(st["embed_reps"])], "s/pass", "MiniLM encode, %d texts, batch 64" % st["texts"])
    return E


def per_process(name, rec):
    """The number one process gives: the median of its step times (embed: its fastest pass)."""
    return min(rec["times"]) if name == "embed_st" else statistics.median(rec["times"])


def agreement(name, d, p):
    if name.startswith("generate"):
        a, b = d["ids"], p["ids"]
        rows = sum(x == y for x, y in zip(a, b))
        toks = sum(u == v for x, y in zip(a, b) for u, v in zip(x, y))
        n = sum(len(x) for x in a)
        return dict(rows_equal=rows, rows=len(a), tokens_equal=toks, tokens=n, same_shape=[len(a), len(a[0])] == [
            len(b), len(b[0])], text="%d/%d rows, %d/%d tokens equal" % (rows, len(a), toks, n))
    if name == "sure_step_ref":
        la, lb = d["loss_eval"], p["loss_eval"]
        return dict(loss_daei=la, loss_peer=lb, abs_diff=abs(la - lb), rel_diff=abs(la - lb) / max(1e-30, abs(lb)),
                    text="eval loss %.8g vs %.8g (rel. diff %.1e)" % (la, lb, abs(la - lb) / max(1e-30, abs(lb))))
    if name.startswith("t5_step"):
        la, lb = d["loss_eval"], p["loss_eval"]
        return dict(loss_eval_daei=la, loss_eval_peer=lb, rel_diff=abs(la - lb) / abs(lb),
                    first_loss_daei=d["losses"][0], first_loss_peer=p["losses"][0],
                    text="eval CE %.6g vs %.6g (rel. diff %.1e); first train step %.4f vs %.4f (dropout masks "
                         "differ)" % (la, lb, abs(la - lb) / abs(lb), d["losses"][0], p["losses"][0]))
    if name == "embed_st":
        diff = max(abs(u - v) for u, v in zip(d["first"], p["first"]))
        return dict(first_daei=d["first"], first_peer=p["first"], max_abs_diff=diff,
                    text="row 0, first 4 values: max abs diff %.1e" % diff)
    return {}


def summarize(name, pairs, target):
    ratios = [p / d for d, p in pairs]
    m = statistics.median(ratios)
    return dict(ratio=m, ratio_min=min(ratios), ratio_max=max(ratios), pair_ratios=[round(r, 4) for r in ratios],
                daei_s=statistics.median([d for d, _ in pairs]), peer_s=statistics.median([p for _, p in pairs]),
                target=target, met=m >= target)


TARGETS = dict(t5_step_hf_fp32=1.5, t5_step_hf_bf16=1.3, generate_hf_greedy=1.3, generate_hf_beam4=1.3,
               sure_step_ref=1.2, embed_st=1.3)


def markdown(meta, res):
    L = ["# daei against the peers' own code (issue 66)", "",
         "- command: `%s`" % meta["command"], "- git revision: %s%s" % (meta["git_revision"], " (+ uncommitted "
                                                                         "changes)" if meta["dirty"] else ""),
         "- machine: %s, %s cores; bf16 ISA (cpuinfo flags): %s; daei's probe: %s" % (
             meta["cpu"], meta["cores"], ", ".join(meta["bf16_flags"]) or "none", meta["daei_bf16"]),
         "- versions: torch %s (both sides: daei's libtorch is the same wheel), transformers %s, "
         "sentence-transformers %s, tokenizers %s" % tuple(meta["versions"][k] for k in (
             "torch", "transformers", "sentence-transformers", "tokenizers")),
         "- wall time %.0f s; load average (/proc/loadavg) %s at the start, %s at the end" % (
             meta["wall_s"], meta["load_start"], meta["load_end"]),
         "- %d paired rounds; in each, daei's process and the peer's back to back (order swapped every other round), "
         "1 thread a process; ratio = peer time / daei time (> 1: daei faster), the median of the rounds' ratios "
         "[min, max over the rounds]; a process reports the median of its steps (embed: its fastest of %d passes)" % (
             meta["rounds"], meta["embed_reps"]),
         "- allocator settings, the same on both sides: `tuned` = daei's DAEI_MALLOC=tuned and the peer with "
         "GLIBC_TUNABLES=%s; `default` = glibc's own on both" % TUNABLES, ""]
    if meta.get("note"):
        L += ["- " + meta["note"], ""]
    settings = meta["settings"]
    L += ["<!-- peers-table-start -->",
          "| entry | what | " + " | ".join("daei / peer (%s)" % s for s in settings) + " | " +
          " | ".join("ratio %s [min, max]" % s for s in settings) + " | target | met | agreement |",
          "|---|---|" + "---:|" * (2 * len(settings)) + "---:|---|---|"]
    for name, r in res.items():
        if "error" in r:
            L.append("| %s | %s | error: %s |" % (name, r["what"], r["error"][:200].replace("|", "/")))
            continue
        cells = ["%.4g / %.4g %s" % (r[s]["daei_s"], r[s]["peer_s"], r["unit"]) for s in settings]
        rat = ["**%.2f** [%.2f, %.2f]" % (r[s]["ratio"], r[s]["ratio_min"], r[s]["ratio_max"]) for s in settings]
        met = "/".join("yes" if r[s]["met"] else "**no**" for s in settings)
        L.append("| %s | %s | %s | %s | ≥ %.1f | %s | %s |" % (name, r["what"], " | ".join(cells), " | ".join(rat),
                                                             r["target"], met, r["agreement"].get("text", "")))
    L.append("<!-- peers-table-end -->")
    notes = os.path.join(HERE, "findings.md")  # the profiles of the missed targets, written by hand after a run
    if os.path.exists(notes) and not meta.get("quick"):
        L += ["", open(notes).read().rstrip()]
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 round unless --rounds: a smoke test")
    ap.add_argument("--only", default="")
    ap.add_argument("--malloc", choices=("both", "tuned", "default"), default="both")
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="results/peers_bench", help="writes OUT.json and OUT.md (relative to the repo)")
    ap.add_argument("--note", default="", help="a line for the header (e.g. what ran beside the benchmark)")
    ap.add_argument("--render", metavar="OUT.json", help="only rewrite OUT.md from a finished run's OUT.json")
    a = ap.parse_args()
    if a.render:
        j = json.load(open(a.render))
        md = markdown(j["meta"], j["entries"])
        with open(a.render[:-len(".json")] + ".md", "w") as f:
            f.write(md)
        print(md)
        return 0
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    for b in ("bench_peers", "bench_embed_bench"):
        if not os.access(os.path.join(build, b), os.X_OK):
            sys.exit("peers: %s/%s missing (flock /tmp/daei-build.lock cmake --build build --target bench_peers "
                     "bench_embed_bench)" % (build, b))
    model = os.path.join(ASSETS, "all-MiniLM-L6-v2")
    if not os.path.isdir(model):
        sys.exit("peers: no %s (launch/setup.sh)" % model)
    rounds = a.rounds if (a.rounds != 5 or not a.quick) else 1
    T5, SURE, st = sizes(a.quick)
    settings = ["tuned", "default"] if a.malloc == "both" else [a.malloc]
    tmp = tempfile.mkdtemp(prefix="daei-peers-")
    W = os.path.join(tmp, "w")
    run_json([os.path.join(build, "bench_peers"), "save", "--dir", W] + flags(T5) + flags(SURE), ENV1)
    texts = os.path.join(tmp, "texts.txt")
    rows = [json.loads(l) for l in open(os.path.join(ROOT, "tests/fixtures/minilm/texts.jsonl"), encoding="utf-8")][1:]
    with open(texts, "w", encoding="utf-8") as f:
        for r in rows[:st["texts"]]:
            f.write(r["text"].replace("\n", " ") + "\n")
    model_name, cores, bf16_flags = cpu_info()
    try:
        probe = run_json([os.path.join(build, "bench_entries"), "precision"], ENV1)
        daei_bf16, native = "%s (native: %s)" % (probe["isa"], probe["native"]), bool(probe["native"])
    except (OSError, RuntimeError, IndexError, ValueError) as ex:
        daei_bf16, native = "probe failed: %s" % str(ex)[-100:], "avx512_bf16" in bf16_flags
    E = entries(build, W, T5, SURE, st, texts, model, native)
    only = [x for x in a.only.split(",") if x]
    names = [n for n in E if not only or n in only]
    load0, t0 = open("/proc/loadavg").read().strip(), time.time()
    recs = {n: {s: [] for s in settings} for n in names}
    errors = {}
    for r in range(rounds):
        for n in names:
            if n in errors:
                continue
            dcmd, pcmd, _, _ = E[n]
            for s in settings:
                de, pe = envs(s)
                try:
                    if r % 2 == 0:
                        d = run_json(dcmd, de)
                        p = run_json(pcmd, pe)
                    else:
                        p = run_json(pcmd, pe)
                        d = run_json(dcmd, de)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError, IndexError) as ex:
                    errors[n] = str(ex)[-800:]
                    break
                recs[n][s].append((d, p))
                print("round %d %-20s %-7s daei %.4g  peer %.4g  ratio %.3f" % (
                    r + 1, n, s, per_process(n, d), per_process(n, p), per_process(n, p) / per_process(n, d)),
                    flush=True)
    res = {}
    for n in names:
        _, _, unit, what = E[n]
        if n in errors:
            res[n] = dict(what=what, unit=unit, error=errors[n])
            continue
        r = dict(what=what, unit=unit, target=TARGETS[n], daei_cmd=" ".join(E[n][0]).replace(tmp, "$TMP").replace(
            ROOT + "/", ""), peer_cmd=" ".join(E[n][1]).replace(tmp, "$TMP").replace(ROOT + "/", ""))
        for s in settings:
            pairs = [(per_process(n, d), per_process(n, p)) for d, p in recs[n][s]]
            r[s] = summarize(n, pairs, TARGETS[n])
            r[s]["minflt_daei"] = statistics.median([d.get("minflt", 0) for d, _ in recs[n][s]])
            r[s]["minflt_peer"] = statistics.median([p.get("minflt", 0) for _, p in recs[n][s]])
        d0, p0 = recs[n][settings[0]][0]
        r["agreement"] = agreement(n, d0, p0)
        # every round's outputs the same as the first's (deterministic decoding, fixed probes)
        if n.startswith("generate"):
            r["agreement"]["all_rounds_same"] = all(d["ids"] == d0["ids"] and p["ids"] == p0["ids"]
                                                    for s in settings for d, p in recs[n][s])
        res[n] = r
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "bench"], cwd=ROOT).returncode != 0
    meta = dict(command="bash bench/peers/run.sh " + shlex.join(sys.argv[1:]), git_revision=rev.strip(), dirty=dirty,
                cpu=model_name, cores=cores, bf16_flags=bf16_flags, daei_bf16=daei_bf16, rounds=rounds,
                settings=settings, embed_reps=st["embed_reps"], quick=a.quick, note=a.note,
                versions=peer_versions(),
                load_start=load0, load_end=open("/proc/loadavg").read().strip(), wall_s=time.time() - t0,
                sizes=dict(t5=T5, sure=SURE, steps=st), threads=1)
    md = markdown(meta, res)
    out = a.out if os.path.isabs(a.out) else os.path.join(ROOT, a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(dict(meta=meta, entries=res, log=LOG), f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(md)
    print(md)
    print("wrote %s.{json,md}" % os.path.relpath(out, ROOT))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
