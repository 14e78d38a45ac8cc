"""A shape plus the offered tools → the grammar of a family's calls, and the lazy triggers that switch it on.

The calls expression (E) is the family's whole call section for these tools: every function name is a literal
bound to its own arguments grammar, so a call of one tool never carries another's arguments. With
tool_choice "required" the grammar is E (after the family's fixed lead, if any) from the first token on. With
"auto" it is lazy: unconstrained until a trigger, E from the trigger on (llama.cpp replays the text from the
trigger into the grammar, so E starts exactly where a trigger starts)."""

from __future__ import annotations

import re

from harness.schema.arguments import tool_parameters
from harness.formats.shape import Shape
from harness.core.errors import GrammarError
from harness.grammar.gbnf import (
    EMPTY, JSON_SPACE, PATTERN_SPACE, Alt, Expr, Lit, Opt, Raw, Ref, RuleSet, alt, regex_escape, seq, text_without,
)
from harness.grammar.schema import (
    GemmaValues, MinimaxValues, PythonValues, Schemas, Values, ordered, text_variants,
)

CALL_ID = Raw("[A-Za-z0-9_-]{1,40}", r"[A-Za-z0-9_\-]{1,40}")
CALL_INDEX = Raw("[0-9]{1,3}", r"[0-9]{1,3}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_LEADING_SPACE = r"[ \t\r\n]*"


def tool_list(tools) -> list:
    """[(name, parameters schema)] from OpenAI-style tools or bare functions; names must be identifiers."""
    if not isinstance(tools, (list, tuple)) or not tools:
        raise GrammarError("a tool-call grammar needs a non-empty list of tools")
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise GrammarError(f"tool {i} has no usable name (an identifier is needed): {tool!r:.120}")
        params = tool_parameters(tool)
        if not isinstance(params, dict):
            raise GrammarError(f"tool {name!r}: parameters must be a JSON schema object")
        out.append((name, params))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise GrammarError(f"tool names must be unique: {names}")
    return out


class CallGrammar:
    def __init__(self, shape: Shape, tools: list, rules: RuleSet | None = None):
        self.shape = shape
        self.tools = tools
        self.rules = rules or RuleSet()

    # -- the calls expression ---------------------------------------------------------------------------

    def calls(self) -> Expr:
        shape = self.shape
        call = self._call_rule()
        all_in_one = any(t == ("ph", p) for t in shape.call for p in ("array", "pycalls"))
        if shape.multiple and not all_in_one:
            between = self.rules.render(self._tokens(shape.between, None), inner=True)
            calls = seq(call, Raw(f"({between} {call.name})*"))
        else:
            calls = call
        opening = self._tokens(shape.section_open, None) if shape.section_open else None
        if opening is not None and shape.section_optional:
            opening = Opt(opening)
        closing = self._tokens(shape.section_close, None) if shape.section_close else None
        return seq(opening, calls, closing)

    def lead(self) -> Expr | None:
        if not self.shape.lead:
            return None
        parts = []
        for kind, value in self.shape.lead:
            if kind == "opt":
                parts.append(Opt(self._tokens(value, None)))
            elif kind == "text":
                parts.append(text_without(self.rules, value, [value], "lead-text"))
            else:
                parts.append(Lit(value))
        return seq(*parts)

    def render(self, tokens) -> Expr:
        """Fixed tokens (no call placeholders) as an expression."""
        return self._tokens(tokens, None)

    def _call_rule(self) -> Ref:
        per_tool = any(t == ("ph", p) for t in self.shape.call for p in ("name", "arguments", "params"))
        if per_tool:
            options = [self.rules.define(f"{name}-call", self._tokens(self.shape.call, (name, params)))
                       for name, params in self.tools]
            return self.rules.define("call", alt(*options))
        return self.rules.define("call", self._tokens(self.shape.call, None))

    def _tokens(self, tokens, tool, param=None) -> Expr:
        parts = []
        for kind, value in tokens:
            if kind == "lit":
                parts.append(Lit(value))
            elif kind == "ws":
                parts.append(PATTERN_SPACE)
            elif kind == "nl":
                parts.append(Opt(Lit("\n")))
            else:
                parts.append(self._placeholder(value, tool, param))
        return seq(*parts) if parts else EMPTY

    def _placeholder(self, name, tool, param) -> Expr:
        if name == "name":
            return Lit(tool[0])
        if name == "arguments":
            return self._arguments(tool)
        if name == "params":
            return self._params(tool)
        if name == "object":
            return self._call_objects()
        if name == "array":
            obj = self._call_objects()
            space = self.rules.render(JSON_SPACE, inner=True)
            more = Raw(f'("," {space} {obj.name})*') if self.shape.multiple else None
            return seq(Lit("["), JSON_SPACE, obj, more, JSON_SPACE, Lit("]"))
        if name == "pycalls":
            return self._python_calls()
        if name == "id":
            return CALL_ID
        if name == "index":
            return CALL_INDEX
        if name == "key":
            return Lit(self.shape.key_escape(param[0]))
        if name == "kind":
            return Lit(param[2])
        if name == "value":
            return param[1]
        raise GrammarError(f"{self.shape.family}: placeholder {{{name}}} has no grammar")

    # -- payloads ---------------------------------------------------------------------------------------

    def _values(self, params, kind="json") -> Values:
        cls = {"json": Values, "gemma": GemmaValues, "python": PythonValues, "minimax": MinimaxValues}[kind]
        return cls(self.rules, params)

    def _arguments(self, tool) -> Expr:
        name, params = tool
        return self._values(params, self.shape.arguments).object(params, f"{name}-args")

    def _call_objects(self) -> Ref:
        shape = self.shape.object
        options = []
        for name, params in self.tools:
            args = self._values(params).object(params, f"{name}-args")
            sep = seq(Lit(","), JSON_SPACE)
            if shape.shape == "name-to-arguments":
                body = seq(Lit(f'"{name}"'), Lit(":"), JSON_SPACE, args)
            else:
                values = Values(self.rules)
                members = [(seq(values.key(shape.name_key), Lit(":"), JSON_SPACE, Lit(f'"{name}"')), True),
                           (seq(values.key(shape.arguments_key), Lit(":"), JSON_SPACE, args), True)]
                extra = [shape.id_key] if shape.id_key else []
                extra += [k for k in shape.required if k not in extra]
                for key in extra:
                    spec = shape.required.get(key, shape.optional.get(key, "string"))
                    members.append((seq(values.key(key), Lit(":"), JSON_SPACE, self._fixed(spec, values)),
                                    key in shape.required))
                body = ordered(self.rules, members, sep, f"{name}-call-object")
            options.append(self.rules.define(f"{name}-call-object", seq(Lit("{"), JSON_SPACE, body, JSON_SPACE, Lit("}"))))
        return self.rules.define("call-object", alt(*options))

    @staticmethod
    def _fixed(spec, values: Values) -> Expr:
        if spec == "string":
            return values.string()
        if spec == "any":
            return values.any()
        return alt(*(values.literal(v) for v in spec))

    def _python_calls(self) -> Expr:
        options = []
        for name, params in self.tools:
            values = self._values(params, "python")
            props = params.get("properties") or {}
            required = set(params.get("required") or [])
            members = [(self.rules.define(f"{name}-{k}-kwarg", seq(Lit(f"{k}="), values.value(v, f"{name}-{k}"))),
                        k in required) for k, v in props.items()]
            kwargs = ordered(self.rules, members, seq(Lit(","), JSON_SPACE), f"{name}-kwargs")
            options.append(self.rules.define(f"{name}-pycall", seq(Lit(f"{name}("), kwargs, Lit(")"))))
        one = self.rules.define("pycall", alt(*options))
        more = Raw(f'("," {self.rules.render(JSON_SPACE, inner=True)} {one.name})*') if self.shape.multiple else None
        return seq(Lit("["), one, more, Lit("]"))

    def _params(self, tool) -> Expr:
        name, params = tool
        shape = self.shape
        if not shape.param:
            raise GrammarError(f"{shape.family}: a call with {{params}} needs a param pattern")
        stop, continuations = _stop_after_value(shape.param)
        props = params.get("properties") or {}
        required = set(params.get("required") or [])
        schemas = Schemas(params)
        nested = self._nested(params)
        items = []
        for key, schema in props.items():
            hint = f"{name}-{key}"
            text = self._text(stop, continuations)
            variants = text_variants(schemas, nested, schema, text, f"{hint}-value")
            if shape.kinds is not None:
                options = []
                for kind, expr in variants:
                    attribute = shape.kinds.get(kind, shape.kinds.get("*"))
                    if attribute is not None:
                        options.append(self._tokens(shape.param, tool, (key, expr, attribute)))
                rendered = alt(*options)
            else:
                rendered = self._tokens(shape.param, tool, (key, alt(*(e for _, e in variants)), None))
            items.append((self.rules.define(f"{hint}-param", rendered), key in required))
        return ordered(self.rules, items, self._tokens(shape.param_between, tool), f"{name}-params")

    def _text(self, stop, continuations) -> Expr:
        """A markup value's free text, by the shape's named rule (harness.formats.shape.TEXT_RULES)."""
        if self.shape.text == "cdata":
            # Unwrapped text may not hold <, & or a newline; anything else goes in <![CDATA[...]]>.
            plain = Raw("[^<&\\n]*")
            cdata = seq(Lit("<![CDATA["), text_without(self.rules, "]]>", ["]]>"], "cdata-text"), Lit("]]>"))
            return self.rules.define(f"{self.shape.family}-text", Alt((plain, cdata)))
        if self.shape.text == "minimax":
            return MinimaxValues(self.rules).string()
        # The parsers refuse a value holding the parameter opener (markup-in-value): so does the grammar.
        opener = next((value for kind, value in self.shape.param if kind == "lit"), None)
        return text_without(self.rules, stop, continuations, f"text-{stop}", (opener,) if opener else ())

    def _nested(self, params) -> Values:
        if self.shape.nested == "minimax":
            return MinimaxValues(self.rules, params)
        values = Values(self.rules, params)
        if self.shape.nested == "cdata-json":
            return _CdataJson(self.rules, params)
        return values

    # -- triggers ---------------------------------------------------------------------------------------

    def trigger_patterns(self, calls: Expr, anywhere, at_start) -> tuple[list, list]:
        """(words kept, ECMAScript patterns). A pattern matches only when the text from the trigger word to
        the end of the latest token is a prefix E accepts (see gbnf's module note for why that matters)."""
        words_kept, patterns = [], []
        for words, start in ((anywhere, False), (at_start, True)):
            words = list(dict.fromkeys(w for w in words if w))
            if not words:
                continue
            budget = max(len(w) for w in words) + 32
            prefix = self.rules.prefix_regex([calls], budget)
            usable = [w for w in words if re.fullmatch(prefix, w)]
            if not usable:
                continue
            words_kept += [w for w in usable if w not in words_kept]
            look = "(?=" + "|".join(regex_escape(w) for w in usable) + ")"
            if start:
                # No reasoning prefix here: `[\\s\\S]*` over the whole reply makes std::regex recurse once per
                # character (a 60k-character reply crashed it). GrammarGate applies these after reasoning itself.
                patterns.append(f"^{_LEADING_SPACE}({look}{prefix})$")
            else:
                patterns.append(f"{look}{prefix}$")
        return words_kept, patterns


class _PlainJson(Values):
    """JSON a MiniCPM 5 value may hold unwrapped: no newline, and strings without < or &."""

    space = Raw('" "?', " ?", closed=True)
    prefix = "plain-json"

    def string(self) -> Expr:
        char = self.rules.define("plain-json-char",
                                 Raw('[^"\\\\<&\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'))
        return self.rules.define("plain-json-string", Raw(f'"\\"" {char.name}* "\\""'))


class _CdataJson(Values):
    """Objects and arrays in a MiniCPM 5 value: plain JSON, or any JSON inside <![CDATA[...]]>."""

    def _either(self, plain: Expr, wrapped: Expr) -> Expr:
        return alt(plain, seq(Lit("<![CDATA["), wrapped, Lit("]]>")))

    def object(self, schema, hint):
        return self._either(_PlainJson(self.rules, self.schemas.root).object(schema, f"{hint}-plain"),
                            Values(self.rules, self.schemas.root).object(schema, hint))

    def array(self, schema, hint):
        return self._either(_PlainJson(self.rules, self.schemas.root).array(schema, f"{hint}-plain"),
                            Values(self.rules, self.schemas.root).array(schema, hint))

    def any(self):
        return self._either(_PlainJson(self.rules, self.schemas.root).any(), Values(self.rules, self.schemas.root).any())


def _stop_after_value(param_tokens) -> tuple[str, list]:
    """The literal a parser reads a {value} up to, and the texts that may follow the value in the grammar."""
    after = param_tokens[[t for t in param_tokens].index(("ph", "value")) + 1 :]
    gap = ""
    for kind, value in after:
        if kind == "lit":
            return value, [value, "\n" + value] if gap else [value]
        if kind == "ph":
            break
        gap = "\n"
    raise GrammarError("a {value} must be followed by a literal (the text that ends the value)")
