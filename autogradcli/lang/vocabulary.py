"""The one table of the language's operations. Each entry holds, side by side: how PyTorch
computes it, how SymPy writes it (one term per element, or a definition through other
operations), its shape rule, the ways PyTorch code spells it (``torch.sin``, ``x.sin()``,
``F.relu``, ``np.sin``, ...), and its caveats.

Entries take the module (``torch``, ``sympy``, ``numpy``) as an argument, so this table
imports none of them and the parser can use it without loading them.
"""

from __future__ import annotations

import math
from typing import Any

from autogradcli.lang import forms, ops
from autogradcli.lang.ops import REDUCTION, REQUIRED, Op, Param, broadcast_all, index_shape
from autogradcli.lang.tree import Binary, Call, Num, Unary, call

_OPS: tuple[Op, ...] = (
    forms.math_op("sin"),
    forms.math_op("cos"),
    forms.math_op("tan"),
    forms.math_op("asin", np_name="arcsin", also=("torch.arcsin", "Tensor.arcsin")),
    forms.math_op("acos", np_name="arccos", also=("torch.arccos", "Tensor.arccos")),
    forms.math_op("atan", np_name="arctan", also=("torch.arctan", "Tensor.arctan")),
    forms.math_op("sinh"),
    forms.math_op("cosh"),
    forms.math_op("tanh", also=("F.tanh",)),
    forms.math_op("asinh", np_name="arcsinh", also=("torch.arcsinh", "Tensor.arcsinh")),
    forms.math_op("acosh", np_name="arccosh", also=("torch.arccosh", "Tensor.arccosh")),
    forms.math_op("atanh", np_name="arctanh", also=("torch.arctanh", "Tensor.arctanh")),
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
        "Abs",
        math_name="fabs",
        also=("np.absolute", "torch.absolute", "Tensor.absolute"),
        kink="abs'(0) is undefined (SymPy's sign(0) is 0)",
        atoms=("sign",),
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
        torch=lambda torch, a: a.clone(),
        sympy=lambda sp, a: a,
        spelled=("bare", "torch", "Tensor"),
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
    # operators, as PyTorch's functions and methods write them
    Op(
        "add",
        build=forms.operator("+"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "np"),
    ),
    Op(
        "sub",
        build=forms.operator("-"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.subtract", "Tensor.subtract", "np.subtract"),
    ),
    Op(
        "mul",
        build=forms.operator("*"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.multiply", "Tensor.multiply", "np.multiply"),
    ),
    Op(
        "div",
        build=forms.operator("/"),
        tensors=("input", "other"),
        spelled=(
            "torch",
            "Tensor",
            "torch.divide",
            "Tensor.divide",
            "torch.true_divide",
            "Tensor.true_divide",
            "np.divide",
            "np.true_divide",
        ),
    ),
    Op(
        "pow",
        build=forms.operator("**"),
        tensors=("input", "exponent"),
        spelled=("torch", "Tensor", "np.power", "math.pow", "Tensor.float_power"),
    ),
    Op(
        "matmul",
        build=forms.operator("@"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.mm", "Tensor.mm", "torch.mv", "Tensor.mv", "np"),
    ),
    Op("neg", build=lambda a: Unary("-", a), spelled=("torch", "Tensor", "torch.negative")),
    Op("square", build=lambda a: Binary("**", a, Num(2)), spelled=("torch", "Tensor", "np")),
    Op(
        "reciprocal",
        build=lambda a: Binary("/", Num(1), a),
        spelled=("torch", "Tensor", "np"),
    ),
    Op(
        "rsqrt",
        build=lambda a: Binary("/", Num(1), call("sqrt", a)),
        spelled=("torch", "Tensor"),
    ),
    # reductions and functions of whole tensors
    forms.reduction("sum", forms.sum_of),
    forms.reduction("mean", forms.mean),
    forms.reduction("prod", forms.prod, dims="int"),
    forms.extreme_op("max"),
    forms.extreme_op("min"),
    Op(
        "softmax",
        torch=lambda torch, a, dim: torch.softmax(a, dim=dim),
        components=forms.softmax,
        shape=ops.same_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "F"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "log_softmax",
        torch=lambda torch, a, dim: torch.log_softmax(a, dim=dim),
        components=forms.log_softmax,
        shape=ops.same_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "F"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "logsumexp",
        torch=lambda torch, a, dim, keepdim=False: torch.logsumexp(a, dim=dim, keepdim=keepdim),
        components=forms.logsumexp,
        shape=ops.reduce_shape,
        params=(Param("dim", "dims"), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "norm",
        torch=lambda torch, a, p=2, dim=None, keepdim=False: torch.linalg.vector_norm(
            a, 2, dim=dim, keepdim=keepdim
        ),
        components=forms.norm,
        shape=ops.reduce_shape,
        params=(
            Param("p", "text", 2, (2, "fro")),
            Param("dim", "dims", None),
            Param("keepdim", "bool", False),
        ),
        spelled=("bare", "torch", "Tensor", "torch.linalg.norm", "torch.linalg.vector_norm"),
        note="the 2-norm of all elements (or along dim)",
        kink="norm is not differentiable at the zero vector",
        kink_atoms=("Heaviside",),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "dot",
        torch=lambda torch, a, b: torch.dot(a, b),
        components=lambda sp, np, a, b: forms.objects(np, np.dot(a, b)),
        shape=ops.dot_shape,
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "torch.inner", "Tensor.inner"),
        reduces=True,
        kind="structural",
    ),
    # shapes
    Op(
        "T",
        torch=lambda torch, a: a.t(),
        components=lambda sp, np, a: a.T,
        shape=ops.t_shape,
        spelled=("bare", "torch.t", "Tensor.t"),
        kind="structural",
    ),
    Op(
        "transpose",
        torch=lambda torch, a, dim0, dim1: torch.transpose(a, dim0, dim1),
        components=forms.transpose,
        shape=ops.transpose_shape,
        params=(Param("dim0", "int"), Param("dim1", "int")),
        spelled=("bare", "torch", "Tensor", "torch.swapaxes", "Tensor.swapaxes", "np.swapaxes"),
        kind="structural",
    ),
    Op(
        "permute",
        torch=lambda torch, a, dims: a.permute(dims),
        components=lambda sp, np, a, dims: np.transpose(a, [ops.axis(d, a.ndim) for d in dims]),
        shape=ops.permute_shape,
        params=(Param("dims", "ints"),),
        varargs="dims",
        spelled=("bare", "torch", "Tensor", "np.transpose"),
        kind="structural",
    ),
    Op(
        "reshape",
        torch=lambda torch, a, shape: a.reshape(shape),
        components=lambda sp, np, a, shape: a.reshape(ops.reshape_shape([a.shape], shape)),
        shape=ops.reshape_shape,
        params=(Param("shape", "ints"),),
        varargs="shape",
        spelled=("bare", "torch", "Tensor", "Tensor.view", "np"),
        kind="structural",
    ),
    Op(
        "flatten",
        torch=lambda torch, a, start_dim=0, end_dim=-1: torch.flatten(a, start_dim, end_dim),
        components=forms.flatten,
        shape=ops.flatten_shape,
        params=(Param("start_dim", "int", 0), Param("end_dim", "int", -1)),
        spelled=("bare", "torch", "Tensor"),
        kind="structural",
    ),
    Op(
        "squeeze",
        torch=lambda torch, a, dim=None: a.squeeze() if dim is None else a.squeeze(dim),
        components=forms.squeeze,
        shape=ops.squeeze_shape,
        params=(Param("dim", "dims", None),),
        spelled=("bare", "torch", "Tensor", "np"),
        kind="structural",
    ),
    Op(
        "unsqueeze",
        torch=lambda torch, a, dim: a.unsqueeze(dim),
        components=forms.unsqueeze,
        shape=ops.unsqueeze_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "np.expand_dims"),
        kind="structural",
    ),
    Op(
        "cat",
        torch=lambda torch, *tensors, dim=0: torch.cat(tensors, dim=dim),
        components=forms.cat,
        shape=ops.cat_shape,
        tensors=("tensors",),
        params=(Param("dim", "int", 0),),
        sequence=True,
        spelled=("bare", "torch", "torch.concat", "torch.concatenate", "np.concatenate"),
        kind="structural",
    ),
    Op(
        "stack",
        torch=lambda torch, *tensors, dim=0: torch.stack(tensors, dim=dim),
        components=lambda sp, np, *arrays, dim=0: np.stack(
            arrays, axis=ops.unsqueeze_axis(arrays[0].ndim, dim)
        ),
        shape=ops.stack_shape,
        tensors=("tensors",),
        params=(Param("dim", "int", 0),),
        sequence=True,
        spelled=("bare", "torch", "np"),
        kind="structural",
    ),
    # losses, as torch.nn.functional defines them
    forms.loss("mse_loss", forms.mse),
    forms.loss(
        "l1_loss",
        forms.l1,
        kink="l1_loss is not differentiable where input equals target",
        atoms=("sign",),
    ),
    forms.loss(
        "smooth_l1_loss",
        forms.smooth_l1,
        Param("beta", "float", 1.0),
        kink="smooth_l1_loss with beta 0 is not differentiable where input equals target",
        atoms=("sign", "Piecewise"),
    ),
    forms.loss(
        "huber_loss",
        forms.huber,
        Param("delta", "float", 1.0),
        kink="huber_loss switches from squares to lines at |input - target| = delta",
        atoms=("Piecewise",),
    ),
    forms.loss(
        "binary_cross_entropy",
        forms.bce,
        optional=("weight",),
        note="PyTorch clamps each log at -100",
        kink="binary_cross_entropy's logs are clamped at -100 here",
        atoms=("Heaviside",),
    ),
    forms.loss(
        "binary_cross_entropy_with_logits", forms.bce_logits, optional=("weight", "pos_weight")
    ),
    Op(
        "cross_entropy",
        torch=forms.cross_entropy_torch,
        components=forms.cross_entropy,
        shape=ops.class_shape,
        tensors=("input", "target"),
        params=(
            Param("reduction", "text", "mean", REDUCTION),
            Param("label_smoothing", "float", 0.0),
        ),
        spelled=("bare", "F"),
        note="target: class indices (N,) or class probabilities (N, C)",
        reduces=True,
        kind="structural",
    ),
    Op(
        "nll_loss",
        torch=lambda torch, x, t, reduction="mean": torch.nn.functional.nll_loss(
            x, t.long(), reduction=reduction
        ),
        components=forms.nll_loss,
        shape=ops.nll_shape,
        tensors=("input", "target"),
        params=(Param("reduction", "text", "mean", REDUCTION),),
        spelled=("bare", "F"),
        note="input: log-probabilities; target: class indices",
        reduces=True,
        kind="structural",
    ),
)

OPS: dict[str, Op] = {op.name: op for op in _OPS}

# The ways code may name a function: "torch.sin", "Tensor.sin", "F.relu", "np.sin", "sin".
_PREFIXES = ("torch", "Tensor", "F", "np", "math")


def _inference_tensor(torch: Any, a: Any) -> Any:
    """The value as ``torch.inference_mode()`` makes it: an inference tensor, which
    PyTorch refuses to save for backward (its own error, raised where it is used)."""
    with torch.inference_mode():
        return a.clone()


def _spellings() -> dict[str, Op]:
    table: dict[str, Op] = {}
    for op in _OPS:
        for way in op.spelled:
            key = f"{way}.{op.name}" if way in _PREFIXES else op.name if way == "bare" else way
            table.setdefault(key, op)
        for alias in op.aliases:
            table.setdefault(alias, op)
    return table


SPELLINGS: dict[str, Op] = _spellings()

# Operations that only stand for operators (the parser writes them as such).
SUGAR = frozenset(op.name for op in _OPS if op.build is not None)

# The language's own names: what a bare call may name.
BARE = frozenset(k for k in SPELLINGS if "." not in k)


def function_names() -> list[str]:
    """The bare names of the language, in the table's order."""
    return [op.name for op in _OPS if op.build is None and op.name in BARE]


def elementwise_names() -> list[str]:
    return [op.name for op in _OPS if op.sympy is not None and op.name in BARE]


# Named constants, used unless a value is given for the name: (Python value, SymPy name).
CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "pi"),
    "e": (math.e, "E"),
}

