import torch

x = torch.tensor([2.0, 3.0], requires_grad=True)
c = torch.tensor([10.0, 20.0])
y = c * x**2
print(x.requires_grad, c.requires_grad, y.is_leaf)
y.sum().backward(retain_graph=True)
print(x.grad)
y.sum().backward()
print(x.grad)
x.grad.zero_()
y = c * x**2
y.backward(gradient=torch.tensor([1.0, 0.0]))
x.grad = None
