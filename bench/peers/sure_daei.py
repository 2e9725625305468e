"""The peer of the sure_step_ref entry (issue 66): the DAEI public code's MC-SURE step written as PyTorch in its form
(DAEI/models/dae.py, DAEI/losses/sure.py of ChrisWang233/DAEI; notes: /work/shared/reference/vec2text-daei.md
section 2.2), not daei's:
  - ResidualDAE: input_norm LayerNorm(d) -> input_proj (torch.nn.utils.spectral_norm) -> depth x pre-norm block
    [h = LN(x) + cond; x + fc2(dropout(GELU(fc1(h))))] with spectral_norm on fc1, fc2 -> output_proj (no norm);
    sigma_cond.net = Linear(33, H) -> SiLU -> Linear(H, H) on [log s, sin(log s f), cos(log s f)];
  - the loss: y = noisy.detach().requires_grad_(); g = get_residual(y, sigma expanded to B); for each of K probes a
    Rademacher z drawn by randint(0, 2) * 2 - 1 and one autograd.grad(g, y, z, create_graph=True, retain_graph=True);
    traces stacked and averaged; loss = mean(|g|^2 + 2 sigma^2 mean_trace) with sigma a Python float; the denoised
    y + g also formed, as the public code returns it;
  - a step: zero_grad, loss.backward(), torch.optim.AdamW(lr 1e-3).step(), train mode (dropout, one power iteration).
Loads the weights and inputs `bench_peers save` wrote (D/dae/model.safetensors, D/sure_inputs.safetensors) and
prints the eval-mode loss on the stored probes (compared with daei's) and the step times, one JSON line.

  python sure_daei.py --dir D [--steps 3] [--sigma 0.01]"""
import argparse
import json
import math
import os
import resource
import time

import torch
import torch.nn as nn
from torch.nn.utils import spectral_norm

from perfctl import perf_ctl


class SigmaCond(nn.Module):
    def __init__(self, hidden, n_freqs=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1 + 2 * n_freqs, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.register_buffer("freqs", torch.exp(torch.linspace(0.0, math.log(1000.0), n_freqs)))

    def forward(self, sigma):
        ls = sigma.float().log().unsqueeze(-1)
        a = ls * self.freqs
        return self.net(torch.cat([ls, a.sin(), a.cos()], dim=-1))


class Block(nn.Module):
    def __init__(self, dim, inner, p):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = spectral_norm(nn.Linear(dim, inner))
        self.act = nn.GELU()
        self.dropout = nn.Dropout(p)
        self.fc2 = spectral_norm(nn.Linear(inner, dim))

    def forward(self, x, cond):
        h = self.norm(x)
        if cond is not None:
            h = h + cond
        return x + self.fc2(self.dropout(self.act(self.fc1(h))))


class ResidualDAE(nn.Module):
    def __init__(self, dim, hidden, depth, p=0.1):
        super().__init__()
        self.input_norm = nn.LayerNorm(dim)
        self.input_proj = spectral_norm(nn.Linear(dim, hidden))
        self.sigma_cond = SigmaCond(hidden)
        self.blocks = nn.ModuleList([Block(hidden, 2 * hidden, p) for _ in range(depth)])
        self.output_proj = nn.Linear(hidden, dim)

    def get_residual(self, x, sigma):
        if sigma.dim() == 0:
            sigma = sigma.expand(x.shape[0])
        cond = self.sigma_cond(sigma)
        h = self.input_proj(self.input_norm(x))
        for b in self.blocks:
            h = b(h, cond)
        return self.output_proj(h)


def sure_loss(dae, noisy, sigma, n_probes, probes=None):
    """probes: optional [K, B, d] given probes (the loss comparison); None draws them as the public code does."""
    B = noisy.shape[0]
    y = noisy.detach().requires_grad_(True)
    g = dae.get_residual(y, torch.tensor(sigma, dtype=y.dtype).expand(B))
    recons = (g ** 2).sum(dim=-1)
    traces = []
    for k in range(n_probes):
        z = probes[k] if probes is not None else torch.randint(0, 2, y.shape, dtype=y.dtype) * 2.0 - 1.0
        vjp = torch.autograd.grad(outputs=g, inputs=y, grad_outputs=z, create_graph=True, retain_graph=True)[0]
        traces.append((z * vjp).sum(dim=-1))
    trace = torch.stack(traces).mean(dim=0)
    loss = (recons + 2.0 * sigma ** 2 * trace).mean()
    denoised = (y + g).detach()
    return loss, denoised, recons.mean().detach(), trace.mean().detach()


def daei_names(sd):
    """daei's DAE names (src/model/attack/dae.h) -> the public code's: norm -> input_norm, sigma_cond.{0,2} ->
    sigma_cond.net.{0,2}, freqs -> sigma_cond.freqs."""
    out = {}
    for k, v in sd.items():
        if k.startswith("norm."):
            k = "input_" + k
        elif k.startswith("sigma_cond."):
            k = "sigma_cond.net." + k[len("sigma_cond."):]
        elif k == "freqs":
            k = "sigma_cond.freqs"
        out[k] = v
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--sigma", type=float, default=0.01)
    a = ap.parse_args()
    torch.set_num_threads(1)
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(a.dir, "dae", "dae.json")))
    if not (cfg.get("spectral_norm") and cfg.get("sigma_cond")):
        raise SystemExit("sure_daei: the DAE must have spectral_norm and sigma_cond on (the GTR scripts' setting)")
    dae = ResidualDAE(cfg["dim"], cfg["hidden"], cfg["depth"], cfg["dropout"])
    dae.load_state_dict(daei_names(load_file(os.path.join(a.dir, "dae", "model.safetensors"))), strict=True)
    inp = load_file(os.path.join(a.dir, "sure_inputs.safetensors"))
    y, probes = inp["y"], inp["probes"]
    K = probes.shape[0]
    dae.eval()
    loss, _, sq, div = sure_loss(dae, y, a.sigma, K, probes)
    out = dict(impl="DAEI public code's form (PyTorch)", loss_eval=loss.item(), sq_eval=sq.item(), div_eval=div.item())
    dae.train()
    opt = torch.optim.AdamW(dae.parameters(), lr=1e-3)
    times, losses = [], []
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    for s in range(a.steps + 1):
        if s == 1:
            perf_ctl("enable")
        t0 = time.perf_counter()
        opt.zero_grad()
        loss, _, _, _ = sure_loss(dae, y, a.sigma, K)
        loss.backward()
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    perf_ctl("disable")
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    out.update(times=times, losses=losses, batch=y.shape[0], dim=y.shape[1], probes=K, torch=torch.__version__,
               minflt=ru1.ru_minflt - ru0.ru_minflt, maxrss_kb=ru1.ru_maxrss, threads=torch.get_num_threads())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