# Non-differentiable points by code: what SymPy knows of them. What PyTorch gives there is
# read from its .grad and shown beside (see messages.kink_note).
KINK_POINTS: dict[str, str] = {
    **{op.name: op.kink for op in _OPS if op.kink},
    "second": "the second derivative at a kink (relu or abs at 0, max or min at a tie) is "
    "undefined (a jump in the first)",
    "zero_over_zero": "the derivative is 0/0 here (undefined)",
}

# The code a jump stands for when no operation of the expression claims it.
KINKS: dict[str, str] = {
    "Heaviside": "relu",
    "sign": "abs",
    "DiracDelta": "second",
    "Piecewise": "where",
}

# Operations with a kink: only an expression using one lets a numeric check accept a value
# between its one-sided slopes.
KINKED: frozenset[str] = frozenset(op.name for op in _OPS if op.kink)


def definition(node: Any, placeholders: list[Any]) -> Any:
    """The operation's definition through others (a loss through means and logs), with the
    placeholders standing for its arguments; None when it is folded as itself."""
    op = OPS[node.func]
    if op.expand is None:
        return None
    positional, keywords = arguments(node, list(placeholders))
    return op.expand(*positional, **keywords)


def arguments(node: Call, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """How an entry's functions take a call's folded arguments: the required tensors by
    position, the optional tensors that are there and the parameters by name."""
    op = OPS[node.func]
    options = node.options
    names = options.pop("given", None)
    if op.sequence or names is None:
        return list(values), options
    positional = [v for n, v in zip(names, values, strict=True) if n not in op.optional]
    optional = {n: v for n, v in zip(names, values, strict=True) if n in op.optional}
    return positional, {**optional, **options}


def kink_codes(atom: str, uses: set[str]) -> set[str]:
    """The note codes for a jump (a SymPy class name) in a derivative of an expression that
    calls ``uses``: the operations whose kink shows as that jump, else ``KINKS``'s code."""
    found = {name for name in uses if name in OPS and atom in OPS[name].kink_atoms}
    return found or {KINKS[atom]}


__all__ = [
    "BARE",
    "CONSTANTS",
    "KINKED",
    "KINKS",
    "KINK_POINTS",
    "OPS",
    "REQUIRED",
    "SPELLINGS",
    "SUGAR",
    "Op",
    "Param",
    "arguments",
    "broadcast_all",
    "index_shape",
]
