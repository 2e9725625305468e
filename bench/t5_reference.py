#!/usr/bin/python3
"""Python reference for the stage-2 benchmarks (Debian python3-torch, the same libtorch as daei): the Vec2Text inverter
written the way Hugging Face's T5ForConditionalGeneration computes it (RMS layer norm in fp32, bucketed relative
positions, no 1/sqrt(d_kv) score scaling, tied embeddings scaled by d_model^-0.5, full [B, T, V] logits and
CrossEntropyLoss(ignore_index=-100)), and vec2text's batching (every text padded to the maximum length).

  bench/t5_reference.py step     [--steps N] ...   teacher-forced step: forward + backward + AdamW (--amp bf16: the
                                                   forward under torch.autocast("cpu", dtype=torch.bfloat16))
  bench/t5_reference.py generate [--steps N] ...   greedy decoding with a key/value cache
  bench/t5_reference.py epoch    --lengths FILE    one epoch over texts of the given token lengths, padded to --max-len
Prints one JSON line: {"times": [...seconds per step after one warm-up...], "minflt": ..., "maxrss_kb": ...}."""
import argparse, json, math, resource, time
import torch
import torch.nn as nn
import torch.nn.functional as F


def bucket(rel, bidirectional, num_buckets=32, max_distance=128):
    ret = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        ret += (rel > 0).long() * num_buckets
        rel = rel.abs()
    else:
        rel = -torch.clamp(rel, max=0)
    max_exact = num_buckets // 2
    small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return ret + torch.where(small, rel, large)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class Attention(nn.Module):
    def __init__(self, c, is_decoder, has_bias):
        super().__init__()
        inner = c.heads * c.d_kv
        self.h, self.dkv, self.is_decoder, self.p = c.heads, c.d_kv, is_decoder, c.dropout
        self.q = nn.Linear(c.d_model, inner, bias=False)
        self.k = nn.Linear(c.d_model, inner, bias=False)
        self.v = nn.Linear(c.d_model, inner, bias=False)
        self.o = nn.Linear(inner, c.d_model, bias=False)
        self.relative_attention_bias = nn.Embedding(32, c.heads) if has_bias else None

    def compute_bias(self, q_len, k_len):
        ctx = torch.arange(k_len - q_len, k_len)[:, None]
        mem = torch.arange(k_len)[None, :]
        b = bucket(mem - ctx, not self.is_decoder)
        return self.relative_attention_bias(b).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv, bias, cache=None, static=False):
        B, Tq = x.shape[:2]
        shape = lambda t: t.view(B, -1, self.h, self.dkv).transpose(1, 2)
        q = shape(self.q(x))
        if kv is not None:
            if cache is not None and static and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                k, v = shape(self.k(kv)), shape(self.v(kv))
                if cache is not None:
                    cache["k"], cache["v"] = k, v
        else:
            k, v = shape(self.k(x)), shape(self.v(x))
            if cache is not None:
                if "k" in cache:
                    k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
                cache["k"], cache["v"] = k, v
        scores = torch.matmul(q, k.transpose(3, 2))
        if bias is not None:
            scores = scores + bias
        w = F.dropout(F.softmax(scores.float(), -1).type_as(scores), self.p, self.training)
        return self.o(torch.matmul(w, v).transpose(1, 2).reshape(B, Tq, -1))


class Dense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wo = nn.Linear(c.d_ff, c.d_model, bias=False)
        self.p = c.dropout

    def forward(self, x):
        return self.wo(F.dropout(F.relu(self.wi(x)), self.p, self.training))


class Block(nn.Module):
    def __init__(self, c, is_decoder, has_bias):
        super().__init__()
        self.sa, self.sa_norm = Attention(c, is_decoder, has_bias), RMSNorm(c.d_model)
        self.ca = Attention(c, is_decoder, False) if is_decoder else None
        self.ca_norm = RMSNorm(c.d_model) if is_decoder else None
        self.ff, self.ff_norm = Dense(c), RMSNorm(c.d_model)
        self.p = c.dropout

    def forward(self, h, bias, enc, cross_bias, cache):
        d = lambda t: F.dropout(t, self.p, self.training)
        h = h + d(self.sa(self.sa_norm(h), None, bias, None if cache is None else cache.setdefault("s", {})))
        if self.ca is not None:
            h = h + d(self.ca(self.ca_norm(h), enc, cross_bias,
                              None if cache is None else cache.setdefault("c", {}), static=True))
        return h + d(self.ff(self.ff_norm(h)))


class Stack(nn.Module):
    def __init__(self, c, is_decoder, n):
        super().__init__()
        self.block = nn.ModuleList([Block(c, is_decoder, i == 0) for i in range(n)])
        self.final_layer_norm = RMSNorm(c.d_model)
        self.is_decoder, self.p = is_decoder, c.dropout

    def forward(self, x, mask=None, enc=None, enc_mask=None, cache=None):
        h = F.dropout(x, self.p, self.training)
        T = h.shape[1]
        past = 0 if cache is None or "s" not in cache.get(0, {}) else cache[0]["s"]["k"].shape[2]
        Tk = past + T
        bias = self.block[0].sa.compute_bias(T, Tk)
        lo = torch.finfo(h.dtype).min
        if self.is_decoder:
            causal = torch.arange(Tk)[None, :] <= (torch.arange(T) + past)[:, None]
            bias = bias + (1.0 - causal.float())[None, None] * lo
        elif mask is not None:
            bias = bias + (1.0 - mask[:, None, None, :].float()) * lo
        cross = None if enc_mask is None else (1.0 - enc_mask[:, None, None, :].float()) * lo
        for i, b in enumerate(self.block):
            h = b(h, bias, enc, cross, None if cache is None else cache.setdefault(i, {}))
        return F.dropout(self.final_layer_norm(h), self.p, self.training)


