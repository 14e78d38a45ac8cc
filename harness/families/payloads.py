"""Payload readers shared by families: call objects in JSON, Python call lists, and the JSON decoding that
names why a payload is not JSON. Each reader is strict and raises Mismatch with a deviation name."""

import ast
import json
import re
from dataclasses import dataclass, field

from harness.families import deviations as dev
from harness.families.base import ToolCall

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_DECODER = json.JSONDecoder()


class Mismatch(Exception):
    def __init__(self, deviation, detail):
        super().__init__(detail)
        self.deviation = deviation
        self.detail = detail


@dataclass
class ObjectShape:
    """How a call is written as a JSON object."""

    name_key: str = "name"
    arguments_key: str = "arguments"
    # "name-and-arguments": {"name": N, "arguments": {...}}; "name-to-arguments": {N: {...}}.
    shape: str = "name-and-arguments"
    # key -> "string", "any", or a list of the allowed values.
    optional: dict = field(default_factory=dict)
    required: dict = field(default_factory=dict)
    id_key: str | None = None

    def read(self, obj) -> ToolCall:
        if not isinstance(obj, dict):
            raise Mismatch(dev.INVALID_JSON, f"expected a JSON object for the call, got {type(obj).__name__}")
        if self.shape == "name-to-arguments":
            if len(obj) != 1:
                raise Mismatch(dev.UNKNOWN_KEY, f"expected one {{name: arguments}} pair, got keys {list(obj)}")
            ((name, args),) = obj.items()
            return ToolCall(_check_name(name), check_arguments(args))
        if self.name_key not in obj and isinstance(obj.get("function"), dict):
            raise Mismatch(dev.NESTED_FUNCTION_SHAPE, "the call is nested as {'function': {...}} (the tool-list shape)")
        for key in (self.name_key, self.arguments_key, *self.required):
            if key not in obj:
                raise Mismatch(dev.MISSING_KEY, f"the call object has no {key!r} key")
        allowed = {self.name_key, self.arguments_key, *self.optional, *self.required}
        for key, value in obj.items():
            if key not in allowed:
                raise Mismatch(dev.UNKNOWN_KEY, f"unknown key {key!r} in the call object")
            spec = self.optional.get(key, self.required.get(key))
            if spec is not None and not _value_ok(value, spec):
                raise Mismatch(dev.UNEXPECTED_VALUE, f"{key!r} is {value!r}, expected {spec}")
        call_id = obj.get(self.id_key) if self.id_key else None
        return ToolCall(_check_name(obj[self.name_key]), check_arguments(obj[self.arguments_key]), call_id)

    def write(self, call: ToolCall) -> dict:
        if self.shape == "name-to-arguments":
            return {call.name: call.arguments}
        out = {self.name_key: call.name, self.arguments_key: call.arguments}
        if self.id_key and call.id is not None:
            out[self.id_key] = call.id
        for key, spec in self.required.items():
            if key not in out:
                out[key] = spec[0] if isinstance(spec, list) else "0"
        return out


def _value_ok(value, spec) -> bool:
    if spec == "any":
        return True
    if spec == "string":
        return isinstance(value, str)
    return value in spec


def _check_name(name):
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Mismatch(dev.INVALID_NAME, f"function name {name!r} is not an identifier")
    return name


def check_arguments(args):
    if isinstance(args, str):
        raise Mismatch(dev.STRINGIFIED_ARGUMENTS, "arguments are a JSON-encoded string, not an object")
    if not isinstance(args, dict):
        raise Mismatch(dev.ARGUMENTS_NOT_OBJECT, f"arguments are a {type(args).__name__}, not an object")
    return args


def decode_json(text, pos):
    if pos >= len(text):
        raise Mismatch(dev.UNCLOSED_CALL, "the reply ended where a JSON value was due")
    try:
        return _DECODER.raw_decode(text, pos)
    except ValueError as exc:
        tail = text[pos:]
        name = dev.json_failure(tail)
        if name == dev.INVALID_JSON and tail.lstrip()[:1] in "{[" and _unterminated(tail):
            name = dev.UNCLOSED_CALL
        raise Mismatch(name, f"not JSON at offset {pos}: {exc.msg}") from None


def _unterminated(tail: str) -> bool:
    # A JSON value cut off by the end of the reply (max_tokens) is an unclosed call, not a syntax error.
    return tail.count("{") + tail.count("[") > tail.count("}") + tail.count("]")


class PythonCalls:
    """`[name(arg=literal, ...), ...]`: read with Python's own parser, literals only, never evaluated."""

    @staticmethod
    def read(source: str) -> list:
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise Mismatch(dev.NOT_PYTHON_CALL, f"not a Python expression: {exc.msg}") from None
        body = tree.body
        if not isinstance(body, ast.List) or not body.elts:
            raise Mismatch(dev.NOT_PYTHON_CALL, "expected a non-empty list of calls [f(a=1), ...]")
        calls = []
        for node in body.elts:
            if not isinstance(node, ast.Call) or node.args or not isinstance(node.func, (ast.Name, ast.Attribute)):
                raise Mismatch(dev.NOT_PYTHON_CALL, "each item must be name(keyword=literal, ...)")
            args = {}
            for kw in node.keywords:
                if kw.arg is None or kw.arg in args:
                    raise Mismatch(dev.DUPLICATE_ARGUMENT, f"argument {kw.arg!r} given twice or unpacked")
                try:
                    args[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    raise Mismatch(dev.NOT_PYTHON_CALL, f"argument {kw.arg!r} is not a literal") from None
            calls.append(ToolCall(_check_name(ast.unparse(node.func)), args))
        return calls

    @staticmethod
    def write(calls) -> str:
        def lit(v):
            return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else repr(v)

        parts = [f"{c.name}({', '.join(f'{k}={lit(v)}' for k, v in c.arguments.items())})" for c in calls]
        return "[" + ", ".join(parts) + "]"
