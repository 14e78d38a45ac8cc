"""Two vocabularies mapped: the tolerances SGLang names beside the names the strict parser and scoring give the
same text, so a reader of a peer's log sees "SGLang forgives X under the name Y" and which of ours X is.

SGLang's main branch names every tolerance its tool parsers apply (`CompatibilityEvent` in
python/sglang/srt/function_call/compatibility/, UPSTREAM): with its compatibility mode on it applies the tolerance
and records the event; in its default strict mode a model's deviation raises there instead and the parser falls
open (`fail-open`): the reply comes back as text. The released sglang 0.5.23, the one parser agreement runs, predates
the package: it applies many of the same tolerances without a name.

Each event's `ours` are names of ours for the same text: a deviation (harness.formats.deviations, the strict
parser refuses the reply) or a finding (harness.evaluation.scoring, the parser reads the call and scoring or
`harness parse --tools` names what the tool's schema refuses). `witness` is one reply of a pinned family that
SGLang's event describes; tests/suites/test_parser_agreement_peer_vocabulary.py reads each with the strict parser (and the
command) and holds it to its name, and parser agreement asks every peer parser the witnesses (source
SOURCE), so the page shows what each peer does with them. This module is the one place the mapping lives:
docs/strictness.md and results/parser-agreement.md are both written from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.evaluation import scoring
from harness.evaluation.judging import cell
from harness.formats import deviations as dev

UPSTREAM = {"repository": "sgl-project/sglang", "folder": "python/sglang/srt/function_call/compatibility/",
            "events": "context.py", "commit": "7ca4a40bb38440faaa99dd6c5c0c63a5f37f1d2f",
            "also": "mode.py at 6255158b1cac12705e43b491dd5cd2dbd165cea9 (the same sixteen events, the class "
                    "before its rename); recovery.py at b3930fa3988b9a6d36b812c1eac548ae3244a2f5 (fail-open); "
                    "param_types.py at 6255158b1cac12705e43b491dd5cd2dbd165cea9 (value conversion)"}
VLLM = ("vLLM 0.33.0 names none of its parsers' tolerances: its parsers log and return the reply as content when "
        "they raise (the de facto fail-open, \"Error in extracting tool call from response\" in 14 of its parser "
        "modules), and its `--tool-strict-level` constrains generation (structural tags), not parsing.")
SOURCE = "sglang-event"   # parser agreement's source for the witnesses; a case's name is its event

# Findings of ours an event maps to: the strict parser reads the call, and scoring names what the schema refuses.
FINDINGS = (scoring.UNKNOWN_TOOL, scoring.INVALID_ARGUMENTS)

# The tools every witness is read with: get_weather's parameters typed, so a value no type of them reads is
# refused by the schema (SGLang converts by the same schema), set_flags for an array of strings. no_such_tool is
# never offered.
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"},
                                         "city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "set_flags", "description": "set_flags", "parameters": {
        "type": "object", "properties": {"flags": {"type": "array", "items": {"type": "string"}}}}}},
]


@dataclass(frozen=True)
class Witness:
    family: str
    reply: str
    name: str        # what ours call it: the strict parse's deviation, or the finding `harness parse --tools` gives


@dataclass(frozen=True)
class Event:
    name: str        # SGLang's CompatibilityEvent value
    scope: int       # SGLang's scope: 1 wire structure, 2 nested parameter structure, 3 values, 4 fail-open
    raises: bool     # whether SGLang's strict mode raises on it (a model's deviation) or never (not the model's)
    sglang: str      # what SGLang does with the text in compatibility mode
    ours: tuple      # our names for the same text
    witness: Witness | None = None
    note: str = ""


_M3 = "]<]minimax[>["   # MiniMax-M3's namespace token, before each of its tags


def _m3(body: str) -> str:
    return f'{_M3}<tool_call>\n{_M3}<invoke name="{body}{_M3}</invoke>\n{_M3}</tool_call>'


EVENTS = (
    Event("skipped-garbage", 1, True, "drops text it cannot read inside a call, up to the next marker it knows, and "
          "reads on", (dev.MALFORMED_CALL,),
          Witness("minimax-m2", '<minimax:tool_call>\n<invoke name="get_weather">\nJUNK that matches no tag\n'
                                '<parameter name="location">Paris</parameter>\n</invoke>\n</minimax:tool_call>',
                  dev.MALFORMED_CALL)),
    Event("malformed-json-dropped", 1, True, "drops a call whose JSON (or Python literal) body does not parse; the "
          "rest of the reply stands", (dev.INVALID_JSON, dev.PYTHON_LITERALS, dev.DOUBLE_BRACES, dev.NOT_PYTHON_CALL),
          Witness("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"location": Paris}}\n</tool_call>',
                  dev.INVALID_JSON),
          "ours says why the body is not JSON: a Python dict, the template's braces copied, or other text; in a "
          "Python-call family, a payload that is not literals"),
    Event("unknown-tool-dropped", 1, True, "drops a call to a tool the request did not offer",
          (scoring.UNKNOWN_TOOL,),
          Witness("hermes", '<tool_call>\n{"name": "no_such_tool", "arguments": {}}\n</tool_call>',
                  scoring.UNKNOWN_TOOL),
          "the strict parser reads the call (the family's shape); scoring and `harness parse --tools` name the "
          "tool that was not offered"),
    Event("dropped-invoke-tail", 1, True, "drops the rest of an invoke it cannot read and closes the arguments it "
          "had streamed", (dev.MALFORMED_CALL,),
          Witness("minimax-m3", _m3('get_weather">GARBAGE WITH NO TAG'), dev.MALFORMED_CALL)),
    Event("skipped-non-function-entry", 1, True, "skips a Step3 tool-call entry whose type is not `function`",
          (dev.UNEXPECTED_VALUE,), None,
          "no witness: no pinned template writes Step3's format; a fixed part with a value the family does not "
          "allow is what ours calls this"),
    Event("missing-close-tag", 1, True, "ends a parameter value at the next tag when its own closing tag is "
          "missing", (dev.MARKUP_IN_VALUE,),
          Witness("qwen-xml", "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n<parameter=days>\n"
                              "3\n</parameter>\n</function>\n</tool_call>", dev.MARKUP_IN_VALUE)),
    Event("truncated-call-dropped", 1, True, "drops a call the reply ended inside and returns its text as content "
          "(in both of its modes)", (dev.UNCLOSED_CALL,),
          Witness("qwen-xml", "Check.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nBei",
                  dev.UNCLOSED_CALL),
          "the one event whose outcome is ours: no call, the text kept"),
    Event("mismatched-closing-tag", 2, True, "lets a closing tag close the tags the model left open inside it",
          (dev.MALFORMED_CALL,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<city>Paris{_M3}</city>{_M3}<location>{_M3}<lat>1'
                                    f'{_M3}</wrong>{_M3}</location>'), dev.MALFORMED_CALL)),
    Event("unclosed-tags-at-end", 2, True, "closes the tags still open at the end of a parameter",
          (dev.MALFORMED_CALL,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<city>Paris{_M3}</city>{_M3}<location>{_M3}<lat>1'
                                    f'{_M3}</location>'), dev.MALFORMED_CALL)),
    Event("duplicate-tag-as-list", 2, True, "collects a tag written twice in one object into a list",
          (dev.DUPLICATE_ARGUMENT,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<location>{_M3}<city>a{_M3}</city>{_M3}<city>b{_M3}</city>'
                                    f'{_M3}</location>'), dev.DUPLICATE_ARGUMENT)),
    Event("mixed-text-captured", 2, True, "keeps stray text inside an object under a `$text` key",
          (dev.MALFORMED_CALL,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<location>{_M3}<city>a{_M3}</city>stray{_M3}</location>'),
                  dev.MALFORMED_CALL)),
    Event("non-item-array-child", 2, True, "takes an array element written with another tag than `<item>`",
          (scoring.INVALID_ARGUMENTS,),
          Witness("minimax-m3", _m3(f'set_flags">{_M3}<flags>{_M3}<item>a{_M3}</item>{_M3}<element>b{_M3}</element>'
                                    f'{_M3}</flags>'), scoring.INVALID_ARGUMENTS),
          "the strict parser reads the tags as written, an object; the schema's array refuses it"),
    Event("structure-overrode-schema", 2, True, "reads nested tags as structure where the schema says a scalar",
          (scoring.INVALID_ARGUMENTS,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<city>{_M3}<x>1{_M3}</x>{_M3}</city>'),
                  scoring.INVALID_ARGUMENTS),
          "the strict parser reads the structure too; the schema's string refuses it"),
    Event("unconvertible-value-kept-raw", 3, True, "keeps the raw string when no type of the schema converts it",
          (scoring.INVALID_ARGUMENTS,),
          Witness("minimax-m3", _m3(f'get_weather">{_M3}<city>Paris{_M3}</city>{_M3}<days>tomorrow{_M3}</days>'),
                  scoring.INVALID_ARGUMENTS),
          "the value is read as written; the schema's integer refuses it"),
    Event("invalid-schema-ignored", 3, False, "ignores a tool schema that is itself invalid (the request's fault, "
          "never raised)", (),
          note="not the model's text, so no name of ours; `harness parse --tools` refuses a tool file it cannot "
               "use (exit 2, the tool and the place named)"),
    Event("fail-open", 4, False, "returns the whole reply as text after its parser raised (in strict mode, after "
          "any event above)", (),
          note="no one name of ours: it is what every refusal of the strict parser does (the reply kept as "
               "content), and its deviation says why"),
)


def kind(name: str) -> str | None:
    """Which vocabulary of ours holds `name`: "deviation", "finding", or None."""
    if name in dev.ALL:
        return "deviation"
    return "finding" if name in FINDINGS else None


def by_name() -> dict:
    return {event.name: event for event in EVENTS}


def witnesses() -> list:
    """(event, witness) for every event that has one, in EVENTS' order."""
    return [(event, event.witness) for event in EVENTS if event.witness is not None]


