"""autograd-cli: PyTorch autograd gradients checked against SymPy derivatives.

The Python API lives in :mod:`autogradcli.gradient` (``compute_gradient``); this
package's top level stays free of torch and sympy so that ``--help`` is instant.
"""

__version__ = "0.1.0"
