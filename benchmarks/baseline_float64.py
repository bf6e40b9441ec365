#!/usr/bin/env python3
"""What a user would write by hand instead of ``autograd-cli grad "mean(3*(x+2)**2)" --x
@X.npy --dtype float64``: the baseline of ``bench_large.py``'s float64 rows.

Usage: ``python benchmarks/baseline_float64.py X.npy [DEVICE]`` (X.npy holds float64).

The float64 forward and backward pass, and the closed-form check 6*(x+2)/n with
``torch.testing.assert_close``'s float64 tolerances.
"""

import sys

import numpy as np
import torch

device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
x = torch.from_numpy(np.load(sys.argv[1])).to(device, torch.float64).requires_grad_(True)
out = (3 * (x + 2) ** 2).mean()
out.backward()
n = x.numel()
with torch.no_grad():
    expected = 6 * (x + 2) / n
    ok = torch.allclose(x.grad, expected, rtol=1e-7, atol=1e-7)
print(out.item(), bool(ok))
