"""Round trip: the call a family's parser reads out of a template's rendered probe call, rendered back through
the template as the assistant's message, must give the same text (llama.cpp's tests check the same of its
parsers). The parsed message goes back whole: its calls with arguments typed by the probe tool's schema (as a
runtime types them), the call id the parser read, the text around the calls as content and the reasoning."""

from __future__ import annotations

import copy
import json

from harness import families as registry
from harness.schema.arguments import tool_parameters, type_arguments
from harness.core.errors import TemplateError
from harness.template import render as rendering
from harness.template.detect import cut_at_end_of_turn, reply_start, with_string_arguments
from harness.template.probe import PROBE_CALL_ID, PROBE_TOOL, probe_messages, tool_variables

_CONTEXT = 30


def parsed_message(parsed) -> dict:
    message = {"role": "assistant", "content": parsed.content or "", "tool_calls": [
        {"id": call.id or PROBE_CALL_ID, "type": "function",
         "function": {"name": call.name, "arguments": _typed_probe_arguments(call.arguments)}}
        for call in parsed.calls]}
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning
    return message


def _typed_probe_arguments(arguments: dict) -> dict:
    # Most templates' calls parse to the same few argument dicts, and typing builds a schema validator each time.
    # Keys keep their order in the text: the typed dict is rendered back in that order.
    key = json.dumps(arguments, ensure_ascii=False, default=repr)
    return copy.deepcopy(_typed_by_text(key, arguments))


_typed_cache: dict = {}


def _typed_by_text(key: str, arguments: dict) -> dict:
    if key not in _typed_cache:
        if len(_typed_cache) > 1024:
            _typed_cache.clear()
        _typed_cache[key] = type_arguments(arguments, tool_parameters(PROBE_TOOL)).arguments
    return _typed_cache[key]


def fork(a: str, b: str) -> dict:
    """Where two texts first differ, with a little of each from just before that point."""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - _CONTEXT)
    return {"offset": at, "rendered": a[start:at + _CONTEXT], "round_trip": b[start:at + _CONTEXT]}


def round_trip(template: str, found, bos_token="", eos_token="") -> dict | None:
    """{"same": bool, "fork": {...} or None, "error": str or None} for a detected template; None otherwise (a
    declared, walled or tools-blind template has no rendered call a parser read)."""
    if not found.family or found.declared or not found.rendered_call:
        return None
    parsed = registry.parse(found.family, found.rendered_call, found.prompt or "")
    messages = probe_messages(with_call=False) + [parsed_message(parsed)]
    if found.arguments_style == "string":
        messages = with_string_arguments(messages)
    try:
        history = rendering.render(template, messages, add_generation_prompt=False, bos_token=bos_token,
                                   eos_token=eos_token, **tool_variables(found.carrier, [PROBE_TOOL]))
    except TemplateError as exc:
        return {"same": False, "fork": None, "error": f"the parsed message does not render: {exc}"}
    again = cut_at_end_of_turn(history[reply_start(found.generation_prompt, history):], eos_token)
    if again == found.rendered_call:
        return {"same": True, "fork": None, "error": None}
    return {"same": False, "fork": fork(found.rendered_call, again), "error": None}
