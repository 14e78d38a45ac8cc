"""OpenAI's Harmony format (gpt-oss): a reply is a sequence of messages, each `<|start|>assistant` + header +
`<|message|>` + body, where the header names a channel and, for a tool call, a recipient:

    <|channel|>analysis<|message|>reasoning<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{json arguments}<|call|>

The recipient may also stand in the role header (`<|start|>assistant to=functions.NAME<|channel|>commentary
json<|message|>`), which is how the published template renders past calls. Channels decide what text is:
analysis is reasoning, commentary without a recipient is a preamble for the user, final is the answer. A call
goes to `functions.NAME` on the commentary channel and ends the turn (`<|call|>` is an end-of-generation token,
so a reply holds at most one call). The generation prompt ends with `<|start|>assistant`, so parsing takes it."""

import json
import re

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.payloads import Mismatch, check_arguments, decode_json
from harness.formats.scanner import no_call
from harness.formats.shape import Shape, exact

START = "<|start|>assistant"
CHANNEL, MESSAGE, END, CALL, RETURN = "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>"
FUNCTIONS = "to=functions."
HEADER = re.compile(
    r"(?: to=(?P<role_to>[^\s<]+))?<\|channel\|>(?P<channel>analysis|commentary|final)"
    r"(?: to=(?P<channel_to>[^\s<]+))?(?P<constraint> ?<\|constrain\|>json| json)?<\|message\|>"
)
RECIPIENT = re.compile(r"functions\.([A-Za-z_][A-Za-z0-9_.\-]*)")


class HarmonyParser:
    family = "harmony"
    markers = (CHANNEL, FUNCTIONS)
    # A reply may be several messages (analysis, then a call): `<|end|>` closes one message, the turn ends at
    # `<|call|>` or `<|return|>`, the end-of-generation tokens.
    turn_ends = (CALL, RETURN)

    def __init__(self, foreign_markers):
        self.foreign_markers = foreign_markers

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        result = ParseResult(self.family, content=text.strip())
        if prompt.endswith(START):
            full = START + text
        elif text.lstrip().startswith(START):
            full = text.lstrip()
        elif text.startswith(" to=") or text.lstrip().startswith(CHANNEL):
            full = START + (text if text.startswith(" to=") else text.lstrip())
        else:
            if FUNCTIONS in text:
                result.deviation, result.detail = dev.TEXT_BEFORE_CALL, "text before the first Harmony message header"
                return result
            return no_call(result, text, self.markers, self.foreign_markers(), None)
        try:
            return self._read_messages(full, result)
        except Mismatch as miss:
            # A rejected reply keeps its text as content, past the analysis messages it closed (its reasoning):
            # the near miss is reported, never emptied. The role header the prompt opened is not the reply's.
            reasoning, kept = _closed_analysis(full)
            result.calls, result.reasoning = [], "\n".join(reasoning).strip() or None
            result.content = full[max(kept, len(full) - len(text.lstrip())):].strip()
            result.deviation, result.detail = miss.deviation, miss.detail
            return result

    def _read_messages(self, full, result):
        reasoning, content, pos = [], [], 0
        result.content, result.reasoning = "", None
        while pos < len(full):
            if not full.startswith(START, pos):
                rest = full[pos:]
                if FUNCTIONS in rest:
                    raise Mismatch(dev.MALFORMED_CALL, f"expected {START!r} at offset {pos}, found {rest[:20]!r}")
                content.append(rest)
                break
            header = HEADER.match(full, pos + len(START))
            if header is None:
                rest = full[pos + len(START) :]
                if FUNCTIONS in rest or rest.lstrip().startswith(CHANNEL):
                    raise Mismatch(dev.MALFORMED_CALL, f"not a Harmony message header: {rest[:40]!r}")
                content.append(rest)  # the model skipped the header: plain text
                break
            pos = header.end()
            recipient = header["role_to"] or header["channel_to"]
            if recipient is not None:
                self._finish(result, reasoning, content)
                return self._read_call(full, pos, header, recipient, result)
            channel = header["channel"]
            terminators = (RETURN, END) if channel == "final" else (END,)
            ends = [full.find(t, pos) for t in terminators if t in full[pos:]]
            if not ends:
                body = full[pos:]
                if channel == "analysis":
                    reasoning.append(body)
                    self._finish(result, reasoning, content)
                    inside_call = FUNCTIONS in body or CHANNEL in body
                    result.deviation = dev.CALL_IN_REASONING if inside_call else dev.UNCLOSED_REASONING
                    return result
                content.append(body)
                break
            end = min(ends)
            (reasoning if channel == "analysis" else content).append(full[pos:end])
            pos = end + len(next(t for t in terminators if full.startswith(t, end)))
            if channel == "final":
                rest = full[pos:].strip()
                if rest:
                    raise Mismatch(dev.TRAILING_TEXT, f"text after the final message: {rest[:60]!r}")
                break
        self._finish(result, reasoning, content)
        return no_call(result, result.content, self.markers, self.foreign_markers(), None)

    @staticmethod
    def _finish(result, reasoning, content):
        result.reasoning = "\n".join(r.strip() for r in reasoning).strip() or None
        result.content = "\n".join(c.strip() for c in content).strip()

    def _read_call(self, full, pos, header, recipient, result):
        if header["role_to"] and header["channel_to"]:
            raise Mismatch(dev.MALFORMED_CALL, "the recipient is written twice")
        name = RECIPIENT.fullmatch(recipient)
        if name is None:
            raise Mismatch(dev.MALFORMED_CALL, f"recipient {recipient!r} is not functions.NAME")
        if header["channel"] == "analysis":
            # llama.cpp reads these; the template renders every past call on commentary, never on analysis.
            raise Mismatch(dev.ANALYSIS_CHANNEL_CALL, "a function call on the analysis channel (commentary is due)")
        if header["channel"] != "commentary":
            raise Mismatch(dev.MALFORMED_CALL, f"a function call on the {header['channel']} channel (commentary is due)")
        arguments, pos = decode_json(full, pos)
        if full.startswith(CALL, pos):
            pos += len(CALL)
        rest = full[pos:].strip()
        if rest:
            raise Mismatch(dev.TRAILING_TEXT, f"text after the call: {rest[:60]!r}")
        result.calls = [ToolCall(name.group(1), check_arguments(arguments))]
        return result

    def format(self, calls, content: str = "") -> str:
        preamble = f"{CHANNEL}commentary{MESSAGE}{content}{END}{START}" if content else ""
        return preamble + "".join(
            f"{CHANNEL}commentary to=functions.{c.name} <|constrain|>json{MESSAGE}{json.dumps(c.arguments, ensure_ascii=False)}"
            for c in calls
        )


