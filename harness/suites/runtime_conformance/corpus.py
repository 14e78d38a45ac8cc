"""The runtime-conformance corpus: per template, the exact replies a model of its family writes, each with the
conversation it answers and what the strict parser reads in it.

Every reply is written from the template itself: an assistant turn (a call, two calls, content beside a call,
reasoning before one, a plain answer) is rendered through the template and the text after the generation prompt,
cut at the end of turn, is the reply. Near misses are built from those replies (the call unclosed, its JSON bare
or fenced, another family's call by that family's format()). Nothing is a hand-typed call string, so a corpus
follows the template when it changes.

A case names the requests it is asked with (`variants`): tool_choice auto always; required, none and a named
function (the one the reply calls, and another one) for the one-call case; parallel_tool_calls false for the
two-call case; required alone for prose-required (prose where a call is required). Thinking is on only for the
cases that write reasoning (one closes its block before the call, one never does), and only where the template
reads `enable_thinking`; a template that renders reasoning without a switch (Harmony's analysis channel) gets the
first of them too. Beside the calls, text after a call, a history whose two calls share one id, and a history
whose call's arguments are not JSON. The cases a user writes in a YAML file of their own are read by
corpus_file.py.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field

from harness.core.errors import TemplateError
from harness import families
from harness.suites.runtime_conformance import history_cases
from harness.families import get as family_get
from harness.formats.calls import ToolCall
from harness.formats.reasoning import DEFAULT_PAIRS, prompt_opens
from harness.template import detect as detection
from harness.template import render as rendering
from harness.template.kwargs import template_kwargs_for
from harness.template.probe import PROBE_TOOL, tool_variables
from harness.template.system_tools import calls_into_content, place

GET_TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The current time in UTC.",
    "parameters": {"type": "object", "properties": {}}}}
CREATE_EVENT = {"type": "function", "function": {
    "name": "create_event", "description": "Create a calendar event.",
    "parameters": {"type": "object", "properties": {
        "title": {"type": "string"},
        "attendees": {"type": "array", "items": {"type": "string"}},
        "details": {"type": "object", "properties": {
            "room": {"type": "integer"}, "online": {"type": "boolean"}, "notes": {"type": ["string", "null"]}}},
        "budget": {"type": "number"},
        "priority": {"type": "integer"}},
        "required": ["title"]}}}
TOOLS = [PROBE_TOOL, GET_TIME, CREATE_EVENT]

WEATHER = {"location": "Paris", "days": 3}
EVENT = {"title": "Café \"Zürich\" \\ 東京 🎉", "attendees": ["Ana", "Bo"],
         "details": {"room": 12, "online": False, "notes": None}, "budget": 1250.5, "priority": -3}
REASONING = "The user asks for the weather in Paris, so get_weather fits."
# A call's arguments cut short mid-value, as a model that stopped early leaves them (llama.cpp issue 25510).
MALFORMED_ARGUMENTS = '{"location": "Par'
MALFORMED_HISTORY = "history-malformed-call"      # the case that carries them in its history
OPENED_REASONING = "Nothing to think about."
# tool_choice variants: how each is sent is in harness.suites.runtime_conformance.driver.request_body.
# named: the function the reply calls; named-other: another one, which the runtime must not return a call to.
AUTO, REQUIRED, NONE, NAMED, NAMED_OTHER, NO_PARALLEL = "auto", "required", "none", "named", "named-other", "no-parallel"
VARIANTS = (AUTO, REQUIRED, NONE, NAMED, NAMED_OTHER, NO_PARALLEL)
# Each case's first user message opens with filler words, one (a token in every vocabulary here) per byte of the
# replies before it and SPACING more per case, so a template's prompts lie a reply's length apart (a token is at
# least a byte) and its whole corpus fits one scripted model (a Turn owns the positions its reply runs through).
SPACING = 16
_CLOSERS = re.compile(r"(</[^<>]+>|<\|[^|<>]+\|>|<｜[^｜]+｜>|\[/[A-Z_]+\]|\]<\]minimax\[>\[</[a-z_:]+>)\s*$")


@dataclass
class Case:
    name: str
    messages: list
    tools: list
    reply: str                     # what the scripted model writes after the prompt (its end of turn follows)
    variants: tuple = (AUTO,)
    template_kwargs: dict = field(default_factory=dict)
    expect: dict | None = None     # the strict parse of `reply` after our render of the prompt
    note: str = ""
    # Our render of the prompt (not written with the case: the template rebuilds it), against which a text the
    # runtime generated instead of `reply` is read as `expect` is.
    prompt: str = field(default="", compare=False, repr=False)

    def parse(self, family: str | None, text: str) -> dict:
        """`text`'s strict parse after this case's prompt, as `expect` is of the reply."""
        return families.parse(family, text, self.prompt).to_json()

    def to_json(self) -> dict:
        return {"name": self.name, "messages": self.messages, "tools": self.tools, "reply": self.reply,
                "variants": list(self.variants), "template_kwargs": self.template_kwargs, "expect": self.expect,
                "note": self.note}


@dataclass
class Corpus:
    template_id: str
    family: str | None
    cases: list
    skipped: list        # (case name, why it cannot be written for this template)
    detection: object = None


def _call(name: str, arguments: dict, n: int) -> dict:
    return {"id": f"call{n:05d}", "type": "function", "function": {"name": name, "arguments": copy.deepcopy(arguments)}}


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


class Renderer:
    """Renders as Hugging Face does, with the template's special tokens (the pin's, unless bos/eos are given:
    a scripted model carries its vocabulary's, and a runtime renders with those)."""

    def __init__(self, ref, found, bos: str | None = None, eos: str | None = None):
        self.text = ref.text
        self.bos = ref.bos_token or "" if bos is None else bos
        self.eos = ref.eos_token or "" if eos is None else eos
        self.found = found
        self.kwargs = template_kwargs_for(ref.text)
        parser = family_get(found.family).parser if found.family else None
        self.pairs = getattr(parser, "reasoning", None) or DEFAULT_PAIRS
        self.turn_ends = getattr(parser, "turn_ends", None)    # a family whose messages end before its turn does

    def variables(self, messages, tools, kwargs) -> tuple:
        """(messages, render variables): a template that takes no `tools` gets the tool list where its model card
        puts it (harness.template.system_tools), as live runs do."""
        placement = getattr(self.found, "tool_placement", None)
        if placement is not None:
            messages, tools = place(placement, messages, tools), None
        if self.found.declared:
            messages = calls_into_content(messages, self.found.family)
        return messages, {**tool_variables(self.found.carrier, tools), **kwargs}

    def prompt(self, messages, tools, kwargs) -> str:
        messages, variables = self.variables(messages, tools, kwargs)
        return rendering.render(self.text, messages, add_generation_prompt=True, bos_token=self.bos,
                                eos_token=self.eos, **variables)

    def reply(self, messages, assistant, tools, kwargs) -> str:
        """The text the template puts after the generation prompt for `assistant`, cut at the end of turn."""
        prompt = self.prompt(messages, tools, kwargs)
        if self.found.declared:
            # The template renders no call: the calls go into content as the family writes them (format()).
            assistant = calls_into_content([assistant], self.found.family)[0]
        if self.found.arguments_style == "string":
            assistant = detection.with_string_arguments([assistant])[0]
        history_messages, variables = self.variables(messages + [assistant], tools, kwargs)
        history = rendering.render(self.text, history_messages, bos_token=self.bos, eos_token=self.eos, **variables)
        if history.startswith(prompt):
            region = history[len(prompt):]
        else:
            # The generation prompt ends with a tail the history does not repeat (a forced-open <think>): the
            # reply is what follows the shared part, less the tail the prompt already holds. The history may
            # close the block the prompt already closed (DeepSeek V3.2: `<think></think>` in the prompt, a bare
            # `</think>` in the history): past the prompt, the model does not write that tag again.
            start = detection.reply_start(prompt, history)
            region, tail = history[start:], prompt[start:]
            if region.startswith(tail):
                region = region[len(tail):]
            else:
                region = next((region[len(c):] for _, c in self.pairs
                               if tail.rstrip().endswith(c) and region.startswith(c)), region)
        return self.answer(prompt, detection.cut_at_end_of_turn(region, self.eos, self.turn_ends))

    def answer(self, prompt: str, text: str) -> str:
        """`text` as the model writes it after `prompt`: a generation prompt that opens a reasoning block
        (Apriel's "Here are my reasoning steps:", a bare <think>) is closed first; the history render never
        shows that part, and a near miss inside reasoning would test nothing."""
        for open_tag, close_tag in self.pairs:
            if prompt_opens(prompt, open_tag) and close_tag not in text:
                return f"{OPENED_REASONING}\n{close_tag}{text}"
        return text


