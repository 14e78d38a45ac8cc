"""Verdicts for one recorded sample, from its raw replies alone.

Scoring re-parses every recorded reply with the CURRENT parser of the recorded family and re-types every call
by the scenario's schemas, so a parser change re-scores old transcripts (`harness report`). It reads nothing
from the run's own parse except to say whether the parse has changed since. Pure: no model, no I/O.

A verdict is True, False, or None when it does not apply (no call expected, no answer expected, or a
replayed record that stops before the part being judged). A step that errored (the template raised, the
generation failed) fails every check it reaches; an answer is judged as harness.evaluation.answers reads it."""

import json
import re
from dataclasses import replace
from functools import lru_cache

from harness import families as registry
from harness.schema.arguments import type_arguments
from harness.template.detect import END_OF_TURN
from harness.formats import deviations as dev
from harness.formats.attempts import call_attempt
from harness.formats.calls import ParseResult, ToolCall
from harness.storage.records import SampleRecord
from harness.evaluation.answers import Answer, read_answer

VERDICTS = ("parsed", "right_tool", "intended_tool", "valid_arguments", "expected_arguments", "answer",
            "result_used")
# The same checks on each turn's first reply as the model wrote it natively. In fallback mode the verdicts above
# judge the grammar's rewrite; these (keys "first_<name>") keep what the model did before the grammar stepped in.
FIRST_REPLY = ("parsed", "call_readable", "intended_tool", "right_tool")

# Findings: named behaviours of the model (or, for tool-ran-twice, of the loop) that a rate would hide.
INVENTED_ARGUMENTS = "invented-arguments"      # arguments given to a tool that takes none (small models do)
INVALID_ARGUMENTS = "invalid-arguments"        # the schema rejects a call's arguments (wrong type, missing, unknown)
STRING_COERCED = "string-coerced-arguments"    # "10" written for an integer and read as JSON (Llama 3.2 1B does)
PYTHON_NOTATION = "python-notation-arguments"  # True / None / {'a': 1} written for a typed parameter
JSON_NOTATION = "json-notation-arguments"      # true / null where the template writes Python (MiniCPM 5, LFM2)
UNKNOWN_TOOL = "unknown-tool"                  # a call to a tool that was not offered
REPEATED_CALL = "repeated-call"                # the same call (tool and arguments) twice in one turn
STEP_LIMIT = "step-limit"                      # the turn ran out of steps while still calling tools
TRUNCATED = "truncated"                        # a reply stopped at max_tokens
GENERATION_ERROR = "generation-error"          # generation failed (deadline, runtime error)
TOOL_RAN_TWICE = "tool-ran-twice"              # one call executed more than once: a loop bug, never a model's
CALL_WITHOUT_TOOLS = "call-without-tools"      # a tools-less chat wrote call-like text (named by its deviation)
PAST_END_OF_TURN = "past-end-of-turn"          # the reply holds an end-of-turn marker as text and goes on:
#                                                the model writes the next turns itself (wrong or no template)
# Behaviours of the tool loop, named so a rate never hides that the loop stepped in.
ZERO_ARG_RETRY = "zero-arg-retry"              # a zero-parameter tool called with arguments ran with none
SYNTHESIZED_ANSWER = "synthesized-answer"      # a follow-up failed after a tool ran; the answer is its result
GRAMMAR_RUNTIME_RETRY = "grammar-runtime-retry"  # grammar sampling failed in the runtime; rewritten unconstrained
NATIVE_FALLBACK = "native-fallback"            # fallback mode: a failed native attempt was rewritten under grammar
REPEATED_CALL_AFTER_RESULT = "repeated-call-after-result"  # fallback mode: a call that already ran this turn was
#                                                written again; it was not run, the turn answered from its result
THINKING_BUDGET_RETRY = "thinking-budget-retry"  # a reply cut inside its think block was rewritten with room
# Why a turn's final text is not an answer: each fails the answer checks it would otherwise pass.
ECHOED_USER = "echoed-user"                    # the answer repeats a user message back: those words are not an
#                                                answer (Gemma 270M's `My name is Priya. mendatang` loop)
ECHOED_TOOL_MESSAGE = "echoed-tool-message"    # the answer repeats the tool message the harness sent
#                                                (`Result of <tool>: …`, or the result as sent) instead of using it
RUNAWAY_ANSWER = "runaway-answer"              # the turn's last reply only stopped at the token limit: a loop or
#                                                a ramble, not an answer


