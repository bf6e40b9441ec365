import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
t = torch.arange(3.0)
M = torch.eye(2, 3)
y = M @ (w * t)
print(w)
print(y)
y.backward(torch.ones(2))
print(w.grad)
