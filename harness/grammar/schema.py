"""JSON Schema → grammar expressions, in the value syntaxes tool calls are written in.

What a small model most often gets wrong is what the grammar pins down: enum values become literal
alternatives, integers/numbers/booleans/null their literal syntax, objects their keys in the schema's property
order (required ones always, optional ones may be left out), arrays their item schema. Free strings stay "any
string" of the syntax (constraining them more makes the grammar large and buys nothing).

Syntaxes (dialects): JSON; Python literals (LFM2's `[name(key=value)]` calls); Gemma 4's call language
(`{key:<|"|>text<|"|>}`, keys sorted as its template writes them); MiniMax-M3's nested elements. Markup families
that write each argument as text (`<parameter=K>V</parameter>`) use `text_variants`, which types a value by
the schema and says which kind each variant is (DSML's and Kimi K3's markup carry that kind in an attribute).

Not expressed (the grammar is then looser than the schema, never stricter than the parser): string patterns
and formats, numeric ranges (except that `minimum >= 0` drops the minus sign), maxItems, additionalProperties
(extra keys are never generated), multipleOf, not/if/then."""

from __future__ import annotations

import json

from harness.grammar.gbnf import (
    EMPTY, JSON_SPACE, Alt, Expr, Lit, Raw, Ref, RuleSet, alt, seq, text_without,
)

HEX4 = "[0-9a-fA-F]{4}"
_DIGITS = '("0" | [1-9] [0-9]{0,15})'
_FRACTION = '("." [0-9]{1,16})?'
_EXPONENT = '([eE] [-+]? [0-9]{1,3})?'
INTEGER = Raw('"-"? ' + _DIGITS, r"-?(?:0|[1-9][0-9]{0,15})")
NATURAL = Raw(_DIGITS, r"(?:0|[1-9][0-9]{0,15})")
NUMBER = Raw(f'"-"? {_DIGITS} {_FRACTION} {_EXPONENT}')
NON_NEGATIVE_NUMBER = Raw(f"{_DIGITS} {_FRACTION} {_EXPONENT}")
BOOLEAN = Alt((Lit("true"), Lit("false")))
GEMMA_QUOTE = '<|"|>'
MINIMAX_NS = "]<]minimax[>["


def ordered(rules: RuleSet, items: list, sep: Expr, hint: str) -> Expr:
    """The members `items` [(expr, required)] in their order, any optional ones left out, `sep` between two.

    from_i is "members i.. when none is written yet", tail_i "members i.. after one was written"; one rule per
    member keeps the grammar linear in the number of members."""
    if all(required for _, required in items):
        out = []
        for i, (expr, _) in enumerate(items):
            out.extend([sep, expr] if i else [expr])
        return seq(*out) if out else EMPTY
    n = len(items)
    tails = [EMPTY] * (n + 1)
    froms = [EMPTY] * (n + 1)
    for i in range(n - 1, -1, -1):
        expr, required = items[i]
        after = seq(sep, expr, tails[i + 1])
        tails[i] = rules.define(f"{hint}-tail-{i}", after if required else alt(after, tails[i + 1]))
        first = seq(expr, tails[i + 1])
        froms[i] = rules.define(f"{hint}-from-{i}", first if required else alt(first, froms[i + 1]))
    return froms[0]