def _closed_analysis(full: str) -> tuple:
    """(the bodies of the analysis messages the reply opens with, each closed by <|end|>; where the text after
    them starts)."""
    bodies, pos = [], 0
    while full.startswith(START, pos):
        header = HEADER.match(full, pos + len(START))
        end = full.find(END, header.end()) if header else -1
        if header is None or header["channel"] != "analysis" or header["role_to"] or header["channel_to"] or end < 0:
            break
        bodies.append(full[header.end():end].strip())
        pos = end + len(END)
    return bodies, pos


_CALL_HEAD = f"{CHANNEL}commentary to=functions.get_weather <|constrain|>json{MESSAGE}"
NEAR_MISSES = (
    NearMiss(_CALL_HEAD + "{'location': 'Paris'}", dev.PYTHON_LITERALS),
    NearMiss(f"{CHANNEL}analysis to=functions.get_weather <|constrain|>json{MESSAGE}" + '{"location": "Paris"}',
             dev.ANALYSIS_CHANNEL_CALL, "a function call on the analysis channel; the template trains commentary "
             "(llama.cpp accepts both)"),
    NearMiss(f"{CHANNEL}commentary to=get_weather <|constrain|>json{MESSAGE}" + '{"location": "Paris"}',
             dev.MALFORMED_CALL, "the recipient without its functions. namespace"),
    NearMiss(f"{CHANNEL}analysis{MESSAGE}I need the forecast.{START}{_CALL_HEAD}" + '{"location": "Paris"}',
             dev.CALL_IN_REASONING, "the analysis message never ended with <|end|> before the call"),
    NearMiss(f"{CHANNEL}final{MESSAGE}" + '{"name": "get_weather", "arguments": {"location": "Paris"}}', dev.BARE_JSON,
             "the call written as JSON in the final answer"),
    NearMiss(_CALL_HEAD + '{"location": "Paris"}' + f"{CALL}Done.", dev.TRAILING_TEXT),
)


FAMILY = CustomFamily(
    name="harmony",
    label="Harmony (gpt-oss) channels",
    detail="Messages on analysis (reasoning), commentary and final channels; a call is a commentary message to "
    "functions.NAME with JSON arguments, ended by <|call|>, one per reply. Written by gpt-oss.",
    parser=HarmonyParser,
    near_misses=NEAR_MISSES,
    peers={"vllm": "openai", "sglang": "gpt-oss"},
    multiple_calls=False,
    shape=Shape(
        call=exact("<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}"),
        multiple=False,
        reasoning=(),
        # <|channel|> alone also opens analysis and final messages.
        triggers=("<|channel|>commentary to=functions.",),
        note="a commentary message to functions.NAME (the channel form of the recipient)",
    ),
    tokens={t: "special" for t in ("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", END, CALL, RETURN)},
    tokens_source="gpt-oss' tokenizer_config (ids 200002-200012, special: true), as tokenizer test fixtures copy it",
)
