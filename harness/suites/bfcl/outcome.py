"""One recorded BFCL case, read again: our checks (the scenario scoring every sample gets) and the calls BFCL's
checker is to be handed, strict and lenient. Pure: BFCL's verdicts come from its own checker in its own
environment (harness.peers.bfcl), at report time, on these calls.

Strict calls are what the strict parser read from the reply the sample was judged on (in fallback mode, the
grammar's rewrite when there was one), each with its arguments typed by the tool's schema where the family writes
values as text or in Python's notation (the call as its template meant it); a JSON family's values go to BFCL as
the model wrote them, so a "10" written for an integer is BFCL's to judge. Lenient calls are, for a reply the
strict parser refused with a deviation that has a lenient reading (harness.suites.bfcl.lenient_reading), the calls
that reading takes; for any other reply, the strict calls."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import families as registry
from harness.suites.bfcl.cases import IRRELEVANCE, Case
from harness.suites.bfcl.lenient_reading import lenient_calls
from harness.evaluation.scoring import is_call_attempt, parse_steps, score_sample, writes_values_as_text
from harness.schema.arguments import type_arguments


@dataclass
class Outcome:
    case: str
    category: str
    model: str
    mode: str
    seconds: float | None
    errored: bool                 # the sample stopped on an error (the template raised, generation failed)
    call_due: bool                # irrelevance: False; every other category: True
    parsed: bool | None           # our check: the strict parser read a call (call due), or no call was made
    right_tool: bool | None       # our check; for irrelevance, our rule: no call attempted (no near miss either)
    valid_arguments: bool | None  # our check: the expected tool's call fits its schema
    deviation: str | None         # the named near miss of the judged reply, if any
    strict: list = field(default_factory=list)     # BFCL's decoded form: [{name: {param: value}}]
    lenient: list = field(default_factory=list)
    lenient_read: bool = False    # a lenient reading found calls the strict parser did not
    attempted: bool = False       # a call, or a call-shaped near miss (scoring.is_call_attempt)
    # The judged reply's call was held by a lazy grammar in another spelling than the family's own (lazy-trigger's
    # fenced or bare object): a near miss to the strict parser, its lenient reading is the call the grammar held.
    held: bool = False
    # The text of the judged reply (the last step's): what a deployment replay has a scripted model write.
    reply: str | None = None


def _strict(case: Case, parse, family) -> list:
    notation = registry.value_notation(parse.family)
    calls = []
    for call in parse.calls:
        arguments = call.arguments
        tool = case.scenario.tool(call.name)
        if tool is not None:
            typed = type_arguments(call.arguments, tool.parameters, notation)
            if typed.ok and (notation != "json" or writes_values_as_text(family)):
                arguments = typed.arguments
        calls.append({call.name: arguments})
    return calls


def outcome(case: Case, record) -> Outcome:
    verdicts = score_sample(case.scenario, record)
    steps = record.turns[0].get("steps", []) if record.turns else []
    parses = parse_steps(steps, record.family, [t.name for t in case.scenario.tools])
    judged = parses[-1] if parses else None
    strict = _strict(case, judged, record.family) if judged is not None and judged.accepted else []
    deviation = judged.deviation if judged is not None else None
    lenient, read = strict, False
    if judged is not None and not judged.accepted and is_call_attempt(judged):
        found = lenient_calls(deviation, judged.content)
        if found:
            lenient, read = [{name: arguments} for name, arguments in found], True
    return Outcome(case.id, case.category, record.model.id, record.mode, record.seconds, bool(record.error),
                   case.category not in IRRELEVANCE, verdicts["parsed"], verdicts["right_tool"],
                   verdicts["valid_arguments"], deviation, strict, lenient, read,
                   judged is not None and (judged.accepted or is_call_attempt(judged)),
                   bool(steps) and steps[-1].get("grammar_held") is True,
                   steps[-1].get("reply") if steps else None)
