#!/usr/bin/env bash
# Issue 14, "serve-embedder": hostile input. Chunked and compressed bodies, the API key decided from the headers
# before any body is read, slowloris and idle connections (a normal request still answered in < 1 s), no
# SO_REUSEPORT (a second server on the port fails "address in use"), a backlog of 1024, no MPI listener on other
# interfaces, and the answers that were already right (400/401/413) with the key never logged.
set -euo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd)
D=$BUILD/daei
T=$(mktemp -d /tmp/daei-e2e-serve.XXXXXX)
SERVER_PID=""
cleanup() { [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
cd "$T"
export DAEI_TEST_KEY=sekrit-key-123
cfg=(--set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini" --set server.api_key_env=DAEI_TEST_KEY
     --set server.max_body_bytes=65536 --set server.threads=2 --set server.read_timeout_s=3.0)
: >server.out
"$D" serve-embedder "${cfg[@]}" --port 0 >server.out 2>server.err &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's#^listening http://127.0.0.1:\([0-9]*\)$#\1#p' server.out || true)
  [[ -n $PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat server.err; fail "server exited"; }
  sleep 0.1
done
[[ -n $PORT ]] || fail "server did not start"

echo "== listening sockets: only 127.0.0.1:$PORT (no MPI listener), backlog 1024"
socks=$(ss -Hltnp | grep "pid=$SERVER_PID," || true)
echo "$socks"
[[ $(echo "$socks" | wc -l) == 1 ]] || fail "the server listens on more than one socket"
grep -q "127.0.0.1:$PORT " <<<"$socks" || fail "not 127.0.0.1:$PORT"
backlog=$(echo "$socks" | awk '{print $3}')
want=$(( $(cat /proc/sys/net/core/somaxconn) < 1024 ? $(cat /proc/sys/net/core/somaxconn) : 1024 ))
[[ $backlog == "$want" ]] || fail "listen backlog $backlog, want $want"

echo "== a second server on the same port: address in use"
set +e; timeout 20 "$D" serve-embedder "${cfg[@]}" --port "$PORT" >second.out 2>second.err; rc=$?; set -e
[[ $rc == 1 ]] || { cat second.err; fail "second server exit $rc, want 1"; }
grep -q "cannot bind 127.0.0.1:$PORT: address in use" second.err || { cat second.err; fail "no 'address in use'"; }

python3 - "$PORT" <<'PY'
import gzip, json, socket, sys, threading, time
port = int(sys.argv[1]); KEY = "sekrit-key-123"

def raw(data, timeout=5.0, send_after=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    if send_after: s.sendall(send_after)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
                if n and len(body) >= n[0]: break
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out

def status(resp):
    return int(resp.split(b" ")[1]) if resp.startswith(b"HTTP/1.1 ") else None

def post(body, headers=None, key=True):
    h = {"Host": "x", "Content-Type": "application/json", "Content-Length": str(len(body))}
    if key: h["Authorization"] = "Bearer " + KEY
    h.update(headers or {})
    head = "POST /v1/embeddings HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return raw(head.encode() + body)

good = json.dumps({"input": ["the cat sat"]}).encode()
r = post(good); assert status(r) == 200, r[:200]
print("normal request: 200")

# Already right, kept: malformed JSON, wrong types, oversize batch, invalid UTF-8, wrong or missing key.
assert status(post(b"{not json")) == 400
assert status(post(json.dumps({"input": 3}).encode())) == 400
assert status(post(json.dumps({"input": ["a"] * 300}).encode())) == 400
assert status(post(b'{"input": ["\xff\xfe"]}')) == 400
assert status(post(good, key=False)) == 401
assert status(post(good, {"Authorization": "Bearer wrong"}, key=False)) == 401
print("400 / 401 answers: ok")

# Chunked body over max_body_bytes (64 KB here): refused.
chunk = b"x" * 16384
body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(16)) + b"0\r\n\r\n"
head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n").encode()
r = raw(head + body)
assert status(r) == 413, r[:200]
print("chunked 256 KB body: 413")

# A client that sends its whole body before reading (Python's http.client) sees the 413 of a 2 MB body every time:
# the server drains the body (up to max_body_bytes + 16 MiB) before answering, instead of resetting the connection.
import http.client
big = json.dumps({"input": ["word " * 400] * 1000}).encode()
assert len(big) > 2_000_000
for attempt in range(3):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/v1/embeddings", body=big,
              headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    resp = c.getresponse()
    assert resp.status == 413, (attempt, resp.status)
    assert b"request body too large" in resp.read()
    c.close()
print("http.client, 2 MB body: 413 read by the client 3 times of 3")

# Compressed bodies are refused, whatever they inflate to.
bomb = gzip.compress(json.dumps({"input": ["a" * (8 << 20)]}).encode())
r = post(bomb, {"Content-Encoding": "gzip"})
assert status(r) == 415, r[:200]
print(f"gzip body ({len(bomb)} bytes, inflating to 8 MB): 415")

# The key is decided from the headers: without it, the answer comes before any of the body is sent.
head = f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: {510 * 1024}\r\n\r\n".encode()
t0 = time.time(); r = raw(head, timeout=3.0)
assert status(r) == 401, r[:200]
print(f"no key, 510 KB body announced, none sent: 401 in {time.time() - t0:.3f} s")
# A huge Content-Length is refused at once, not read and skipped.
head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Length: {10**12}\r\n\r\n").encode()
r = raw(head, timeout=3.0)
assert status(r) == 413, r[:200]
print("Content-Length 10^12: 413 at once")

# 12 slowloris clients (a header line every 0.5 s) and 8 idle connections; normal requests stay fast.
stop = False
def slowloris():
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")
        i = 0
        while not stop:
            s.sendall(f"X-Slow-{i}: y\r\n".encode()); i += 1
            time.sleep(0.5)
    except OSError:
        pass
threads = [threading.Thread(target=slowloris, daemon=True) for _ in range(12)]
for t in threads: t.start()
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
time.sleep(1.0)
worst = 0.0
for _ in range(10):
    t0 = time.time(); r = post(good); dt = time.time() - t0
    assert status(r) == 200, r[:200]
    worst = max(worst, dt)
    time.sleep(0.2)
stop = True
print(f"10 requests during 12 slowloris + 8 idle connections: slowest {worst:.3f} s")
assert worst < 1.0, worst
PY

kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""
if grep -q "sekrit-key-123" server.out server.err; then fail "the API key was logged"; fi
echo "ok"
