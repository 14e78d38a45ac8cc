"""Tool schemas from outside: refused with a place and a reason, never fetched, never a hang or a traceback."""

import http.server
import re
import threading

import jsonschema._keywords
import jsonschema._utils
import pytest

from harness.schema import safe_regex
from harness.schema.arguments import type_arguments
from harness.core.errors import ToolSchemaError
from harness.schema.schemas import check_tools


def tool(parameters, name="t"):
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def nested(levels):
    schema = {}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


REFUSED = {
    "remote $ref": ([tool({"properties": {"a": {"$ref": "https://example.org/s.json"}}})], "never fetched"),
    "$ref loop": ([tool({"properties": {"a": {"$ref": "#/$defs/b"}},
                         "$defs": {"b": {"$ref": "#/$defs/c"}, "c": {"allOf": [{"$ref": "#/$defs/b"}]}}})],
                  "loops back"),
    "root self $ref": ([tool({"$ref": "#"})], "loops back"),
    "$ref to nothing": ([tool({"properties": {"a": {"$ref": "#/$defs/none"}}})], "names nothing"),
    "deep": ([tool(nested(300))], "deeper than 64"),
    "properties a list": ([tool({"properties": ["a"]})], "properties must be an object"),
    "property schema a number": ([tool({"properties": {"a": 5}})], "a schema is an object"),
    "required a string": ([tool({"properties": {"a": {}}, "required": "sxyz"})], "required must be a list"),
    "type a number": ([tool({"properties": {"a": {"type": 5}}})], "type must be one of"),
    "type unknown": ([tool({"properties": {"a": {"type": "float"}}})], "type must be one of"),
    "name a number": ([{"function": {"name": 42}}], "non-empty string"),
    "no function": (["get_weather"], "a tool is an object"),
    "duplicate names": ([tool({}, "x"), tool({}, "x")], "'x' is defined twice"),
    "parameters a list": ([tool([1])], "parameters must be a JSON Schema object"),
    "backreference": ([tool({"properties": {"a": {"pattern": "(a)\\1"}}})], "backtracking"),
    "lookahead in patternProperties": ([tool({"patternProperties": {"(?=a)": {}}})], "backtracking"),
    "pattern a list": ([tool({"properties": {"a": {"pattern": ["a"]}}})], "a pattern is a string"),
    "invalid keyword value": ([tool({"properties": {"a": {"minimum": "x"}}})], "not valid JSON Schema"),
    "not a list": ({"name": "t"}, "expected a JSON list"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_tool_file_that_cannot_be_used_is_refused_with_the_reason(case):
    tools, reason = REFUSED[case]
    with pytest.raises(ToolSchemaError, match=re.escape(reason)):
        check_tools(tools)


def test_recursive_and_boolean_schemas_are_used_not_refused():
    node = {"properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                         "items": {"$ref": "#/$defs/node"}}}}}}
    tools = check_tools([tool(node), tool({"properties": {"any": True, "none": False}}, "b")])
    assert list(tools) == ["t", "b"]
    typed = type_arguments({"node": {"kids": [{"kids": '[{"kids": []}]'}]}}, node)
    assert typed.ok and typed.coerced == ["node.kids[0].kids"]
    typed = type_arguments({"any": [1], "none": 2}, tools["b"]["function"]["parameters"])
    assert typed.arguments == {"any": [1]} and "must be nothing (the schema is false)" in typed.errors[0]


class _Counting(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):  # noqa: N802 -- the name http.server calls
        type(self).hits += 1
        body = b'{"type": "integer"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_remote_ref_is_never_fetched_even_when_typing_directly():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/s.json"
        schema = {"properties": {"a": {"type": "object", "properties": {"b": {"$ref": url}}}}}
        with pytest.raises(ToolSchemaError, match="never fetched"):
            check_tools([tool(schema)])
        typed = type_arguments({"a": {"b": 1}}, schema)  # scenario tools reach typing without check_tools
        assert not typed.ok and "cannot be used" in typed.errors[0]
    finally:
        server.shutdown()
        server.server_close()
    assert _Counting.hits == 0


def test_patterns_never_reach_pythons_backtracking_re(monkeypatch):
    def refuse(*args):
        raise AssertionError("Python's backtracking re.search was used on a schema pattern")

    # jsonschema calls re.search in these modules for pattern, patternProperties and additionalProperties.
    for module in (jsonschema._keywords, jsonschema._utils):
        monkeypatch.setattr(module.re, "search", refuse)
    schema = {"properties": {"a": {"type": "string", "pattern": "^(a+)+$"},
                             "b": {"type": "object", "patternProperties": {"^(x+)+$": {"type": "integer"}},
                                   "additionalProperties": False, "propertyNames": {"pattern": "^(x+)+y?$"}}}}
    check_tools([tool(schema)])
    typed = type_arguments({"a": "a" * 28 + "!", "b": {"xxxx": "1", "xz": 1}}, schema)
    assert typed.errors == [
        f"parameter 'a': '{'a' * 28}!' does not match '^(a+)+$'",
        "parameter 'b': Additional properties are not allowed ('xz' was unexpected)",
        "parameter 'b': 'xz' does not match '^(x+)+y?$'",
    ]
    assert typed.coerced == ["b.xxxx"]  # typed by the patternProperties schema its name matches
    assert type_arguments({"a": "a" * 5000}, schema).ok


@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^[a-z]{2,4}$", r"ab|cd", r"^\d+(\.\d+)?$", r"colou?r", r"x*",
                                     r"\bfoo\b", r"^[^0-9]+$", r"(a|b)*c", r"a{0,3}b", r"^(a|ab)(c|bcd)(d*)$",
                                     r"[\w.-]+@[\w-]+\.\w{2,}", r"^.$", r"a.*?b", r"(x+x+)+y"])
def test_the_safe_matcher_agrees_with_re_where_both_answer(pattern):
    for text in ["", "a", "aa", "aaaa!", "abc", "cd", "12.5", "12.", "colour", "foo bar", "xfoo", "Paris",
                 "a@b.co", "ab", "abcd", "xxxxy", "aaab", "Zürich"]:
        assert safe_regex.search(pattern, text) == bool(re.search(pattern, text)), (pattern, text)


def test_the_safe_matcher_bounds_its_own_size():
    with pytest.raises(safe_regex.UnsafePattern, match="states"):
        safe_regex.compile_pattern("(a{100}){200}")
    with pytest.raises(safe_regex.UnsafePattern, match="inline flags"):
        safe_regex.compile_pattern("(?i)abc")
