"""The probe tool, call and conversations that rendering tests and format detection put through every template.

The shapes follow what every supported template accepts: an assistant tool-call turn has string content (""
when there is no text, because Qwen3's GGUF template evaluates `'</think>' in message.content`), call ids are 9
alphanumerics (Mistral's templates raise on any other length), arguments are a dict (templates serialise them
with tojson themselves) and turns alternate user/assistant around the tool result.

The constants are shared: never mutate them. The functions return fresh copies that callers may change.
"""

from __future__ import annotations

import copy
import json

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Number of days to forecast"},
            },
            "required": ["location"],
        },
    },
}

# A non-string argument (days) lets detection check that a family's parser gives back typed JSON values.
PROBE_CALL = {"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}
PROBE_CALL_ID = "call00001"

PROBE_SYSTEM = "You are a helpful assistant."
PROBE_USER = "What will the weather be in Paris for the next 3 days?"
PROBE_RESULT = '{"forecast": ["sunny", "cloudy", "rain"], "unit": "celsius"}'
PROBE_ANSWER = "Sunny today, cloudy tomorrow, then rain."
PROBE_FOLLOW_UP = "Thanks. Should I take an umbrella on the third day?"


def probe_tools() -> list[dict]:
    return [copy.deepcopy(PROBE_TOOL)]


def probe_call_message() -> dict:
    """The assistant turn that makes PROBE_CALL, in the OpenAI / Hugging Face shape."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": PROBE_CALL_ID,
                "type": "function",
                "function": {"name": PROBE_CALL["name"], "arguments": copy.deepcopy(PROBE_CALL["arguments"])},
            }
        ],
    }


def probe_messages(with_call: bool) -> list[dict]:
    """The user turn alone, or followed by the assistant's PROBE_CALL. Detection diffs the two renders."""
    messages = [{"role": "user", "content": PROBE_USER}]
    if with_call:
        messages.append(probe_call_message())
    return messages


def full_conversation() -> list[dict]:
    """A whole tool exchange as a chat stores it: system, user, call, tool result, the assistant's answer to the
    result, then a follow-up question. The answer keeps the turns alternating; without it the two user turns
    around the tool result would be rejected by Mistral-style templates that check alternation."""
    return [
        {"role": "system", "content": PROBE_SYSTEM},
        {"role": "user", "content": PROBE_USER},
        probe_call_message(),
        {"role": "tool", "tool_call_id": PROBE_CALL_ID, "name": PROBE_CALL["name"], "content": PROBE_RESULT},
        {"role": "assistant", "content": PROBE_ANSWER},
        {"role": "user", "content": PROBE_FOLLOW_UP},
    ]


# How tools reach a template. Hugging Face passes `tools`; llama.cpp renders Firefunction v2 without `tools`,
# giving it a `functions` JSON string (the tools indented by 2, nlohmann's dump(2)) and a `datetime`
# (common_chat_params_init_firefunction_v2). The date is llama.cpp's earlier fixed one, so renders reproduce.
HF_TOOLS = "tools"
LLAMA_CPP_FUNCTIONS = "functions"
FUNCTIONS_DATETIME = "Jan 29 2025 13:00:00 GMT"


def tool_variables(carrier: str, tools: list | None) -> dict:
    """The render variables that carry `tools` (None: no tools offered) the way `carrier` passes them."""
    if carrier == HF_TOOLS:
        return {"tools": tools}
    if carrier == LLAMA_CPP_FUNCTIONS:
        functions = json.dumps(tools, ensure_ascii=False, indent=2) if tools else ""
        return {"tools": None, "functions": functions, "datetime": FUNCTIONS_DATETIME}
    raise ValueError(f"unknown tool carrier {carrier!r}")
