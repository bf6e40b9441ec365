import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x**2
y.register_hook(lambda g: print(g))
h = y.register_hook(lambda g: g * 10)
z = y.sin().sum()
z.backward(retain_graph=True)
print(x.grad)
h.remove()
x.grad = None
z.backward()
print(x.grad)
