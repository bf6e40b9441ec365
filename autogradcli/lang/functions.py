"""The table's element-wise functions (part of the one table, ``lang/vocabulary.py``):
each entry's torch call, SymPy form, PyTorch spellings, caveats and kink, side by side.
Mathematical functions, activations, selections, constants and the ways out of the graph.

Entries take the module (``torch``, ``sympy``) as an argument, so the table imports none of
them and the parser can use it without loading them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autogradcli.lang import forms
from autogradcli.lang.ops import Op, Param

if TYPE_CHECKING:
    from types import ModuleType

    import torch as torch_


def _inference_tensor(torch: ModuleType, a: torch_.Tensor) -> torch_.Tensor:
    """The value as ``torch.inference_mode()`` makes it: an inference tensor, which
    PyTorch refuses to save for backward (its own error, raised where it is used)."""
    with torch.inference_mode():
        return a.clone()


ENTRIES: tuple[Op, ...] = (
    forms.math_op("sin"),
    forms.math_op("cos"),
    forms.math_op("tan"),
    forms.math_op("asin", forms.Names(numpy="arcsin", also=("torch.arcsin", "Tensor.arcsin"))),
    forms.math_op("acos", forms.Names(numpy="arccos", also=("torch.arccos", "Tensor.arccos"))),
    forms.math_op("atan", forms.Names(numpy="arctan", also=("torch.arctan", "Tensor.arctan"))),
    forms.math_op("sinh"),
    forms.math_op("cosh"),
    forms.math_op("tanh", forms.Names(also=("F.tanh",))),
    forms.math_op("asinh", forms.Names(numpy="arcsinh", also=("torch.arcsinh", "Tensor.arcsinh"))),
    forms.math_op("acosh", forms.Names(numpy="arccosh", also=("torch.arccosh", "Tensor.arccosh"))),
    forms.math_op("atanh", forms.Names(numpy="arctanh", also=("torch.arctanh", "Tensor.arctanh"))),
    forms.math_op("exp"),
    forms.math_op("log", note="natural logarithm"),
    Op(
        "log2",
        torch=lambda torch, a: torch.log2(a),
        sympy=lambda sp, a: sp.log(a, 2),
        spelled=("bare", "torch", "Tensor", "np", "math"),
    ),
    Op(
        "log10",
        torch=lambda torch, a: torch.log10(a),
        sympy=lambda sp, a: sp.log(a, 10),
        spelled=("bare", "torch", "Tensor", "np", "math"),
    ),
    forms.math_op("sqrt", note="sqrt'(0) is infinite"),
    forms.math_op(
        "abs",
        forms.Names("Abs", math="fabs", also=("np.absolute", "torch.absolute", "Tensor.absolute")),
        kink=forms.Kink("abs'(0) is undefined (SymPy's sign(0) is 0)", ("sign",)),
    ),
    Op(
        "erf",
        torch=lambda torch, a: torch.erf(a),
        sympy=lambda sp, a: sp.erf(a),
        spelled=("bare", "torch", "Tensor", "math", "torch.special.erf"),
        note="the error function",
    ),
    Op(
        "sigmoid",
        torch=lambda torch, a: torch.sigmoid(a),
        sympy=lambda sp, a: 1 / (1 + sp.exp(-a)),
        spelled=("bare", "torch", "Tensor", "F", "torch.special.expit"),
    ),
    Op(
        "relu",
        torch=lambda torch, a: torch.relu(a),
        sympy=lambda sp, a: sp.Max(0, a),
        spelled=("bare", "torch", "Tensor", "F"),
        kink="relu'(0) is undefined (SymPy's Heaviside(0) is 1/2)",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "log1p",
        torch=lambda torch, a: torch.log1p(a),
        sympy=lambda sp, a: sp.log(1 + a),
        spelled=("bare", "torch", "Tensor", "np", "math"),
        note="log(1 + x), accurate for small x",
    ),
    Op(
        "expm1",
        torch=lambda torch, a: torch.expm1(a),
        sympy=lambda sp, a: sp.exp(a) - 1,
        spelled=("bare", "torch", "Tensor", "np", "math"),
        note="exp(x) - 1, accurate for small x",
    ),
    Op(
        "softplus",
        torch=lambda torch, a, beta=1.0, threshold=20.0: torch.nn.functional.softplus(
            a, beta=beta, threshold=threshold
        ),
        sympy=forms.softplus,
        params=(Param("beta", "float", 1.0), Param("threshold", "float", 20.0)),
        spelled=("bare", "F"),
        note="log(1 + exp(beta*x))/beta; PyTorch returns x itself where beta*x > threshold",
        kink="softplus switches to x itself at beta*x = threshold",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "logsigmoid",
        torch=lambda torch, a: torch.nn.functional.logsigmoid(a),
        sympy=lambda sp, a: -sp.log(1 + sp.exp(-a)),
        spelled=("bare", "F"),
        note="log(sigmoid(x)), without rounding sigmoid(x) to 0 or 1 first",
    ),
    Op(
        "gelu",
        torch=lambda torch, a, approximate="none": torch.nn.functional.gelu(
            a, approximate=approximate
        ),
        sympy=forms.gelu,
        params=(Param("approximate", "text", "none", ("none", "tanh")),),
        spelled=("bare", "F"),
        note="x·Φ(x), Φ the normal distribution's CDF (approximate='tanh': its tanh form)",
    ),
    Op(
        "silu",
        torch=lambda torch, a: torch.nn.functional.silu(a),
        sympy=lambda sp, a: a / (1 + sp.exp(-a)),
        spelled=("bare", "F"),
        note="x·sigmoid(x)",
    ),
    Op(
        "elu",
        torch=lambda torch, a, alpha=1.0: torch.nn.functional.elu(a, alpha=alpha),
        sympy=lambda sp, a, alpha=1.0: sp.Piecewise(
            (a, a > 0), (sp.nsimplify(alpha) * (sp.exp(a) - 1), True)
        ),
        params=(Param("alpha", "float", 1.0),),
        spelled=("bare", "F"),
        kink="elu is not differentiable at 0 unless alpha is 1",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "leaky_relu",
        torch=lambda torch, a, negative_slope=0.01: torch.nn.functional.leaky_relu(
            a, negative_slope=negative_slope
        ),
        sympy=lambda sp, a, negative_slope=0.01: sp.Piecewise(
            (a, a > 0), (sp.nsimplify(negative_slope) * a, True)
        ),
        params=(Param("negative_slope", "float", 0.01),),
        spelled=("bare", "F"),
        kink="leaky_relu'(0) is undefined",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "hardtanh",
        torch=lambda torch, a, min_val=-1.0, max_val=1.0: torch.nn.functional.hardtanh(
            a, min_val=min_val, max_val=max_val
        ),
        sympy=lambda sp, a, min_val=-1.0, max_val=1.0: forms.clamp_term(
            sp, a, sp.nsimplify(min_val), sp.nsimplify(max_val)
        ),
        params=(Param("min_val", "float", -1.0), Param("max_val", "float", 1.0)),
        spelled=("bare", "F"),
        kink="hardtanh is not differentiable at min_val and max_val",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "clamp",
        torch=lambda torch, a, min=None, max=None: torch.clamp(a, min, max),
        sympy=lambda sp, a, min=None, max=None: forms.clamp_term(sp, a, min, max),
        tensors=("input", "min", "max"),
        optional=frozenset({"min", "max"}),
        spelled=("bare", "torch", "Tensor", "torch.clip", "Tensor.clip", "np.clip"),
        aliases=("clip",),
        kink="clamp is not differentiable at its bounds",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "maximum",
        torch=lambda torch, a, b: torch.maximum(a, b),
        sympy=lambda sp, a, b: sp.Max(a, b),
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "np"),
        kink="maximum is not differentiable where its arguments are equal",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "minimum",
        torch=lambda torch, a, b: torch.minimum(a, b),
        sympy=lambda sp, a, b: sp.Min(a, b),
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "np"),
        kink="minimum is not differentiable where its arguments are equal",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "where",
        torch=lambda torch, c, a, b: torch.where(c.bool(), a, b),
        sympy=forms.where_term,
        tensors=("condition", "input", "other"),
        spelled=("bare", "torch", "np"),
        kink="where switches branches here",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "ones_like",
        torch=lambda torch, a: torch.ones_like(a),
        sympy=lambda sp, a: sp.Integer(1),
        spelled=("bare", "torch", "np"),
        kind="constant",
    ),
    Op(
        "zeros_like",
        torch=lambda torch, a: torch.zeros_like(a),
        sympy=lambda sp, a: sp.Integer(0),
        spelled=("bare", "torch", "np"),
        kind="constant",
    ),
    Op(
        "clone",
        torch=lambda torch, a, memory_format=None: (
            a.clone()
            if memory_format is None
            else a.clone(memory_format=getattr(torch, memory_format))
        ),
        sympy=lambda sp, a, memory_format=None: a,
        params=(Param("memory_format", "attr", None, forms.MEMORY_FORMATS),),
        spelled=("bare", "torch", "Tensor"),
        note="a copy in the graph (memory_format= changes the layout, not the values)",
    ),
    Op(
        "detach",
        torch=lambda torch, a: a.detach(),
        spelled=("bare", "torch", "Tensor"),
        kind="detach",
        note="the same values (and memory) outside the graph: no gradient through it",
    ),
    Op(  # a line under 'with torch.no_grad():' (written only that way)
        "no_grad",
        torch=lambda torch, a: a.detach(),
        spelled=(),
        kind="detach",
        note="made under torch.no_grad(): a constant outside the graph",
    ),
    Op(  # a line under 'with torch.inference_mode():' (written only that way)
        "inference_mode",
        torch=lambda torch, a: _inference_tensor(torch, a),
        spelled=(),
        kind="detach",
        note="made under torch.inference_mode(): an inference tensor, outside the graph",
    ),
)