def upstream_line() -> str:
    u = UPSTREAM
    return (f"SGLang's names: `CompatibilityEvent` in {u['repository']} `{u['folder']}{u['events']}` at commit "
            f"{u['commit']}; {u['also']}. The released sglang 0.5.23 (the peers environment) has no such package.")


def _witness_cell(witness: Witness | None) -> str:
    if witness is None:
        return "–"
    return f"{witness.family}: {cell(witness.reply, 240)} → `{witness.name}`"


def vocabulary_lines(records=None, heading: str = "##") -> list:
    """The table, one row per SGLang event. records: parser agreement's (those that stand) to add, per event, what
    SGLang's released parser did with the witness and how often it forgave the corpus's replies under our names
    for the event; None for the table alone (docs/strictness.md)."""
    lines = ["", f"{heading} SGLang's names for what it forgives, and ours", "",
             "SGLang's main branch names each tolerance of its tool parsers: with its compatibility mode on it "
             "applies the tolerance and records the event; strict (its parser's default, per SGLang's unit tests "
             "of the package) it raises there instead and falls open: the reply is returned as text. Each row: the "
             "event, its scope (1 wire "
             "structure, 2 nested parameter structure, 3 values, 4 fail-open), whether strict mode raises on it, "
             "what SGLang does with the text, and what ours calls the same text: a deviation (the strict parser "
             "refuses the reply) or a finding (the parser reads the call, scoring and `harness parse --tools` name "
             "what the tool's schema refuses). The witness is a reply of a pinned family the event describes and "
             "what the strict parser (or the command) names it; tests/suites/test_parser_agreement_peer_vocabulary.py holds "
             "each. The mapping is data in harness/suites/parser_agreement/peer_vocabulary.py.", "", upstream_line(), "", VLLM, ""]
    header = "| SGLang event | scope | strict mode | SGLang does | ours | note | witness → ours |"
    rule = "|---|---:|---|---|---|---|---|"
    if records is not None:
        header += " SGLang 0.5.23 on the witness | SGLang 0.5.23 forgave under ours (corpus) |"
        rule += "---|---|"
    lines += [header, rule]
    for event in EVENTS:
        ours = ", ".join(f"`{name}`" + (" (finding)" if kind(name) == "finding" else "") for name in event.ours)
        row = (f"| `{event.name}` | {event.scope} | {'raises' if event.raises else 'never raises'} | "
               f"{event.sglang} | {ours or '–'} | {event.note or '–'} | {_witness_cell(event.witness)} |")
        if records is not None:
            row += f" {_on_witness(event, records)} | {_forgiven(event, records)} |"
        lines.append(row)
    return lines


def _on_witness(event: Event, records: list) -> str:
    found = [r for r in records if r.project == "sglang" and r.source == SOURCE and r.case == event.name]
    return ", ".join(f"`{label}`" for label in found[0].labels) if found else "–"


def _forgiven(event: Event, records: list) -> str:
    counts = {}
    for r in records:
        if r.project != "sglang" or r.source == SOURCE:
            continue
        for label in r.labels:
            name = label.split(":", 1)[1] if label.startswith("forgave:") else None
            if name in event.ours:
                counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"`{k}` ×{v}" for k, v in sorted(counts.items())) or "–"
