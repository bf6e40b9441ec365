"""The table's operators, reductions, shape operations and losses (part of the one table,
``lang/vocabulary.py``): each entry's torch call, its reference (SymPy terms held by NumPy
object arrays, a definition through other operations, or the operator it spells), its shape
rule, PyTorch spellings and caveats, side by side.

Entries take the module (``torch``, ``sympy``, ``numpy``) as an argument, so the table
imports none of them and the parser can use it without loading them.
"""

from __future__ import annotations

from autogradcli.lang import forms, ops
from autogradcli.lang.ops import REDUCTION, Op, Param
from autogradcli.lang.tree import Binary, Num, Unary, call

ENTRIES: tuple[Op, ...] = (
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
        kink=forms.Kink("l1_loss is not differentiable where input equals target", ("sign",)),
    ),
    forms.loss(
        "smooth_l1_loss",
        forms.smooth_l1,
        Param("beta", "float", 1.0),
        kink=forms.Kink(
            "smooth_l1_loss with beta 0 is not differentiable where input equals target",
            ("sign", "Piecewise"),
        ),
    ),
    forms.loss(
        "huber_loss",
        forms.huber,
        Param("delta", "float", 1.0),
        kink=forms.Kink(
            "huber_loss switches from squares to lines at |input - target| = delta",
            ("Piecewise",),
        ),
    ),
    forms.loss(
        "binary_cross_entropy",
        forms.bce,
        optional=("weight",),
        note="PyTorch clamps each log at -100",
        kink=forms.Kink("binary_cross_entropy's logs are clamped at -100 here", ("Heaviside",)),
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
