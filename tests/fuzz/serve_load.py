#!/usr/bin/env python3
"""Hostile clients against a running serve-embedder (tests/fuzz/serve_load.sh starts it): PORT PID SLOW REQS KEY [HOLD].

Phases: baseline (200 valid requests alone); attack: SLOW slow connections (a header or body byte a second), 50
bodies over max_body_bytes, 50 malformed chunked bodies, and REQS requests from 8 workers mixing valid and invalid
bodies; then, when HOLD > 0, HOLD seconds more of the slow clients (longer than server.request_timeout_s, so the
server cuts them off and they reconnect) with one valid request every 0.1 s. Prints one table row per phase: requests, errors (a valid request not answered 200, an invalid one answered
200 or 5xx, a connection failure), p50/p99 latency of the valid requests, and the server's peak RSS (/proc VmHWM)."""
import json
import random
import socket
import sys
import threading
import time

PORT, PID, SLOW, REQS, KEY = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
HOLD = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
VALID = json.dumps({"model": "daei", "input": ["the cat sat on the mat", "a dog"]}).encode()
INVALID = [b"{", b'{"input": 5}', b'{"input": []}', b"\xff\xfe", b'{"input": ["' + b"x" * 70000 + b'"]}',
           json.dumps({"input": ["a"] * 1000}).encode(), b"null", b'{"input": "' + b"\\ud800" + b'"}']


def request(body, key=KEY, timeout=10.0):
    """One POST on a fresh connection: (status or None, seconds)."""
    t0 = time.monotonic()
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return raw(head + body, timeout), time.monotonic() - t0


def raw(data, timeout=10.0):
    """Sends bytes, reads the answer to the end; the status code, or None when the connection failed."""
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=timeout) as s:
            try:
                s.sendall(data)
            except OSError:
                pass  # the server may answer (413) and close before the whole body went out
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_mb():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000 if xs else float("nan")


class Tally:
    def __init__(self):
        self.n, self.errors, self.lat, self.lock = 0, 0, [], threading.Lock()

    def add(self, valid, status, secs):
        ok = status == 200 if valid else (status is not None and 400 <= status < 500)
        with self.lock:
            self.n += 1
            self.errors += not ok
            if valid and status == 200:
                self.lat.append(secs)


def mixed(count, tally, workers=8):
    """count requests, half valid, half one of INVALID (some with a wrong key), from `workers` threads."""
    rnd = random.Random(7)
    plan = [(rnd.random() < 0.5, rnd.randrange(len(INVALID)), rnd.random() < 0.1) for _ in range(count)]
    it, lock = iter(plan), threading.Lock()

    def work():
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                return
            valid, which, bad_key = job
            if valid:
                tally.add(True, *request(VALID))
            else:
                tally.add(False, *request(INVALID[which], key="wrong" if bad_key else KEY))
    ts = [threading.Thread(target=work) for _ in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def slowloris(n, stop, held):
    """n connections trickling a byte a second, reopened when the server closes them: the even ones a request header
    (never finished), the odd ones a body of 4,096 bytes after a whole header (Content-Length)."""
    head = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4096
    body_head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                 f"Content-Length: 4096\r\n\r\n").encode()
    body = b'{"input": ["' + b"b" * 4000

    def connect(i):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        if i % 2:
            s.sendall(body_head)
        s.setblocking(False)
        return s
    socks = []
    for i in range(n):
        try:
            socks.append([connect(i), 0, i])
        except OSError:
            break
    held.append(len(socks))
    while not stop.is_set():
        for e in socks:
            data = body if e[2] % 2 else head
            try:
                e[0].send(data[e[1] % len(data):e[1] % len(data) + 1])
                e[1] += 1
            except OSError:
                held.append(-1)  # closed by the server (request deadline): counted, reopened
                try:
                    e[0].close()
                    e[0], e[1] = connect(e[2]), 0
                except OSError:
                    pass
        stop.wait(1.0)
    for e in socks:
        e[0].close()


def over_limit(tally):
    """50 bodies over max_body_bytes (65536): 413, never 200; and 50 malformed chunked bodies: 400, never 200."""
    for i in range(50):
        body = b'{"input": ["' + b"y" * 200000 + b'"]}'
        tally.add(False, *request(body))
        chunks = [b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\nab\r\n0\r\n\r\n", b"ffffffffffffffffff\r\nx\r\n",
                  b"3;ext=" + b"e" * 10000 + b"\r\nabc\r\n0\r\n\r\n", b"-1\r\nx\r\n0\r\n\r\n"][i % 5]
        head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
        t0 = time.monotonic()
        tally.add(False, raw(head + chunks), time.monotonic() - t0)


def row(name, t, wall):
    print(f"| {name} | {t.n} | {t.errors} | {pct(t.lat, 50):.1f} | {pct(t.lat, 99):.1f} | {wall:.0f} s | "
          f"{peak_rss_mb():.0f} MB |", flush=True)


def main():
    print("| phase | requests | errors | p50 valid (ms) | p99 valid (ms) | wall | server peak RSS |")
    print("|---|---|---|---|---|---|---|")
    base, t0 = Tally(), time.monotonic()
    for _ in range(200):
        base.add(True, *request(VALID))
    row("baseline: 200 valid, alone", base, time.monotonic() - t0)
    stop, held = threading.Event(), []
    sl = threading.Thread(target=slowloris, args=(SLOW, stop, held))
    sl.start()
    time.sleep(3)
    attack, t0 = Tally(), time.monotonic()
    ol = threading.Thread(target=over_limit, args=(attack,))
    ol.start()
    mixed(REQS, attack)
    ol.join()
    wall = time.monotonic() - t0
    row(f"attack: {REQS} mixed + 100 over-limit/chunked, {held[0] if held else 0} slow clients", attack, wall)
    if HOLD > 0:
        sustained, t0 = Tally(), time.monotonic()
        while time.monotonic() - t0 < HOLD:
            sustained.add(True, *request(VALID))
            time.sleep(0.1)
        row(f"sustained: the slow clients for {HOLD:.0f} s more, a valid request every 0.1 s", sustained,
            time.monotonic() - t0)
    stop.set()
    sl.join()
    print(f"slow clients: {held[0] if held else 0} connected of {SLOW}; {held.count(-1)} closed by the server")
    after = Tally()
    for _ in range(50):
        after.add(True, *request(VALID))
    row("after: 50 valid", after, 0)
    return 1 if base.errors or after.errors or attack.errors else 0


if __name__ == "__main__":
    sys.exit(main())
