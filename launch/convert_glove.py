#!/usr/bin/env python3
"""Converts a word-vector text file to the folder daei's GloVe embedder reads (embedder.kind: glove).

usage: convert_glove.py [--member NAME] INPUT OUTDIR

INPUT is a word-vector text file, plain, .gz or .zip (recognised by their first bytes, not their names), or - for
standard input (plain or gzip):
  - GloVe's text format, one `word v1 ... vd` line per word (glove.6B.100d.txt, or glove.6B.zip with
    --member glove.6B.100d.txt: the zip holds the 50-, 100-, 200- and 300-d files);
  - word2vec / fastText .vec text: the same lines after a `V d` header line, which is detected and skipped (the
    file must then hold V words).
Fields are separated by ASCII white space; d is the number of values on the first word's line. Words are kept as
their bytes (UTF-8 in every published file); a repeated word keeps its first vector and the repeats are counted.
--member NAME picks the file inside a zip (its full name or its base name); without it a zip must hold one file.

OUTDIR receives
  vectors.safetensors  one float32 tensor "vectors" [V, d]; row i is the word on line i of vocab.txt
  vocab.txt            one word a line
  asset.json           rows, dim and the size and SHA-256 of both files (checked by daei before use)
Then: embedder.kind: glove, embedder.glove_dir: OUTDIR (or OUTDIR = ASSETS/glove-100d, the default).

Streaming: the vectors go to a temporary file as they are read, so memory holds one line and the set of words
seen (about 40 MB for GloVe 6B's 400,000 words), whatever d. Malformed input (a line with another number of values,
a value that is not a finite number, a header that does not match the file) stops it with one error line and
exit 1, leaving OUTDIR as it was.
"""
import array
import contextlib
import gzip
import hashlib
import io
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import zipfile
import zlib

PROG = "convert_glove"


class Bad(Exception):
    """Malformed input or a usage error: one line, exit 1."""


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_args(argv):
    member = None
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--member":
            if i + 1 >= len(argv):
                raise Bad("--member needs a NAME")
            member = argv[i + 1]
            i += 2
            continue
        if a.startswith("--member="):
            member = a[len("--member="):]
        elif a.startswith("-") and a != "-":
            raise Bad(f"unknown option {a} (usage: convert_glove.py [--member NAME] INPUT OUTDIR)")
        else:
            pos.append(a)
        i += 1
    if len(pos) != 2:
        raise Bad("usage: convert_glove.py [--member NAME] INPUT OUTDIR")
    return member, pos[0], pos[1]


def open_input(src, member, stack):
    """A binary line stream of the word vectors, and a label for messages. Opened files go on `stack`."""
    if src == "-":
        raw = stack.enter_context(io.BufferedReader(io.FileIO(sys.stdin.fileno(), "rb", closefd=False), 1 << 20))
        label = "<stdin>"
    else:
        try:
            raw = stack.enter_context(open(src, "rb", buffering=1 << 20))
        except OSError as e:
            raise Bad(f"{src}: cannot open ({e.strerror})")
        label = src
    magic = raw.peek(4)[:4]
    if magic[:2] == b"\x1f\x8b":
        if member is not None:
            raise Bad(f"{label}: --member is for .zip files; this one is gzip")
        return stack.enter_context(io.BufferedReader(gzip.GzipFile(fileobj=raw), 1 << 20)), label
    if magic == b"PK\x03\x04":
        if src == "-":
            raise Bad("a .zip cannot be read from standard input: give its path")
        try:
            z = stack.enter_context(zipfile.ZipFile(raw))
        except zipfile.BadZipFile as e:
            raise Bad(f"{src}: not a readable zip ({e})")
        names = [n for n in z.namelist() if not n.endswith("/")]
        if member is None:
            if len(names) != 1:
                raise Bad(f"{src} holds {len(names)} files: pick one with --member NAME ({', '.join(names[:8])}"
                          f"{', ...' if len(names) > 8 else ''})")
            pick = names[0]
        else:
            hits = [n for n in names if n == member] or [n for n in names if n.rsplit("/", 1)[-1] == member]
            if len(hits) != 1:
                raise Bad(f"{src}: {'no' if not hits else 'more than one'} member named {member!r} "
                          f"(it holds {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})")
            pick = hits[0]
        return stack.enter_context(io.BufferedReader(z.open(pick), 1 << 20)), f"{src}:{pick}"
    if member is not None:
        raise Bad(f"{label}: --member is for .zip files; this one is not a zip")
    return raw, label


def is_int(b):
    return b.isdigit()


