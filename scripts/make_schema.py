"""Write the JSON Schemas of every --json document to schema/ (python scripts/make_schema.py).

tests/test_schema.py checks that the committed files are what this script writes, and every
JSON document the test suite produces is validated against them (tests/conftest.py).
"""

from __future__ import annotations

import json
import pathlib

from autogradcli import schemas
from autogradcli.policy.verdict import CAUSES, VERDICTS

NUM = {"oneOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}
NUMN = {"oneOf": [NUM, {"type": "null"}]}
DEFS = {
    "number": NUM,
    "tensor": {
        "anyOf": [
            {"$ref": "#/$defs/number"},
            {"type": "array", "items": {"$ref": "#/$defs/tensor"}},
        ]
    },
    "tensor_or_null": {"anyOf": [{"$ref": "#/$defs/tensor"}, {"type": "null"}]},
    "number_or_null": {"anyOf": [{"$ref": "#/$defs/number"}, {"type": "null"}]},
    "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "verdict": {"enum": list(VERDICTS)},
    "verdict_or_null": {"enum": [*VERDICTS, None]},
    "cause": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"enum": list(CAUSES)},
                    "message": {"type": "string"},
                },
            },
        ]
    },
    "tolerance": {
        "type": "object",
        "required": ["rtol", "atol"],
        "additionalProperties": False,
        "properties": {"rtol": {"type": "number"}, "atol": {"type": "number"}},
    },
    "notes": {"type": "array", "items": {"type": "string"}},
    "note_codes": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["code"],
            "properties": {"code": {"type": "string"}},
        },
    },
    "seed": {"type": ["integer", "null"]},
}
HEAD = {
    "schema_version": {"const": 1},
    "expression": {"type": "string"},
    "device": {"type": "string"},
    "dtype": {"enum": ["float32", "float64", "float16", "bfloat16"]},
    "tolerance": {"$ref": "#/$defs/tolerance"},
    "expected_by": {"enum": ["SymPy", "numeric", "none"]},
    "seed": {"$ref": "#/$defs/seed"},
    "notes": {"$ref": "#/$defs/notes"},
    "note_codes": {"$ref": "#/$defs/note_codes"},
    "rounding_bound": {"type": "number", "minimum": 0, "maximum": 0.125},
    "strict": {"type": "boolean"},
    "verdict": {"$ref": "#/$defs/verdict"},
    "cause": {"$ref": "#/$defs/cause"},
    "agree": {"type": "boolean"},
}


def obj(props, required=None, extra=False):
    return {
        "type": "object",
        "required": list(required or props),
        "additionalProperties": extra,
        "properties": props,
    }


