"""The sentence-transformers side of the embed_st entry (issue 66): SentenceTransformer(MODEL).encode over a file of
texts (one a line), batch 64, 1 thread, fp32; `--reps` full passes (the first one warms up as daei's first round
does), each timed. Prints one JSON line: texts, times, the first row's first values, torch's version.

  python st_embed.py --model DIR --texts FILE [--batch 64] [--reps 3]"""
import argparse
import json
import resource
import time

import torch

from perfctl import perf_ctl


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    from sentence_transformers import SentenceTransformer
    texts = open(a.texts, encoding="utf-8").read().split("\n")
    texts = [t for t in texts if t]
    m = SentenceTransformer(a.model, device="cpu")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    times, e = [], None
    for r in range(a.reps):
        if r == 1:
            perf_ctl("enable")
        t0 = time.perf_counter()
        e = m.encode(texts, batch_size=a.batch, convert_to_numpy=True)
        times.append(time.perf_counter() - t0)
    perf_ctl("disable")
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps(dict(impl="sentence-transformers", texts=len(texts), times=times, dim=int(e.shape[1]),
                          first=[float(x) for x in e[0][:4]], torch=torch.__version__, threads=torch.get_num_threads(),
                          minflt=ru1.ru_minflt - ru0.ru_minflt, maxrss_kb=ru1.ru_maxrss)), flush=True)


if __name__ == "__main__":
    main()