@lru_cache(maxsize=None)
def writes_values_as_text(family: str | None) -> bool:
    """True for families whose grammar carries every value as text (Qwen XML, key/value tags): there a string
    for an integer is the format, not the model's deviation. Asked of the family itself, by a round trip."""
    if not family:
        return False
    parser = registry.get(family)
    try:
        parsed = parser.parse(parser.format([ToolCall("probe", {"n": 1})]))
    except Exception:  # noqa: BLE001 -- a family that cannot format is judged as JSON-typed
        return False
    return bool(parsed.calls) and isinstance(parsed.calls[0].arguments.get("n"), str)


def is_call_attempt(parse: ParseResult) -> bool:
    """A near miss: the reply tried to call and the parser could not read it (reasoning left open is not)."""
    return not parse.accepted and parse.deviation not in (None, dev.UNCLOSED_REASONING)


def end_of_turn_at(text: str) -> int | None:
    hits = [text.find(m) for m in END_OF_TURN if m in text]
    return min(hits) if hits else None


def before_end_of_turn(text: str) -> str:
    """The answer the turn gave: text a model writes after an end-of-turn marker is the next turns, which it
    made up, not its answer (an echo of the user's words there must not pass an answer check)."""
    cut = end_of_turn_at(text)
    return text if cut is None else text[:cut].strip()


def _same_value(got, want) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().casefold() == want.strip().casefold()
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, dict) and isinstance(got, dict):
        return arguments_match(got, want)
    return got == want


def arguments_match(got: dict, want: dict) -> bool:
    """Subset match: every expected argument is there with the expected (typed) value; strings compare
    case-insensitively. `{}` is the exception: it means "no arguments at all" (a zero-parameter tool)."""
    if not want:
        return not got
    return all(key in got and _same_value(got[key], value) for key, value in want.items())



# Where a near miss names its tool: a JSON or Python-literal name key, or an XML-ish function tag.
_NAME_AT = re.compile(r"""["']?(?:name|tool_name)["']?\s*[:=]\s*["']([A-Za-z_][\w.-]*)["']|<function=([A-Za-z_][\w.-]*)""")


def intended_tool(parse: ParseResult, tools=()) -> str | None:
    """The tool a first reply chose: the call's name when the strict parser reads it; for a named near miss,
    the first name written in a name position ("name": "…", <function=…>), else the first offered tool named
    as a word. Never a call (nothing is run or typed from it): it separates "chose right, wrote it wrong" from
    "chose wrong", the seeds' native-vs-grammar question."""
    if parse.accepted:
        return parse.calls[0].name
    if not is_call_attempt(parse):
        return None
    text = parse.content
    named = _NAME_AT.search(text)
    if named:
        return named.group(1) or named.group(2)
    words = [(hit.start(), name) for name in tools for hit in [re.search(rf"\b{re.escape(name)}\b", text)] if hit]
    return min(words)[1] if words else None


def _all(values):
    known = [v for v in values if v is not None]
    return None if not known else all(known)


def parse_steps(steps: list, family: str | None, tools=()) -> list:
    """The current parse of each recorded step. Each step is read by the parser it was written for (a grammar
    attempt's may differ from the model's); a synthesized answer is the loop's text, never parsed for calls.
    tools: the names of the tools the step was offered; a reply the parser reads as plain text that holds a call
    to one of them in any dialect is that near miss (judged_parse)."""
    return [ParseResult(None, content=s.get("reply", "")) if s.get("synthesized")
            else judged_parse(registry.parse(s.get("family", family), s.get("reply", ""), s.get("prompt_tail", "")),
                              tools)
            for s in steps]


