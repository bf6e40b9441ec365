import torch
import torch.nn.functional as F

x = torch.tensor([0.5, 3.0], requires_grad=True)
t = torch.tensor([1.0, 1.0])
F.mse_loss(x, t).backward()
x.grad = None
F.l1_loss(x, t, reduction="sum").backward()
x.grad = None
F.smooth_l1_loss(x, t).backward()
x.grad = None
F.huber_loss(x, t, delta=0.5).backward()
