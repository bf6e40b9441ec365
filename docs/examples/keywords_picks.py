import torch
import torch.nn.functional as F

logits = torch.tensor([[0.2, -1.0, 0.7], [1.1, 0.4, -0.3], [-0.6, 0.9, 0.1]], requires_grad=True)
ys = torch.tensor([2, 0, 1])
probs = F.softmax(logits, dim=1)
picked = probs[torch.arange(3), ys]
hot = F.one_hot(ys, num_classes=3)
weight = torch.Tensor([1.0, 0.5, 2.0])
loss = -picked.log().mean() + F.cross_entropy(logits, ys, weight=weight, ignore_index=1)
loss.backward()
print(loss)
print((hot * logits.grad).sum(dim=1))
