import torch

x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
(x**3).sum().backward()
print(x.grad)
