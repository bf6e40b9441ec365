"""The PyTorch side: devices, the forward pass built from the tree, backward passes, the graph."""

from autogradcli.torchside import custom as custom  # a cell's autograd Functions run here
