"""Payload readers shared by families: call objects in JSON, Python call lists, and the JSON decoding that
names why a payload is not JSON. Each reader is strict and raises Mismatch with a deviation name."""

import ast
import json
import keyword
import math
import re
import warnings
from dataclasses import dataclass, field

from harness.formats import deviations as dev
from harness.formats.calls import ToolCall
from harness.formats.jsonscan import MAX_DEPTH, too_deep

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_JSON_WS = re.compile(r"[ \t\n\r]*")
# Python's default limit for printing an int: a longer one would break every later json.dumps of the call.
MAX_DIGITS = 4300
_INT_LIMIT = 10**MAX_DIGITS
_SURROGATE = re.compile("[\ud800-\udfff]")
# Where a decoded string may hold a surrogate: an escape of one (paired or not), or a raw one.
_MAY_HOLD_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


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
        due, allowed, plain, checked = self._keys()
        for key in due:
            if key not in obj:
                raise Mismatch(dev.MISSING_KEY, f"the call object has no {key!r} key")
        # The common object holds only keys with no value to check: one set comparison in C says so. With one
        # value to check and every key allowed, that value is the only thing that can fail, whatever the order.
        if obj.keys() <= plain:
            pass
        elif len(checked) == 1 and obj.keys() <= allowed:
            ((key, spec),) = checked
            if key in obj and not _value_ok(obj[key], spec):
                raise Mismatch(dev.UNEXPECTED_VALUE, f"{key!r} is {obj[key]!r}, expected {spec}")
        else:
            for key, value in obj.items():
                if key in plain:
                    continue
                if key not in allowed:
                    raise Mismatch(dev.UNKNOWN_KEY, f"unknown key {key!r} in the call object")
                spec = self.optional.get(key, self.required.get(key))
                if spec is not None and not _value_ok(value, spec):
                    raise Mismatch(dev.UNEXPECTED_VALUE, f"{key!r} is {value!r}, expected {spec}")
        call_id = obj.get(self.id_key) if self.id_key else None
        return ToolCall(_check_name(obj[self.name_key]), check_arguments(obj[self.arguments_key]), call_id)

    def _keys(self) -> tuple:
        """(the keys a call must have, every key it may have, those of them whose value is not checked, (key, spec)
        of those whose value is): built on the first call read, not on every one."""
        keys = self.__dict__.get("_keys_cache")
        if keys is None:
            allowed = frozenset({self.name_key, self.arguments_key, *self.optional, *self.required})
            # As read() looks a key's spec up: optional first, then required.
            specs = {k: self.optional.get(k, self.required.get(k)) for k in allowed}
            checked = tuple((k, spec) for k, spec in specs.items() if spec is not None)
            keys = ((self.name_key, self.arguments_key, *self.required), allowed,
                    allowed - {k for k, _ in checked}, checked)
            self.__dict__["_keys_cache"] = keys
        return keys

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


def _unique_pairs(pairs):
    obj = dict(pairs)
    # Built in C; only an object that lost a key to a repeat is walked again, to name the first key repeated.
    if len(obj) == len(pairs):
        return obj
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise Mismatch(dev.DUPLICATE_KEY, f"key {key!r} written twice in one JSON object")
        obj[key] = value
    return obj


def _non_finite(literal):
    raise Mismatch(dev.NON_FINITE_NUMBER, f"{literal} is not a JSON number")


def _finite_float(literal):
    value = float(literal)
    if not math.isfinite(value):
        raise Mismatch(dev.NON_FINITE_NUMBER, f"{literal[:30]} does not fit a float")
    return value


def _bounded_int(literal):
    if len(literal.lstrip("-")) > MAX_DIGITS:
        raise Mismatch(dev.NUMBER_TOO_LONG, f"an integer of {len(literal.lstrip('-'))} digits")
    return int(literal)


# Python's decoder keeps the last of two equal keys and reads NaN, Infinity and 1e999 (as inf): JSON has none of them.
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_non_finite, parse_float=_finite_float,
                            parse_int=_bounded_int)


def raw_json(text, pos):
    """The JSON value at `pos` and where it ends. Raises Mismatch for what JSON or our limits refuse in a value
    that decodes, json.JSONDecodeError for text that is not JSON."""
    if too_deep(text, pos):
        raise Mismatch(dev.NESTING_TOO_DEEP, f"the JSON value at offset {pos} nests deeper than {MAX_DEPTH} levels")
    value, end = _DECODER.raw_decode(text, pos)
    # A lone surrogate breaks every later UTF-8 write of the call (transcripts, the next prompt).
    if _may_hold_surrogate(text, pos, end) and _SURROGATE.search(json.dumps(value, ensure_ascii=False)):
        raise Mismatch(dev.LONE_SURROGATE, f"a string in the JSON value at offset {pos} holds half a surrogate pair")
    return value, end


