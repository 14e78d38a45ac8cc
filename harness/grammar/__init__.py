"""Tool-call grammars: a GBNF grammar from the offered tools' JSON schemas, in a family's own call shape, so that
sampling can only write a plain answer or a valid call of that family (only a call, with tool_choice "required").

    spec = build_grammar("hermes", tools, tool_choice="auto")
    spec.gbnf              # GBNF text, root rule "root"
    spec.lazy              # False: "auto" holds from the first token (lazy=True: from a trigger on)
    spec.openings          # "auto": what a plain answer may not start with (harness.grammar.answer)
    spec.answer_excludes   # "auto": what a plain answer may not hold anywhere (calls in another shape)
    spec.trigger_patterns  # lazy only: what llama_sampler_init_grammar_lazy_patterns takes
    spec.triggers          # lazy only: the words those patterns look for
    spec.family            # whose call shape the grammar imposes; harness.families.parse(spec.family, reply)
                           # reads the reply

"auto" from the first token: the reply is the family's call (marker included), or a plain answer that does
not open like a call (no leading brace, bracket, code fence, the family's trigger words or reasoning tag, or
another family's marker) and holds no call in a JSON dialect anywhere (harness.grammar.answer), which may go on
to the family's call where the family lets text come first. A model that writes its calls without its marker
is constrained from its first token: a lazy grammar would wait for a marker it never writes. A reasoning block
may open the reply only where the model's template knows the family's reasoning tag (`template=`): a model
refused its first word would otherwise take `<think>` as the way out of the call. lazy=True keeps the older
lazy grammar (unconstrained until a trigger word); the lazy-trigger design (harness.grammar.lazy) adds to it
llama.cpp's start-of-reply trigger on a fenced or bare JSON call object.

Families: every YAML family gets its grammar from its own pattern; a Python family from the shape its module
declares; a family with no tool format (None) or a Python family without a shape gets the generic JSON
call-or-answer shape, family "generic-json": the whole reply is {"name": ..., "arguments": {...}} or
{"response": "..."}, from the first token on (harness/grammar/generic.py; not lazy: no marker announces a call).
generic-json is a registered family (harness/families/generic-json.yaml), not detectable: no template writes it
(harness/families/README.md, "Grammar shapes").

Lazy grammars and llama.cpp. When a trigger pattern matches, llama.cpp feeds the text from the trigger to the
end of the current token into the grammar; if the grammar rejects that text it throws a C++ exception through
the C API and the process aborts (it cannot be caught in Python). Every pattern built here therefore matches
only when that text is a prefix the grammar accepts, and fires on the word at the end of a token or followed
by the start of the call, never by arbitrary text. GrammarRuntimeError (harness.core.errors) is what a generation
raises when grammar sampling fails inside the runtime: the tool loop retries once unconstrained."""

from __future__ import annotations

from dataclasses import dataclass

from harness import families as registry
from harness.core.errors import GrammarError, GrammarRuntimeError
from harness.formats.base import Family
from harness.formats.reasoning import prompt_opens
from harness.grammar.answer import CALL_SHAPED, OPENERS, answer_text
from harness.grammar.builder import CallGrammar, tool_list
from harness.grammar.gbnf import PATTERN_SPACE, Lit, Opt, RuleSet, alt, seq, text_without
from harness.grammar.generic import answer_grammar
from harness.grammar.shapes import shape_for

__all__ = ["GENERIC", "TOOL_CHOICES", "ANSWER_RULES", "GrammarSpec", "GrammarError", "GrammarRuntimeError", "build_grammar"]

# The family whose shape is imposed where a family has none (or there is no family).
GENERIC = "generic-json"
TOOL_CHOICES = ("auto", "required")


@dataclass(frozen=True)
class GrammarSpec:
    family: str
    gbnf: str
    triggers: tuple = ()
    trigger_patterns: tuple = ()
    tool_choice: str = "auto"
    # The family asked for (None: the template has no tool format); differs from `family` on a fallback.
    requested: str | None = None
    root: str = "root"
    note: str = ""
    # The family's reasoning blocks ((open, close) pairs). GrammarGate fires no trigger inside one that opens
    # the reply, and applies the ^-anchored patterns after it (a whole-reply call after `<think>…</think>`);
    # llama.cpp's own lazy sampler cannot do either safely.
    reasoning: tuple = ()
    # A grammar that is not lazy but lets a reasoning block open the reply names, per reasoning pair, the root
    # to use when the prompt already opened that block ((open tag, rule name) pairs; see root_for).
    opened_roots: tuple = ()
    # "auto" from the first token: what a plain answer may not open with, and may not hold anywhere.
    openings: tuple = ()
    answer_excludes: tuple = ()
    # Lazy: the trigger words that open a call in another spelling than the family's own (the lazy-trigger
    # design's fenced or bare JSON call object, harness.grammar.lazy); a call held from one of them is a
    # near miss to the family's strict parser, and is counted apart from the family's own calls.
    held_triggers: tuple = ()

    @property
    def lazy(self) -> bool:
        return bool(self.trigger_patterns)

    def root_for(self, prompt: str) -> str:
        """The root rule for a reply to `prompt`: inside the reasoning block the prompt opened, if any."""
        for open_tag, root in self.opened_roots:
            if prompt_opens(prompt, open_tag):
                return root
        return self.root

    def trigger_word(self, text: str, offset: int | None) -> str | None:
        """The trigger word a lazy grammar took over at: the longest of `triggers` that `text` holds at
        `offset` (a character offset, as a step records it); None where no grammar took over."""
        if offset is None or not self.lazy:
            return None
        found = [w for w in self.triggers if text.startswith(w, offset)]
        return max(found, key=len) if found else None

    def to_json(self) -> dict:
        return {"family": self.family, "requested": self.requested, "tool_choice": self.tool_choice,
                "lazy": self.lazy, "triggers": list(self.triggers), "trigger_patterns": list(self.trigger_patterns),
                "reasoning": [list(p) for p in self.reasoning], "openings": list(self.openings),
                "answer_excludes": list(self.answer_excludes), "held_triggers": list(self.held_triggers),
                "note": self.note, "gbnf": self.gbnf}


