#!/usr/bin/env python3
"""What a user would write by hand instead of autograd-cli: the baseline of the large-tensor
row of ``bench_speed.py`` (kept here so that every row runs from a clone).

Usage: ``python benchmarks/baseline_large.py X.npy [DEVICE]`` (make X.npy with ``python -c
"import numpy as np; np.save('X.npy', np.random.rand(10**7).astype('float32'))"``).

It does what ``autograd-cli grad "mean(3*(x+2)**2)" --x @X.npy --device DEVICE`` must do: the
float32 forward and backward pass, and the closed-form check 6*(x+2)/n in float64.
"""

import sys

import numpy as np
import torch

device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
x = torch.from_numpy(np.load(sys.argv[1])).to(device).requires_grad_(True)
out = (3 * (x + 2) ** 2).mean()
out.backward()
n = x.numel()
expected = 6 * (x.detach().double() + 2) / n
ok = torch.allclose(x.grad.double(), expected, rtol=1.3e-6, atol=1e-5)
print(float(out), bool(ok))
