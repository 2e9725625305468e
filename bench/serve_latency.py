#!/usr/bin/env python3
"""daei serve-embedder under load (issue 63 item 8): the latency of one text and the throughput of 64 clients.

  python3 bench/serve_latency.py [--build build] [--config configs/quickstart.yaml] [--requests 300]
                                 [--clients 64] [--per-client 20] [--threads 2] [--out results/serve_minilm.md]

Starts `daei serve-embedder` on a free loopback port (server.threads = --threads: the cores that embed), waits for it,
then (1) sends --requests single-text requests one after another (p50, p99, mean latency), (2) starts --clients
threads that each send --per-client single-text requests back to back on their own connection (requests/s, and the
latency p50/p99 a client sees under that load). Texts: the committed MiniLM parity texts
(tests/fixtures/minilm/texts.jsonl), cycled. Standard library only; prints the markdown table and writes --out.
"""
import argparse, http.client, json, os, platform, socket, statistics, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def texts():
    path = os.path.join(ROOT, "tests/fixtures/minilm/texts.jsonl")
    rows = [json.loads(l) for l in open(path) if l.strip()]
    out = [r["text"] for r in rows if "text" in r]  # the first line is the fixture's metadata
    return [t for t in out if t.strip()] or ["a short text"]


def post(conn, text):
    body = json.dumps({"input": [text]})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
    return dt


def pct(v, p):
    v = sorted(v)
    k = (len(v) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--config", default="configs/quickstart.yaml")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--per-client", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/serve_minilm.md")
    a = ap.parse_args()
    daei = os.path.join(ROOT, a.build, "daei")
    if not os.access(daei, os.X_OK):
        sys.exit("serve_latency: no daei binary at %s (build it first)" % daei)
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [daei, "serve-embedder", "--config", os.path.join(ROOT, a.config), "--port", str(port),
           "--set", "server.threads=%d" % a.threads, "--set", "train.threads=1"]
    log = open(os.path.join("/tmp", "serve_latency.%d.log" % os.getpid()), "w")
    t_start = time.time()
    load_start = open("/proc/loadavg").read().split()[:3]
    srv = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    T = texts()
    try:
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                post(c, "ready?")
                c.close()
                break
            except (ConnectionError, OSError):
                if srv.poll() is not None or time.time() > deadline:
                    sys.exit("serve_latency: the server did not answer (log: %s)" % log.name)
                time.sleep(0.2)
        startup = time.time() - t_start
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for i in range(20):  # warm-up
            post(conn, T[i % len(T)])
        single = [post(conn, T[i % len(T)]) for i in range(a.requests)]
        conn.close()
        lat, errors, lock = [], [], threading.Lock()

        def client(cid):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            mine = []
            try:
                for j in range(a.per_client):
                    mine.append(post(c, T[(cid * a.per_client + j) % len(T)]))
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(repr(e))
            c.close()
            with lock:
                lat.extend(mine)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    load_end = open("/proc/loadavg").read().split()[:3]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    ver = subprocess.run([daei, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    ms = lambda x: "%.1f ms" % (1000 * x)
    md = ["# serve-embedder latency and throughput (all-MiniLM-L6-v2 + noise)", "",
          "Command: `python3 bench/serve_latency.py %s`  " % " ".join(sys.argv[1:]),
          "Revision %s · %s, %d CPUs · %s · server.threads %d, 1 torch thread each · server start to first answer %.1f s"
          % (rev, cpu, os.cpu_count(), ver[0] if ver else "?", a.threads, startup) + "  ",
          "%s UTC · wall time %.0f s · load average %s at the start, %s at the end (other work on the machine shows "
          "here)" % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), time.time() - t_start, " ".join(load_start),
                     " ".join(load_end)), "",
          "| load | requests | p50 | p99 | mean | throughput |", "|---|---|---|---|---|---|",
          "| one client, one text a request, back to back | %d | %s | %s | %s | %.1f requests/s |"
          % (len(single), ms(pct(single, 50)), ms(pct(single, 99)), ms(statistics.mean(single)),
             len(single) / sum(single)),
          "| %d clients, one text a request, %d requests each | %d | %s | %s | %s | %.1f requests/s |"
          % (a.clients, a.per_client, len(lat), ms(pct(lat, 50)), ms(pct(lat, 99)), ms(statistics.mean(lat)),
             len(lat) / wall), ""]
    if errors:
        md.append("Errors: %d (%s)" % (len(errors), "; ".join(sorted(set(errors))[:3])))
    md.append("Texts: tests/fixtures/minilm/texts.jsonl (%d texts, cycled). Each request is one text: the server "
              "embeds requests as they come (no batching across requests), so 64 clients queue on %d threads. The clients "
              "(Python threads) run on the same cores as the server, so the 64-client throughput is a lower bound."
              % (len(T), a.threads))
    text = "\n".join(md) + "\n"
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.join(ROOT, a.out)), exist_ok=True)
        open(os.path.join(ROOT, a.out), "w").write(text)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