def _may_hold_surrogate(text, pos, end) -> bool:
    # The escape branch needs a backslash-u in the span: str.find rules most values out faster than the regex.
    if text.find("\\u", pos, end) < 0:
        return _SURROGATE.search(text, pos, end) is not None
    return _MAY_HOLD_SURROGATE.search(text, pos, end) is not None


def load_json(text):
    """The whole text as one JSON value (whitespace around it allowed, as json.loads allows it)."""
    value, end = raw_json(text, _JSON_WS.match(text).end())
    if _JSON_WS.match(text, end).end() != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def read_answer(text: str, key: str) -> str | None:
    """The answer of a reply that is exactly one {KEY: STRING} object (whitespace around it allowed), else None.
    Duplicate keys, NaN or too deep a nesting make it no answer: the call parser then names what it is."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = load_json(stripped)
    except (ValueError, Mismatch):
        return None
    if isinstance(value, dict) and list(value) == [key] and isinstance(value[key], str):
        return value[key]
    return None


def decode_json(text, pos):
    if pos >= len(text):
        raise Mismatch(dev.UNCLOSED_CALL, "the reply ended where a JSON value was due")
    try:
        return raw_json(text, pos)
    except json.JSONDecodeError as exc:
        tail = text[pos:]
        name = dev.json_failure(tail)
        if name == dev.INVALID_JSON and tail.lstrip()[:1] in "{[" and _unterminated(tail):
            name = dev.UNCLOSED_CALL
        # exc.pos is where the decoder stopped in the same text: the error itself, not the value's start.
        raise Mismatch(name, f"not JSON at offset {exc.pos}: {exc.msg} (in the value from offset {pos})") from None


def _unterminated(tail: str) -> bool:
    # A JSON value cut off by the end of the reply (max_tokens) is an unclosed call, not a syntax error.
    return tail.count("{") + tail.count("[") > tail.count("}") + tail.count("]")


# JSON's spellings of Python's True, False and None: llama.cpp's LFM2 parser reads them inside a Python call
# (`[f(config={"on": true})]`); read here too, and each place is listed on the call (ToolCall.json_literals).
JSON_NAMES = {"true": True, "false": False, "null": None}


# Where Python's parser can warn: an escape sequence (a backslash) or a number run into a name or keyword (a
# digit or point followed by a letter). Other source skips catch_warnings, which costs a fifth of a short parse.
_MAY_WARN = re.compile(r"\\|[0-9.][^\W0-9]")


# The common call list, read without Python's parser: `[name(key="text", key=-12, key=True), ...]`, strings with
# no escape, quote, control character or surrogate, integers as Python writes them (no leading zero or `_`),
# True/False/None, spaces between tokens. Whatever else (floats, lists, JSON names, comments, errors) goes to ast.
_STR = r'"[^"\\\x00-\x1f\x7f\ud800-\udfff]*"'
_SCALAR = rf'{_STR}|-?(?:0|[1-9][0-9]{{0,15}})|True|False|None'
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_KWARG = rf"{_IDENT} *= *(?:{_SCALAR})"
_CALL = rf"{_IDENT}(?:\.{_IDENT})* *\( *(?:{_KWARG}(?: *, *{_KWARG})*)? *\)"
_PLAIN = re.compile(rf"\[ *{_CALL}(?: *, *{_CALL})* *\]")
_PLAIN_PART = re.compile(rf"({_IDENT}(?:\.{_IDENT})*) *\(|({_IDENT}) *= *({_SCALAR})")
_CONSTANTS = {"True": True, "False": False, "None": None}


def _plain_calls(source: str) -> list | None:
    """The calls of a plain call list, as PythonCalls.read would return them; None for any other source."""
    if _PLAIN.fullmatch(source) is None:
        return None
    calls, name, args = [], None, None
    for m in _PLAIN_PART.finditer(source):
        if m[1] is not None:
            if name is not None:
                calls.append(ToolCall(name, args, json_literals=()))
            name, args = m[1], {}
            if any(keyword.iskeyword(part) or part == "__debug__" for part in name.split(".")):
                return None
            continue
        key, literal = m[2], m[3]
        if keyword.iskeyword(key) or key == "__debug__" or key in args:
            return None     # Python's parser names the syntax error, read() the argument given twice
        args[key] = literal[1:-1] if literal[0] == '"' else _CONSTANTS[literal] if literal in _CONSTANTS \
            else int(literal)
    calls.append(ToolCall(name, args, json_literals=()))
    return calls


class PythonCalls:
    """`[name(arg=literal, ...), ...]`: read with Python's own parser, never evaluated. Argument values are the
    literals JSON has a type for (str, int, float, True/False/None, lists, dicts with string keys): Python's
    literal_eval would also hand back bytes, sets, tuples, complex numbers, Ellipsis and inf. JSON's true, false
    and null are read as those values and named on the call (`json_literals`: the argument paths)."""

    @staticmethod
    def read(source: str) -> list:
        source = source.strip()
        calls = _plain_calls(source)
        if calls is not None:
            return calls
        try:
            if _MAY_WARN.search(source):  # a reply such as `1if` must not print SyntaxWarnings into reports
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)
                    tree = ast.parse(source, mode="eval")
            else:
                tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise Mismatch(dev.NOT_PYTHON_CALL, f"not a Python expression: {exc.msg}") from None
        except ValueError as exc:  # a lone surrogate cannot be encoded as source
            raise Mismatch(dev.NOT_PYTHON_CALL, f"not Python source: {exc}") from None
        except (RecursionError, MemoryError):
            raise Mismatch(dev.NESTING_TOO_DEEP, "an expression nested too deep for Python's parser") from None
        body = tree.body
        if not isinstance(body, ast.List) or not body.elts:
            raise Mismatch(dev.NOT_PYTHON_CALL, "expected a non-empty list of calls [f(a=1), ...]")
        calls = []
        for node in body.elts:
            if not isinstance(node, ast.Call) or node.args:
                raise Mismatch(dev.NOT_PYTHON_CALL, "each item must be name(keyword=literal, ...)")
            args, json_literals = {}, []
            for kw in node.keywords:
                if kw.arg is None or kw.arg in args:
                    raise Mismatch(dev.DUPLICATE_ARGUMENT, f"argument {kw.arg!r} given twice or unpacked")
                args[kw.arg] = _literal(kw.value, kw.arg, 1, [kw.arg], json_literals)
            calls.append(ToolCall(_check_name(_dotted(node.func)), args, json_literals=tuple(json_literals)))
        return calls

    @staticmethod
    def write(calls) -> str:
        def lit(v):
            return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else repr(v)

        parts = [f"{c.name}({', '.join(f'{k}={lit(v)}' for k, v in c.arguments.items())})" for c in calls]
        return "[" + ", ".join(parts) + "]"


def _dotted(node) -> str:
    # Iterative: a.b.c... thousands deep would exhaust ast.unparse's recursion.
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise Mismatch(dev.NOT_PYTHON_CALL, "each item must be name(keyword=literal, ...)")
    return ".".join([node.id, *reversed(parts)])


def _literal(node, arg, depth, path, json_literals):
    if depth > MAX_DEPTH:
        raise Mismatch(dev.NESTING_TOO_DEEP, f"argument {arg!r} nests deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and _is_number(node.operand):
        value = node.operand.value
        return _number(-value if isinstance(node.op, ast.USub) else value, arg)
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str) and _SURROGATE.search(value):
            raise Mismatch(dev.LONE_SURROGATE, f"argument {arg!r} holds half a surrogate pair")
        if value is None or isinstance(value, (str, bool)):
            return value
        if _is_number(node):
            return _number(value, arg)
        raise Mismatch(dev.NON_JSON_VALUE, f"argument {arg!r} is {type(value).__name__} {value!r:.40}")
    if isinstance(node, ast.Name) and node.id in JSON_NAMES:
        json_literals.append("/".join(map(str, path)))
        return JSON_NAMES[node.id]
    if isinstance(node, ast.List):
        return [_literal(item, arg, depth + 1, path + [i], json_literals) for i, item in enumerate(node.elts)]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise Mismatch(dev.NON_JSON_VALUE, f"argument {arg!r} has a dict key that is not a string")
            if key.value in out:
                raise Mismatch(dev.DUPLICATE_KEY, f"key {key.value!r} written twice in argument {arg!r}")
            out[key.value] = _literal(value, arg, depth + 1, path + [key.value], json_literals)
        return out
    if isinstance(node, (ast.Set, ast.Tuple)):
        raise Mismatch(dev.NON_JSON_VALUE, f"argument {arg!r} is a {type(node).__name__.lower()}, which JSON has not")
    raise Mismatch(dev.NOT_PYTHON_CALL, f"argument {arg!r} is not a literal")


def _is_number(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _number(value, arg):
    if isinstance(value, float) and not math.isfinite(value):
        raise Mismatch(dev.NON_FINITE_NUMBER, f"argument {arg!r} is {value}")
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        raise Mismatch(dev.NUMBER_TOO_LONG, f"argument {arg!r} is an integer of more than {MAX_DIGITS} digits")
    return value