def build_corpus(ref, found=None) -> Corpus:
    """Every case this template can be given, and why the others cannot (ref: a ResolvedTemplate)."""
    found = found or detection.detect_declared(ref.text, ref.bos_token or "", ref.eos_token or "",
                                               **template_kwargs_for(ref.text))
    if not found.family:
        return Corpus(ref.id, None, [], [("*", f"no family detected ({found.status}): {found.reason}")], found)
    family = family_get(found.family)
    r = Renderer(ref, found)
    off = r.kwargs                         # {"enable_thinking": False} where the template reads it, else {}
    cases, skipped = [], []
    tools = _renderable_tools(r, off, skipped)

    def add(name, messages, reply_of, variants=(AUTO,), kwargs=None, note=""):
        kwargs = off if kwargs is None else kwargs
        messages = _padded(messages, sum(len(c.reply.encode("utf-8")) + SPACING for c in cases))
        try:
            prompt = r.prompt(messages, tools, kwargs)
            reply = reply_of(messages, kwargs) if callable(reply_of) else r.answer(prompt, reply_of)
        except TemplateError as exc:
            skipped.append((name, f"the template refuses the conversation: {exc}"))
            return None
        if isinstance(reply, tuple):           # (None, why): this template cannot say it
            skipped.append((name, reply[1]))
            return None
        expect = families.parse(family.name, reply, prompt).to_json()
        case = Case(name, messages, tools, reply, tuple(variants), dict(kwargs), expect, note, prompt)
        cases.append(case)
        return case

    def assistant(content="", calls=(), reasoning=None):
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [_call(n, a, i + 1) for i, (n, a) in enumerate(calls)]
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        return message

    def rendered(*calls, content="", reasoning=None, must=()):
        def write(messages, kwargs):
            absent = [n for n, _ in calls if n not in {t["function"]["name"] for t in tools}]
            if absent:
                return None, f"the template cannot be given the tool {', '.join(absent)}"
            text = r.reply(messages, assistant(content, calls, reasoning), tools, kwargs)
            missing = [m for m in must if m not in text]
            return (None, f"the template does not render {', '.join(missing)} in the reply") if missing else text
        return write

    one = [_user("What will the weather be in Paris for the next 3 days?")]
    call_case = add("one-call", one, rendered(("get_weather", WEATHER), must=("get_weather",)),
                    (AUTO, REQUIRED, NONE, NAMED, NAMED_OTHER))
    if family.multiple_calls:
        add("two-calls", [_user("Weather in Paris for 3 days, and the time now, please.")],
            rendered(("get_weather", WEATHER), ("get_time", {}), must=("get_weather", "get_time")),
            (AUTO, NO_PARALLEL))
    else:
        skipped.append(("two-calls", f"the {family.name} family writes one call per reply"))
    add("zero-arguments", [_user("What time is it?")], rendered(("get_time", {}), must=("get_time",)))
    add("typed-arguments", [_user("Book the team party, with every detail.")],
        rendered(("create_event", EVENT), must=("create_event",)))
    add("text-before-call", [_user("Can you look up the weather in Paris for 3 days?")],
        rendered(("get_weather", WEATHER), content="Let me check.", must=("Let me check.", "get_weather")))
    thinking = [_user("Think first: the weather in Paris for 3 days?")]
    thought = None
    if "enable_thinking" in off:
        thought = add("reasoning-then-call", thinking,
                      rendered(("get_weather", WEATHER), reasoning=REASONING, must=(REASONING, "get_weather")),
                      kwargs={"enable_thinking": True})
        # The model opens its reasoning and calls inside it, never closing the block: the call is reasoning to a
        # strict reader, and a runtime that runs it has read a thought as an action.
        unclosed = _reasoning_left_open(thought.reply, r.pairs) if thought else None
        add("reasoning-unclosed-call", [_user("Think it over: the weather in Paris for 3 days?")],
            lambda m, k: unclosed or (None, "the reasoning block has no closing tag to leave out"),
            kwargs={"enable_thinking": True})
    if call_case is not None:
        # Text the model writes after its call: a runtime may keep it streamed and drop it non-streamed.
        add("text-after-call", [_user("Weather in Paris for 3 days, then say what you did.")],
            f"{call_case.reply}\nI asked for the forecast.")
    # tool_choice required, answered in prose: a runtime that holds the model to a call rewrites the reply; one
    # that returns the prose has ignored the request.
    add("prose-required", [_user("Just say hello, no tools needed.")], rendered(content="Hello! No tool needed."),
        (REQUIRED,))
    add("prose-braces", [_user("Show me a tiny JSON example in a sentence.")],
        rendered(content='An object looks like {"a": [1, 2]} and a list like [3, {"b": null}].'))
    marker = family.markers[0] if family.markers else None
    if marker:
        add("prose-marker", [_user("How does your tool-call format start?")],
            rendered(content=f"In my format a call starts with {marker.strip()} and nothing else."))
    plain = json.dumps({"name": "get_weather", "arguments": WEATHER})
    add("near-miss-bare-json", [_user("Weather in Paris, 3 days, as JSON?")], plain)
    add("near-miss-fenced-json", [_user("Weather in Paris, 3 days, fenced?")], f"```json\n{plain}\n```")
    if call_case is not None:
        unclosed = _unclosed(call_case.reply, getattr(getattr(family.parser, "spec", None), "end_of_turn", None))
        add("near-miss-unclosed", [_user("Weather in Paris for 3 days, quickly.")],
            unclosed if unclosed else (None, "the call has no closing marker to leave out"))
    foreign = "mistral" if family.name == "hermes" else "hermes"
    add("near-miss-foreign-markers", [_user("Weather in Paris for 3 days, any format.")],
        family_get(foreign).format([ToolCall("get_weather", dict(WEATHER))]),
        note=f"a {foreign} call (that family's format())")
    history = [_user("What will the weather be in Paris for the next 3 days?"),
               assistant(calls=[("get_weather", WEATHER)]),
               {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
                "content": '{"forecast": ["sunny", "cloudy", "rain"]}'}]
    add("history-answer", history, rendered(content="Sunny, then cloudy, then rain."))
    if family.multiple_calls:
        # A client that sent two calls under one id (and their two results): the runtime renders the history as
        # it is, or refuses it in words.
        twice = [_user("Weather in Paris and in Rome, 3 days each?"),
                 {"role": "assistant", "content": "", "tool_calls": [
                     _call("get_weather", WEATHER, 1), _call("get_weather", {**WEATHER, "location": "Rome"}, 1)]},
                 {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
                  "content": '{"forecast": ["sunny", "cloudy", "rain"]}'},
                 {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
                  "content": '{"forecast": ["rain", "rain", "sunny"]}'}]
        add("history-same-id", twice, rendered(content="Paris clears up, Rome gets wet."))
    # A call the model cut short, as a client keeps it in the history: arguments that are not JSON. The runtime
    # renders them as the string they are, or refuses the history in words with a 4xx; a 5xx says the server
    # took the client's bad input for its own failure (and every later request of that conversation fails too).
    # Cases from here on are appended after the older ones, so the older cases' prompts keep their padding.
    broken = [_user("What will the weather be in Paris for the next 3 days?"),
              {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", MALFORMED_ARGUMENTS, 1)]},
              {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
               "content": '{"error": "the arguments are not JSON"}'}]
    if r.found.declared:
        skipped.append((MALFORMED_HISTORY, "the template renders no call: past calls go into content as the "
                                           "family writes them, which needs JSON arguments"))
    else:
        add(MALFORMED_HISTORY, broken, rendered(content="My call was cut short; let me ask again."))
    if "enable_thinking" not in off:
        # Reasoning the template renders without a thinking switch: Harmony's analysis channel, then the call on
        # the commentary channel (the two messages of one reply a runtime must split between reasoning and call).
        thought = add("reasoning-then-call", thinking,
                      rendered(("get_weather", WEATHER), reasoning=REASONING, must=(REASONING, "get_weather")))
    if thought is not None:
        # The reasoning and call a runtime returned, sent back after the tool result and after a new user turn.
        history_cases.add_cases(add, rendered, thinking, thought)
    return Corpus(ref.id, family.name, cases, skipped, found)


def _reasoning_left_open(reply: str, pairs) -> str | None:
    """A reply with reasoning then a call, its reasoning block's closing tag taken out (the first one after the
    reasoning), or None where it has none."""
    at = reply.find(REASONING)
    if at < 0:
        return None
    for _, close in pairs:
        end = reply.find(close, at)
        if end >= 0:
            return reply[:end] + reply[end + len(close):]
    return None


def _renderable_tools(r: Renderer, kwargs: dict, skipped: list) -> list:
    """TOOLS, less any the template fails on (Command R+ requires additionalProperties on object parameters)."""
    try:
        r.prompt([_user("Hi")], TOOLS, kwargs)
        return TOOLS
    except TemplateError:
        pass
    kept = []
    for tool in TOOLS:
        try:
            r.prompt([_user("Hi")], [tool], kwargs)
            kept.append(tool)
        except TemplateError as exc:
            skipped.append((f"tool {tool['function']['name']}", f"the template refuses the tool: {exc}"))
    return kept


def _padded(messages: list, words: int) -> list:
    out = copy.deepcopy(messages)
    if words:
        first = next(m for m in out if m["role"] == "user")
        first["content"] = f"({' '.join(['ok'] * words)}) {first['content']}"
    return out


def _unclosed(reply: str, end_of_turn: str | None = None) -> str | None:
    """The call without its closing marker, or without its final brace where it has none (or where that marker
    is the end of turn, which a reply may leave to the runtime's stop: GigaChat)."""
    stripped = reply.rstrip()
    match = _CLOSERS.search(stripped)
    if match and match.start() > 0 and match.group(1) != end_of_turn:
        return stripped[:match.start()].rstrip()
    if match and match.start() > 0:
        stripped = stripped[:match.start()].rstrip()
    if stripped.endswith("}"):
        return stripped[:-1]
    return None
