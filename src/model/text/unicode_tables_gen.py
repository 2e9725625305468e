#!/usr/bin/env python3
"""Generates unicode_tables.inc for the WordPiece tokenizer.

daei's WordPiece follows what sentence-transformers runs: Hugging Face's fast tokenizer (the Rust `tokenizers`
library: BertNormalizer, BertPreTokenizer, WordPiece). Its character classes come from Rust crates with their own,
older Unicode data (`unicode_categories` for "other" C* / non-spacing marks / punctuation,
`unicode-normalization-alignments` for NFD) and from Rust's std (char::is_whitespace, char::to_lowercase), so
they are not Python's unicodedata. The tables are therefore read off the library itself, one code point at a
time, with the pinned `tokenizers` (see tests/fixtures/minilm/make_fixtures.sh, which builds a venv with it):

  ~/.cache/daei/venv-st-5.1.2/bin/python src/model/text/unicode_tables_gen.py

Tables (every code point except surrogates, which UTF-8 cannot carry):
  kBertClean   BertNormalizer clean_text drops it (NUL, U+FFFD, and `is_control` = Rust `is_other`: Cc, Cf, Cn, Co,
               Cs of the crate's Unicode version, except \\t \\n \\r)
  kBertWhite   clean_text turns it into ' ' (\\t \\n \\r and Rust char::is_whitespace), also what BertPreTokenizer
               splits on
  kBertCjk     handle_chinese_chars puts spaces around it
  kBertPunct   BertPreTokenizer isolates it (ASCII punctuation and the crate's P* categories)
  kBertDrop    strip_accents + lowercase remove it (a non-spacing mark after NFD)
  kBertFold    strip_accents + lowercase map it to another sequence: lowercase(drop_Mn(NFD(c))), for every c whose
               result is neither c nor empty (Hangul syllables excluded: the C++ code decomposes them
               algorithmically, and the script checks that it gives the library's answer)
  kPySpace     Python str.isspace() (from this Python's unicodedata; the text metrics' \\s, model/text/unicode_classes.h)
The NFD's canonical reordering of combining marks across characters is not modelled (marks that matter, Mn, are
dropped anyway)."""
import os
import sys

import tokenizers
from tokenizers import normalizers, pre_tokenizers

MAXCP = 0x110000
SURROGATES = range(0xD800, 0xE000)


def ranges(cps):
    out, start, prev = [], None, None
    for cp in sorted(cps):
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            out.append((start, prev))
            start = prev = cp
    if start is not None:
        out.append((start, prev))
    return out


def emit_ranges(f, name, rs):
    f.write(f"static const CodePointRange {name}[] = {{\n")
    for i in range(0, len(rs), 6):
        f.write("  " + " ".join(f"{{0x{a:X}, 0x{b:X}}}," for a, b in rs[i:i + 6]) + "\n")
    f.write("};\n\n")


def emit_map(f, name, items):
    f.write(f"static const CpMap {name}[] = {{\n")
    for cp, seq in items:
        assert 1 <= len(seq) <= 4, (hex(cp), seq)
        vals = ", ".join(f"0x{ord(c):X}" for c in seq) + ", 0" * (4 - len(seq))
        f.write(f"  {{0x{cp:X}, {{{vals}}}}},\n")
    f.write("};\n\n")


def hangul_nfd(c):
    si = c - 0xAC00
    out = [0x1100 + si // (21 * 28), 0x1161 + (si % (21 * 28)) // 28]
    if si % 28:
        out.append(0x11A7 + si % 28)
    return "".join(map(chr, out))


def main():
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                       lowercase=False)
    cjk = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                     lowercase=False)
    fold = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                      lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    t_clean, t_white, t_cjk, t_punct, t_drop, t_fold = [], [], [], [], [], []
    for cp in range(MAXCP):
        if cp in SURROGATES:
            continue
        ch = chr(cp)
        c = clean.normalize_str(ch)
        if c == "":
            t_clean.append(cp)
        elif c == " " and ch != " ":
            t_white.append(cp)
        else:
            assert c == ch, (hex(cp), c)
        if cjk.normalize_str(ch) == f" {ch} ":
            t_cjk.append(cp)
        pieces = [p for p, _ in pre.pre_tokenize_str(f"a{ch}b")]
        if pieces == ["a", ch, "b"]:
            t_punct.append(cp)
        elif pieces == ["a", "b"]:
            if cp != 0x20:
                assert cp in t_white or c == "", hex(cp)  # the pre-tokenizer's whitespace = the normaliser's
        else:
            assert pieces == [f"a{ch}b"], (hex(cp), pieces)
        r = fold.normalize_str(ch)
        if 0xAC00 <= cp <= 0xD7A3:
            assert r == hangul_nfd(cp), hex(cp)
        elif r == "":
            t_drop.append(cp)
        elif r != ch:
            t_fold.append((cp, r))
    t_white.append(0x20)
    # clean_text runs first: a dropped or whitespace character never reaches the folding; and a folded character
    # never yields one that clean_text or the pre-tokenizer's whitespace split would have treated otherwise.
    special = set(t_white) | set(t_clean)
    t_fold = [(cp, r) for cp, r in t_fold if cp not in special]
    t_drop = [cp for cp in t_drop if cp not in special]
    for cp, r in t_fold:
        assert not any(ord(x) in special for x in r), hex(cp)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_tables.inc")
    import unicodedata
    with open(path, "w") as f:
        f.write(f"// Generated by unicode_tables_gen.py from the Rust `tokenizers` library {tokenizers.__version__} "
                f"(its BertNormalizer / BertPreTokenizer, probed per code point)\n// and Python "
                f"{sys.version.split()[0]} unicodedata (Unicode {unicodedata.unidata_version}) for kPySpace. "
                "Do not edit.\n\n")
        emit_ranges(f, "kBertClean", ranges(t_clean))
        emit_ranges(f, "kBertWhite", ranges(t_white))
        emit_ranges(f, "kBertCjk", ranges(t_cjk))
        emit_ranges(f, "kBertPunct", ranges(t_punct))
        emit_ranges(f, "kBertDrop", ranges(t_drop))
        emit_map(f, "kBertFold", t_fold)
        emit_ranges(f, "kPySpace", ranges(cp for cp in range(MAXCP) if chr(cp).isspace()))
    print("wrote", path, {k: len(v) for k, v in dict(clean=t_clean, white=t_white, cjk=t_cjk, punct=t_punct,
                                                      drop=t_drop, fold=t_fold).items()})


if __name__ == "__main__":
    main()
