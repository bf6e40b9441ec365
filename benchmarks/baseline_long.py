#!/usr/bin/env python3
"""What a user would write by hand instead of ``autograd-cli grad "sum(w*(tanh(x)*sigmoid(x)
+ log1p(x**2)))" --x @X.npy --w @W.npy``: the baseline of ``bench_large.py``'s longer rows.

Usage: ``python benchmarks/baseline_long.py X.npy W.npy [DEVICE]`` (float32 files).

The float32 forward and backward pass, and both gradients checked against their closed
forms in float64 (dw = tanh(x)·sigmoid(x) + log1p(x²); dx = w·(tanh'·sigmoid +
tanh·sigmoid' + 2x/(1+x²))) with float32's tolerances.
"""

import sys

import numpy as np
import torch

device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
x = torch.from_numpy(np.load(sys.argv[1])).to(device).requires_grad_(True)
w = torch.from_numpy(np.load(sys.argv[2])).to(device).requires_grad_(True)
out = (w * (torch.tanh(x) * torch.sigmoid(x) + torch.log1p(x**2))).sum()
out.backward()
with torch.no_grad():
    x64, w64 = x.double(), w.double()
    t, s = torch.tanh(x64), torch.sigmoid(x64)
    dw = t * s + torch.log1p(x64**2)
    dx = w64 * ((1 - t**2) * s + t * s * (1 - s) + 2 * x64 / (1 + x64**2))
    ok = torch.allclose(w.grad.double(), dw, rtol=1.3e-6, atol=1e-5)
    ok = ok and torch.allclose(x.grad.double(), dx, rtol=1.3e-6, atol=1e-5)
print(out.item(), bool(ok))