# What the plain answer of an "auto" grammar may not hold anywhere: the call shapes the strict parsers name
# (CALL_SHAPED, a list of spellings), or no brace at all: a model refused one spelling samples the next one no
# list names ("name " with a blank, doubled braces, mixed quotes), while every call object opens with a brace.
ANSWER_RULES = ("refusal-list", "no-brace")
# How the generic JSON shape answers under "auto": the answer object {"response": ...}, plain text, or either
# ("object-or-text": then the text holds no brace at all, so every JSON object a reply holds is a call or the
# answer object and a call cannot hide in prose under a spelling no list names).
GENERIC_ANSWERS = ("object", "text", "object-or-text")


def build_grammar(family: str | None, tools: list, tool_choice: str = "auto", *, lazy: bool = False,
                  template: str | None = None, answer: str = "refusal-list",
                  generic_answer: str = "object") -> GrammarSpec:
    """The grammar of a call of `family` (None: no tool format) to one of `tools` (OpenAI-style tool dicts or
    bare functions with name/parameters). tool_choice "auto": a call or a plain answer from the first token
    (lazy=True: plain text, or text then a call, constrained only from a trigger word on); "required": a call
    and nothing else. template: the model's chat template; where it holds the family's reasoning tag, the
    reply may open with a reasoning block. answer: what the plain answer may not hold (ANSWER_RULES).
    generic_answer: how the generic JSON shape answers under "auto" (GENERIC_ANSWERS): the answer object
    {"response": ...}, plain text that opens like no call and holds no call spelling, or either of them
    ("object-or-text", the text then holding no brace)."""
    if tool_choice not in TOOL_CHOICES:
        raise GrammarError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, not {tool_choice!r}")
    if answer not in ANSWER_RULES:
        raise GrammarError(f"answer rule must be one of {', '.join(ANSWER_RULES)}, not {answer!r}")
    if generic_answer not in GENERIC_ANSWERS:
        raise GrammarError(f"generic answer must be one of {', '.join(GENERIC_ANSWERS)}, not {generic_answer!r}")
    tools = tool_list(tools)
    if family is None:
        return _build_generic(tools, tool_choice, None, "the template has no tool-call format", generic_answer)
    fam = registry.get(family)
    if fam.name == GENERIC:
        return _build_generic(tools, tool_choice, family, "", generic_answer)
    shape = shape_for(fam)
    if shape is None:
        why = f"{family}'s call format has no grammar shape (custom parser); the generic JSON shape is imposed"
        return _build_generic(tools, tool_choice, family, why)
    thinks = tuple(p for p in shape.reasoning if template and p[0] in template)
    try:
        return _build(fam, shape, tools, tool_choice, family, shape.note, lazy, thinks, answer)
    except GrammarError as exc:
        why = f"{family}'s pattern cannot be made a grammar ({exc}); the generic JSON shape is imposed"
        return _build_generic(tools, tool_choice, family, why)


def _build_generic(tools, tool_choice, requested, note, generic_answer="object") -> GrammarSpec:
    """generic-json: "required" is the call; "auto" is the call or the answer from the first token on: the
    answer object, or ("text") plain text held to the plain answer's rules (harness.grammar.answer): it opens
    with no brace, bracket, fence or family marker and holds no call spelling, so a model that wants to call
    has the bare object as its only way, and one that wants to answer answers as it would without a grammar.
    A reasoning block the reply would open itself is not offered: a model refused its first word would take
    `<think>` as the way out of the JSON (a stand-in did exactly that)."""
    shape = shape_for(registry.get(GENERIC))
    grammar = CallGrammar(shape, tools, RuleSet())
    body = grammar.calls()
    held = ((), ())
    if tool_choice == "auto" and generic_answer != "object":
        # A model that opens with a brace after a tool result (the JSON it just read) may still answer, in the
        # answer object; its text then needs no refusal list: no brace at all.
        both = generic_answer == "object-or-text"
        held = (tuple(dict.fromkeys([*OPENERS, *_foreign(registry.get(GENERIC))])), ("{",) if both else CALL_SHAPED)
        body = alt(body, answer_text(grammar.rules, *held))
        if both:
            body = alt(body, answer_grammar(grammar.rules, shape.answer_key))
    elif tool_choice == "auto":
        body = alt(body, answer_grammar(grammar.rules, shape.answer_key))
    return _whole(GENERIC, grammar, shape, body, tool_choice, requested, note, answer=held)


