"""Sentences for codes: errors, notes and the causes of a verdict.

The core raises errors and records notes as a code and its numbers; the sentence is made
here, when something shows it (``str(error)``, the Rich report, JSON ``message``). An option
written ``[[name]]`` or ``[[name=value]]`` in a template is spelled for whoever reads it:
``--name value`` on the command line, ``name=value`` in Python (``CLI`` and ``PYTHON``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from autogradcli.lang.vocabulary import KINK_POINTS

POINTS: dict[str, str] = {
    **KINK_POINTS,
    "off_domain": "the function is NaN within the numeric step (1e-06) here (outside "
    "its real domain or at its edge), so central differences give no number",
    "one_sided": "SymPy's derivative is 0/0 here and the one-sided slopes differ (a kink)",
}

VALUE_HINT = (
    "give a number (2, -1.5e-3), a nested list ([[1,2],[3,4]]), a constructor "
    "(ones(2,2), zeros(3), full(2,3,0.5), arange(1,16), linspace(0,1,5), "
    "reshape(arange(1,16),5,3), rand(2,3), randn(2,3)) or a file (@data.npy, .pt, .csv, .json)"
)
PROGRAM_HINT = (
    'a program is steps NAME = EXPR separated by ; or newlines, e.g. "y = x + 2; out = y*y"'
)


class Coded(Protocol):
    code: str
    data: Mapping[str, Any]


# --- options, as each reader writes them -----------------------------------------------------

# Names the CLI spells differently from "--" + name with dashes.
FLAGS: dict[str, str] = {"sympy_seconds": "--sympy-timeout", "json_output": "--json"}
# Names the Python API reaches through another object.
PARAMETERS: dict[str, str] = {
    n: f"Limits.{n}"
    for n in (
        "max_length",
        "max_depth",
        "max_exponent",
        "max_elements",
        "max_entries",
        "max_iterations",
        "max_lines",
        "max_file_bytes",
    )
}


# Commands as the Python API names them ([[@graph]] in a template).
FUNCTIONS: dict[str, str] = {"graph": "backward_graph()"}


def cli_option(name: str, value: str | None) -> str:
    if name.startswith("@"):
        return f"autograd-cli {name[1:]}"
    flag = FLAGS.get(name, "--" + name.replace("_", "-"))
    return flag if value is None else f"{flag} {value}"


BOOLEANS = frozenset(
    {"same_graph", "retain_graph", "zero_grad", "explain", "inspect", "numeric", "strict"}
    | {"functional"}
)
TEXTS = frozenset({"device", "dtype", "weights", "memory"})  # the API takes these as strings
LISTS = frozenset({"retain_grad", "const"})  # and these as lists of names


def python_option(name: str, value: str | None) -> str:
    if name.startswith("@"):
        return "ag." + FUNCTIONS.get(name[1:], name[1:] + "()")
    if name == "var" and value is not None:  # --var x=2: a value given by name
        key, _, given = value.partition("=")
        return f"values=dict({key}={given})"
    if name == "expect" and value is not None:  # --expect x=93: a gradient by name
        key, _, given = value.partition("=")
        return f"expect=dict({key}={given})"
    if value is None and name in BOOLEANS:
        return f"{name}=True"
    if value is not None and name in TEXTS | LISTS:
        value = f'"{value}"' if name in TEXTS else f'["{value}"]'
    name = PARAMETERS.get(name, name)
    return name if value is None else f"{name}={value}"


Style = Callable[[str, "str | None"], str]
CLI: Style = cli_option
PYTHON: Style = python_option
_OPTION = re.compile(r"\[\[(@?[\w{}]+)(?:=([^\]]+))?\]\]")


def spell(template: str, style: Style, data: Mapping[str, Any] | None = None) -> str:
    """``template`` with each ``[[name]]``/``[[name=value]]`` spelled in ``style`` (fields
    such as ``{name}`` inside them filled from ``data`` first)."""
    fields = _Missing(data or {})

    def option(match: re.Match[str]) -> str:
        value = match.group(2)
        return style(match.group(1).format_map(fields), value and value.format_map(fields))

    return _OPTION.sub(option, template)


# --- errors ----------------------------------------------------------------------------------

ERRORS: dict[str, str] = {
    # the expression
    "expression_too_long": "expression is {length} characters long; the limit is {limit} "
    "(raise it with [[max_length]])",
    "recursion_limit": "the expression is nested too deeply to check: Python's recursion "
    "limit ({limit} calls) was reached in {where}; write it with fewer nested levels, or raise "
    "the limit with sys.setrecursionlimit in the Python API",
    "expression_too_long_read": "the program in {path} is more than {limit} characters long "
    "(reading stopped after {read} bytes{size}); the limit is {limit} "
    "(raise it with [[max_length]])",
    "expression_empty": 'the expression is empty; give one such as "2*x**2 + 1"',
    "name_normalized": "the name '{word}' has characters Python reads as '{plain}'; "
    "write '{plain}'",
    "syntax": "cannot parse the expression{where}: {detail}; write it in Python syntax, "
    'e.g. "2*x**4 + 3*x + 1"',
    "syntax_lookalike": "cannot parse the expression{where}: '{char}' ({point}) looks like "
    "{looks} but is not Python's; write '{write}' ('{fixed}')",
    "syntax_product": "cannot parse the expression{where}: '{written}' is not a product in "
    "Python; write the * ('{fixed}')",
    "nested_for_parser": "the expression is nested too deeply for Python's parser; write it "
    "with fewer nested parentheses",
    "unparsable": "cannot parse the expression: {detail}",
    "statement_not_allowed": "{what} cannot be used; " + PROGRAM_HINT,
    "custom_function_methods": "the Function '{name}' needs @staticmethod forward and backward "
    "methods, as PyTorch's 'Extending PyTorch' writes them",
    "custom_function_form": "'{text}' cannot be used in a custom autograd Function; "
    "write {instead}",
    "custom_function_static": "'{name}' of a custom autograd Function must be a @staticmethod, "
    "as PyTorch requires; write @staticmethod above 'def {name}'",
    "custom_function_return": "'{name}' of a custom autograd Function ends without return; "
    "return its result",
    "custom_function_outputs": "'{name}.apply' returns {count} tensors; unpack them "
    "(a, b = {name}.apply(x)) or use a Function with one output",
    "custom_function_unpack": "{count} values cannot be unpacked into {names}; "
    "unpack as many names as were saved or given",
    "bad_assignment": "cannot assign in '{text}': assign one plain name per step; " + PROGRAM_HINT,
    "assign_function": "cannot assign to '{name}': it is a function; choose another name",
    "assign_namespace": "cannot assign to '{name}': it names a module (torch, F, np, math); "
    "choose another name",
    "step_unused": "step '{name}' is never used; use it in a later step or remove it",
    "too_deep": "the expression is nested more than {limit} levels deep (raise it with "
    "[[max_depth]])",
    "operator_not_allowed": "operator in '{symbol}' is not allowed; allowed are {allowed}",
    "syntax_not_allowed": "{what} cannot be used in an expression; allowed are {allowed}",
    "constant_not_allowed": "'{value}' is not allowed in an expression; allowed are {allowed}",
    "complex_number": "complex numbers are not supported; use real numbers",
    "string_not_allowed": "strings are not allowed in an expression; allowed are {allowed}",
    "integer_too_large": "integer constant with {digits} digits is too large; the limit is "
    "about 1e308",
    "constant_kind": "constant {value} is not allowed in an expression",
    "call_not_plain": "'{text}' cannot be called; call a function by its name, as a method "
    "(x.sum()) or in torch, F (torch.nn.functional), np or math (torch.sin(x))",
    "unknown_function": "unknown function '{name}'{hint} (autograd-cli grad --help lists "
    "the functions)",
    "outside_maths": "{what} is not part of the maths the tool checks; {instead}",
    "unknown_spelling": "{what} is not supported{hint} (autograd-cli grad --help lists the "
    "functions)",
    "namespace_alone": "'{name}' is a module; call a function in it, e.g. {name}.exp(x)",
    "namespace_value": "'{text}' is not a value the language knows; use pi and e, or a "
    "function call such as torch.exp(x)",
    "readable_only": "'{text}' is not part of the computation; print it (print({text})) or "
    "write it on a line of its own, after the backward() that fills it",
    "read_unknown": "'{text}': no tensor '{name}' is defined before this line",
    "statement_method": "'{text}(...)' is a statement: write it on a line of its own, e.g. "
    "out.backward()",
    "attribute_not_allowed": "'{text}' cannot be used: .{attr} is not an attribute the "
    "language knows; use .T, .data, .grad in print(...), or a method such as x.sum()",
    "saved_attribute": "'{text}' reads what a node saved for backward; autograd-cli graph "
    "--saved shows every node's {attr} (shapes, dtypes, first values) and what reading it "
    "after backward() does",
    "node_attribute": "'{text}' reads the graph itself; autograd-cli graph shows each node "
    "and its next_functions (graph --saved: what each node saved)",
    "constructor_cast": "'{text}' casts the new value; write the dtype in the constructor "
    "instead: {fixed}",
    "not_a_pair": "'{text}': only torch.max(x, dim) and torch.min(x, dim) give (values, "
    "indices) pairs",
    "pair_result": "'{text}' gives (values, indices) in PyTorch; write {text}.values (or "
    "[0]), or {name}(x) over all elements",
    "indices_not_differentiable": "'{text}': indices are integers, with no gradient; use "
    ".values (or [0])",
    "max_of_two": "{name}(x, y) of two tensors: write maximum(x, y) for the elementwise "
    "larger (minimum for the smaller), or {name}(x, dim) along a dim",
    "linalg_norm_order": "'{where}': the norm of order {ord} needs singular values (a "
    "matrix's 2-norm, -2-norm or nuclear norm), which SymPy has no closed form to check; use "
    "ord='fro', 1, -1, inf or -inf, or torch.linalg.vector_norm(x, ord) for the norm of all "
    "elements",
    "linalg_norm_dims": "'{where}': torch.linalg.norm with ord takes a 1-D or 2-D input (or "
    "dim=), not shape {shape}; use torch.linalg.vector_norm(x, ord) for the norm of all "
    "elements",
    "bad_order": "{what} must be a number, inf, -inf (math.inf, float('inf')) or 'fro', not {text}",
    "legacy_tensor": "'{text}': torch.Tensor is PyTorch's legacy constructor; it is taken "
    "for float data only (torch.Tensor([1., 2.])); use torch.tensor([1., 2.]) for values, "
    "torch.zeros(2, 3) for a shape",
    "len_here": "len(...) gives a size; use it inside a constructor such as torch.ones(len(y))",
    "constructor_here": "'{text}' makes a value; give values as --NAME VALUE (or define "
    "them in a program: x = torch.tensor([1., 2.]))",
    "starred_call": "{name}() takes its arguments written out, not *args or **kwargs",
    "given_twice_arg": "{name}() got '{arg}' twice; give it once",
    "argument_missing": "{name}() needs its argument '{arg}', e.g. {example}",
    "sequence_needed": "{name}() takes a list of tensors, e.g. {example}",
    "too_many_arguments": "too many arguments for {name}(); e.g. {example}",
    "unknown_keyword": "{name}() has no argument '{keyword}'; it takes {known}",
    "bad_integer": "{what} must be an integer written as such (0, 1, -1), not '{text}'",
    "bad_number_argument": "{what} must be a number written as such (0.5, -1), not '{text}'",
    "bad_flag": "{param} of {name}() must be True or False, not '{text}'",
    "bad_choice": "{param} of {name}() must be one of {choices}, not {text}",
    "slice_step": "slices step forward in PyTorch; a step of {step} is not allowed (use a "
    "positive step)",
    "chained_comparison": "'{text}': write one comparison at a time (a < b), and combine "
    "them with where(...)",
    "import_not_allowed": "'{text}' is not allowed: a cell may import torch, "
    "torch.nn.functional as F, torch.nn as nn, numpy as np and math (nothing is imported)",
    "attribute_assignment": "'{text}' is not allowed; the attributes a cell may set are "
    "x.grad = None and x.requires_grad = True",
    "requires_grad_not_leaf": "'{text}': {name} is not a value the program defines; "
    "requires_grad_ is for values made with torch.tensor(...), torch.ones(...) and the like",
    "requires_grad_after_use": "'{text}': {name} is already used above; call "
    "requires_grad_ right after making it (or pass requires_grad=True)",
    "backward_arguments": "'{text}': backward takes gradient= and retain_graph=, e.g. "
    "out.backward(torch.ones_like(out), retain_graph=True)",
    "create_graph_here": "'{text}': create_graph=True is for higher derivatives; use "
    "autograd-cli grad --order 2, or autograd-cli hessian",
    "backward_inputs": "'{text}': backward(inputs=...) is not supported; every leaf's .grad "
    "is shown",
    "program_file": "cannot read the program from '{path}': {reason}; give a readable "
    "text file (@cell.py), - for standard input, or the program in quotes",
    "line_syntax": "cannot split the line as a shell would: {reason}; close the quotes",
    "line_command": "a line starts with a command ({commands}), not '{word}', e.g. "
    'grad "x**3" --x 2',
    "case_json": "the case is not valid JSON ({reason} at column {column}); write one object "
    'per line, e.g. {{"command": "grad", "expression": "x**3", "values": {{"x": 2}}}}',
    "case_fields": 'a JSON case needs "expression" (text) and an optional "command" ({commands})',
    "case_field": "{reason}; a JSON case takes the Python API's arguments (docs/api.md)",
    "check_file": "cannot read the cases from '{path}': {reason}; give a text file of command "
    "lines or JSON Lines, or - for standard input",
    "shell_name": "'{name}' is a word of the shell; bind a value to another name, e.g. x = 2",
    "shell_set": "write set NAME VALUE with NAME one of {settings}, e.g. set dtype float64",
    "shell_flag": "write set {key} on or set {key} off",
    "plot_range": "'{text}' is not a range; write LOW:HIGH with LOW < HIGH, e.g. -3:3",
    "plot_wrt": "say which variable to plot along with [[wrt=NAME]] and give the others "
    "values (variables: {variables})",
    "plot_not_elementwise": "the output does not have one value per point of {name}: plot "
    "needs an elementwise expression of {name} (no sum, mean or matrix product over it)",
    "plot_extra": 'writing a {suffix} file needs matplotlib: pip install "autograd-cli[plot]" '
    "(or leave out [[output]] to plot in the terminal)",
    "plot_format": "'{path}': write the plot to a .png, .svg or .pdf file",
    "expect_spec": "'{spec}': write [[expect=NAME=VALUE]], e.g. [[expect=x=93]]",
    "expect_unknown": "[[expect]] names '{name}', which is not a differentiated input (inputs: "
    "{names}); write [[expect=NAME=VALUE]] with one of them",
    "expect_shape": "the expected gradient of {name} has shape {shape}, and {name}.grad has "
    "shape {grad}; give one number or a value of the gradient's shape",
    "zero_none": "'{text}': the .grad is None here (no backward() has filled it yet), so "
    "Python raises AttributeError (None has no zero_()); call backward() first, or write "
    "x.grad = None",
    "grad_none_used": "{name}.grad is None here (no backward() has filled it yet); print it "
    "after a backward() that reaches {name}",
    "show_unknown": "'{name}' is not a tensor of the cell; print a leaf or a step",
    "cell_option": "[[{option}]] does not apply to a cell that calls backward() or print(...) "
    "itself: its own lines say what runs (backward(gradient=..., retain_graph=True), "
    "x.grad.zero_(), print(x.grad))",
    "in_place_leaf_no_grad": "'{text}' changes the leaf {name} in place under a "
    "no_grad/inference_mode block, which PyTorch allows (an optimizer's step), but a program "
    "here does not change a leaf in place yet; write the update as a new tensor with a new "
    "name, e.g. {name}2 = {name} - ...",
    "in_place_no_grad": "'{text}' changes {name} in place under a no_grad/inference_mode "
    "block: PyTorch keeps {name}'s graph and would send gradients through the old operation, "
    "which a program here does not follow; write the change outside the block, or as a new "
    "tensor, e.g. {name}2 = {name} + ...",
    "in_place": "'{text}' changes a tensor in place inside an expression; write the in-place "
    "call as a line of its own (y.exp_()), or compute a new tensor (z = y.exp())",
    "in_place_target": "'{text}': an in-place call here changes a named tensor (y.add_(1)); the "
    "one on a .grad a cell may use is x.grad.zero_()",
    "in_place_unknown": "'{text}': .{method}() is not an in-place operation autograd-cli "
    "follows; it follows the elementwise ones (y.add_(1), y.mul_(2), y.exp_(), y.clamp_(min=0), "
    "...) and y += ..., y -= ..., y *= ..., y /= ...; compute a new tensor instead",
    "in_place_hooked": "'{text}' changes {name} in place after a hook was registered on it, "
    "which autograd-cli does not follow; register the hook after the change, or compute a new "
    "tensor",
    "hook_form": "'{text}': a hook here is a function of one argument on a named tensor, "
    "written as a lambda or a def that returns an expression in it or prints it, e.g. "
    "y.register_hook(lambda g: g * 2) or y.register_hook(lambda g: print(g))",
    "function_not_hook": "'{name}' is a function the program defines, which autograd-cli "
    "follows only as a gradient hook (y.register_hook({name})); write its expression inline "
    "instead",
    "hook_body": "'{text}': the hook's body may use its argument {param}, numbers and the "
    "language's functions, not {name}; e.g. lambda {param}: {param}.clamp(-1, 1)",
    "hook_print": "'{text}': a printing hook prints its argument (and text), e.g. lambda "
    "{param}: print({param})",
    "hooks_grad_only": "the program registers a gradient hook, which changes what backward() "
    "sends; {command} does not run the program's backward(), so hooks are for grad: "
    "autograd-cli grad",
    "in_place_alias": "'{text}' changes {name} in place, and {other} shares its memory (the "
    "same tensor, a view or a detach()), so PyTorch changes {other} too; autograd-cli follows "
    "each name as a value of its own; write {name} = {name}.clone() first, or compute a new "
    "tensor",
    "print_format": "'{text}': print names and expressions, without formatting, e.g. print(x.grad)",
    "manual_seed": "'{text}': torch.manual_seed takes one whole number, e.g. torch.manual_seed(0)",
    "with_not_allowed": "'{text}' is not allowed; the blocks a cell may use are 'with "
    "torch.no_grad():' and 'with torch.inference_mode():' around assignments",
    "nothing_computed": "the program computes nothing to differentiate; end it with an "
    "expression or a step, e.g. out = (x**2).sum()",
    "flag_value": "'{text}': give True or False as written",
    "power_too_large": "integer constant {left}**{right} is too large (about 2**{bits}); "
    "the limit is about 1e308",
    "constant_division_by_zero": "division by zero in the constant {text}",
    "constant_overflow": "the constant {text} overflows a float",
    "constant_complex": "the constant {text} is a complex number; only real numbers are supported",
    "constant_too_large": "integer constant {text} is too large; the limit is about 1e308",
    "exponent_too_large": "exponent {exponent:g} is larger than the limit {limit} (raise it "
    "with [[max_exponent]])",
    # shapes
    "no_broadcast": "shapes {left} and {right} do not broadcast in '{where}'; give the "
    "variables matching shapes",
    "matmul_scalar": "'{where}': @ needs tensors of at least 1 dimension, not shapes {left} "
    "and {right}; use * to scale",
    "matmul_mismatch": "'{where}': shapes {left} @ {right} do not match ({columns} columns "
    "against {rows} rows)",
    "transpose_not_2d": "'{where}': T() and .t() transpose up to 2 dims; shape {shape} has "
    "more; use transpose(x, 0, 1) or permute(x, ...)",
    "dot_shapes": "dot(a, b) takes two 1-D tensors of the same length; '{where}' has shapes "
    "{left} and {right} (use @ for matrices)",
    "inner_shapes": "'{where}': inner(a, b) sums over the last dims, which differ: shapes "
    "{left} and {right}",
    "one_hot_classes": "'{where}': F.one_hot needs num_classes here (PyTorch counts the "
    "classes from the values, which are not known before they run); write "
    "F.one_hot(t, num_classes=3)",
    "gather_index": "'{where}': an index of {value} is out of range for size {size} along "
    "dim {dim}",
    "gather_shapes": "'{where}': gather along dim {dim} needs an index with as many dims as "
    "the input and no larger in the others; the shapes are {input} and {index}",
    "class_weight": "'{where}': weight must have shape [{classes}] (one per class), not {weight}",
    "dim_repeated": "'{where}': dim {dim} names a dim twice",
    "bad_permutation": "'{where}': permute needs each dim of shape {shape} once, not {dims}",
    "flatten_order": "'{where}': start_dim {start} comes after end_dim {end}",
    "cat_number": "'{where}': cat() joins tensors of at least 1 dim; use stack() for numbers",
    "cat_shapes": "'{where}': cat() along dim {dim} needs the other sizes equal; the shapes "
    "are {shapes}",
    "stack_shapes": "'{where}': stack() needs tensors of one shape; the shapes are {shapes}",
    "bad_index": "'{where}': {detail} (shape {shape})",
    "class_input": "'{where}': {func}() takes an input of shape (C), (N, C) or (N, C, d1, "
    "...), not {shape}",
    "class_target": "'{where}': the target must have shape {input} without its class dim "
    "(dim 1, or 0 of a 1-D input: class indices) or shape {input} (class probabilities), "
    "not {target}",
    "target_not_constant": "{what} must be a constant tensor of whole numbers (a value with "
    "requires_grad=False)",
    "class_out_of_range": "a class index is {value:g}; with {classes} classes they run from "
    "0 to {classes} - 1",
    "dim_of_number": "'{where}': '{arg}' is a single number; its only dims are 0 and -1; "
    "write {func}({arg}, 0)",
    "dim_out_of_range": "'{where}': dim {dim} is out of range for shape {shape} "
    "(use {low}..{high})",
    "operation_too_large": "'{where}' would have {size} elements (shape {shape}); the limit "
    "is {limit} (raise it with [[max_elements]])",
    "weights_shape": "the external gradient has shape {weights}; the output has shape "
    "{output}; give [[weights]] of the output's shape, or [[weights=ones]]",
    # values
    "value_empty": "empty value; " + VALUE_HINT,
    "value_too_long": "value text is {length} characters long; use a file (@data.npy)",
    "value_unreadable": "cannot read the value '{text}'; " + VALUE_HINT,
    "value_lookalike": "cannot read the value '{text}': '{char}' ({point}) looks like {looks} "
    "but is not Python's; write '{write}' ({fixed})",
    "ragged_list": "ragged or non-numeric list: every row must have the same length and "
    "hold numbers",
    "value_too_large": "a value of shape {shape} has {size} elements; the limit is {limit} "
    "(raise it with [[max_elements]])",
    "number_too_large": "the number {value} is too large for a float",
    "not_a_number": "{text} is not a number; " + VALUE_HINT,
    "list_too_deep": "the list is nested more than {limit} levels deep",
    "not_whole": "{what} must be a whole number, not {number:g}",
    "shape_needed": "{name}() needs a shape, e.g. {name}(2,3)",
    "negative_size": "sizes in {name}() cannot be negative: {shape}",
    "size_too_large": "a size in {name}() is larger than the limit {limit} (raise it with "
    "[[max_elements]])",
    "unknown_constructor": "unknown constructor '{name}'; " + VALUE_HINT,
    "positional_only": "{name}() takes positional arguments only, e.g. {name}(2,3)",
    "full_arguments": "full() needs a shape and a fill value, e.g. full(2,3,0.5)",
    "arange_arguments": "arange() takes (end), (start, end) or (start, end, step)",
    "arange_step": "arange() needs finite numbers and a step that is not 0",
    "arange_too_many": "arange() would have too many elements; use a larger step",
    "linspace_arguments": "linspace() takes (start, end, steps), e.g. linspace(0,1,5)",
    "constructor_refused": "PyTorch refuses {name}() with these arguments: {detail}",
    "linspace_negative": "steps in linspace() cannot be negative",
    "reshape_arguments": "reshape() needs a value and a shape, e.g. reshape(arange(6),2,3)",
    "reshape_size": "cannot reshape {size} elements into shape {shape}",
    "len_unknown": "len({name}): no tensor '{name}' is defined before this line",
    "len_of_number": "len({name}): '{name}' is a single number, with no length",
    "value_dtype": "dtype= in a value given from outside the program is not used: every "
    "tensor runs in one dtype; write [[dtype={dtype}]] instead",
    "value_requires_grad": "requires_grad=False in a value given from outside the program is "
    "not used; write [[const=NAME]] to make that input a constant",
    "constructor_keyword": "{name}() does not take {keyword}=; its keywords are {known}",
    "constructor_dtype": "dtype={dtype} is not one the tool runs; use torch.float32, "
    "torch.float64, torch.float16 or torch.bfloat16 (or an integer dtype for indices)",
    "tensor_arguments": "torch.tensor() takes the data, e.g. torch.tensor([1., 2.])",
    "eye_arguments": "eye() takes n (and m), e.g. torch.eye(4, 5)",
    "random_unavailable": "{kind}() is not available here",
    "file_type": "cannot read '@{path}': unsupported file type '{suffix}'; use {types}",
    "file_is_directory": "cannot read '{path}': it is a directory, not a file",
    "file_not_regular": "cannot read '{path}': it is {kind}, not a regular file; copy it into a "
    "regular file first",
    "file_too_large": "'{path}' is {size} bytes, more than the {limit} read from a file "
    "(raise it with [[max_file_bytes]])",
    "file_unreadable": "cannot read '{path}': {detail}",
    "json_too_deep": "'{path}' is nested too deeply to be a tensor; write at most 32 levels "
    "of lists",
    "pt_too_large": "'{path}' unpacks to {size} bytes, more than the {limit} read from a "
    "file (raise it with [[max_file_bytes]])",
    "pt_storage_too_large": "'{path}' holds {size} bytes of tensor data, more than a tensor "
    "of {limit} elements needs at 8 bytes each (raise it with [[max_elements]])",
    "list_too_large": "a list in the text holds more than {limit} numbers, the limit of "
    "elements (raise it with [[max_elements]], or give the values in a file: @data.npy)",
    "memory_budget": "{what} would need about {estimate} of memory, more than the budget "
    "of {budget}; raise it with [[memory={suggest}]] or give smaller inputs",
    "bad_memory": "[[memory]] takes a size in bytes such as 512M or 4G (K, M, G, T: "
    "powers of 1024), not '{value}'",
    "line_too_long": "line {line} is longer than {limit} bytes; it was skipped",
    "line_nul": "line {line} holds a NUL byte; write text",
    "line_encoding": "line {line} is not UTF-8 (byte {column}); save the file as UTF-8",
    "too_many_lines": "the script has more than {limit} lines; the rest was not read",
    "too_many_cases": "'{path}' holds more than {limit} cases; split it into smaller files",
    # faults around a run (check, shell, the command line's output)
    "stream_too_large": "{where} gave more than {limit} bytes; the rest was not read (split "
    "the input into smaller files)",
    "writes_not_allowed": "[[{option}={path}]]: a line of {source} writes no file; to let it, "
    "run autograd-cli {command} with --allow-writes",
    "overwrites_input": "[[{option}={path}]] is the {what} that was read; write to another file",
    "internal_error": "internal error ({error}: {detail}); this is a bug in autograd-cli, "
    "please report it (AUTOGRAD_CLI_TRACEBACK=1 prints the traceback)",
    "output_failed": "cannot write the output: {detail}",
    "worker_lost": "the worker process running this case {how}, twice; the case did not "
    "finish (out of memory? run it alone, without --jobs)",
    "worker_retried": "note: a worker process {how} while running line {line}; the case ran "
    "again in a new one",
    "check_stopped": "stopped by {signal}: {done} of {total} cases finished",
    "npy_unreadable": "cannot read '@{path}' as a NumPy array: {detail}",
    "npy_not_numeric": "'@{path}' does not hold a numeric array",
    "pt_unreadable": "cannot read '@{path}' with torch.load(weights_only=True): {detail}",
    "pt_not_tensor": "'@{path}' holds a {kind}, not a tensor",
    "pt_not_real": "'@{path}' holds a {dtype} tensor; give a real-valued one",
    "csv_unreadable": "cannot read '@{path}' as CSV numbers: {detail}",
    "json_unreadable": "cannot read '@{path}' as JSON: {detail}",
    "json_not_numbers": "'@{path}' must hold a number or a nested list of numbers",
    # variables and options
    "unknown_variable": "no variable '{name}' in the expression (its variables: {known})",
    "value_for_step": "'{name}' is a step of the program, computed in it, so it takes no "
    "value; give values for {known} only",
    "value_for_step_no_inputs": "'{name}' is a step of the program, computed in it, so it "
    "takes no value; this program has no inputs, so drop the value (or rename the step)",
    "value_missing": "variable '{name}' needs a value, e.g. [[{name}=2]] (or [[var={name}=2]])",
    "bad_number": "[[{name}]] takes {what}, not {value}",
    "needs_repeat": "[[{option}]] only matters when backward runs more than once; add "
    "[[repeat=2]] (or more)",
    "functional_combination": "[[functional]] computes with torch.autograd.grad, which "
    "returns the gradients and fills no .grad; [[{option}]] works on .grad: leave one of "
    "them out",
    "retain_graph_alone": "[[retain_graph]] only matters when backward runs again on the "
    "same graph; add [[same_graph]] (with [[repeat=2]] or more)",
    "explain_needs_sympy": "[[explain]] needs SymPy's exact check, which is not available "
    "here; see the graph with [[@graph]]",
    "retain_grad_input": "'{name}' is an input (a leaf tensor): its .grad is kept anyway; "
    "[[retain_grad]] is for steps and the output: {intermediate}",
    "retain_grad_unknown": "[[retain_grad={name}]]: no step or output named '{name}'{hint} "
    "(choose from {intermediate}, or all)",
    "retain_grad_no_grad": "[[retain_grad={name}]]: '{name}' does not require grad (it "
    "depends on no input that does), so it has no gradient to keep",
    "grad_never_reached": "no gradient reached {name}: the output uses it only through "
    "detach(), torch.no_grad() or torch.inference_mode(), so backward() leaves {name}.grad "
    "None; write [[const={name}]] to make it a constant, or use it outside those",
    "all_const": "every input is [[const]]: there is nothing to differentiate",
    "tangent_unknown": "--tangent {name}=...: '{name}' is not an input that requires grad "
    "(choose from {names})",
    "tangent_shape": "--tangent {name}=...: the tangent has shape {shape}; the input has "
    "shape {want} (a tangent is one direction per input element)",
    "tangent_form": "--tangent takes NAME=VALUE (e.g. --tangent x=[1,0]), not '{text}'",
    "no_elements": "{what} has no elements, so there is nothing to differentiate",
    "jacobian_too_large": "the Jacobian would have {entries} entries; the limit is {limit} "
    "(raise it with [[max_entries]])",
    "hessian_not_scalar": "the Hessian needs a one-element output; this one has shape "
    "{shape}; reduce it with sum(...) or mean(...), or use [[@jacobian]]",
    "hessian_too_large": "the Hessian would have {entries} entries; the limit is {limit} "
    "(raise it with [[max_entries]])",
    "order_elementwise": "[[order]] works on elementwise expressions (no sum, mean or matrix "
    "algebra); for second derivatives of any scalar output use [[@hessian]]",
    "order_combination": "[[order={order}]] cannot be combined with [[{option}]]",
    "explain_too_large": "[[explain]] covers backward graphs of up to {limit} nodes; this one "
    "has {nodes}; explain a smaller expression (or see it with [[@graph]])",
    "numeric_budget": "a numeric {what} needs {evaluations} forward evaluations; the limit "
    "is {limit}; use smaller inputs",
    "not_name_value": "'{spec}' is not NAME=VALUE; write e.g. [[var=x=2]]",
    "value_defined": "'{name}' is defined in the program ({name} = {source}); drop its "
    "value, or the line that defines it",
    "integer_requires_grad": "'{source}' is an integer tensor, and only floating point "
    "tensors can require gradients; write the numbers with a decimal point ([1., 2.]) or "
    "add dtype=torch.float32",
    "two_seeds": "the program calls torch.manual_seed({program}) and [[seed={given}]] is "
    "given; keep one",
    "mixed_dtypes": "the program's values ask for several dtypes ({dtypes}); the tool runs "
    "one, so give them all one dtype",
    "given_twice": "variable '{name}' is given twice ({first} and {second}); give each "
    "variable one value",
    "dot_stdout_json": "[[dot=-]] prints the DOT text; use [[dot=FILE]] with [[json_output]]",
    "path_is_folder": "[[{option}={path}]]: that is a folder; give a file name, e.g. "
    "graph.{option}",
    "cannot_write": "cannot write {path}: {detail}",
    # devices and dtypes
    "unknown_device": "unknown device '{device}'; use auto, cpu, cuda, cuda:N or mps",
    "device_index": "device '{device}' is not available here: the {type} device has no index "
    "{index}; use [[device={type}]]",
    "device_unavailable": "device '{device}' is not available here; available devices: "
    "{devices} (or use [[device=auto]])",
    "unknown_dtype": "unknown dtype '{dtype}'{suggestion}; use one of {dtypes} (PyTorch's "
    "double, float and half, and torch.float64 and the like, are understood too)",
    "graphviz_missing": "[[{format}]] needs Graphviz's 'dot' program, which is not "
    "installed; install Graphviz (e.g. apt install graphviz, brew install graphviz) or write "
    "the DOT text with [[dot=FILE]] and render it elsewhere",
    # computing
    "pytorch_forward": "PyTorch could not compute the expression: {detail}",
    "python_raised": "'{line}': Python: {call} raises {error}: {detail}; a cell stops "
    "there, as Python would",
    "xor_bitwise": "'{text}': ^ is bitwise xor in Python and PyTorch (computed here on "
    "integer or bool tensors), which autograd-cli does not follow; write ** for a power",
    "xor_numbers": "'{text}': Python: unsupported operand type(s) for ^: '{left}' and "
    "'{right}' (TypeError); ^ is bitwise xor in a cell, write ** for a power",
    "no_graph": "the output has no grad_fn: nothing it depends on requires grad, so PyTorch "
    "recorded no graph; drop [[const]] for an input, or use a variable",
    "graphviz_failed": "Graphviz could not write {path}: {detail}",
    "graphviz_timeout": "Graphviz took more than 60 s; use [[dot=FILE]] instead",
    "no_real_value": "SymPy's result contains {term}, which has no real numeric value here; "
    "check the expression's domain",
    "library_failure": "cannot compute this expression ({error}: {detail}); simplify it or "
    "check its values",
    "not_elementwise": "{text} is not elementwise; use the component-wise model",
    # why the exact check stands aside (their sentences also end notes)
    "exact_inputs": "the exact SymPy check covers up to {limit} input elements; this one "
    "has {inputs}",
    "exact_entries": "the exact SymPy check covers up to {limit} Jacobian entries (output "
    "elements x input elements); this one has {entries}",
    "exact_work": "the exact SymPy check covers up to {limit} (SymPy term nodes x input "
    "elements); this expression has more ({inputs} input elements)",
    "exact_hessian_inputs": "the exact SymPy Hessian covers up to {limit} input elements; "
    "this one has {inputs}",
    "sympy_timeout": "SymPy took more than {seconds:g} s",
    "no_closed_form": "SymPy leaves {term} unevaluated",
    "sympy_cannot": "SymPy cannot work with this expression: {error}",
    "unstable": "the precise reference did not settle within {bits} bits",
    "sample_mismatch": "float64 evaluation of {term} is off at {off} of {sampled} sampled elements",
    "untrusted_float64": "float64 evaluation of {term} cannot be bounded within 1e-10 "
    "(bound {bound})",
    # a cell's loops, ifs and Python numbers (lang/loops.py, issue 26 §1)
    "loop_not_range": "'{text}' is not a loop this tool runs; write 'for NAME in range(N):' "
    "with N a number known before the loop (no else)",
    "loop_bound": "'{text}': range() needs whole numbers known before the loop runs "
    "(literals, or names bound to them), e.g. 'for t in range(2000):'",
    "loop_iterations_cap": "'{text}' runs {count} iterations; the cap is {cap} for all of a "
    "cell's loops together; run fewer iterations (or raise the cap with [[max_iterations]])",
    "cell_lines_cap": "the cell runs more than {cap} lines (its loops unrolled), at '{text}'; "
    "run fewer iterations or fewer lines in the loop (or raise the cap with [[max_lines]])",
    "if_not_number": "'if {text}:' reads a tensor, which this tool does not follow yet; a "
    "cell's 'if' takes Python numbers (such as 'if t % 100 == 99:')",
    "python_number_raised": "'{text}': Python raises {error} here",
    "device_keyword": 'device={text}: write device=torch.device("cpu"), device="cpu" or a '
    "name bound to one of them",
    "device_named": "the cell asks for device {device}, but this run is on {run}; ask for it "
    "with --device {device} (or write device={run})",
    # tensor conditions and the cell's own functions (lang/flow.py, issue 26 §1)
    "while_form": "'{text}' is not a loop this tool runs: write 'while CONDITION:' without "
    "else (the condition a Python number or a one-element tensor)",
    "while_iterations_cap": "'{text}' ran past the cap of {cap} iterations for all of a "
    "cell's loops together; make the condition end sooner (or raise the cap with "
    "[[max_iterations]])",
    "flow_in_with": "a tensor condition or a call of the cell's own function inside a 'with' "
    "block is not followed; write the 'if', the 'while' or the call outside the block",
    "function_form": "'def {name}(...)' is not a function this tool inlines: write plain "
    "parameters (no defaults, *args, **kwargs or decorators), e.g. 'def f(a):'",
    "function_call_alone": "'{text}': a call of the cell's own function '{name}' goes on a "
    "line of its own, 'NAME = {name}(...)' (then use NAME in the expression)",
    "function_arguments": "'{text}': '{name}' takes the arguments {params}, each given once",
    "function_returns_nothing": "'{text}': the function returned no tensor (no 'return "
    "VALUE' ran), so the name would be None; return the tensor",
    "call_depth": "'{text}': calls of the cell's own functions nest past {cap} (recursion); "
    "write the computation without recursion",
    "flow_changed": "'{line}': the run read this condition as {now}, but the cell was read "
    "with it {then}; the path cannot be trusted, so the run stops here (please report it)",
    "condition_item": "'{text}': .item(), .tolist(), float(), int() and bool() in a "
    "condition are not followed; compare the tensor itself, e.g. 'if loss < 0.5:' (a "
    "one-element tensor's truth, read in its dtype)",
    "while_never_ends": "'{text}' reads the same tensors on every pass and nothing changes "
    "them, so the loop never ends (Python would run forever); assign the condition's tensor "
    "again in the loop's body",
    "jump_outside_loop": "'{text}' is outside a loop (Python refuses it); use it inside "
    "'for' or 'while'",
    "unbound_local": "'{name}' is read before the function assigns it (Python raises "
    "UnboundLocalError); pass it as an argument or assign it first",
}


def _fill(template: str, data: Mapping[str, Any], style: Style) -> str:
    """Options spelled first (they come only from templates), then the data filled in."""
    return spell(template, style, data).format_map(_Missing(data))


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def error_text(error: Coded, style: Style = PYTHON) -> str:
    """The sentence for an error, in ``style`` (the Python API's words by default)."""
    if error.code == "pytorch":
        return torch_text(error.data, style)
    data = dict(error.data)
    if error.code == "value_for_step":
        data["known"] = ", ".join(data["variables"])
        if not data["variables"]:
            return _fill(ERRORS["value_for_step_no_inputs"], data, style)
    if error.code == "unknown_variable":
        data["known"] = ", ".join(data["variables"]) if data["variables"] else "none"
    if error.code == "device_unavailable":
        data["devices"] = ", ".join(data["available"])
    if error.code == "bad_number":
        data["what"] = _number_kind(data)
        data["value"] = repr(data["value"]) if isinstance(data["value"], str) else data["value"]
    if error.code == "unknown_dtype":
        data["dtypes"] = ", ".join(data["dtypes"])
        near = data.get("near")
        data["suggestion"] = f" (did you mean {near}?)" if near else ""
    if error.code in ("retain_grad_input", "retain_grad_unknown"):
        data["intermediate"] = ", ".join(data["intermediate"])
    if error.code == "retain_grad_unknown":
        data["hint"] = f"; did you mean {data['near']}?" if data.get("near") else ""
    template = ERRORS.get(error.code, error.code)
    return _fill(template, data, style)


def _number_kind(data: Mapping[str, Any]) -> str:
    """ "a whole number from 1 to 8", "a number ≥ 0"."""
    kind = "a whole number" if data["whole"] else "a number"
    low, high = (v if v == math.inf or v != int(v) else int(v) for v in (data["low"], data["high"]))
    return f"{kind} ≥ {low}" if high == math.inf else f"{kind} from {low} to {high}"


def torch_text(data: Mapping[str, Any], style: Style = PYTHON) -> str:
    """PyTorch's message as written, with where it happened, why, and the fix."""
    from autogradcli.glossary import BY_KEY

    context = f"'{data['line']}': " if data.get("line") else ""
    if data.get("pass_index"):
        context += f"backward pass {data['pass_index']} on the same graph: "
    if data.get("shape") is not None:
        context += f"the output has shape {data['shape']}: "
    text = data["torch_message"]
    entry = BY_KEY.get(data.get("entry") or "")
    which = in_place_text(text, data.get("changes") or [])
    if entry is None:
        return f"{context}PyTorch: {text}{which}"
    stop = "" if text.endswith(".") else "."
    fix = entry.in_cell if data.get("in_cell") and entry.in_cell else spell(entry.fix, style)
    return f"{context}PyTorch: {text}{stop}{which} Why: {entry.why}. Fix: {fix}."


_VERSION = re.compile(
    r"(?:which is output \d+ of (\w+), )?is at version (\d+); expected version (\d+)"
)


def _short(grad_fn: str | None) -> str | None:
    """``Exp`` for ``ExpBackward0``: how PyTorch's in-place message names a node."""
    return None if grad_fn is None else re.sub(r"Backward\d*$", "", grad_fn)


def in_place_text(message: str, changes: list[Mapping[str, Any]]) -> str:
    """Which tensor PyTorch's in-place error is about, with its version counter before and
    after the line that changed it (from the in-place lines run before it)."""
    if not changes:
        return ""
    found = _VERSION.search(message)
    if found is not None:
        made_by, now, saved = found.group(1), int(found.group(2)), int(found.group(3))
        for change in reversed(changes):
            origin = change["made_by"]
            names = {_short(origin), _short(change["made_by_after"] or origin)}
            if made_by in names and change["version_after"] == now:
                what = "a leaf" if origin is None else f"the output of {origin}"
                return (
                    f" Which tensor: {change['name']} ({what}), saved for backward at version "
                    f"{saved}; '{change['line']}' changed it in place from version "
                    f"{change['version_before']} to {change['version_after']}."
                )
    last = changes[-1]
    if last["version_before"] == last["version_after"]:
        return (
            f" Which tensor: {last['name']}, at version {last['version_before']} before and "
            f"after '{last['line']}' (PyTorch refused before changing it)."
        )
    done = "; ".join(
        f"'{c['line']}' changed {c['name']} from version {c['version_before']} to "
        f"{c['version_after']}"
        for c in changes
    )
    return f" In place before this: {done}."


GRAD_NONE = {
    "untracked": "autograd does not track a tensor with requires_grad=False",
    "leaf_only": "PyTorch keeps .grad only for leaf tensors",
    "made_no_grad": "it was computed under torch.no_grad(), so autograd recorded nothing: "
    "requires_grad=False, grad_fn None, is_leaf True; to autograd it is a constant, so no "
    "gradient flows into it, nor through it back to the tensors it was computed from",
    "made_inference_mode": "it was computed under torch.inference_mode(): an inference "
    "tensor (requires_grad=False, grad_fn None, is_leaf True), a constant to autograd, so no "
    "gradient flows into it or through it; PyTorch also refuses to save it for backward "
    "(use torch.no_grad() instead, or .clone() it outside the block)",
    "requires_grad_off": "its requires_grad was turned off (requires_grad_(False), or "
    "requires_grad = False) before it was used, so autograd does not track it and "
    "backward() gives it no .grad",
    "detached": "it is a detach() (or .data): the same memory as the tensor it came from, "
    "but outside the graph (requires_grad=False, grad_fn None, is_leaf True), so no gradient "
    "flows into it, nor through it back to the tensor it was detached from",
    "functional": "torch.autograd.grad returned the gradient (the gradients table shows it) "
    "and left .grad as it was",
    "unsent": "backward() sent it no gradient (a backward formula on the way returns none, "
    "as the order-0 norm's does); autograd counts that as zero",
}
# the operation a step was made by (a Call's func) -> why its .grad is None
GRAD_NONE_MADE_BY = {
    "no_grad": "made_no_grad",
    "inference_mode": "made_inference_mode",
    "detach": "detached",
}


def grad_none_text(reason: str, style: Style = PYTHON) -> str:
    """Why a tensor's .grad is None: a reason code, or a glossary key."""
    return GRAD_NONE[reason] if reason in GRAD_NONE else glossary_text(reason, style)


def explain_pytorch(message: str, style: Style = PYTHON) -> str:
    """PyTorch's message as written, then why and the fix when the glossary knows it."""
    from autogradcli.glossary import lookup

    text = " ".join(message.split())
    entry = lookup(text)
    return torch_text({"torch_message": text, "entry": entry and entry.key}, style)


def glossary_text(key: str, style: Style = PYTHON) -> str:
    """Why and what to do, for a glossary entry (e.g. a .grad that is None)."""
    from autogradcli.glossary import BY_KEY

    entry = BY_KEY[key]
    return f"{entry.why}; {spell(entry.fix, style)}"


# --- notes -----------------------------------------------------------------------------------

NOTES: dict[str, str] = {
    "unchecked": "not checked: SymPy's exact {what} is past its limits and a numeric one "
    "would need {evaluations} forward evaluations (the limit is {limit}); autograd's numbers "
    "are shown beside torch.autograd.functional's, and only that cross-check ran",
    "text_timeout": "SymPy took more than {seconds:g} s writing {what} ([[sympy_seconds]]); "
    "it is left out",
    "functional": "computed with torch.autograd.grad(out, inputs, grad_outputs): it returns "
    "the gradients and leaves every .grad as it was ({grads}), so nothing accumulates across "
    "passes. With create_graph=True, backward() would put a gradient that holds its own graph "
    "into .grad: a reference cycle (PyTorch warns about it); autograd.grad returns it instead",
    "hooks": "a hook that returns a tensor replaces the gradient on its way (here on "
    "{tensors}), as PyTorch runs it: .grad and the expected numbers include that, while the "
    "derivative and chain rule shown are of the expression alone",
    "order_unchecked": "{name}: not checked: central differences of order {order} are too "
    "coarse to judge autograd's value (they stand in for SymPy above order 2 only when they "
    "agree); raise [[sympy_seconds]] for SymPy's exact check",
    "caret_power": "^ is read as ** (power) in an expression; in Python and PyTorch it is "
    "bitwise xor, which a pasted cell gets",
    "program_dtype": "the program's values are {dtype} (dtype=), so everything runs in {dtype}",
    "constant_shadowed": "'{name}' here is a variable (given a value or assigned), not the "
    "constant {name}",
    "numeric_fallback": "{reason}; checked numerically instead (central differences, float64)",
    "timeout_fallback": "{reason} ([[sympy_seconds]]); checked numerically instead",
    "no_number_fallback": "SymPy gives no number here ({reason}); checked numerically instead",
    "output_nan": "the output is NaN at {elements} element(s): the expression is outside its "
    "real domain there (e.g. log, sqrt or a fractional power of a negative number); PyTorch "
    "still applies each backward formula, as SymPy's derivative does",
    "nonfinite_input": "an input is NaN or infinite: IEEE arithmetic carries it through, so "
    "the check compares how PyTorch and SymPy's formula propagate it, not a derivative",
    "domain_edge_limit": "SymPy's derivative for {name} is 0/0 or 0*inf at {elements} "
    "element(s) (a domain edge such as x**y at x = 0); there its limit, by central "
    "differences in float64, is the reference",
    "grad_unsent": "{names}: backward() sent it no gradient, though the output depends on it: "
    "a backward formula on the way returns none (the order-0 norm's: a count of nonzero "
    "elements, whose derivative is 0 wherever it has one), so PyTorch leaves .grad as it was "
    "(None if nothing filled it); autograd counts a gradient never sent as zero, and so "
    "does the check",
    "graph_not_freed": "backward() ran {repeat} times on one graph without retain_graph=True "
    "and PyTorch did not raise: no node of this graph saved a tensor for backward, so "
    "nothing was freed (a product would fail, x*x or x*2: each saves a factor; x + 2 saves "
    "nothing)",
    "kink": "{points}; PyTorch's value there: {values}; {excluded} element(s) at that point "
    "are left out of the check",
    "kink_smooth": "{points}, but the function is differentiable there at {elements} "
    "element(s): its one-sided derivatives agree ({values}), so that is the number .grad "
    "is checked against",
    "kink_between": "{points}; one-sided derivatives there: {sides} (a real kink); PyTorch's "
    "value there: {values}; {elements} element(s) checked to lie between them",
    "infinite_derivative": "the derivative is infinite at {elements} element(s)",
    "undefined_derivative": "the derivative is undefined (NaN) at {elements} element(s), "
    "outside the function's real domain",
    "numeric_kink": "the numeric step ({eps:g}) crosses a kink at {elements} element(s): "
    "central differences mean nothing there, so autograd is checked to lie between the "
    "one-sided slopes (PyTorch's choice at a kink is one of them or between them)",
    "numeric_off_domain": "numeric check: " + POINTS["off_domain"] + "; {elements} "
    "element(s) left out",
    "order_rounding": "numeric check of {name}: differences of order {order} amplify float64 "
    "rounding of the function's values; its tolerance is widened by up to {widen:.3g} "
    "(absolute)",
    "numeric_unchecked": "{name}: {elements} of {total} element(s) not checked: the numeric "
    "reference there (central differences in float64, Richardson-extrapolated) is good only "
    "to about {error:.2g}, more than a tenth of the tolerance",
    "numeric_unestimated": "{name}: {elements} of {total} element(s) not checked: central "
    "differences in float64 do not settle there (no error estimate)",
    "numeric_coarse": "{name}: at {elements} of those element(s) the forward pass in float64 "
    "is too coarse: its rounding alone limits the differences to about {rounding:.2g} (the "
    "function's value is large beside its slope); raise [[sympy_seconds]] for SymPy's exact "
    "check",
    # tensor conditions (lang/flow.py): the path taken
    "flow_while": "'{text}' (line {line}): the loop ran {count} times, its condition read "
    "from the tensor values as PyTorch reads them",
    "flow_while_again": "'{text}' (line {line}): reached {reached} times, the loop ran "
    "{count} times in all, each condition read from the tensor values as PyTorch reads them",
    "flow_if": "'{text}' (line {line}): the condition was {value} (read from the tensor "
    "values as PyTorch reads them)",
    "flow_if_again": "'{text}' (line {line}): the condition was True {true} times and False "
    "{false} times (each read from the tensor values as PyTorch reads them)",
    "flow_path": "the graph is the path these conditions took, and the reference "
    "differentiates that path (other values may take another path, with another derivative)",
}


def note_text(note: Coded, style: Style = PYTHON) -> str:
    """The sentence for a note."""
    data = dict(note.data)
    if note.code in ("numeric_fallback", "timeout_fallback", "no_number_fallback"):
        data["reason"] = error_text(_Reason(data["reason_code"], data["reason_data"]), style)
    if note.code in ("kink", "kink_smooth", "kink_between"):
        data["points"] = points_text(data["codes"])
        data["values"] = values_text(data["values"])
    if note.code == "kink_between":
        data["sides"] = ", ".join(f"[{number(a)}, {number(b)}]" for a, b in data["sides"])
    text = _fill(NOTES.get(note.code, note.code), data, style)
    prefix = data.get("prefix")
    return f"{prefix}{text}" if prefix else text


class _Reason:
    def __init__(self, code: str, data: Mapping[str, Any]) -> None:
        self.code, self.data = code, data


def number(value: Any) -> str:
    """A number as printed in sentences (strings such as "beyond float64" pass through)."""
    if isinstance(value, str):
        return value
    return f"{float(value) + 0.0:.6g}"


def pair(a: Any, b: Any) -> tuple[str, str]:
    """Two numbers with enough digits to tell them apart."""
    if isinstance(a, str) or isinstance(b, str):
        return number(a), number(b)
    for digits in (6, 9, 12, 17):
        left, right = f"{float(a) + 0.0:.{digits}g}", f"{float(b) + 0.0:.{digits}g}"
        if left != right:
            return left, right
    return left, right


def values_text(values: Iterable[float]) -> str:
    return ", ".join(number(v) for v in values)


def points_text(codes: Iterable[str]) -> str:
    return "; ".join(POINTS.get(c, c) for c in sorted(codes))


def _at(data: Mapping[str, Any]) -> str:
    """Where a failed element is: its index and the count (nothing for a single number)."""
    if not data["index"]:
        return ""
    return f" at element {data['index']} ({data['elements']} element(s) in all)"


# PyTorch's own value at each operation's kink: the factor its backward uses there.
RULES: dict[str, str] = {
    "relu": "PyTorch takes relu'(0) = 0",
    "abs": "PyTorch takes abs'(0) = sign(0) = 0",
    "clamp": "PyTorch passes the gradient (factor 1) at a clamp bound",
    "clip": "PyTorch passes the gradient (factor 1) at a clip bound",
    "hardtanh": "PyTorch takes hardtanh' = 0 at -1 and 1",
    "relu6": "PyTorch takes relu6' = 0 at 0 and 6",
    "maximum": "PyTorch splits the gradient evenly at a tie of maximum",
    "minimum": "PyTorch splits the gradient evenly at a tie of minimum",
    "max": "PyTorch gives a tie of max the gradient evenly, or all to the returned index",
    "min": "PyTorch gives a tie of min the gradient evenly, or all to the returned index",
}


def rules_text(codes: Iterable[str]) -> str:
    """PyTorch's rule at the kinks of these operations (the point's sentence otherwise)."""
    return "; ".join(RULES.get(c, POINTS.get(c, c)) for c in sorted(codes))


def _loss(data: Mapping[str, Any]) -> str:
    dtype, kind = data["dtype"], data.get("kind")
    if kind == "float64_noise":
        return (
            f"precision loss in float64's backward pass (the forward values are right): its "
            f"error of {number(data['error'])} ({number(data['relative'])} relative) is "
            f"within the noise of its own rounding here ({number(data['noise'])}, from the "
            "sizes of the numbers autograd adds up): cancellation, not a wrong formula"
        )
    if kind == "beyond_bound":
        return (
            f"precision loss in the backward pass (the forward values are right): {dtype}'s "
            f"error of {number(data['error'])} ({number(data['relative'])} relative) is more "
            f"than its rounding can do here; float64 agrees (error "
            f"{number(data['float64_error'])})"
        )
    node = data["node"]
    value, exact = pair(data["value"], data["exact"])
    what = {
        "cancellation": f"cancellation in {node}: {value} in {dtype}, exactly {exact}",
        "rounded_to_zero": f"{node} rounded to 0 in {dtype} (exactly {exact})",
        "infinite": f"{node} is {value} in {dtype} (exactly {exact})",
    }.get(kind or "", f"{node} is {value} in {dtype}, exactly {exact}")
    if "operand" in data:
        rounded, truth = pair(data["operand_value"], data["operand_exact"])
        what += f", after {data['operand']} rounded to {rounded} (exactly {truth})"
    if "fed_to" in data:
        what += f"; then fed to {data['fed_to']}"
    return f"precision loss: {what}"


def cause_text(cause: Coded) -> str:
    """One sentence for a verdict's cause."""
    data = cause.data
    code = cause.code
    if code == "rounding":
        return (
            f"within {data['dtype']} rounding: error {number(data['error'])} "
            f"({number(data['relative'])} relative, bound {number(data['bound'])}); "
            f"float64 agrees (error {number(data['float64_error'])})"
        )
    if code == "overflow" and data.get("inside"):
        return (
            f"overflow inside {data['node']}: a value it computes on the way passed "
            f"{data['dtype']}'s largest number {number(data['max'])}, so {data['dtype']} "
            f"gives inf although the result, {number(data['exact'])}, is within range"
        )
    if code == "overflow":
        where = "the backward pass" if data["node"] == "backward" else data["node"]
        return (
            f"overflow: {where} reaches {number(data['exact'])}, past {data['dtype']}'s largest "
            f"number {number(data['max'])}, so {data['dtype']} gives inf"
        )
    if code == "precision_loss":
        return _loss(data)
    if code == "non_differentiable":
        return (
            f"NaN at a non-differentiable point: .grad is NaN or infinite at "
            f"{data['elements']} element(s) where {points_text(data['points'])}"
        )
    if code == "domain":
        return (
            f"PyTorch's forward is {number(data['value'])} at {data['node']}, where SymPy's "
            f"(simplified) expression is {number(data['exact'])}: IEEE arithmetic met 0/0, "
            "inf - inf or a value outside the real domain on the way"
        )
    if code == "nonfinite_input":
        return (
            "an input is NaN or infinite: IEEE arithmetic carries it through, and SymPy's "
            "formula does not give the same numbers"
        )
    if code == "zero_times_inf":
        return (
            f"NaN from 0·inf in the backward pass at {data['elements']} element(s): a zero "
            "gradient met an infinite local derivative (or 0/0), where the derivative is not NaN"
        )
    if code == "accumulation":
        return (
            f".grad is not the sum of the {data['backwards']} backward() call(s) since its last "
            f"reset (max abs error {number(data['error'])})"
        )
    if code == "grad_presence":
        return (
            ".grad is None where backward() calls should have filled it"
            if data["none"]
            else ".grad is filled where no backward() call reached this leaf"
        )
    if code == "nonsmooth_chain_rule":
        return (
            f"the chain rule through a kink missed: {rules_text(data['points'])}, and autograd "
            f"multiplies that into its product, but the function itself is differentiable "
            f"there (its one-sided derivatives are both {number(data['derivative'])}); .grad "
            f"is {number(data['autograd'])}{_at(data)}"
        )
    if code == "kink_outside":
        return (
            f"at a kink ({rules_text(data['points'])}) .grad must lie between the one-sided "
            f"derivatives {number(data['low'])} and {number(data['high'])}; it is "
            f"{number(data['autograd'])}{_at(data)}"
        )
    if code == "mismatch" and "node" in data:
        wide = number(data["float64_value"])
        also = "" if data["dtype"] == "float64" else f" and {wide} in float64"
        return (
            f"a real mismatch: PyTorch's {data['node']} is {number(data['value'])} in "
            f"{data['dtype']}{also}, where SymPy's definition gives {number(data['exact'])}: "
            "PyTorch's function and the reference's definition differ here"
        )
    if code == "mismatch" and data.get("stable"):
        return (
            f"a real mismatch: autograd's float64 numbers are off by "
            f"{number(data['float64_error'])}, more than the rounding of the numbers it adds "
            "up can make, so it is not cancellation"
        )
    if code == "mismatch":
        return (
            f"a real mismatch: float64 disagrees too (max abs error "
            f"{number(data['float64_error'])})"
        )
    return code