def judged_parse(parse: ParseResult, tools) -> ParseResult:
    """`parse`, or, where the parser saw plain text holding a call to one of `tools` (names) written as an object
    in any spelling (harness.formats.attempts), the same text named as that near miss. The parser knows only
    the spellings it lists; the judge knows which tools were offered, and a call to one is an attempt whatever
    its key's blanks or its fence's backticks. Nothing is read into a call: it stays a near miss."""
    if parse.accepted or parse.deviation is not None or not tools:
        return parse
    spelling = call_attempt(parse.content, tools)
    if spelling is None:
        return parse
    return replace(parse, deviation=spelling,
                   detail="a call to an offered tool written as an object the family's parser does not read "
                          "(recognised by its structure)")


def retry_due(parse: ParseResult, tools) -> bool:
    """Whether fallback writes a native attempt again under the grammar: a call the app can see failed, i.e. a
    reply the strict parser refused as a near miss, or plain text holding a call to one of the offered `tools`
    (names) in a spelling the parser does not list (judged_parse). Plain text is an answer: an app cannot tell it
    from a refusal to call, so it is never rewritten. The run decides by this (harness.live.modes) and the
    reports check recorded samples against it (harness.evaluation.setups), so the two cannot drift apart."""
    return is_call_attempt(judged_parse(parse, tools))


class _Turn:
    """One user turn of a record, re-parsed. shown: what the model had been shown by the end of this turn,
    (user messages, tool messages), against which its answer is read."""

    def __init__(self, record_turn: dict, family, scenario, shown=((), ())):
        self.steps = record_turn.get("steps", [])
        self.parses = parse_steps(self.steps, family, [t.name for t in scenario.tools])
        self.calls = []  # (step index, ToolCall, Typed or None)
        for index, parse in enumerate(self.parses):
            for call in parse.calls if parse.accepted else ():
                tool = scenario.tool(call.name)
                typed = (type_arguments(call.arguments, tool.parameters, registry.value_notation(parse.family))
                         if tool else None)
                self.calls.append((index, call, typed))
        self.errored = bool(self.steps) and bool(self.steps[0].get("error"))
        self.answer = self._answer(*shown)

    def _answer(self, users, tool_messages) -> Answer | None:
        last = self.steps[-1] if self.steps else None
        if last is None or last.get("error") or last.get("synthesized"):
            return None  # no reply, or the loop's own text (a synthesized answer is not the model's)
        parse = self.parses[-1]
        if parse.accepted or is_call_attempt(parse):
            return None  # a call, or an unread call shown as text: either way the turn gave no answer
        text = before_end_of_turn(parse.content)
        # A reply the template's end-of-turn marker closed did end; only the runtime went on past it.
        finish = None if end_of_turn_at(parse.content) is not None else last.get("finish_reason")
        return read_answer(text, finish, users, tool_messages)


def first_reply_verdicts(expect, parse: ParseResult, tools, turn_names=None) -> dict:
    """parsed, right_tool, intended_tool, call_readable of a turn's first reply. turn_names: every call of
    the turn, for a turn that may call nothing at all (without it, the first reply alone is judged)."""
    attempted = parse.accepted or is_call_attempt(parse)
    names = turn_names if turn_names is not None else [c.name for c in parse.calls if parse.accepted]
    out = dict.fromkeys(FIRST_REPLY)
    if expect.expects_call is True:
        out["parsed"] = parse.accepted
    elif expect.expects_call is False:
        out["parsed"] = not parse.calls and parse.deviation is None
    if expect.tool:
        out["right_tool"] = bool(parse.accepted and parse.calls[0].name == expect.tool)
        out["intended_tool"] = intended_tool(parse, tools) == expect.tool
    elif expect.no_tool:
        out["right_tool"] = not names and not attempted
    if expect.not_tools and out["right_tool"] is not False:
        out["right_tool"] = not any(n in expect.not_tools for n in names)
    out["call_readable"] = parse.accepted if attempted else None
    return out


