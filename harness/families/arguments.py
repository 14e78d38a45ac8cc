"""Arguments typed once, by the tool's JSON schema, for every family.

Text families write every value as text and small models write numbers as strings ("limit": "10"), so a
string given for a non-string parameter is read as JSON. Anything else that does not fit the schema is a
tool error the model can read: a wrong type, a missing required parameter, an unknown parameter, and inside
objects and arrays whatever the rest of the schema says (jsonschema, Draft 2020-12). A text value
in Python notation (True, None, {'a': 1}) is not read: it stays an error, named, because JSON is what the schema
and every parser expect (Seed-OSS and MiniCPM 5 templates render past values with Python's str())."""

import ast
import json

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from dataclasses import dataclass, field

from harness.families.payloads import Mismatch, load_json

_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


@dataclass
class Typed:
    arguments: dict
    errors: list = field(default_factory=list)
    # Parameters whose string value was read as JSON (reported, since it is the model's deviation too).
    coerced: list = field(default_factory=list)
    # Parameters whose string value is not JSON but a Python literal of another type (an error, named).
    python_notation: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error_message(self) -> str:
        return "; ".join(self.errors)


def tool_parameters(tool: dict) -> dict:
    """The parameters schema of an OpenAI-style tool ({"type": "function", "function": {...}}) or a bare function."""
    function = tool.get("function", tool)
    return function.get("parameters") or {"type": "object", "properties": {}}


def _fits(value, schema) -> bool:
    kinds = schema.get("type")
    if kinds is None:
        return True
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        expected = _JSON_TYPES.get(kind)
        if expected is None:
            return True
        # bool is an int in Python; JSON keeps them apart.
        if isinstance(value, bool) and kind in ("integer", "number"):
            continue
        if isinstance(value, expected):
            return "enum" not in schema or value in schema["enum"]
    return False


def _expects_string(schema) -> bool:
    kinds = schema.get("type")
    return kinds is None or kinds == "string" or (isinstance(kinds, list) and "string" in kinds)


def _describe(schema) -> str:
    out = schema.get("type", "any")
    if "enum" in schema:
        out = f"one of {schema['enum']}"
    return str(out)


def _is_python_literal(text: str) -> bool:
    """Whether `text` spells a non-string value in Python notation (True, None, ['x'], {'a': 1})."""
    if len(text) > 10_000:
        return False
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return not isinstance(value, (str, bytes))


def _schema_errors(key: str, value, schema: dict) -> list:
    """What the rest of the schema says about a value of the right type: items, nested properties, required
    keys, enums, bounds and patterns at any depth, each named by its path inside the parameter."""
    try:
        Draft202012Validator.check_schema(schema)     # else a bad keyword value raises mid-validation
        errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    except SchemaError as exc:
        return [f"the tool's schema for parameter {key!r} is not valid JSON Schema: {exc.message}"]
    return [f"parameter {key!r}{''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}" for e in errors]


def type_arguments(arguments: dict, parameters: dict) -> Typed:
    properties = parameters.get("properties", {}) or {}
    typed = Typed({})
    for key, value in arguments.items():
        schema = properties.get(key)
        if schema is None:
            typed.errors.append(f"unknown parameter {key!r}")
            continue
        if isinstance(value, str) and not _expects_string(schema):
            try:
                decoded = load_json(value)
            except (ValueError, Mismatch):  # not JSON, or JSON no parser accepts (NaN, duplicate keys, too deep)
                decoded = value
            if decoded is not value:
                value = decoded
                typed.coerced.append(key)
            elif _is_python_literal(value):
                typed.python_notation.append(key)
                typed.errors.append(f"parameter {key!r} must be {_describe(schema)}, got {json.dumps(value)} "
                                    "(Python notation; JSON is due)")
                continue
        if schema.get("type") == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not _fits(value, schema):
            typed.errors.append(f"parameter {key!r} must be {_describe(schema)}, got {json.dumps(value)}")
            continue
        nested = _schema_errors(key, value, schema)
        if nested:
            typed.errors += nested
            continue
        typed.arguments[key] = value
    for key in parameters.get("required", []) or []:
        if key not in arguments:
            typed.errors.append(f"missing required parameter {key!r}")
    return typed
