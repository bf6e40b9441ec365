import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
x.mul_(2)
x.sum().backward()
