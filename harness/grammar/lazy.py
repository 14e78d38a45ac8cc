"""The lazy pattern trigger (grammar variant `lazy-trigger`), as llama.cpp's Hermes 2 Pro handler built it in
2025: the reply is free text until a trigger fires, and from the trigger on the grammar holds the rest of the
reply to a call whose arguments follow the offered tools' schemas. Two kinds of trigger:

- the family's own call markers, anywhere (hermes: `<tool_call>`): the family's own call follows;
- at the start of the reply (after blanks, and after a reasoning block the reply opens with: GrammarGate applies
  ^-anchored patterns there), a JSON object whose first key is `name`: `{`, blanks, `"name`, bare or after a
  code fence of three (or two) backticks, tagged `json` or not. The grammar then holds a JSON call object
  {"name": <an offered tool>, "arguments": {...}} (generic-json's call), closed by the same fence where a fence
  opened it, several objects apart by blanks where the family writes several calls.

llama.cpp's pattern was `(?:```(?:json|xml)?\\n\\s*)?...\\s*\\{\\s*"name"\\s*:\\s*"(?:<tool names>)"` from the
start of the reply. Here the object trigger fires as soon as `"name` is written, before the tool's name: a
name no tool has is then refused, not left free. And, as every trigger built here, it fires only where the text
from the trigger to the end of the latest token is a prefix the grammar accepts (harness.grammar: llama.cpp
aborts on one it refuses), so a spelling the grammar would refuse at once never fires it. Of the spellings seen
in committed replies, these fire: ```` ```json\\n{"name": ````, ```` ``\\n{"name": ````, `{"name": `,
`{\\n  "name": `, and `{"name "` with a blank where the tokenizer ends a token right after `"name` (Qwen2's
does: `{"`, `name`, ` "`; the blank is then refused). These do not, and stay free text the judge reads as near
misses: doubled braces (`{{"name"`), Python quotes (`{'name'`), typographic quotes, a capital `"Name"`, the
nested `{"type": "function", ...}` shape, other keys (`{"function": ...}`), escaped quotes, a fence tagged
otherwise (```` ```python ````), and any object or fence after text (`Here you go: {...}`, `<tools>\\n{...}`).

A call held from a fence or a bare object is not in the family's format (hermes's strict parser reads it as the
near miss fenced-json or bare-json): the spec names those trigger words (`held_triggers`), each step records the
trigger that fired, and the design page counts those calls apart from the family's own. A model without a tool
template gets the generic shape (generic-json), whose own call is the bare object: only a fenced one is held in
another spelling there."""

from __future__ import annotations

from harness import families as registry
from harness.core.errors import GrammarError
from harness.grammar import GENERIC, GrammarSpec, family_triggers
from harness.grammar.builder import _LEADING_SPACE, CallGrammar, tool_list
from harness.grammar.gbnf import PATTERN_SPACE, Lit, Opt, Raw, RuleSet, alt, seq
from harness.grammar.shapes import shape_for

# What must follow the start of the reply for the held call to fire: an optional fence, then `{` and the name
# key's opening (ECMAScript, as llama.cpp's trigger patterns are; GrammarGate reads the same text in Python).
HELD_LOOKAHEAD = r'(?:`{2,3}(?:json)?[ \t\r\n]*)?\{[ \t\r\n]*"name'
FENCES = ("```", "``")
FENCE_TAG = "json"
# The words a held call opens with, as a step records the one that fired (the longest the reply holds there).
FENCE_WORDS = tuple(f + tag for f in FENCES for tag in (FENCE_TAG, ""))
BARE_WORD = "{"
# How far past the start of the held call a trigger regex looks: a fence, its tag, blanks, `{`, blanks, `"name`
# and the rest of the token that completed them.
_BUDGET = 72


def build_lazy_trigger(family: str | None, tools: list) -> GrammarSpec:
    """The lazy-trigger grammar of `family` (None: no tool format) for `tools`: the family's own call from its
    markers on, or the JSON call object from a fence or a bare `{"name` at the start of the reply."""
    tools = tool_list(tools)
    if family is None:
        return _build(None, None, tools, None, "the template has no tool-call format")
    fam = registry.get(family)
    shape = shape_for(fam) if fam.name != GENERIC else None
    if shape is None:
        why = "" if fam.name == GENERIC else (f"{family}'s call format has no grammar shape (custom parser); the "
                                              "generic JSON shape is imposed")
        return _build(None, None, tools, family, why)
    try:
        return _build(fam, shape, tools, family, shape.note)
    except GrammarError as exc:
        why = f"{family}'s pattern cannot be made a grammar ({exc}); the generic JSON shape is imposed"
        return _build(None, None, tools, family, why)


def _build(fam, shape, tools, requested, note) -> GrammarSpec:
    rules = RuleSet()
    held = _held(rules, tools, several=shape is not None and shape.multiple)
    generic_shape = shape_for(registry.get(GENERIC))
    if fam is None:
        root, own, anywhere, at_start = held, GENERIC, [], []
        reasoning = generic_shape.reasoning
        grammar = CallGrammar(generic_shape, tools, rules)
    else:
        grammar = CallGrammar(shape, tools, rules)
        calls = grammar.calls()
        later = seq(grammar.render(shape.lazy_lead), calls) if shape.lazy_lead else calls
        root, own, reasoning = alt(later, held), fam.name, shape.reasoning
        anywhere, at_start = family_triggers(fam, shape, [n for n, _ in tools])
    # Every pattern matches only a prefix of the whole grammar: whichever trigger fires, the text from it is
    # what the grammar is fed.
    words, patterns = grammar.trigger_patterns(root, anywhere, at_start) if anywhere or at_start else ([], [])
    prefix = rules.prefix_regex([root], _BUDGET)
    patterns.append(f"^{_LEADING_SPACE}((?={HELD_LOOKAHEAD}){prefix})$")
    # The bare object is generic-json's own call (and may be a family's own start): held in another spelling only
    # where the family's own triggers do not open with it.
    spelled = [*FENCE_WORDS, *([BARE_WORD] if own != GENERIC and BARE_WORD not in at_start else [])]
    triggers = tuple(dict.fromkeys([*words, *FENCE_WORDS, BARE_WORD]))
    return GrammarSpec(own, rules.text(root), triggers, tuple(patterns), "auto", requested, note=note,
                       reasoning=tuple(tuple(p) for p in reasoning), held_triggers=tuple(spelled))


def _held(rules: RuleSet, tools, several: bool):
    """The JSON call object (several, blanks between, where the family writes several calls), bare or in a
    fence that closes as it opened."""
    one = rules.define("held-call", CallGrammar(shape_for(registry.get(GENERIC)), tools, rules).calls())
    space = rules.render(PATTERN_SPACE, inner=True)
    objects = seq(one, Raw(f"({space} {one.name})*")) if several else one
    objects = rules.define("held-calls", objects)
    fenced = [seq(Lit(f), Opt(Lit(FENCE_TAG)), PATTERN_SPACE, objects, PATTERN_SPACE, Lit(f)) for f in FENCES]
    return rules.define("held", alt(*fenced, objects))
