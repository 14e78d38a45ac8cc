"""What a render is given, prepared as transformers' apply_chat_template prepares it: messages and tools rebuilt
out of plain JSON types (the template never sees or mutates the caller's objects, and methods of rich objects
stay out of the sandbox), None values dropped, reasoning copied under every name templates read it by."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from harness.core.errors import TemplateError

# Names a message's reasoning is passed under; transformers copies the first one found to the others.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _plain(value: Any) -> Any:
    """Rebuild a value out of plain JSON types, as transformers' `_plain_template_data` does: the template then
    never sees (or mutates) the caller's objects, and methods of rich objects stay out of the sandbox."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if any(cls.__module__ == "numpy" and cls.__name__ == "generic" for cls in type(value).__mro__):
        return _plain(value.item())  # numpy scalars: np.bool_(False) must not become a truthy placeholder
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _prepare_messages(messages: Any) -> list[dict]:
    if not isinstance(messages, (list, tuple)):
        raise TemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise TemplateError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    prepared = []
    for index, message in enumerate(messages):
        if dataclasses.is_dataclass(message) and not isinstance(message, type):
            message = {field.name: getattr(message, field.name) for field in dataclasses.fields(message)}
        elif callable(getattr(message, "model_dump", None)):
            message = message.model_dump()
        if not isinstance(message, Mapping):
            raise TemplateError(f"message {index} must be a dict, got {type(message).__name__}: {message!r}")
        # apply_chat_template drops keys whose value is None (e.g. OpenAI's content=None): many templates crash on
        # them or print "None", while they handle a missing key.
        message = _plain({key: item for key, item in message.items() if item is not None})
        reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            # Same key order as transformers: `thinking` first (gpt-oss reads it), `reasoning_content` overwritten.
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared


def _prepare_tools(tools: Any) -> list[dict] | None:
    if tools is None:
        return None
    if not isinstance(tools, (list, tuple)):
        raise TemplateError(f"tools must be a list of JSON-schema dicts, got {type(tools).__name__}")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise TemplateError(f"tool {index} must be a JSON-schema dict, got {type(tool).__name__}")
    return _plain(list(tools))