def _whole(family: str, grammar: CallGrammar, shape, body, tool_choice, requested, note, thinks=(),
           answer=((), ())) -> GrammarSpec:
    """A grammar that holds from the first token. Where the prompt opened a reasoning block (a distill's
    generation prompt ends in `<think>`), the block is free text up to its close, then `body`: root_for picks
    that root, so a model that must think first still can. `thinks`: the reasoning pairs whose block the reply
    may open itself (its template knows them), ahead of `body`."""
    rules, opened, blocks = grammar.rules, [], []
    for open_tag, close_tag in shape.reasoning:
        thought = seq(text_without(rules, close_tag, [close_tag], "reasoning-text"), Lit(close_tag), PATTERN_SPACE)
        opened.append((open_tag, rules.define(f"root-in-{open_tag}", seq(thought, body)).name))
        if (open_tag, close_tag) in thinks:
            blocks.append(seq(Lit(open_tag), thought))
    if blocks:
        body = seq(Opt(alt(*blocks)), body)
    return GrammarSpec(family, rules.text(body), tool_choice=tool_choice, requested=requested, note=note,
                       reasoning=tuple(tuple(p) for p in shape.reasoning), opened_roots=tuple(opened),
                       openings=tuple(answer[0]), answer_excludes=tuple(answer[1]))


def _build(fam: Family, shape, tools, tool_choice, requested, note, lazy=False, thinks=(),
           answer_rule="refusal-list") -> GrammarSpec:
    grammar = CallGrammar(shape, tools, RuleSet())
    calls = grammar.calls()
    names = [n for n, _ in tools]
    if tool_choice == "required":
        return _whole(fam.name, grammar, shape, seq(grammar.lead(), calls), tool_choice, requested, note, thinks)
    anywhere, at_start = family_triggers(fam, shape, names)
    later = seq(grammar.render(shape.lazy_lead), calls) if shape.lazy_lead else calls
    if not lazy:
        # A reasoning tag is no way out of the call either: a block the template knows is written through
        # its own rule (_whole), after which the answer is held to the same openings.
        foreign = _foreign(fam)
        openings = tuple(dict.fromkeys([*OPENERS, *anywhere, *at_start, *(o for o, _ in shape.reasoning), *foreign]))
        # Anywhere in the answer: the family's own trigger words and calls in a JSON dialect. (Another family's
        # marker is refused as an opening only: every marker of every family in every state of the text would
        # make the grammar five times larger and each refused token's mask as much slower.)
        held = tuple(dict.fromkeys([*anywhere, *(CALL_SHAPED if answer_rule == "refusal-list" else ("{",))]))
        answer = answer_text(grammar.rules, openings, held)
        if anywhere:  # text before a call, as the family writes it: the call from its trigger word on
            answer = seq(answer, Opt(later))
        # Blanks before the call as before an answer: whitespace decides neither.
        body = alt(seq(PATTERN_SPACE, grammar.lead(), calls), answer)
        return _whole(fam.name, grammar, shape, body, tool_choice, requested, note, thinks, (openings, held))
    words, patterns = grammar.trigger_patterns(later, anywhere, at_start)
    if not patterns:
        raise GrammarError(f"{fam.name}: none of the trigger words {anywhere + at_start} opens the call grammar")
    return GrammarSpec(fam.name, grammar.rules.text(later), tuple(words), tuple(patterns), tool_choice,
                       requested, note=note, reasoning=tuple(tuple(p) for p in shape.reasoning))


def family_triggers(fam: Family, shape, names) -> tuple[list, list]:
    """(words anywhere, words at the start of the reply) that open `fam`'s call: its markers (at the start only
    for a family whose call is the whole reply), or the words its shape names, one per offered tool where a
    word holds {name}."""
    if shape.start_only:
        anywhere, at_start = [], list(fam.markers)
    else:
        anywhere, at_start = list(fam.markers), []
    if shape.triggers is not None:
        anywhere = _words(shape.triggers, names)
    if shape.start_triggers is not None:
        at_start = _words(shape.start_triggers, names)
    return anywhere, at_start


def _foreign(fam: Family) -> list:
    """Every other family's markers except those `fam` itself uses (Harmony's answer opens with its own
    `<|channel|>`; only its call's `<|channel|>commentary to=functions.` is refused), as its parser names a
    foreign marker in a reply."""
    own = set(fam.markers)
    return [m for name in registry.names() if name not in (fam.name, GENERIC)
            for m in registry.get(name).markers if m not in own]


def _words(templates, names) -> list:
    """Trigger words from a shape's templates: one per offered tool where the template holds {name}."""
    return [w for t in templates for w in ([t.replace("{name}", n) for n in names] if "{name}" in t else [t])]
