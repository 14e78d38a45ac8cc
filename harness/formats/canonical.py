"""Canonical outputs of a family: what its model would write for known calls, made by the family's own
formatter. They feed the rejection matrix and the grammar tests."""

from harness.formats.base import Family

from harness.formats.calls import ToolCall

ONE_CALL = [ToolCall("get_weather", {"location": "Paris", "days": 3}, "call00001")]
TWO_CALLS = ONE_CALL + [ToolCall("get_time", {"timezone": "Europe/Paris"}, "call00002")]
UNICODE_CALL = [ToolCall("search_notes", {"query": "café \"naïve\" <b>", "limit": 5}, "call00003")]
EMPTY_ARGS_CALL = [ToolCall("get_time", {}, "call00004")]


def canonical_outputs(family: Family) -> list:
    """(label, calls, text) for every canonical output of the family."""
    cases = [("one call", ONE_CALL), ("quoted unicode", UNICODE_CALL), ("no arguments", EMPTY_ARGS_CALL)]
    if family.multiple_calls:
        cases.append(("two calls", TWO_CALLS))
    out = [(label, calls, family.format(calls)) for label, calls in cases]
    if not family.start_only:
        out.append(("text then call", ONE_CALL, family.format(ONE_CALL, content="Let me check. ")))
    return out
