"""The rules every check follows: comparing with the reference, and the verdict policy."""