def kind_of(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class Schemas:
    """Resolves $ref, allOf and nullable, and lists a schema's alternatives (anyOf, type lists, enum)."""

    def __init__(self, root: dict):
        self.root = root

    def resolve(self, schema) -> dict:
        if not isinstance(schema, dict):
            return {}
        seen = 0
        while "$ref" in schema and seen < 32:
            schema = {**self._lookup(schema["$ref"]), **{k: v for k, v in schema.items() if k != "$ref"}}
            seen += 1
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self.resolve(part)
                for key, value in part.items():
                    if key == "properties":
                        merged["properties"] = {**merged.get("properties", {}), **value}
                    elif key == "required":
                        merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                    else:
                        merged.setdefault(key, value)
            schema = merged
        return schema

    def _lookup(self, ref: str) -> dict:
        if not ref.startswith("#/"):
            return {}
        node = self.root
        for part in ref[2:].split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
        return node if isinstance(node, dict) else {}

    def choices(self, schema) -> list:
        """(kind, detail) alternatives: ("literal", value), ("type", name, schema) or ("any", schema)."""
        schema = self.resolve(schema)
        if "const" in schema:
            return [("literal", schema["const"])]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return [("literal", v) for v in schema["enum"]]
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                base = {k: v for k, v in schema.items() if k != key}
                return [c for option in schema[key] for c in self.choices({**base, **self.resolve(option)})]
        kinds = schema.get("type")
        if kinds is None and "properties" in schema:
            kinds = "object"
        if kinds is None:
            return [("any", schema)]
        kinds = list(kinds) if isinstance(kinds, list) else [kinds]
        if schema.get("nullable") and "null" not in kinds:
            kinds.append("null")
        return [("type", k, schema) for k in kinds]


class Values:
    """Values of one syntax. Subclasses change how strings, keys, literals and separators are written."""

    space = JSON_SPACE
    key_order_sorted = False
    prefix = "json"  # names the shared rules of this syntax (any value, any object)

    def __init__(self, rules: RuleSet, root_schema: dict | None = None):
        self.rules = rules
        self.schemas = Schemas(root_schema or {})
        self._refs: dict[str, str] = {}

    # syntax pieces, JSON by default
    def string(self) -> Expr:
        char = self.rules.define("json-char", Raw(f'[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" {HEX4})'))
        return self.rules.define("json-string", Raw(f'"\\"" {char.name}* "\\""'))

    def literal(self, value) -> Expr:
        return Lit(json.dumps(value, ensure_ascii=False))

    def key(self, name: str) -> Expr:
        return Lit(json.dumps(name, ensure_ascii=False))

    def member(self, key: Expr, value: Expr) -> Expr:
        return seq(key, Lit(":"), self.space, value)

    def separator(self) -> Expr:
        return seq(Lit(","), self.space)

    def enclose(self, open_: str, body: Expr, close: str) -> Expr:
        return seq(Lit(open_), self.space, body, self.space, Lit(close))

    def boolean(self) -> Expr:
        return BOOLEAN

    def null(self) -> Expr | None:
        return Lit("null")

    # structure
    def value(self, schema, hint: str) -> Expr:
        schema = self.schemas.resolve(schema) if isinstance(schema, dict) else {}
        options = [self._choice(c, hint) for c in self.schemas.choices(schema)]
        options = [o for o in options if o is not None]
        return alt(*options) if options else self.any()

    def _choice(self, choice, hint) -> Expr | None:
        if choice[0] == "literal":
            return self.literal(choice[1])
        if choice[0] == "any":
            return self.any()
        _, kind, schema = choice
        if kind == "string":
            return self.string()
        if kind == "integer":
            return NATURAL if _non_negative(schema) else INTEGER
        if kind == "number":
            return NON_NEGATIVE_NUMBER if _non_negative(schema) else NUMBER
        if kind == "boolean":
            return self.boolean()
        if kind == "null":
            return self.null()
        if kind == "object":
            return self.object(schema, hint)
        if kind == "array":
            return self.array(schema, hint)
        return self.any()

    def object(self, schema, hint: str) -> Expr:
        props = schema.get("properties")
        if not isinstance(props, dict):
            if schema.get("additionalProperties") is False:
                return self.enclose("{", EMPTY, "}")
            return self.any_object()
        required = set(schema.get("required") or [])
        names = sorted(props) if self.key_order_sorted else list(props)
        items = []
        for name in names:
            value = self.value(props[name], f"{hint}-{name}")
            member = self.rules.define(f"{hint}-{name}-kv", self.member(self.key(name), value))
            items.append((member, name in required))
        return self.rules.define(hint, self.enclose("{", ordered(self.rules, items, self.separator(), hint), "}"))

    def array(self, schema, hint: str) -> Expr:
        items = schema.get("items")
        if isinstance(items, list):  # draft-4 tuple form: any of the listed item schemas
            item = alt(*(self.value(s, f"{hint}-item") for s in items)) if items else self.any()
        else:
            item = self.value(items, f"{hint}-item") if isinstance(items, dict) and items else self.any()
        item = self.rules.define(f"{hint}-item", item) if not isinstance(item, (Ref, Lit)) else item
        more = Raw(f"({self.rules.render(self.separator())} {self.rules.render(item, inner=True)})*")
        listed = seq(item, more)
        body = listed if (schema.get("minItems") or 0) >= 1 else alt(listed, EMPTY)
        return self.rules.define(f"{hint}-array", self.enclose("[", body, "]"))

    def any(self) -> Expr:
        name = f"{self.prefix}-value"
        if name not in self.rules.rules:
            self.rules.reserve(name)
            obj = self.any_object()
            value = Ref(name)
            items = seq(value, Raw(f"({self.rules.render(self.separator())} {name})*"))
            arr = self.enclose("[", alt(items, EMPTY), "]")
            options = [obj, arr, self.string(), NUMBER, self.boolean(), self.null()]
            self.rules.fill(name, alt(*(o for o in options if o is not None)))
        return Ref(name)

    def any_object(self) -> Expr:
        name = f"{self.prefix}-object"
        if name not in self.rules.rules:
            self.rules.reserve(name)
            value = self.any()
            pair = self.member(self.string(), value)
            rendered = self.rules.render(pair, inner=True)
            body = alt(seq(pair, Raw(f"({self.rules.render(self.separator())} {rendered})*")), EMPTY)
            self.rules.fill(name, self.enclose("{", body, "}"))
        return Ref(name)


def _non_negative(schema) -> bool:
    for key in ("minimum", "exclusiveMinimum"):
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound >= 0:
            return True
    return False


class PythonValues(Values):
    """Python literals as ast.literal_eval reads them: either quote style, True/False/None."""

    def string(self) -> Expr:
        dq = self.rules.define("py-dq-char", Raw(f'[^"\\\\\\x00-\\x1F] | "\\\\" (["\\\\\'bfnrt] | "u" {HEX4})'))
        sq = self.rules.define("py-sq-char", Raw(f'[^\'\\\\\\x00-\\x1F] | "\\\\" (["\\\\\'bfnrt] | "u" {HEX4})'))
        return self.rules.define("py-string", Raw(f'"\\"" {dq.name}* "\\"" | "\'" {sq.name}* "\'"'))

    def literal(self, value) -> Expr:
        if isinstance(value, str):
            return alt(Lit(json.dumps(value, ensure_ascii=False)), Lit(repr(value)))
        return Lit(repr(value))

    def key(self, name: str) -> Expr:
        return self.literal(name)

    def boolean(self) -> Expr:
        return Alt((Lit("True"), Lit("False")))

    def null(self) -> Expr:
        return Lit("None")

    def any(self) -> Expr:
        name = "py-value"
        if name not in self.rules.rules:
            self.rules.reserve(name)
            value = Ref(name)
            sep = self.rules.render(self.separator())
            arr = self.enclose("[", alt(seq(value, Raw(f"({sep} {name})*")), EMPTY), "]")
            pair = self.rules.render(self.member(self.string(), value), inner=True)
            obj = self.enclose("{", alt(seq(self.member(self.string(), value), Raw(f"({sep} {pair})*")), EMPTY), "}")
            self.rules.fill(name, alt(obj, arr, self.string(), NUMBER, self.boolean(), self.null()))
        return Ref(name)

    def any_object(self) -> Expr:
        return self.any()


class GemmaValues(Values):
    """Gemma 4's call language: <|"|>-delimited strings, bare keys in sorted order, no whitespace, None for null."""

    space = EMPTY
    key_order_sorted = True

    def string(self) -> Expr:
        text = text_without(self.rules, GEMMA_QUOTE, [GEMMA_QUOTE], "gemma-text")
        return self.rules.define("gemma-string", seq(Lit(GEMMA_QUOTE), text, Lit(GEMMA_QUOTE)))

    def literal(self, value) -> Expr:
        if isinstance(value, str):
            return Lit(f"{GEMMA_QUOTE}{value}{GEMMA_QUOTE}")
        if isinstance(value, bool):
            return Lit("true" if value else "false")
        if value is None:
            return self.null()
        if isinstance(value, (int, float)):
            return Lit(json.dumps(value))
        return self.any()

    def key(self, name: str) -> Expr:
        return Lit(name)

    def null(self) -> Expr:
        return Lit("None")

    def any(self) -> Expr:
        name = "gemma-value"
        if name not in self.rules.rules:
            self.rules.reserve(name)
            value = Ref(name)
            key = Raw("[A-Za-z_] [A-Za-z0-9_]*")
            pair = seq(key, Lit(":"), value)
            more_pairs = Raw(f'("," {self.rules.render(pair, inner=True)})*')
            obj = seq(Lit("{"), alt(seq(pair, more_pairs), EMPTY), Lit("}"))
            arr = seq(Lit("["), alt(seq(value, Raw(f'("," {name})*')), EMPTY), Lit("]"))
            self.rules.fill(name, alt(self.string(), obj, arr, NUMBER, BOOLEAN, self.null()))
        return Ref(name)

    def any_object(self) -> Expr:
        return self.any()


class MinimaxValues(Values):
    """MiniMax-M3's nested values: an object is one NS<key>…NS</key> element per property, an array one
    NS<item>…NS</item> element per item, a leaf its text (strings as is, numbers and booleans as JSON)."""

    space = EMPTY

    def element(self, key: str, value: Expr) -> Expr:
        return seq(Lit(f"{MINIMAX_NS}<{key}>"), value, Lit(f"{MINIMAX_NS}</{key}>"))

    def string(self) -> Expr:
        return text_without(self.rules, MINIMAX_NS, [MINIMAX_NS], "minimax-text")

    def literal(self, value) -> Expr:
        if isinstance(value, str):
            return Lit(value)
        return Lit(json.dumps(value, ensure_ascii=False))

    def object(self, schema, hint: str) -> Expr:
        props = schema.get("properties")
        if not isinstance(props, dict):
            return self.any()
        required = set(schema.get("required") or [])
        items = [(self.element(k, self.value(v, f"{hint}-{k}")), k in required) for k, v in props.items()]
        return self.rules.define(hint, ordered(self.rules, items, EMPTY, hint))

    def array(self, schema, hint: str) -> Expr:
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        item = self.rules.define(f"{hint}-item", self.element("item", self.value(items, f"{hint}-item")))
        return self.rules.define(f"{hint}-array", Raw(f"{item.name}*"))

    def any(self) -> Expr:
        # An untyped value is written as text; nested structure is not guessed.
        return self.string()


def text_variants(schemas: Schemas, nested: Values, schema, text: Expr, hint: str) -> list:
    """A markup argument's value, written as text: [(kind, expr)], kind being the JSON type it holds.

    `text` is the family's free-text rule (text up to its closing markup); `nested` writes objects, arrays and
    untyped values (JSON for most families)."""
    out = []
    for choice in schemas.choices(schema):
        if choice[0] == "literal":
            value = choice[1]
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            out.append((kind_of(value), Lit(shown)))
        elif choice[0] == "any":
            out += [("string", text), ("any", nested.any())]
        else:
            _, kind, sub = choice
            if kind == "string":
                out.append(("string", text))
            elif kind == "integer":
                out.append(("integer", NATURAL if _non_negative(sub) else INTEGER))
            elif kind == "number":
                out.append(("number", NON_NEGATIVE_NUMBER if _non_negative(sub) else NUMBER))
            elif kind == "boolean":
                out.append(("boolean", BOOLEAN))
            elif kind == "null":
                out.append(("null", Lit("null")))
            elif kind in ("object", "array"):
                out.append((kind, nested.value(sub, hint)))
            else:
                out.append(("any", nested.any()))
    return out
