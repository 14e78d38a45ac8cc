"""Where the tool list goes for a template that renders an assistant's calls but never reads `tools`.

DeepSeek V3.1 and the DeepSeek-R1 distills are trained to call tools, and their templates render a past call, but
the templates take no `tools`: the model card says where the caller writes the tool list instead. A placement
is that text, written from the model card's own wording, and the message it goes into. Live runs and the
runtime-conformance corpus render through `place()`, so the prompt a model is judged on carries its tools the
way its makers describe; the placement's name and source go into the transcript with the detection."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Callable

from harness import families
from harness.formats.calls import ToolCall

SYSTEM, FIRST_USER = "system", "first-user"


@dataclass(frozen=True)
class Placement:
    family: str
    message: str                 # SYSTEM: appended to the system message (one is added when there is none);
    #                              FIRST_USER: ahead of the first user message
    source: str                  # where the wording comes from
    joiner: str                  # between the text already there and the tool list
    write: Callable[[list], str]  # the tool list as the model card spells it

    def to_json(self) -> dict:
        return {"family": self.family, "message": self.message, "source": self.source}


def _deepseek_v31(tools: list) -> str:
    # The model card's "ToolCall" section: a `## Tools` block after the system prompt, one `###` entry per tool
    # with its parameters as json.dumps writes them, then the exact call format the model must follow.
    entries = "".join(f"### {f['name']}\nDescription: {f.get('description', '')}\n\n"
                      f"Parameters: {json.dumps(f.get('parameters', {}), ensure_ascii=False)}\n\n"
                      for f in (t["function"] for t in tools))
    return ("## Tools\nYou have access to the following tools:\n\n" + entries
            + "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
            "<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n\n"
            "- `tool_call_name` must be an exact match to one of the available tools\n"
            "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
            "- For multiple tool calls, chain them directly without separators or spaces")


def _deepseek_r1(tools: list) -> str:
    # The R1 distills' cards give no tool wording; llama.cpp's DeepSeek R1 template (pinned here as
    # llama-cpp-deepseek-r1) does, with the call syntax of this family. Its text, word for word.
    functions = json.dumps([t["function"] for t in tools], ensure_ascii=False, indent=2)
    return ("You can call any of the following function tools to satisfy the user's requests: " + functions
            + "\n\nExample function tool call syntax:\n\n"
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>example_function_name\n```json\n"
            "{\n  \"arg1\": \"some_value\"\n  ...\n}\n```\n<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n\n")


PLACEMENTS = {
    "deepseek-v3.1": Placement(
        "deepseek-v3.1", SYSTEM, "https://huggingface.co/deepseek-ai/DeepSeek-V3.1 (model card, \"ToolCall\": "
        "`{system prompt}\\n\\n{tool_description}`)", "\n\n", _deepseek_v31),
    # The distills' cards: "Avoid adding a system prompt; all instructions should be contained within the user
    # prompt." So the tool list opens the first user message.
    "deepseek-r1": Placement(
        "deepseek-r1", FIRST_USER, "https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Qwen-32B (model card, "
        "\"Usage Recommendations\": no system prompt, every instruction in the user prompt); the wording is "
        "llama.cpp's DeepSeek R1 template's (templates/llama-cpp-deepseek-r1.jinja)", "", _deepseek_r1),
}


def placement_for(family: str | None) -> Placement | None:
    return PLACEMENTS.get(family) if family else None


def place(placement: Placement | None, messages: list, tools: list | None) -> list:
    """`messages` with the tool list written where `placement` says (fresh copies; no tools, no change)."""
    if placement is None or not tools:
        return messages
    out = copy.deepcopy(messages)
    text = placement.write(tools)
    if placement.message == SYSTEM:
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0].get('content') or ''}{placement.joiner}{text}"
        else:
            out.insert(0, {"role": "system", "content": text})
        return out
    first = next((m for m in out if m.get("role") == "user"), None)
    if first is None:
        out.insert(0, {"role": "user", "content": text})
    else:
        first["content"] = f"{text}{placement.joiner}{first.get('content') or ''}"
    return out


def calls_into_content(messages: list, family: str) -> list:
    """For a template that renders no call but passes an assistant's content through (a declared family: LFM2,
    Granite 3.3): each past call written into its turn's content as the family writes it, so the history shows
    the model its own calls (fresh copies)."""
    out = []
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            written = families.get(family).format([ToolCall(c["function"]["name"], c["function"]["arguments"])
                                                   for c in calls])
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            message["content"] = (message.get("content") or "") + written
        out.append(copy.deepcopy(message))
    return out