def score_turn(scenario, spec, record_turn, family, replayed=False, shown=((), ())) -> dict:
    expect = spec.expect
    turn = _Turn(record_turn or {}, family, scenario, shown)
    tools = [t.name for t in scenario.tools]
    out = dict.fromkeys(VERDICTS)
    findings, deviations = [], [p.deviation for p in turn.parses if p.deviation]
    names = [call.name for _, call, _ in turn.calls]
    if turn.parses:
        first = first_reply_verdicts(expect, turn.parses[0], tools, names)
        out.update({k: first[k] for k in ("parsed", "right_tool", "intended_tool")})
        native = turn.steps[0].get("fallback_from")
        native = parse_steps([native], family, tools)[0] if native else turn.parses[0]
        native = first_reply_verdicts(expect, native, tools)
    target = next(((i, c, t) for i, c, t in turn.calls if c.name == expect.tool), None) if expect.tool else None
    if target is not None:
        out["valid_arguments"] = target[2].ok
        if expect.arguments is not None:
            out["expected_arguments"] = target[2].ok and arguments_match(target[2].arguments, expect.arguments)
    complete = bool(turn.steps) and not (replayed and turn.answer is None)
    answer = turn.answer
    if expect.wants_answer:
        if answer is not None:
            # A turn that must call a tool is answered after the call: an apology written instead of calling
            # is no report of what the tool did.
            out["answer"] = (answer.valid and (not expect.tool or _tool_ran(turn, expect.tool))
                             and (not expect.any_of or any(answer.holds(s) for s in expect.any_of))
                             and all(answer.holds(s) for s in expect.all_of))
        elif complete:
            out["answer"] = False
    if expect.uses_tool_result:
        evidence = scenario.tool(expect.tool).evidence
        if answer is not None:
            out["result_used"] = _tool_returned(turn, expect.tool) and any(answer.holds(e) for e in evidence)
        elif complete:
            out["result_used"] = False
    if (not turn.steps and not replayed) or turn.errored:
        # The sample stopped before this turn, or its first step errored (the template raised, the generation
        # failed): nothing the model wrote can meet what was due.
        out = {k: (False if _applies(k, expect) else None) for k in VERDICTS}
        native = {k: (False if k != "call_readable" and _applies(k, expect) else None) for k in FIRST_REPLY}
    elif not turn.parses:
        native = dict.fromkeys(FIRST_REPLY)
    # Of the replies that tried to call (a call, or a call-shaped near miss), how many the strict parser reads.
    attempts = [p for p in turn.parses if p.accepted or is_call_attempt(p)]
    readable = all(p.accepted for p in attempts) if attempts else None
    findings += _findings(scenario, turn, family, replayed)
    if answer is not None and (expect.wants_answer or expect.uses_tool_result):
        findings += [name for name, hit in ((ECHOED_USER, answer.echoed_user),
                                            (ECHOED_TOOL_MESSAGE, answer.echoed_tool),
                                            (RUNAWAY_ANSWER, answer.runaway)) if hit]
    recorded = [s.get("parse") for s in turn.steps]
    changed = any(r is not None and _parse_key(r) != _parse_key(p.to_json()) for r, p in zip(recorded, turn.parses))
    return {**out, "call_readable": readable, **{f"first_{k}": v for k, v in native.items()},
            "deviations": deviations, "findings": findings,
            "answer_text": answer.text if answer is not None else None,
            "calls": [{"name": c.name, "arguments": t.arguments if t else c.arguments} for _, c, t in turn.calls],
            "parse_changed": changed}


def _applies(verdict: str, expect) -> bool:
    return {"parsed": expect.expects_call is not None,
            "right_tool": expect.expects_call is not None or bool(expect.not_tools),
            "intended_tool": bool(expect.tool),
            "valid_arguments": bool(expect.tool), "expected_arguments": expect.arguments is not None,
            "answer": expect.wants_answer, "result_used": expect.uses_tool_result}[verdict]


def _parse_key(parse: dict):
    return (json.dumps(parse.get("calls"), sort_keys=True), parse.get("deviation"))


def _tool_returned(turn: _Turn, name: str) -> bool:
    """The named tool ran in this turn and returned a result (not an error)."""
    return any(call.get("name") == name and call.get("executed") and not call.get("error")
               for step in turn.steps for call in step.get("calls", []))


def _tool_ran(turn: _Turn, name: str) -> bool:
    """The named tool ran in this turn, whether it returned or raised."""
    return any(call.get("name") == name and call.get("executed") for step in turn.steps for call in step.get("calls", []))


