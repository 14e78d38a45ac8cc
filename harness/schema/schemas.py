"""Tool definitions read from a user's file, checked before any argument is typed by them.

A schema is data from outside: it must not reach the network (a remote `$ref` is refused, and the validator is
given a registry that cannot retrieve anything), hang (patterns run without backtracking, `safe_regex`), or
recurse without end (`$ref` loops and nesting past MAX_DEPTH are refused). Whatever is refused is refused with
the tool and the place in its schema."""

from __future__ import annotations

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from harness.core.errors import ToolSchemaError
from harness.schema import safe_regex

MAX_DEPTH = 64
_TYPES = {"string", "integer", "number", "boolean", "object", "array", "null"}
# Keywords whose value is one schema, a list of schemas, or a mapping of names to schemas.
_ONE = ("additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else",
        "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords that apply their schemas to the same value: a cycle through these alone never ends.
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")


def _refuse_retrieval(uri):
    raise NoSuchResource(ref=uri)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not safe_search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if safe_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, extra_schema, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = sorted(k for k in instance if k not in known and not any(safe_search(p, k) for p in patterns))
    if validator.is_type(extra_schema, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra_schema, path=key)
    elif not extra_schema and extras:
        listed = ", ".join(map(repr, extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} {'was' if len(extras) == 1 else 'were'}"
                              " unexpected)")


def safe_search(pattern, text) -> bool:
    """JSON Schema's unanchored pattern match, without backtracking."""
    try:
        return safe_regex.search(pattern, text)
    except safe_regex.UnsafePattern:
        return False  # checked when the tools were read; a text too long to check does not match


# Draft 2020-12 with every pattern keyword through the backtracking-free matcher.
SafeValidator = validators.extend(Draft202012Validator, {
    "pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties,
})


def validator_for(schema) -> Draft202012Validator:
    return SafeValidator(schema, registry=Registry(retrieve=_refuse_retrieval))


def _pointer(root, ref: str, where: str):
    """The schema a local `$ref` (#, #/$defs/x) names inside `root`."""
    if not ref.startswith("#"):
        raise ToolSchemaError(f"{where}: $ref {ref!r} is not local to the tool; schemas are never fetched "
                              "(put the definition under $defs and refer to it as #/$defs/NAME)")
    node = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ToolSchemaError(f"{where}: $ref {ref!r} names nothing in the tool's schema")
    return node


def resolve(root, schema, where: str = "the schema"):
    """`schema` with its `$ref` chain followed inside `root`; a chain that comes back to itself is refused."""
    seen = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        if id(schema) in seen:
            raise ToolSchemaError(f"{where}: $ref {schema['$ref']!r} loops back to itself")
        seen.add(id(schema))
        schema = _pointer(root, schema["$ref"], where)
    return schema


def _children(schema):
    """(keyword path, child schema, applies to the same value) for each subschema of `schema`."""
    for key in _ONE:
        if key in schema:
            yield key, schema[key], key in _IN_PLACE
    for key in _MANY:
        if key in schema:
            if not isinstance(schema[key], list):
                raise ToolSchemaError(f"{key} must be a list of schemas")
            for i, child in enumerate(schema[key]):
                yield f"{key}[{i}]", child, key in _IN_PLACE
    for key in _NAMED:
        if key in schema:
            if not isinstance(schema[key], dict):
                raise ToolSchemaError(f"{key} must be an object mapping names to schemas")
            for name, child in schema[key].items():
                yield f"{key}.{name}", child, key in _IN_PLACE


def _check_node(schema, where):
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{where}: a schema is an object (or true/false), not {type(schema).__name__}")
    kinds = schema.get("type")
    if kinds is not None:
        listed = kinds if isinstance(kinds, list) else [kinds]
        if not listed or not all(isinstance(k, str) and k in _TYPES for k in listed):
            raise ToolSchemaError(f"{where}: type must be one of {sorted(_TYPES)} or a list of them, got {kinds!r}")
    required = schema.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        raise ToolSchemaError(f"{where}: required must be a list of property names, got {required!r}")
    if "$ref" in schema and not isinstance(schema["$ref"], str):
        raise ToolSchemaError(f"{where}: $ref must be a string")
    patterns = [schema["pattern"]] if "pattern" in schema else []
    patterns += list(schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else [])
    for pattern in patterns:
        try:
            safe_regex.compile_pattern(pattern)
        except safe_regex.UnsafePattern as exc:
            raise ToolSchemaError(f"{where}: pattern {pattern!r}: {exc}") from None
    for key in ("$dynamicRef", "$recursiveRef"):
        if key in schema:
            raise ToolSchemaError(f"{where}: {key} is not supported (use $ref to #/$defs/NAME)")


def check_schema(root, where: str) -> None:
    """Refuse what would make typing by `root` fail, fetch, hang or recurse without end; explain where."""
    todo = [(root, where, 0)]
    in_place = {}  # id(schema) -> the schemas it applies to the same value, for the loop check
    nodes, nodes_by_id = {}, {}
    while todo:
        schema, at, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ToolSchemaError(f"{where}: the schema nests deeper than {MAX_DEPTH} levels")
        _check_node(schema, at)
        if not isinstance(schema, dict) or id(schema) in nodes:
            continue
        nodes[id(schema)] = at
        nodes_by_id[id(schema)] = schema
        edges = in_place.setdefault(id(schema), [])
        if "$ref" in schema:
            target = _pointer(root, schema["$ref"], at)
            edges.append(target)
            todo.append((target, f"{at} ($ref {schema['$ref']})", depth + 1))
        try:
            children = list(_children(schema))
        except ToolSchemaError as exc:
            raise ToolSchemaError(f"{at}: {exc}") from None
        for key, child, same_value in children:
            if same_value:
                edges.append(child)
            todo.append((child, f"{at}.{key}", depth + 1))
    _refuse_loops(in_place, nodes)
    seen = {key for node in nodes_by_id.values() for key in node}
    if {"patternProperties", "unevaluatedProperties"} <= seen:
        # jsonschema finds the properties unevaluatedProperties leaves with Python's backtracking re.
        raise ToolSchemaError(f"{where}: unevaluatedProperties beside patternProperties is not supported")
    try:
        SafeValidator.check_schema(root)
    except SchemaError as exc:
        raise ToolSchemaError(f"{where}: not valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise ToolSchemaError(f"{where}: the schema nests too deeply to check") from None


def _refuse_loops(in_place, nodes):
    """A schema that reaches itself through $ref and in-place keywords alone would be applied to the same value
    forever."""
    state = {}  # id -> 1 on the stack, 2 done
    for origin in list(in_place):
        if origin in state:
            continue
        stack = [(origin, iter(in_place.get(origin, ())))]
        state[origin] = 1
        while stack:
            node, edges = stack[-1]
            child = next(edges, None)
            if child is None:
                state[node] = 2
                stack.pop()
                continue
            if not isinstance(child, dict):
                continue
            if state.get(id(child)) == 1:
                raise ToolSchemaError(f"{nodes.get(id(child), 'the schema')}: $ref loops back to itself without "
                                      "descending into a property or an item")
            if id(child) not in state:
                state[id(child)] = 1
                stack.append((id(child), iter(in_place.get(id(child), ()))))


def check_tools(tools) -> dict:
    """OpenAI-style tool definitions (a list) → {name: tool}, or ToolSchemaError naming the first problem."""
    if not isinstance(tools, list):
        raise ToolSchemaError(f"expected a JSON list of tool definitions, got {type(tools).__name__}")
    out = {}
    for i, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            raise ToolSchemaError(f"tool {i}: a tool is an object, with its function under \"function\"")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ToolSchemaError(f"tool {i}: the function name must be a non-empty string, got {name!r}")
        if name in out:
            raise ToolSchemaError(f"tool {i}: {name!r} is defined twice")
        parameters = function.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, dict):
                raise ToolSchemaError(f"tool {name!r}: parameters must be a JSON Schema object")
            check_schema(parameters, f"tool {name!r} parameters")
        out[name] = tool
    return out
