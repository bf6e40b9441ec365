import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
a = x * x
a[2].backward()
print(x.grad)