variable = obj(
    {
        "value": {"$ref": "#/$defs/tensor"},
        "shape": {"$ref": "#/$defs/shape"},
        "requires_grad": {"type": "boolean"},
        "grad": {"$ref": "#/$defs/tensor_or_null"},
        "expected": {"$ref": "#/$defs/tensor_or_null"},
        "derivative": {"type": ["string", "null"]},
        "latex": {"type": ["string", "null"]},
        "chain_rule": {"type": ["string", "null"]},
        "chain_rule_latex": {"type": ["string", "null"]},
        "max_abs_error": {"$ref": "#/$defs/number_or_null"},
        "agree": {"type": ["boolean", "null"]},
        "numeric": {"$ref": "#/$defs/tensor_or_null"},
        "numeric_max_abs_error": {"$ref": "#/$defs/number_or_null"},
        "numeric_agree": {"type": ["boolean", "null"]},
        "verdict": {"$ref": "#/$defs/verdict_or_null"},
        "cause": {"$ref": "#/$defs/cause"},
        "numeric_verdict": {"$ref": "#/$defs/verdict_or_null"},
        "rounding": {"type": ["string", "null"]},
        "notes": {"$ref": "#/$defs/notes"},
        "note_codes": {"$ref": "#/$defs/note_codes"},
    }
)
output = obj(
    {
        "name": {"type": "string"},
        "value": {"$ref": "#/$defs/tensor"},
        "expected": {"$ref": "#/$defs/tensor"},
        "shape": {"$ref": "#/$defs/shape"},
        "max_abs_error": {"$ref": "#/$defs/number"},
        "agree": {"type": "boolean"},
        "verdict": {"$ref": "#/$defs/verdict"},
        "cause": {"$ref": "#/$defs/cause"},
        "rounding": {"type": ["string", "null"]},
    }
)
pass_ = obj(
    {
        "pass": {"type": "integer", "minimum": 1},
        "grads": {"type": "object", "additionalProperties": {"$ref": "#/$defs/tensor"}},
        "expected": {"type": "object", "additionalProperties": {"$ref": "#/$defs/tensor"}},
        "agree": {"type": "boolean"},
        "verdict": {"$ref": "#/$defs/verdict"},
    }
)
tensor_row = obj(
    {
        "kind": {"enum": ["input", "step", "output"]},
        "shape": {"$ref": "#/$defs/shape"},
        "value": {"$ref": "#/$defs/tensor"},
        "value_expected": {"$ref": "#/$defs/tensor_or_null"},
        "requires_grad": {"type": "boolean"},
        "is_leaf": {"type": "boolean"},
        "grad_fn": {"type": ["string", "null"]},
        "grad": {"$ref": "#/$defs/tensor_or_null"},
        "grad_expected": {"$ref": "#/$defs/tensor_or_null"},
        "grad_note": {"type": ["string", "null"]},
        "grad_note_code": {"type": ["string", "null"]},
        "agree": {"type": ["boolean", "null"]},
    }
)
flow = obj(
    {
        "to": {"type": "string"},
        "local_derivative": {"type": "string"},
        "grad": {"$ref": "#/$defs/tensor"},
        "expected": {"$ref": "#/$defs/tensor"},
        "max_abs_error": {"$ref": "#/$defs/number"},
        "agree": {"type": "boolean"},
    }
)
node = obj(
    {
        "index": {"type": "integer"},
        "grad_fn": {"type": "array", "items": {"type": "string"}},
        "label": {"type": "string"},
        "leaf": {"type": ["string", "null"]},
        "arriving": {"$ref": "#/$defs/tensor"},
        "arriving_expected": {"$ref": "#/$defs/tensor"},
        "arriving_agree": {"type": "boolean"},
        "flows": {"type": "array", "items": flow},
        "agree": {"type": "boolean"},
    }
)
vjp = obj(
    {
        "jacobian": {"$ref": "#/$defs/tensor_or_null"},
        "jtw": {"$ref": "#/$defs/tensor"},
        "backward": {"$ref": "#/$defs/tensor"},
        "grad_of_sum_out_times_w": {"$ref": "#/$defs/tensor"},
        "agree": {"type": "boolean"},
    }
)
explain = {
    "anyOf": [
        {"type": "null"},
        obj(
            {
                "nodes": {"type": "array", "items": node},
                "weights": {"$ref": "#/$defs/tensor_or_null"},
                "vjp": {"type": "object", "additionalProperties": vjp},
                "agree": {"type": "boolean"},
            }
        ),
    ]
}
hook = obj(
    {
        "tensor": {"type": "string"},
        "hook": {"type": "string"},
        "received": {"$ref": "#/$defs/tensor_or_null"},
        "received_expected": {"$ref": "#/$defs/tensor_or_null"},
        "returned": {"$ref": "#/$defs/tensor_or_null"},
        "returned_expected": {"$ref": "#/$defs/tensor_or_null"},
        "agree": {"type": ["boolean", "null"]},
    }
)
suggestion = obj(
    {
        "replace": {
            "type": "array",
            "items": obj({"pattern": {"type": "string"}, "with": {"type": "string"}}),
        },
        "expression": {"type": "string"},
        "confirmed": {"type": "boolean"},
        "rerun": obj(
            {
                "verdict": {"$ref": "#/$defs/verdict"},
                "output": {"$ref": "#/$defs/tensor"},
                "grads": {"type": "object", "additionalProperties": {"$ref": "#/$defs/tensor"}},
                "cause": {"$ref": "#/$defs/cause"},
            }
        ),
    }
)
grad = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/grad.schema.json",
    "title": "autograd-cli grad --json",
    "$defs": DEFS,
    **obj(
        {
            **HEAD,
            "command": {"const": "grad"},
            "output": output,
            "weights": {"$ref": "#/$defs/tensor_or_null"},
            "variables": {"type": "object", "additionalProperties": variable},
            "mode": {"type": "string"},
            "passes": {"type": "array", "items": pass_, "minItems": 1},
            "tensors": {
                "anyOf": [{"type": "null"}, {"type": "object", "additionalProperties": tensor_row}]
            },
            "explain": explain,
            "hooks": {"type": "array", "items": hook},
            "suggestions": {"type": "array", "items": suggestion},
            "expect": {
                "type": "object",
                "additionalProperties": obj(
                    {
                        "value": {"$ref": "#/$defs/tensor"},
                        "autograd_agree": {"type": "boolean"},
                        "sympy_agree": {"type": "boolean"},
                        "agree": {"type": "boolean"},
                    }
                ),
            },
        }
    ),
}
block = obj(
    {
        "shape": {"$ref": "#/$defs/shape"},
        "autograd": {"$ref": "#/$defs/tensor"},
        "cross_check": {
            "anyOf": [
                {"type": "null"},
                obj(
                    {
                        "by": {"type": "string"},
                        "value": {"$ref": "#/$defs/tensor"},
                        "agree": {"type": ["boolean", "null"]},
                    }
                ),
            ]
        },
        "expected": {"$ref": "#/$defs/tensor"},
        "max_abs_error": {"$ref": "#/$defs/number"},
        "excluded": {"type": "integer"},
        "numeric": {"$ref": "#/$defs/tensor_or_null"},
        "numeric_agree": {"type": ["boolean", "null"]},
        "rounding": {"type": ["string", "null"]},
        "verdict": {"$ref": "#/$defs/verdict"},
        "cause": {"$ref": "#/$defs/cause"},
        "agree": {"type": "boolean"},
    }
)
row = obj(
    {
        "index": {"type": "array", "items": {"type": "integer"}},
        "one_hot": {"$ref": "#/$defs/tensor"},
        "grads": {"type": "object", "additionalProperties": {"$ref": "#/$defs/tensor"}},
    }
)
derivative = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/derivative.schema.json",
    "title": "autograd-cli jacobian / hessian / grad --order K --json",
    "$defs": DEFS,
    **obj(
        {
            **HEAD,
            "command": {"enum": ["jacobian", "hessian", "derivative", "jvp"]},
            "kind": {"type": "string", "pattern": "^(jacobian|hessian|order [1-8]|jvp)$"},
            "tangents": {
                "description": "jvp only: the tangent v per input (the block 'J·v' is "
                "Σ d out / d input · v)",
                "type": "object",
                "additionalProperties": {"$ref": "#/$defs/tensor"},
            },
            "output_shape": {"$ref": "#/$defs/shape"},
            "values": {"type": "object", "additionalProperties": {"$ref": "#/$defs/tensor"}},
            "blocks": {"type": "object", "additionalProperties": block},
            "derivatives": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "latex": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "rows": {"type": "array", "items": row},
        }
    ),
}
derivative["required"].remove("tangents")  # only jvp's documents have it
derivative["title"] = "autograd-cli jacobian / hessian / grad --order K / jvp --json"
gnode = obj(
    {
        "id": {"type": "integer"},
        "grad_fn": {"type": "string"},
        "label": {"type": "string"},
        "leaf": {"type": ["string", "null"]},
        "shape": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/shape"}]},
        "next": {"type": "array", "items": {"type": ["integer", "null"]}},
        "saved": {
            "description": "with --saved: what the node keeps for backward (grad_fn._saved_*); "
            "a tensor as its shape, dtype and first numbers, anything else as it is",
            "anyOf": [
                {"type": "null"},
                {
                    "type": "array",
                    "items": obj(
                        {
                            "name": {"type": "string", "pattern": "^_saved_"},
                            "tensor": {"type": "boolean"},
                            "shape": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/shape"}]},
                            "dtype": {"type": ["string", "null"]},
                            "value": {},
                        }
                    ),
                },
            ],
        },
    }
)
freed = obj(
    {
        "node": {"type": "integer"},
        "name": {"type": "string", "pattern": "^_saved_"},
        "message": {"type": "string"},
    }
)
graph = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/graph.schema.json",
    "title": "autograd-cli graph --json",
    "$defs": DEFS,
    **obj(
        {
            "schema_version": {"const": 1},
            "command": {"const": "graph"},
            "expression": {"type": "string"},
            "output": {"type": "string"},
            "seed": {"$ref": "#/$defs/seed"},
            "root": {"type": "integer"},
            "nodes": {"type": "array", "items": gnode, "minItems": 1},
            "freed": {
                "description": "with --saved: what reading a saved tensor raised after one "
                "backward() without retain_graph (null: nothing was saved, or no --saved)",
                "anyOf": [{"type": "null"}, freed],
            },
            "written": {"type": "array", "items": {"type": "string"}},
        },
        required=[
            "schema_version",
            "command",
            "expression",
            "output",
            "seed",
            "root",
            "nodes",
            "freed",
        ],
    ),
}
in_place = {
    "type": "array",
    "description": "the in-place lines PyTorch ran before the error, with version counters",
    "items": obj(
        {
            "name": {"type": "string"},
            "line": {"type": "string"},
            "version_before": {"type": "integer", "minimum": 0},
            "version_after": {"type": "integer", "minimum": 0},
            "made_by": {"type": ["string", "null"]},
            "made_by_after": {"type": ["string", "null"]},
        }
    ),
}
error = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/error.schema.json",
    "title": "autograd-cli --json, on bad input (exit code 2)",
    **obj(
        {
            "schema_version": {"const": 1},
            "error": obj(
                {
                    "type": {
                        "enum": [
                            "error",
                            "expression",
                            "limit",
                            "variable",
                            "value",
                            "shape",
                            "device",
                            "computation",
                            "pytorch",
                            "usage",
                        ]
                    },
                    "code": {"type": "string", "pattern": "^[a-z_]+$"},
                    "message": {"type": "string", "minLength": 1},
                    "in_place": in_place,
                },
                required=["type", "code", "message"],
            ),
        }
    ),
}
grad_document = {k: v for k, v in grad.items() if k not in ("$schema", "$id", "title", "$defs")}
leaf_grad = obj(
    {
        "grad": {"$ref": "#/$defs/tensor_or_null"},
        "expected": {"$ref": "#/$defs/tensor_or_null"},
        "max_abs_error": {"$ref": "#/$defs/number_or_null"},
        "verdict": {"$ref": "#/$defs/verdict_or_null"},
        "cause": {"$ref": "#/$defs/cause"},
        "derivative": {"type": ["string", "null"]},
    }
)
shown_value = {
    "anyOf": [
        {"$ref": "#/$defs/tensor_or_null"},
        {"type": ["boolean", "string"]},
        {"type": "array", "items": {"type": ["boolean", "integer", "array"]}},
    ]
}
shown = obj(
    {
        "text": {"type": "string"},
        "value": shown_value,
        "expected": shown_value,
        "verdict": {"$ref": "#/$defs/verdict_or_null"},
    }
)
event = obj(
    {
        "kind": {"enum": ["backward", "reset", "print"]},
        "statement": {"type": "string"},
        "grads": {"type": "object", "additionalProperties": leaf_grad},
        "shown": {"type": "array", "items": shown},
        "check": {"anyOf": [{"type": "null"}, grad_document]},
        "verdict": {"$ref": "#/$defs/verdict_or_null"},
        # a loop's backward(): its one-element target; a print Python formats: its line
        "target": {"type": "number"},
        "printed": {"type": "string"},
    },
    required=["kind", "statement", "grads", "shown", "check", "verdict"],
)
cell_head = {k: v for k, v in HEAD.items() if k != "expected_by"}
cell = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/cell.schema.json",
    "title": "autograd-cli grad --json, for a notebook cell that calls backward() or print()",
    "$defs": DEFS,
    **obj(
        {
            **cell_head,
            "command": {"const": "cell"},
            "events": {"type": "array", "items": event},
            "stopped": {
                "anyOf": [
                    {"type": "null"},
                    obj(
                        {
                            "type": {"type": "string"},
                            "code": {"type": "string", "pattern": "^[a-z_]+$"},
                            "message": {"type": "string", "minLength": 1},
                            "in_place": in_place,
                        },
                        required=["type", "code", "message"],
                    ),
                ]
            },
        }
    ),
}
# a custom autograd Function's own check: present only when the cell defines one
function_input = obj(
    {
        "name": {"type": "string"},
        "backward": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/tensor"}]},
        "expected": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/tensor"}]},
        "numeric": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/tensor"}]},
        "verdict": {"enum": ["agree", "disagree"]},
        "elements": {"type": "array", "items": {"type": "integer"}},
        "written": {"type": "string"},
        "right": {"type": "string"},
        "difference": {"type": "string"},
    }
)
cell["properties"]["functions"] = {
    "type": "array",
    "items": obj(
        {
            "function": {"type": "string"},
            "call": {"type": "string"},
            "verdict": {"enum": ["agree", "disagree"]},
            "inputs": {"type": "array", "items": function_input},
            "problems": {"type": "array", "items": {"type": "string"}},
        }
    ),
}
check = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/check.schema.json",
    "title": "autograd-cli check --json: one line per case, then the summary",
    "oneOf": [
        obj(
            {
                "case": {"type": "integer", "minimum": 1},
                "source": {"type": "string"},
                "exit_code": {"enum": [0, 1, 2, 3]},
                "status": {"enum": ["agree", "disagree", "bad input", "internal error"]},
                "seconds": {"type": "number", "minimum": 0},
                "error": {"type": ["string", "null"]},
                "document": {"type": ["object", "null"]},
            }
        ),
        obj(
            {
                "summary": obj(
                    {
                        "cases": {"type": "integer", "minimum": 0},
                        "agreed": {"type": "integer", "minimum": 0},
                        "disagreed": {"type": "integer", "minimum": 0},
                        "bad_input": {"type": "integer", "minimum": 0},
                        "internal_errors": {"type": "integer", "minimum": 0},
                        "seconds": {"type": "number", "minimum": 0},
                        "stopped": {"enum": [None, "Ctrl-C", "SIGTERM"]},
                        "exit_code": {"enum": [0, 1, 2, 3, 130, 143]},
                    }
                )
            }
        ),
    ],
}
plot = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://autograd-cli/schema/plot.schema.json",
    "title": "autograd-cli plot --json",
    "$defs": DEFS,
    **obj(
        {
            "schema_version": {"const": 1},
            "command": {"const": "plot"},
            "expression": {"type": "string"},
            "wrt": {"type": "string"},
            "order": {"type": "integer", "minimum": 1},
            "fixed": {"type": "object", "additionalProperties": {"type": "string"}},
            **{
                k: {"type": "array", "items": {"$ref": "#/$defs/number"}}
                for k in ("x", "f", "f_expected", "autograd", "expected")
            },
            **{
                k: {"type": "array", "items": {"type": "boolean"}}
                for k in ("disagree", "kinks", "undefined")
            },
            "written": {"type": "array", "items": {"type": "string"}},
            "verdict": {"$ref": "#/$defs/verdict"},
            "agree": {"type": "boolean"},
        }
    ),
}
# The commands' schemas, named by the command registry (autogradcli.schemas()), then the
# documents of no single command: check's lines and the error document.
SCHEMAS = {name: globals()[name] for name in dict.fromkeys(schemas().values())}
SCHEMAS |= {"check": check, "error": error}

if __name__ == "__main__":
    for name, schema in SCHEMAS.items():
        (
            pathlib.Path(__file__).resolve().parent.parent / "schema" / f"{name}.schema.json"
        ).write_text(json.dumps(schema, indent=2) + "\n")
