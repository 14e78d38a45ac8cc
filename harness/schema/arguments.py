"""Arguments typed once, by the tool's JSON schema, for every family.

Text families write every value as text and small models write numbers as strings ("limit": "10"), so a
string given where the schema has no string is read as JSON, at any depth: a parameter, a property of a nested
object, an item of an array of objects. Each such reading is listed by its path (`coerced`), and where a union
(anyOf/oneOf) decided the type, the branch taken is listed too (`branches`). Anything else that does not fit the
schema is a tool error the model can read: a wrong type, a missing required parameter, an unknown parameter, and
inside objects and arrays whatever the rest of the schema says (jsonschema, Draft 2020-12, its patterns run
without backtracking: `schemas.py`). A text value in Python notation (True, None, {'a': 1}) is not read: it
stays an error, named, because JSON is what the schema and the family's template write (Seed-OSS renders past
values with Python's str() too, but its peers keep them as text). The exception is a family whose parser says
`value_notation = "python"` (MiniCPM 5: its template writes a list, dict, bool or None argument with Python's
str(), and vLLM's and SGLang's parsers read it back): there Python notation is the format and is read, and JSON
spelling (true, null) is read but listed (`json_notation`): not what that template writes."""

import ast
import json
import warnings

from dataclasses import dataclass, field

from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from harness.core.errors import ToolSchemaError
from harness.formats.payloads import Mismatch, load_json
from harness.schema.schemas import MAX_DEPTH, SafeValidator, resolve, safe_search, validator_for

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
    # Paths (`days`, `filters[0].limit`) whose string value was read as JSON (reported: in a JSON family it is
    # the model's deviation too).
    coerced: list = field(default_factory=list)
    # Paths whose string value is not JSON but a Python literal of another type (an error, named).
    python_notation: list = field(default_factory=list)
    # {"path", "keyword", "branch", "type"} for each anyOf/oneOf whose branch typed the value.
    branches: list = field(default_factory=list)
    # Paths, in a Python-notation family, whose text is JSON and not a Python literal (true, null).
    json_notation: list = field(default_factory=list)

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
    if isinstance(schema, bool):
        return schema
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
    if isinstance(schema, bool):
        return True
    kinds = schema.get("type")
    return kinds is None or kinds == "string" or (isinstance(kinds, list) and "string" in kinds)


def _describe(schema) -> str:
    if isinstance(schema, bool):
        return "anything" if schema else "nothing (the schema is false)"
    out = schema.get("type", "any")
    if "enum" in schema:
        out = f"one of {schema['enum']}"
    return str(out)


_NOT_LITERAL = object()


def _python_literal(text: str):
    """The non-string value `text` spells in Python notation (True, None, ['x'], {'a': 1}), else _NOT_LITERAL."""
    if len(text) > 10_000:
        return _NOT_LITERAL
    try:
        with warnings.catch_warnings():     # "\ " in model text is an invalid escape: noise, not news
            warnings.simplefilter("ignore")
            value = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL
    return value


