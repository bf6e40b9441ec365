import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([3.0, 4.0], requires_grad=True)
w.requires_grad_(False)
with torch.no_grad():
    a = x * 2
with torch.inference_mode():
    b = x * 3
c = x.detach()
y = (x**2 + a + b + c + w).sum()