def _findings(scenario, turn: _Turn, family, replayed=False) -> list:
    found = []
    seen = set()
    for _, call, typed in turn.calls:
        if call.json_literals:
            found.append(JSON_NOTATION)     # read, but not the Python notation the template writes
        tool = scenario.tool(call.name)
        if tool is None:
            found.append(UNKNOWN_TOOL)
            continue
        if not tool.parameters.get("properties") and call.arguments:
            found.append(INVENTED_ARGUMENTS)
        elif not typed.ok:
            found.append(INVALID_ARGUMENTS)
        if typed.coerced and not writes_values_as_text(family):
            found.append(STRING_COERCED)
        if typed.python_notation:
            found.append(PYTHON_NOTATION)
        key = (call.name, json.dumps(typed.arguments if typed.ok else call.arguments, sort_keys=True, default=str))
        if key in seen:
            found.append(REPEATED_CALL)
        seen.add(key)
    if not replayed and turn.steps and turn.parses[-1].accepted and not turn.steps[-1].get("error"):
        found.append(STEP_LIMIT)
    for step in turn.steps:
        if end_of_turn_at(step.get("reply", "")) is not None:
            found.append(PAST_END_OF_TURN)
        if step.get("finish_reason") == "length":
            found.append(TRUNCATED)
        if step.get("error") or step.get("generation_error"):
            found.append(GENERATION_ERROR)
        if any(c.get("executions", 1) > 1 for c in step.get("calls", [])):
            found.append(TOOL_RAN_TWICE)
        found += [ZERO_ARG_RETRY for c in step.get("calls", []) if c.get("zero_arg_retry")]
        for key, name in (("synthesized", SYNTHESIZED_ANSWER), ("grammar_runtime_retry", GRAMMAR_RUNTIME_RETRY),
                          ("fallback_from", NATIVE_FALLBACK), ("thinking_budget_retry", THINKING_BUDGET_RETRY),
                          ("repeated_call_after_result", REPEATED_CALL_AFTER_RESULT)):
            if step.get(key):
                found.append(name)
    if any(s.get("family", family) is None and p.deviation for s, p in zip(turn.steps, turn.parses)):
        found.append(CALL_WITHOUT_TOOLS)
    return found


def _shown(scenario, recorded_turns: list, upto: int) -> tuple:
    """(user messages, tool messages) the model had been shown by the end of turn `upto`: the seeded history's
    and the turns' user texts, and every tool result sent back, as sent."""
    users = [m["content"] for m in scenario.history if m["role"] == "user"]
    users += [t.user for t in scenario.turns[:upto + 1]]
    tools = [m["content"] for m in scenario.history if m["role"] == "tool"]
    tools += [call["result"] for turn in recorded_turns[:upto + 1] for step in turn.get("steps", [])
              for call in step.get("calls", []) if isinstance(call.get("result"), str)]
    return users, tools


def score_sample(scenario, record: SampleRecord) -> dict:
    """Verdicts of a recorded sample against the scenario: per turn, and for the sample (a verdict holds for
    the sample when it holds in every turn where it applies). `passed`: every applicable verdict holds.
    The first_* verdicts (fallback samples only) judge the native first replies the grammar rewrote."""
    family = record.family
    replayed = record.replayed
    recorded_turns = record.turns
    turns = []
    for index, spec in enumerate(scenario.turns):
        if index >= len(recorded_turns):
            if replayed:
                break  # a replay quotes only what the ADR quoted; the rest is unknown, not wrong
            turns.append(score_turn(scenario, spec, {}, family))
            continue
        turns.append(score_turn(scenario, spec, recorded_turns[index], family, replayed,
                                _shown(scenario, recorded_turns, index)))
    out = {name: _all(t[name] for t in turns) for name in VERDICTS}
    applicable = [v for v in out.values() if v is not None]
    out["passed"] = all(applicable) if applicable else None
    out["call_readable"] = _all(t["call_readable"] for t in turns)
    fallback = record.mode == "fallback"
    out.update({f"first_{k}": _all(t[f"first_{k}"] for t in turns) if fallback else None for k in FIRST_REPLY})
    out["deviations"] = [d for t in turns for d in t["deviations"]]
    out["findings"] = [f for t in turns for f in t["findings"]]
    out["parse_changed"] = any(t["parse_changed"] for t in turns)
    out["turns"] = turns
    return out


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple:
    """Wilson score interval for a binomial rate (95% by default); (0, 1) when there is nothing to count."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
