import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * 2
print(y._version)
y.add_(1)
y *= 3
print(y, y._version)
y.sum().backward()
print(x.grad)