def _json_like(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    return value is None or isinstance(value, (str, bool, int, float))


def _is_python_literal(text: str) -> bool:
    value = _python_literal(text)
    return value is not _NOT_LITERAL and not isinstance(value, (str, bytes))


def _path(path) -> str:
    out = str(path[0])
    for part in path[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _property_schema(schema: dict, key: str):
    """The schema a property of an object is typed by: its own, else the first pattern matching its name, else
    additionalProperties (True, any value, when there is none)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if key in properties:
        return properties[key]
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    for pattern, sub in patterns.items():
        if safe_search(pattern, key):
            return sub
    return schema.get("additionalProperties", True)


class _Typer:
    """Walks a value and its schema together, reading text as JSON where the schema has no string."""

    def __init__(self, root: dict, typed: Typed, validator=None, notation="json"):
        self.root, self.typed, self.notation = root, typed, notation
        self.validator = validator or validator_for(root)

    def value(self, value, schema, path, depth=0):
        if depth > MAX_DEPTH:
            return value
        schema = resolve(self.root, schema, f"parameter {_path(path)!r}")
        if not isinstance(schema, dict):
            return value
        for keyword in ("anyOf", "oneOf"):
            if isinstance(schema.get(keyword), list) and "type" not in schema:
                return self._union(value, schema, keyword, path, depth)
        if isinstance(value, str) and not _expects_string(schema):
            value = self._read_text(value, schema, path)
        kinds = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
        if "integer" in kinds and "number" not in kinds and isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, dict):
            return {k: self.value(v, _property_schema(schema, k), path + [k], depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
            items = schema.get("items")
            return [self.value(v, prefix[i], path + [i], depth + 1) if i < len(prefix)
                    else self.value(v, items, path + [i], depth + 1) if isinstance(items, (dict, bool)) else v
                    for i, v in enumerate(value)]
        return value

    def _read_text(self, value, schema, path):
        if self.notation == "python":
            literal = _python_literal(value)
            # A set, tuple, bytes or complex has no JSON type: str() of an argument never writes one.
            if literal is not _NOT_LITERAL and not isinstance(literal, str) and _json_like(literal):
                self.typed.coerced.append(_path(path))
                return literal
        try:
            decoded = load_json(value)
        except (ValueError, Mismatch):  # not JSON, or JSON no parser accepts (NaN, duplicate keys, too deep)
            if _is_python_literal(value):
                self.typed.python_notation.append(_path(path))
                self.typed.errors.append(f"parameter {_path(path)!r} must be {_describe(schema)}, got "
                                         f"{json.dumps(value)} (Python notation; JSON is due)")
            return value
        self.typed.coerced.append(_path(path))
        if self.notation == "python":
            self.typed.json_notation.append(_path(path))
        return decoded

    def _union(self, value, schema, keyword, path, depth):
        """The first branch the value fits as written, else the first it fits once its text is read as JSON."""
        fallback = None
        for index, branch in enumerate(schema[keyword]):
            scratch = Typed({})
            typed_value = _Typer(self.root, scratch, self.validator, self.notation).value(value, branch, path,
                                                                                       depth + 1)
            resolved = resolve(self.root, branch, f"parameter {_path(path)!r}")
            if scratch.errors or not self.validator.evolve(schema=resolved).is_valid(typed_value):
                continue
            if not scratch.coerced:
                return self._take(typed_value, scratch, keyword, index, resolved, path)
            fallback = fallback or (typed_value, scratch, index, resolved)
        if fallback is None:
            return value
        typed_value, scratch, index, resolved = fallback
        return self._take(typed_value, scratch, keyword, index, resolved, path)

    def _take(self, value, scratch, keyword, index, branch, path):
        self.typed.coerced += scratch.coerced
        self.typed.json_notation += scratch.json_notation
        self.typed.branches += scratch.branches
        self.typed.branches.append({"path": _path(path), "keyword": keyword, "branch": index,
                                    "type": _describe(branch)})
        return value

    def errors(self, key, value, schema) -> list:
        """What the rest of the schema says about a value of the right type: items, nested properties, required
        keys, enums, bounds and patterns at any depth, each named by its path inside the parameter."""
        try:
            SafeValidator.check_schema(schema)  # else a bad keyword value raises mid-validation
        except SchemaError as exc:
            return [f"the tool's schema for parameter {key!r} is not valid JSON Schema: {exc.message}"]
        try:
            found = self.validator.evolve(schema=schema).iter_errors(value)
            found = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        except (Unresolvable, RecursionError) as exc:
            return [f"the tool's schema for parameter {key!r} cannot be used: {exc!r}"]
        return [f"parameter {key!r}{''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}" for e in found]


def type_arguments(arguments: dict, parameters: dict, notation: str = "json") -> Typed:
    """`notation`: "python" where the family's template writes non-string values with Python's str()
    (harness.families.value_notation)."""
    properties = parameters.get("properties", {}) or {}
    typed = Typed({})
    typer = _Typer(parameters, typed, notation=notation)
    for key, value in arguments.items():
        schema = properties.get(key)
        if schema is None:
            typed.errors.append(f"unknown parameter {key!r}")
            continue
        errors_before = len(typed.errors)
        try:
            value = typer.value(value, schema, [key])
            schema = resolve(parameters, schema, f"parameter {key!r}")
        except ToolSchemaError as exc:
            typed.errors.append(f"the tool's schema for parameter {key!r} cannot be used: {exc}")
            continue
        if len(typed.errors) > errors_before:
            continue
        if not _fits(value, schema):
            typed.errors.append(f"parameter {key!r} must be {_describe(schema)}, got {json.dumps(value)}")
            continue
        nested = typer.errors(key, value, schema)
        if nested:
            typed.errors += nested
            continue
        typed.arguments[key] = value
    for key in parameters.get("required", []) or []:
        if key not in arguments:
            typed.errors.append(f"missing required parameter {key!r}")
    return typed
