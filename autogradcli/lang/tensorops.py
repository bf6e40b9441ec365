"""The table's operators, reductions, shape operations and losses (part of the one table,
``lang/vocabulary.py``): each entry's torch call, its reference (SymPy terms held by NumPy
object arrays, a definition through other operations, or the operator it spells), its shape
rule, PyTorch spellings and caveats, side by side.

Entries take the module (``torch``, ``sympy``, ``numpy``) as an argument, so the table
imports none of them and the parser can use it without loading them.
"""

from __future__ import annotations

from autogradcli.lang import forms, jumps, ops, picks
from autogradcli.lang.ops import REDUCTION, Op, Param
from autogradcli.lang.tree import Binary, Num, Unary, call

ENTRIES: tuple[Op, ...] = (
    # operators, as PyTorch's functions and methods write them
    Op(
        "add",
        build=forms.scaled("+"),
        tensors=("input", "other"),
        params=(Param("alpha", "float", 1.0),),
        spelled=("torch", "Tensor", "np"),
    ),
    Op(
        "sub",
        build=forms.scaled("-"),
        tensors=("input", "other"),
        params=(Param("alpha", "float", 1.0),),
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
        build=forms.divided,
        tensors=("input", "other"),
        params=(Param("rounding_mode", "text", None, (None, "trunc", "floor")),),
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
    Op(  # div(a, b, rounding_mode='floor' or 'trunc'), written as div
        "div_rounded",
        torch=lambda torch, a, b, rounding_mode="floor": torch.div(
            a, b, rounding_mode=rounding_mode
        ),
        sympy=jumps.rounded_div,
        tensors=("input", "other"),
        params=(Param("rounding_mode", "text", "floor", ("trunc", "floor")),),
        spelled=(),  # torch.floor_divide has no derivative in PyTorch: not this entry
        note="a/b rounded down ('floor') or toward 0 ('trunc'): its derivative is 0 "
        "(PyTorch's too), undefined at each jump",
        kink="div with rounding_mode jumps where a/b is an integer: no derivative there",
        kink_atoms=("DiracDelta",),
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
        torch=lambda torch, a, dim, dtype=None: torch.softmax(
            a, dim=dim, dtype=forms.torch_dtype(torch, dtype)
        ),
        components=forms.softmax,
        shape=ops.same_shape,
        params=(Param("dim", "int"), Param("dtype", "attr", None, forms.DTYPES)),
        spelled=("bare", "torch", "Tensor", "F"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "log_softmax",
        torch=lambda torch, a, dim, dtype=None: torch.log_softmax(
            a, dim=dim, dtype=forms.torch_dtype(torch, dtype)
        ),
        components=forms.log_softmax,
        shape=ops.same_shape,
        params=(Param("dim", "int"), Param("dtype", "attr", None, forms.DTYPES)),
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
            a, 2 if p == "fro" else p, dim=dim, keepdim=keepdim
        ),
        components=lambda sp, np, a, p=2, dim=None, keepdim=False: forms.norm(
            sp, np, a, 2 if p == "fro" else p, dim, keepdim
        ),
        shape=forms.vector_norm_shape,
        params=(
            Param("p", "order", 2),
            Param("dim", "dims", None),
            Param("keepdim", "bool", False),
        ),
        spelled=("bare", "torch", "Tensor", "torch.linalg.vector_norm"),
        note="the p-norm of all elements (or along dim): p 2 (default), 'fro', 1, 0, 3, "
        "inf, -inf, negative (ord= for vector_norm)",
        kink="norm is not differentiable at the zero vector (nor the order-0 count where "
        "an element is 0)",
        kink_atoms=("Heaviside", "sign", "DiracDelta"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "linalg_norm",
        torch=lambda torch, a, ord=None, dim=None, keepdim=False: torch.linalg.norm(
            a, ord, dim=dim, keepdim=keepdim
        ),
        components=forms.linalg_norm,
        shape=forms.linalg_norm_shape,
        params=(
            Param("ord", "order", None),
            Param("dim", "dims", None),
            Param("keepdim", "bool", False),
        ),
        spelled=("torch.linalg.norm",),
        note="a vector's norm, or with ord a matrix's: 'fro', 1, -1, inf, -inf",
        kink="the norm is not differentiable at the zero vector, where an element is 0 "
        "(ord 1 and inf; ord 0, a count, jumps there) or at a tie",
        kink_atoms=("Heaviside", "sign", "DiracDelta"),
        reduces=True,
        kind="reduction",
    ),
    forms.extreme_of_dims("amax", forms.largest),
    forms.extreme_of_dims("amin", forms.smallest),
    forms.running_op("cumsum"),
    forms.running_op("cumprod"),
    Op(
        "dot",
        torch=lambda torch, a, b: torch.dot(a, b),
        components=lambda sp, np, a, b: forms.objects(np, np.dot(a, b)),
        shape=ops.dot_shape,
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor"),
        reduces=True,
        kind="structural",
    ),
    Op(
        "inner",
        torch=lambda torch, a, b: torch.inner(a, b),
        components=forms.inner,
        shape=forms.inner_shape,
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "np"),
        note="sums over the last dims of both (two vectors: their dot product)",
        reduces=True,
        kind="structural",
    ),
    Op(
        "gather",
        torch=lambda torch, a, index, dim: torch.gather(a, dim, index.long()),
        components=picks.gather,
        shape=picks.gather_shape,
        tensors=("input", "index"),
        params=(Param("dim", "int"),),
        order=("input", "dim", "index"),
        spelled=("bare", "torch", "Tensor"),
        note="out[i][j] = input[index[i][j]][j] (dim 0): index a constant of whole numbers",
        indices=(1, 2),
        kind="structural",
    ),
    Op(  # x[torch.arange(4), ys]: indexing with integer tensors, written only that way
        "take",
        torch=picks.take_torch,
        components=picks.take,
        shape=picks.take_shape,
        params=(Param("pattern", "pattern"),),
        spelled=(),
        note="indexing with integer tensors (constants of whole numbers)",
        indices=(1, None),
        kind="structural",
    ),
    Op(
        "one_hot",
        torch=lambda torch, a, num_classes=-1: torch.nn.functional.one_hot(a.long(), num_classes),
        components=picks.one_hot,
        shape=picks.one_hot_shape,
        params=(Param("num_classes", "int", -1),),
        spelled=("F",),
        note="1 at each class index, 0 elsewhere (integers: no gradient); give num_classes",
        indices=(0, 1),
        kind="structural",
    ),
    # shapes
    # A.T and A.t() are one transpose, but PyTorch records them apart: A.T a permute of
    # every dim (PermuteBackward0), A.t() and torch.t(A) a TBackward0. Both are this entry;
    # the second spelling carries spelling="t" (not a parameter a user writes or sees)
    Op(
        "T",
        torch=lambda torch, a, spelling="T": (
            torch.t(a) if spelling == "t" else torch.permute(a, tuple(range(a.ndim))[::-1])
        ),
        components=lambda sp, np, a, **_: a.T,
        shape=ops.t_shape,
        spelled=("bare",),
        kind="structural",
    ),
    Op(
        "t",
        build=lambda a: call("T", a, spelling="t"),
        spelled=("torch", "Tensor"),
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
        torch=picks.cross_entropy_torch,
        components=picks.cross_entropy,
        shape=ops.class_shape,
        tensors=("input", "target", "weight"),
        optional=frozenset({"weight"}),
        params=(
            Param("reduction", "text", "mean", REDUCTION),
            Param("ignore_index", "int", -100),
            Param("label_smoothing", "float", 0.0),
        ),
        spelled=("bare", "F"),
        note="input (C), (N, C) or (N, C, d1, ...); target: class indices (the input's "
        "shape without dim 1) or class probabilities (the input's shape); weight (C)",
        indices=(1, 2),
        reduces=True,
        kind="structural",
    ),
    Op(
        "nll_loss",
        torch=picks.nll_loss_torch,
        components=picks.nll_loss,
        shape=ops.nll_shape,
        tensors=("input", "target", "weight"),
        optional=frozenset({"weight"}),
        params=(
            Param("reduction", "text", "mean", REDUCTION),
            Param("ignore_index", "int", -100),
        ),
        spelled=("bare", "F"),
        note="input: log-probabilities (C), (N, C) or (N, C, d1, ...); target: class "
        "indices; weight (C)",
        indices=(1, 2),
        reduces=True,
        kind="structural",
    ),
)
