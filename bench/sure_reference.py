#!/usr/bin/python3
"""Python reference for the SURE step (Debian python3-torch, the same libtorch): DAEI's ResidualDAE and its MC-SURE loss
with K separate VJPs (create_graph) on one forward, as DAEI/losses/sure.py; also the finite-difference variant.
Prints one JSON line per option, like bench/sure_bench.cpp."""
import argparse, json, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import spectral_norm


class SigmaCond(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.register_buffer("freqs", torch.exp(torch.linspace(0.0, math.log(1000.0), 16)))
        self.mlp = nn.Sequential(nn.Linear(33, h), nn.SiLU(), nn.Linear(h, h))

    def forward(self, sigma):
        ls = torch.log(sigma).unsqueeze(1)
        a = ls * self.freqs
        return self.mlp(torch.cat([ls, torch.sin(a), torch.cos(a)], 1))


class Block(nn.Module):
    def __init__(self, h, p):
        super().__init__()
        self.norm = nn.LayerNorm(h)
        self.fc1 = spectral_norm(nn.Linear(h, 2 * h))
        self.fc2 = spectral_norm(nn.Linear(2 * h, h))
        self.drop = nn.Dropout(p)

    def forward(self, x, c):
        return x + self.fc2(self.drop(F.gelu(self.fc1(self.norm(x) + c))))


class ResidualDAE(nn.Module):
    def __init__(self, d, h, depth, p=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.input_proj = spectral_norm(nn.Linear(d, h))
        self.blocks = nn.ModuleList([Block(h, p) for _ in range(depth)])
        self.cond = SigmaCond(h)
        self.output_proj = nn.Linear(h, d)
        nn.init.zeros_(self.output_proj.weight)
        nn.init.zeros_(self.output_proj.bias)

    def residual(self, y, sigma):
        c = self.cond(sigma)
        x = self.input_proj(self.norm(y))
        for b in self.blocks:
            x = b(x, c)
        return self.output_proj(x)


def sure_vjp(dae, y, sigma, K):
    y = y.detach().requires_grad_()
    g = dae.residual(y, sigma)
    tr = 0
    for _ in range(K):
        z = torch.randint(0, 2, y.shape, dtype=y.dtype) * 2 - 1
        v = torch.autograd.grad(g, y, z, create_graph=True)[0]
        tr = tr + (z * v).sum(-1)
    return (g.pow(2).sum(-1) + 2 * sigma ** 2 * tr / K).mean()


def sure_fd(dae, y, sigma, K, eps_rel=0.01):
    B = y.shape[0]
    z = torch.randint(0, 2, (K, B, y.shape[1]), dtype=y.dtype) * 2 - 1
    eps = (sigma * eps_rel).unsqueeze(1)
    ys = torch.cat([y] + [y + eps * z[k] for k in range(K)], 0)
    r = dae.residual(ys, sigma.repeat(K + 1)).view(K + 1, B, -1)
    div = ((z * (r[1:] - r[0])).sum(2) / eps.squeeze(1)).mean(0)
    return (r[0].pow(2).sum(-1) + 2 * sigma ** 2 * div).mean()


def main():
    ap = argparse.ArgumentParser()
    for k, v in dict(steps=5, dim=768, hidden=1024, depth=3, batch=256, probes=5).items():
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--only", default="", help="hutchinson or fd: run only that option")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name, fn in (("hutchinson", sure_vjp), ("fd", sure_fd)):
        if a.only and name != a.only:
            continue
        torch.manual_seed(0)
        dae = ResidualDAE(a.dim, a.hidden, a.depth).train()
        opt = torch.optim.AdamW(dae.parameters(), lr=1e-3)
        y = torch.randn(a.batch, a.dim) * 0.04
        sigma = torch.full((a.batch,), 0.01)
        times = []
        import resource
        minflt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for s in range(a.steps + 1):
            t0 = time.perf_counter()
            opt.zero_grad()
            fn(dae, y, sigma, a.probes).backward()
            opt.step()
            if s > 0:
                times.append(time.perf_counter() - t0)
        times.sort()
        print(json.dumps(dict(impl="python reference (python3-torch %s)" % torch.__version__, divergence=name,
                              median_s=times[len(times) // 2], min_s=times[0], times=times,
                              minflt=resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt0,
                              maxrss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, steps=a.steps, dim=a.dim,
                              hidden=a.hidden, depth=a.depth, batch=a.batch, probes=a.probes, threads=1)), flush=True)


if __name__ == "__main__":
    main()
