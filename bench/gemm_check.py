#!/usr/bin/python3
"""fp32 GEMMs of the OpenBLAS kernels this process loads, against float64: is a kernel set safe on this CPU?
   /usr/bin/python3 bench/gemm_check.py                                          # as the environment pins it
   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/gemm_check.py   # OpenBLAS's own choice
Prints the core and the worst |C - C64| / (|A| |B|) over M, N, K and all four transpose pairs (fp32 rounding: ~1e-7
times a small factor; a broken kernel gives 1e-2 or more). Exits 1 above 1e-5."""
import ctypes
import sys

if sys.argv[1:] in (["-h"], ["--help"]):
    print(__doc__.strip())
    sys.exit(0)

import torch

torch.set_num_threads(1)
try:
    lib = ctypes.CDLL("libopenblas.so.0")
except OSError as e:
    sys.exit("gemm_check: this checks OpenBLAS's kernels, and libopenblas.so.0 does not load: %s" % e)
lib.openblas_get_corename.restype = ctypes.c_char_p
g = torch.Generator().manual_seed(0)
worst, cases = 0.0, 0
for m in (1, 3, 7, 16, 31, 32, 33, 64, 100, 256, 513):
    for n in (1, 5, 16, 32, 63, 128, 1024):
        for k in (1, 2, 17, 32, 64, 255, 768):
            for ta in (False, True):
                for tb in (False, True):
                    a = torch.randn(k, m, generator=g).t() if ta else torch.randn(m, k, generator=g)
                    b = torch.randn(n, k, generator=g).t() if tb else torch.randn(k, n, generator=g)
                    exact = a.double() @ b.double()
                    scale = (a.double().abs() @ b.double().abs()).clamp_min(1e-30)
                    worst = max(worst, ((a @ b).double() - exact).abs().div(scale).max().item())
                    cases += 1
print("%s: %d fp32 GEMMs, worst |C - C64| / (|A||B|) = %.2e" % (lib.openblas_get_corename().decode(), cases, worst))
sys.exit(1 if worst > 1e-5 else 0)
