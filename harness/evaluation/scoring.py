"""Verdicts for one recorded sample, from its raw replies alone.

Scoring re-parses every recorded reply with the CURRENT parser of the recorded family and re-types every call
by the scenario's schemas, so a parser change re-scores old transcripts (`harness report`). It reads nothing
from the run's own parse except to say whether the parse has changed since. Pure: no model, no I/O.

A verdict is True, False, or None when it does not apply (no call expected, no answer expected, or a
replayed record that stops before the part being judged)."""

import json
from functools import lru_cache

from harness import families as registry
from harness.families.arguments import type_arguments
from harness.template.detect import END_OF_TURN
from harness.families import deviations as dev
from harness.families.base import ParseResult, ToolCall
from harness.evaluation.records import SampleRecord

VERDICTS = ("parsed", "right_tool", "valid_arguments", "expected_arguments", "answer", "result_used")

# Findings: named behaviours of the model (or, for tool-ran-twice, of the loop) that a rate would hide.
INVENTED_ARGUMENTS = "invented-arguments"      # arguments given to a tool that takes none (seed 004 note)
INVALID_ARGUMENTS = "invalid-arguments"        # the schema rejects a call's arguments (wrong type, missing, unknown)
STRING_COERCED = "string-coerced-arguments"    # "10" written for an integer and read as JSON (seed ADR: Llama 3.2)
PYTHON_NOTATION = "python-notation-arguments"  # True / None / {'a': 1} written for a typed parameter
UNKNOWN_TOOL = "unknown-tool"                  # a call to a tool that was not offered
REPEATED_CALL = "repeated-call"                # the same call (tool and arguments) twice in one turn
STEP_LIMIT = "step-limit"                      # the turn ran out of steps while still calling tools
TRUNCATED = "truncated"                        # a reply stopped at max_tokens
GENERATION_ERROR = "generation-error"          # generation failed (deadline, runtime error)
TOOL_RAN_TWICE = "tool-ran-twice"              # one call executed more than once: a loop bug, never a model's
CALL_WITHOUT_TOOLS = "call-without-tools"      # a tools-less chat wrote call-like text (named by its deviation)
PAST_END_OF_TURN = "past-end-of-turn"          # the reply holds an end-of-turn marker as text and goes on:
#                                                the model writes the next turns itself (wrong or no template)
# Behaviours of the tool loop (issue 4), named so a rate never hides that the loop stepped in.
ZERO_ARG_RETRY = "zero-arg-retry"              # a zero-parameter tool called with arguments ran with none
SYNTHESIZED_ANSWER = "synthesized-answer"      # a follow-up failed after a tool ran; the answer is its result
GRAMMAR_RUNTIME_RETRY = "grammar-runtime-retry"  # grammar sampling failed in the runtime; rewritten unconstrained
NATIVE_FALLBACK = "native-fallback"            # fallback mode: a failed native attempt was rewritten under grammar
THINKING_BUDGET_RETRY = "thinking-budget-retry"  # a reply cut inside its think block was rewritten with room


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


def contains(text: str, needle: str) -> bool:
    return needle.casefold() in text.casefold()


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


def _all(values):
    known = [v for v in values if v is not None]
    return None if not known else all(known)


def parse_steps(steps: list, family: str | None) -> list:
    """The current parse of each recorded step. Each step is read by the parser it was written for (a grammar
    attempt's may differ from the model's); a synthesized answer is the loop's text, never parsed for calls."""
    return [ParseResult(None, content=s.get("reply", "")) if s.get("synthesized")
            else registry.parse(s.get("family", family), s.get("reply", ""), s.get("prompt_tail", ""))
            for s in steps]


class _Turn:
    """One user turn of a record, re-parsed."""

    def __init__(self, record_turn: dict, family, scenario):
        self.steps = record_turn.get("steps", [])
        self.parses = parse_steps(self.steps, family)
        self.calls = []  # (step index, ToolCall, Typed or None)
        for index, parse in enumerate(self.parses):
            for call in parse.calls if parse.accepted else ():
                tool = scenario.tool(call.name)
                typed = type_arguments(call.arguments, tool.parameters) if tool else None
                self.calls.append((index, call, typed))
        self.answer = self._answer()

    def _answer(self):
        if not self.steps or self.steps[-1].get("error"):
            return None
        last = self.parses[-1]
        if last.accepted or is_call_attempt(last):
            return None  # a call, or an unread call shown as text: either way the turn gave no answer
        return before_end_of_turn(last.content)


