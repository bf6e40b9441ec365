"""The PyTorch side: devices, the forward pass built from the tree, backward passes, the graph."""
