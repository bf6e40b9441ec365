"""Checking: compare with the reference, reconcile, the verdict policy, causes, stable forms."""
