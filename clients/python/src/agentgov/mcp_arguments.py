"""A tool call's arguments against the input schema an approver approved.

The proxy forwards a call only when its arguments satisfy the approved input schema, read
strictly: the upstream server's own validation may coerce (`"800"` into 800) or ignore what it
does not know, and must not widen what was approved. What is enforced is JSON Schema as the
schema declares it (`$schema`, default draft 2020-12) through the `jsonschema` package:
`type` (a string is never a number, a boolean never an integer), `required`, `properties`,
`additionalProperties`, `enum`, `const`, bounds, lengths, `pattern`, `items`, the combinators
(`allOf`, `anyOf`, `oneOf`, `not`, `if`) and local `$ref`s. `format` is an annotation only (as
the specification's default says) and is not enforced. A schema that is not valid JSON Schema,
or that refers to anything outside itself (a remote `$ref`), cannot be checked, so every call
to its tool is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

MAX_PROBLEMS = 5


def _where(path: Any) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def argument_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with `arguments` under `schema`, as "pointer: message" lines (at most
    MAX_PROBLEMS); empty when they satisfy it."""
    try:
        checker = validators.validator_for(schema, default=Draft202012Validator)
        checker.check_schema(schema)
        found = sorted(checker(dict(schema)).iter_errors(dict(arguments)),
                       key=lambda error: (list(map(str, error.absolute_path)), error.message))
    except SchemaError as error:
        return [f"the approved input schema is not valid JSON Schema ({error.message});"
                " no call can be checked against it"]
    except Exception as error:  # an unresolvable $ref and the like: unknown means refused
        return [f"the approved input schema cannot be checked ({type(error).__name__}:"
                f" {error})"]
    return [f"{_where(error.absolute_path)}: {error.message}" for error in found[:MAX_PROBLEMS]]