def convert(stream, label, tmpdir):
    """Reads the lines; writes the raw float32 rows to tmpdir/vectors.bin and the words to tmpdir/vocab.txt.
    Returns (rows, dim, duplicates)."""
    dim = None
    header_rows = None
    rows = 0
    dups = 0
    first_dup = None
    seen = set()
    lineno = 0
    word_lines = 0
    swap = sys.byteorder != "little"
    with open(os.path.join(tmpdir, "vectors.bin"), "wb", buffering=1 << 20) as vec, \
            open(os.path.join(tmpdir, "vocab.txt"), "wb", buffering=1 << 20) as voc:
        try:
            for line in stream:
                lineno += 1
                if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                parts = line.split()
                if not parts:
                    continue  # a blank line
                if dim is None and header_rows is None and word_lines == 0 and len(parts) == 2 \
                        and is_int(parts[0]) and is_int(parts[1]):
                    header_rows, hd = int(parts[0]), int(parts[1])
                    if hd <= 0:
                        raise Bad(f"{label}:{lineno}: header `{line.strip().decode('ascii')}` gives {hd} dimensions")
                    dim = hd
                    continue
                word_lines += 1
                if dim is None:
                    dim = len(parts) - 1
                    if dim <= 0:
                        raise Bad(f"{label}:{lineno}: a word with no values")
                if len(parts) != dim + 1:
                    raise Bad(f"{label}:{lineno}: {len(parts) - 1} values for "
                              f"{parts[0].decode('utf-8', 'replace')!r}, expected {dim}")
                try:
                    v = array.array("f", map(float, parts[1:]))
                except ValueError:
                    bad = next((p for p in parts[1:] if not _is_float(p)), b"?")
                    raise Bad(f"{label}:{lineno}: value {bad.decode('utf-8', 'replace')[:40]!r} of "
                              f"{parts[0].decode('utf-8', 'replace')!r} is not a number")
                if not math.isfinite(sum(v)):
                    raise Bad(f"{label}:{lineno}: a value of {parts[0].decode('utf-8', 'replace')!r} is not finite "
                              f"(nan, inf, or beyond float32)")
                w = parts[0]
                if w in seen:
                    dups += 1
                    if first_dup is None:
                        first_dup = (w, lineno)
                    continue
                seen.add(w)
                if swap:
                    v.byteswap()
                vec.write(v.tobytes())
                voc.write(w)
                voc.write(b"\n")
                rows += 1
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise Bad(f"{label}: failed at line {lineno} ({e})")
    if rows == 0:
        raise Bad(f"{label}: no word vectors found")
    if header_rows is not None and header_rows != word_lines:
        raise Bad(f"{label}: the header says {header_rows} words, the file has {word_lines} (truncated?)")
    return rows, dim, dups, first_dup


def _is_float(b):
    try:
        float(b)
        return True
    except ValueError:
        return False


def write_folder(tmpdir, out, rows, dim, source):
    nbytes = 4 * rows * dim
    if os.path.getsize(os.path.join(tmpdir, "vectors.bin")) != nbytes:
        raise Bad("internal: vector bytes do not match rows x dim")
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "vectors": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [0, nbytes]}},
                        separators=(",", ":")).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    st = os.path.join(tmpdir, "vectors.safetensors")
    with open(st, "wb") as g, open(os.path.join(tmpdir, "vectors.bin"), "rb") as f:
        g.write(struct.pack("<Q", len(header)))
        g.write(header)
        shutil.copyfileobj(f, g, 1 << 20)
    os.remove(os.path.join(tmpdir, "vectors.bin"))
    asset = {"name": f"glove-{dim}d", "source": source, "rows": rows, "dim": dim, "files": {}}
    for name in ("vectors.safetensors", "vocab.txt"):
        p = os.path.join(tmpdir, name)
        asset["files"][name] = {"size": os.path.getsize(p), "sha256": sha256_file(p)}
    with open(os.path.join(tmpdir, "asset.json"), "w") as g:
        json.dump(asset, g, indent=1, sort_keys=True)
        g.write("\n")
    os.makedirs(out, exist_ok=True)
    # asset.json last: a folder whose asset.json is in place holds the files it describes
    for name in ("vectors.safetensors", "vocab.txt", "asset.json"):
        os.replace(os.path.join(tmpdir, name), os.path.join(out, name))


def main():
    argv = sys.argv[1:]
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    try:
        member, src, out = parse_args(argv)
        if os.path.exists(out) and not os.path.isdir(out):
            raise Bad(f"{out}: exists and is not a folder")
        # the temporary folder beside OUTDIR, so the final renames stay on one file system
        parent = os.path.dirname(os.path.abspath(out))
        try:
            os.makedirs(parent, exist_ok=True)
            tmpdir = tempfile.mkdtemp(prefix=".convert_glove.", dir=parent)
        except OSError as e:
            raise Bad(f"{parent}: cannot write ({e.strerror})")
        try:
            with contextlib.ExitStack() as stack:
                stream, label = open_input(src, member, stack)
                rows, dim, dups, first_dup = convert(stream, label, tmpdir)
            source = "<stdin>" if src == "-" else os.path.basename(src) + label[len(src):]
            write_folder(tmpdir, out, rows, dim, source)
        except OSError as e:
            raise Bad(f"{out}: write failed ({e.strerror or e})")
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    except Bad as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    note = ""
    if dups:
        w, ln = first_dup
        note = (f" ({dups} repeated word{'s' if dups > 1 else ''} skipped, the first occurrence kept; first repeat: "
                f"{w.decode('utf-8', 'replace')!r} on line {ln})")
    print(f"{PROG}: {rows} words x {dim} -> {out}{note}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `convert_glove.py --help | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