class Inverter(nn.Module):
    """vec2text's InversionModel: embedding_transform → T5 encoder (inputs_embeds) → T5 decoder → tied LM head."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embedding_transform = nn.Sequential(nn.Linear(c.dim, c.dim), nn.Dropout(c.dropout), nn.GELU(),
                                                 nn.Linear(c.dim, c.d_model * c.repeat))
        self.shared = nn.Embedding(c.vocab, c.d_model)
        self.encoder = Stack(c, False, c.layers)
        self.decoder = Stack(c, True, c.layers)

    def project(self, e):
        return self.embedding_transform(e).view(e.shape[0], self.c.repeat, self.c.d_model)

    def logits(self, h):
        return F.linear(h * self.c.d_model ** -0.5, self.shared.weight)

    def loss(self, e, labels):  # HF: full logits, mean CE over labels != -100
        x = self.project(e)
        mask = torch.ones(x.shape[:2], dtype=torch.long)
        enc = self.encoder(x, mask)
        dec_in = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], 1)
        dec_in = dec_in.masked_fill(dec_in == -100, 0)
        h = self.decoder(self.shared(dec_in), None, enc, mask)
        lg = self.logits(h)
        return F.cross_entropy(lg.view(-1, lg.shape[-1]), labels.reshape(-1), ignore_index=-100)

    @torch.no_grad()
    def generate(self, e, max_length, eos=1, pad=0):  # greedy, key/value cache, eos forbidden before max_length
        x = self.project(e)
        B = x.shape[0]
        mask = torch.ones(x.shape[:2], dtype=torch.long)
        enc = self.encoder(x, mask)
        seq = torch.zeros(B, 1, dtype=torch.long)
        finished = torch.zeros(B, dtype=torch.bool)
        cache = {}
        for cur in range(1, max_length):
            h = self.decoder(self.shared(seq[:, -1:]), None, enc, mask, cache)
            lp = F.log_softmax(self.logits(h)[:, -1].float(), -1)
            lp[:, eos] = -float("inf")  # min_length = max_length, as daei's side of the benchmark
            nxt = lp.argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
            seq = torch.cat([seq, nxt[:, None]], 1)
            finished |= nxt == eos
            if bool(finished.all()):
                break
        return seq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["step", "generate", "epoch"])
    for k, v in dict(steps=3, dim=100, d_model=256, d_kv=32, heads=8, d_ff=1024, layers=2, vocab=4096, repeat=16,
                     batch=64, label_len=32, max_len=32, seed=0).items():
        ap.add_argument("--" + k.replace("_", "-"), dest=k, type=int, default=v)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lengths", default="")
    ap.add_argument("--amp", choices=["off", "bf16"], default="off",
                    help="bf16: the step's forward under torch.autocast('cpu', dtype=torch.bfloat16), backward outside")
    c = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(c.seed)
    m = Inverter(c)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    times, tokens = [], 0
    if c.mode == "step":
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        for s in range(c.steps + 1):
            e = torch.randn(c.batch, c.dim)
            labels = torch.randint(2, c.vocab, (c.batch, c.label_len))
            t0 = time.perf_counter()
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=c.amp == "bf16"):
                loss = m.loss(e, labels)
            loss.backward()
            opt.step()
            if s > 0:
                times.append(time.perf_counter() - t0)
    elif c.mode == "generate":
        m.eval()
        for s in range(c.steps + 1):
            e = torch.randn(c.batch, c.dim)
            t0 = time.perf_counter()
            seq = m.generate(e, c.label_len + 1)
            if s > 0:
                times.append(time.perf_counter() - t0)
            tokens = seq.shape[1] - 1
    else:  # epoch: vec2text batching, every text padded to max_len
        lengths = [int(x) for x in open(c.lengths).read().split()]
        g = torch.Generator().manual_seed(c.seed)
        order = torch.randperm(len(lengths), generator=g).tolist()
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        t0 = time.perf_counter()
        for i in range(0, len(order), c.batch):
            rows = order[i:i + c.batch]
            labels = torch.full((len(rows), c.max_len), -100, dtype=torch.long)
            for j, r in enumerate(rows):
                labels[j, :lengths[r]] = torch.randint(2, c.vocab, (lengths[r],))
            e = torch.randn(len(rows), c.dim)
            opt.zero_grad()
            m.loss(e, labels).backward()
            opt.step()
            tokens += sum(lengths[r] for r in rows)
        times.append(time.perf_counter() - t0)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps(dict(impl="python reference (python3-torch %s)" % torch.__version__, mode=c.mode, amp=c.amp, times=times,
                          tokens=tokens, minflt=ru1.ru_minflt - ru0.ru_minflt, maxrss_kb=ru1.ru_maxrss,
                          params=sum(p.numel() for p in m.parameters()))), flush=True)


if __name__ == "__main__":
    main()
