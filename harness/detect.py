"""Detect a template's tool-call family from the template itself (seed ADR 0061).

Render a probe conversation without and with an assistant tool call, cut the difference at the
end-of-turn token: that text is exactly what the template's model is trained to write for the call. The
family whose parser reads it back as the probe call is the template's family. No template source text is
ever fingerprinted."""

import json
import copy
from dataclasses import dataclass

from harness import families as registry
from harness.errors import TemplateError
from harness.probe import PROBE_CALL, PROBE_TOOL, probe_messages
from harness.render import render

# Tokens that end an assistant turn across the pinned templates. The template's own eos_token is tried too.
END_OF_TURN = (
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "</s>", "<end_of_turn>", "<|END_OF_TURN_TOKEN|>",
    "<｜end▁of▁sentence｜>", "<|return|>", "<|call|>", "<|endoftext|>", "<|end_of_text|>", "<turn|>",
    "<|im_end_of_turn|>", "[/TOOL_CALLS]",
    "[e~[", "<seed:eos>", "<|role_end|>", "</assistant>", "<｜hy_eos:opensource｜>", "<|eot|>", "<sep>",
    "<|tool_response>", "<|calls|>",
    "<SPECIAL_12>", "<end_of_sentence>", "<|end_of_msg|>", "<|START_OF_TURN_TOKEN|>",
)

NO_TOOLS_SETTINGS = ("none",)


@dataclass
class Detection:
    family: str | None
    reason: str
    rendered_call: str | None = None
    # The generation prompt up to where the reply starts; parsing a reply needs it (a forced-open <think>,
    # Functionary's >>>).
    prompt: str | None = None
    # Every family that read the call back (more than one would be a registry bug; the matrix forbids it).
    matches: tuple = ()
    # How the template wants an assistant call's arguments: a dict ("object", the Hugging Face shape) or a
    # JSON-encoded string ("string", the OpenAI wire shape some templates concatenate).
    arguments_style: str = "object"
    # The whole generation prompt of the probe. A live reply follows this, so parsing one passes it: it
    # tells whether the template opened a <think> block or Functionary's `>>>` for the model.
    generation_prompt: str | None = None

    def to_json(self) -> dict:
        return {"family": self.family, "reason": self.reason, "rendered_call": self.rendered_call}


def common_prefix_length(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def reply_start(prompt: str, history: str) -> int:
    """Where the reply begins in the history render. When the generation prompt has a tail the history does
    not repeat (a forced-open `<think>`, `<|START_RESPONSE|>`), the common prefix can end inside a tag
    (`<|START_` shared with `<|START_ACTION|>`): back off to the last markup boundary."""
    shared = common_prefix_length(prompt, history)
    if shared == len(prompt):
        return shared
    head = prompt[:shared]
    return max(max(head.rfind(c) + 1 for c in ">]\n"), max(head.rfind(c) for c in "<["), 0)


def with_string_arguments(messages: list) -> list:
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
    return out


def cut_at_end_of_turn(text: str, eos_token: str | None) -> str:
    tokens = [t for t in (*END_OF_TURN, eos_token) if t]
    hits = [text.find(t) for t in tokens if t in text]
    return text[: min(hits)] if hits else text


def same_call(call, expected=PROBE_CALL) -> bool:
    """The parsed call is the probe call. Text families write every value as text ("3" for 3)."""
    if call.name != expected["name"] or set(call.arguments) != set(expected["arguments"]):
        return False
    for key, want in expected["arguments"].items():
        got = call.arguments[key]
        if got != want and not (isinstance(got, str) and got.strip() in (str(want), json.dumps(want))):
            return False
    return True


def render_probe(template: str, bos_token="", eos_token="", arguments_style="object", **kwargs):
    """Return (prompt up to the reply, generation prompt, reply region) for the probe, or raise TemplateError."""
    tools = [PROBE_TOOL]
    prompt = render(template, probe_messages(with_call=False), tools=tools, add_generation_prompt=True,
                    bos_token=bos_token, eos_token=eos_token, **kwargs)
    messages = probe_messages(with_call=True)
    if arguments_style == "string":
        messages = with_string_arguments(messages)
    history = render(template, messages, tools=tools, add_generation_prompt=False,
                     bos_token=bos_token, eos_token=eos_token, **kwargs)
    start = reply_start(prompt, history)
    return prompt[:start], prompt, history[start:]


def _reads_tools(template, prompt, bos_token, eos_token, **kwargs) -> bool:
    try:
        without = render(template, probe_messages(with_call=False), add_generation_prompt=True,
                         bos_token=bos_token, eos_token=eos_token, **kwargs)
    except TemplateError:
        return True  # it fails without tools, so it reads them
    return without != prompt


def detect(template: str, bos_token="", eos_token="", candidates=None, **kwargs) -> Detection:
    # Hugging Face's shape (arguments as a dict) first; some templates concatenate a JSON string instead.
    failure = prompt = None
    for style in ("object", "string"):
        try:
            shared_prompt, prompt, reply_region = render_probe(template, bos_token, eos_token, style, **kwargs)
        except TemplateError as exc:
            failure = failure or exc
            continue
        rendered = cut_at_end_of_turn(reply_region, eos_token)
        if PROBE_CALL["name"] in rendered:
            break
    if prompt is None:
        return Detection(None, f"the template fails to render the probe conversation: {failure}")
    if not _reads_tools(template, prompt, bos_token, eos_token, **kwargs):
        return Detection(None, "the template does not read the `tools` variable: offered tools never reach the model")
    if PROBE_CALL["name"] not in rendered:
        return Detection(None, "the template does not render the assistant's tool call", rendered or None,
                         shared_prompt, generation_prompt=prompt)
    table = registry.families()
    names = candidates or list(table)
    matches = []
    for name in names:
        result = table[name].parse(rendered, shared_prompt)
        if result.accepted and len(result.calls) == 1 and same_call(result.calls[0]):
            matches.append(name)
    if not matches:
        return Detection(None, "no family's parser reads the rendered call back as the probe call",
                         rendered, shared_prompt, arguments_style=style, generation_prompt=prompt)
    reason = f"the rendered call parses back as the probe call in the {matches[0]} family"
    if len(matches) > 1:
        reason += f" (also read by: {', '.join(matches[1:])})"
    return Detection(matches[0], reason, rendered, shared_prompt, tuple(matches), style, prompt)


def resolve(setting: str, template: str, bos_token="", eos_token="", **kwargs):
    """The `tool_format` setting → (family name or None, notice or None), as the seed ADR specifies:
    `auto` detects; `auto` with no match and `none` chat without tools; `auto` with no match says so."""
    if setting in NO_TOOLS_SETTINGS:
        return None, None
    if setting != "auto":
        registry.get(setting)
        return setting, None
    found = detect(template, bos_token, eos_token, **kwargs)
    if found.family:
        return found.family, None
    return None, (f"No tool-call format detected for this template ({found.reason}); chatting without tools. "
                  "Choose a format with the tool_format setting (--family) to enable tools.")