def score_turn(scenario, spec, record_turn, family, replayed=False) -> dict:
    expect = spec.expect
    turn = _Turn(record_turn or {}, family, scenario)
    first = turn.parses[0] if turn.parses else None
    out = dict.fromkeys(VERDICTS)
    findings, deviations = [], [p.deviation for p in turn.parses if p.deviation]
    names = [call.name for _, call, _ in turn.calls]
    attempted = first is not None and (first.accepted or is_call_attempt(first))
    if first is not None:
        if expect.expects_call is True:
            out["parsed"] = first.accepted
        elif expect.expects_call is False:
            out["parsed"] = not first.calls and first.deviation is None
        if expect.tool:
            out["right_tool"] = bool(first.accepted and first.calls[0].name == expect.tool)
        elif expect.no_tool:
            out["right_tool"] = not names and not attempted
        if expect.not_tools and out["right_tool"] is not False:
            out["right_tool"] = not any(n in expect.not_tools for n in names)
    target = next(((i, c, t) for i, c, t in turn.calls if c.name == expect.tool), None) if expect.tool else None
    if target is not None:
        out["valid_arguments"] = target[2].ok
        if expect.arguments is not None:
            out["expected_arguments"] = target[2].ok and arguments_match(target[2].arguments, expect.arguments)
    complete = bool(turn.steps) and not (replayed and turn.answer is None)
    if expect.any_of or expect.all_of:
        if turn.answer is not None:
            text = turn.answer
            out["answer"] = ((not expect.any_of or any(contains(text, s) for s in expect.any_of))
                             and all(contains(text, s) for s in expect.all_of))
        elif complete:
            out["answer"] = False
    if expect.uses_tool_result:
        ran = _tool_returned(turn, expect.tool)
        evidence = scenario.tool(expect.tool).evidence
        if turn.answer is not None:
            out["result_used"] = ran and any(contains(turn.answer, e) for e in evidence)
        elif complete:
            out["result_used"] = False
    if not turn.steps and not replayed:
        # The sample stopped before this turn (a render or generation error): what was due did not happen.
        out = {k: (False if _applies(k, expect) else None) for k in VERDICTS}
    # Of the replies that tried to call (a call, or a call-shaped near miss), how many the strict parser reads.
    attempts = [p for p in turn.parses if p.accepted or is_call_attempt(p)]
    readable = all(p.accepted for p in attempts) if attempts else None
    findings += _findings(scenario, turn, family, replayed)
    recorded = [s.get("parse") for s in turn.steps]
    changed = any(r is not None and _parse_key(r) != _parse_key(p.to_json()) for r, p in zip(recorded, turn.parses))
    return {**out, "call_readable": readable, "deviations": deviations, "findings": findings,
            "answer_text": turn.answer,
            "calls": [{"name": c.name, "arguments": t.arguments if t else c.arguments} for _, c, t in turn.calls],
            "parse_changed": changed}


def _applies(verdict: str, expect) -> bool:
    return {"parsed": expect.expects_call is not None,
            "right_tool": expect.expects_call is not None or bool(expect.not_tools),
            "valid_arguments": bool(expect.tool), "expected_arguments": expect.arguments is not None,
            "answer": bool(expect.any_of or expect.all_of), "result_used": expect.uses_tool_result}[verdict]


def _parse_key(parse: dict):
    return (json.dumps(parse.get("calls"), sort_keys=True), parse.get("deviation"))


def _tool_returned(turn: _Turn, name: str) -> bool:
    """The named tool ran in this turn and returned a result (not an error)."""
    for step in turn.steps:
        for call in step.get("calls", []):
            if call.get("name") == name and call.get("executed") and not call.get("error"):
                return True
    return False


def _findings(scenario, turn: _Turn, family, replayed=False) -> list:
    found = []
    seen = set()
    for _, call, typed in turn.calls:
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
                          ("fallback_from", NATIVE_FALLBACK), ("thinking_budget_retry", THINKING_BUDGET_RETRY)):
            if step.get(key):
                found.append(name)
    if any(s.get("family", family) is None and p.deviation for s, p in zip(turn.steps, turn.parses)):
        found.append(CALL_WITHOUT_TOOLS)
    return found


def score_sample(scenario, record: SampleRecord) -> dict:
    """Verdicts of a recorded sample against the scenario: per turn, and for the sample (a verdict holds for
    the sample when it holds in every turn where it applies). `passed`: every applicable verdict holds."""
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
        turns.append(score_turn(scenario, spec, recorded_turns[index], family, replayed))
    out = {name: _all(t[name] for t in turns) for name in VERDICTS}
    applicable = [v for v in out.values() if v is not None]
    out["passed"] = all(applicable) if applicable else None
    out["call_readable"] = _all(t["call_readable"] for t in turns)
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
