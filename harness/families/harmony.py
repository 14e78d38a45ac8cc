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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Spelling:
    """How one Harmony dialect writes the start of a message and its header."""

    dialect: str
    start: str
    header: re.Pattern


def llm_jp_header(blank: str) -> re.Pattern:
    """LLM-jp 4.1's header: its template writes the constraint as `<|constrain|> json`. `blank` is what its
    tokenizer puts after a special token that text follows ("" as the template's text has it, " " as a
    detokenizer prints the model's tokens); after `<|message|>` only where the body is text."""
    message = r"<\|message\|>(?: |(?=<\|)|$)" if blank else r"<\|message\|>"
    return re.compile(
        rf"(?: to=(?P<role_to>[^\s<]+))?<\|channel\|>{blank}(?P<channel>analysis|commentary|final)"
        rf"(?: to=(?P<channel_to>[^\s<]+))?(?P<constraint> <\|constrain\|>{blank} json)?{message}"
    )


GPT_OSS = Spelling("gpt-oss", START, HEADER)
LLM_JP = Spelling("LLM-jp", START, llm_jp_header(""))
LLM_JP_DECODED = Spelling("LLM-jp", "<|start|> assistant", llm_jp_header(" "))


class HarmonyParser:
    family = "harmony"
    dialect = "gpt-oss"
    markers = (CHANNEL, FUNCTIONS)
    # A reply may be several messages (analysis, then a call): `<|end|>` closes one message, the turn ends at
    # `<|call|>` or `<|return|>`, the end-of-generation tokens.
    turn_ends = (CALL, RETURN)
    # gpt-oss' template renders one call per turn (`<|call|>` ends generation): a second message after a
    # call is text after it.
    multiple = False
    # Headers of the other dialects, each refused by the dialect's name where it is not this one's.
    others = (LLM_JP, LLM_JP_DECODED)

    def __init__(self, foreign_markers):
        self.foreign_markers = foreign_markers

    def spelling_of(self, text: str) -> Spelling:
        return GPT_OSS

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        result = ParseResult(self.family, content=text.strip())
        spelling = self.spelling_of(text)
        if prompt.endswith(START):
            full = spelling.start + text
        elif text.lstrip().startswith(spelling.start):
            full = text.lstrip()
        elif text.startswith(" to=") or text.lstrip().startswith(CHANNEL):
            full = spelling.start + (text if text.startswith(" to=") else text.lstrip())
        else:
            if FUNCTIONS in text:
                result.deviation, result.detail = dev.TEXT_BEFORE_CALL, "text before the first Harmony message header"
                return result
            return no_call(result, text, self.markers, self.foreign_markers(), None)
        try:
            return self._read_messages(full, result, spelling)
        except Mismatch as miss:
            # A rejected reply keeps its text as content, past the analysis messages it closed (its reasoning):
            # the near miss is reported, never emptied. The role header the prompt opened is not the reply's.
            reasoning, kept = _closed_analysis(full, spelling)
            result.calls, result.reasoning = [], "\n".join(reasoning).strip() or None
            result.content = full[max(kept, len(full) - len(text.lstrip())):].strip()
            result.deviation, result.detail = miss.deviation, miss.detail
            return result

    def _read_messages(self, full, result, spelling):
        reasoning, content, pos = [], [], 0
        result.content, result.reasoning = "", None
        while pos < len(full):
            if not full.startswith(spelling.start, pos):
                rest = full[pos:]
                if FUNCTIONS in rest:
                    raise Mismatch(dev.MALFORMED_CALL,
                                   f"expected {spelling.start!r} at offset {pos}, found {rest[:20]!r}")
                content.append(rest)
                break
            at = pos + len(spelling.start)
            header = spelling.header.match(full, at)
            if header is None:
                rest = full[at:]
                if FUNCTIONS in rest or rest.lstrip().startswith(CHANNEL):
                    raise self._not_a_header(full, at)
                content.append(rest)  # the model skipped the header: plain text
                break
            pos = header.end()
            recipient = header["role_to"] or header["channel_to"]
            if recipient is not None:
                self._finish(result, reasoning, content)
                return self._read_calls(full, pos, header, result, spelling)
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

    def _not_a_header(self, full, at) -> Mismatch:
        """Why the text at `at`, where a message header is due, is none of this dialect's."""
        for other in self.others:
            if other.header.match(full, at):
                return Mismatch(dev.HARMONY_DIALECT, f"a message header as {other.dialect} writes it, where "
                                f"{self.dialect} is due: {full[at:at + 60]!r}")
        return Mismatch(dev.MALFORMED_CALL, f"not a Harmony message header: {full[at:at + 40]!r}")

    @staticmethod
    def _finish(result, reasoning, content):
        result.reasoning = "\n".join(r.strip() for r in reasoning).strip() or None
        result.content = "\n".join(c.strip() for c in content).strip()

    def _read_calls(self, full, pos, header, result, spelling):
        """The call messages from the first call's header on: one (gpt-oss) or several, each but the last closed
        by `<|end|>` (LLM-jp), then nothing but `<|call|>`."""
        calls = []
        while True:
            self._check_call_header(header)
            name = RECIPIENT.fullmatch(header["role_to"] or header["channel_to"])
            arguments, pos = decode_json(full, pos)
            calls.append(ToolCall(name.group(1), check_arguments(arguments)))
            following = END + spelling.start
            if not (self.multiple and full.startswith(following, pos)):
                break
            at = pos + len(following)
            header = spelling.header.match(full, at)
            if header is None:
                raise self._not_a_header(full, at)
            if not (header["role_to"] or header["channel_to"]):
                raise Mismatch(dev.TRAILING_TEXT, f"a message that is not a call after the calls: "
                               f"{full[at:at + 60]!r}")
            pos = header.end()
        if full.startswith(CALL, pos):
            pos += len(CALL)
        rest = full[pos:].strip()
        if rest:
            raise Mismatch(dev.TRAILING_TEXT, f"text after the call: {rest[:60]!r}")
        result.calls = calls
        return result

    def _check_call_header(self, header):
        if header["role_to"] and header["channel_to"]:
            raise Mismatch(dev.MALFORMED_CALL, "the recipient is written twice")
        recipient = header["role_to"] or header["channel_to"]
        if RECIPIENT.fullmatch(recipient) is None:
            raise Mismatch(dev.MALFORMED_CALL, f"recipient {recipient!r} is not functions.NAME")
        if header["channel"] == "analysis":
            # llama.cpp reads these; the template renders every past call on commentary, never on analysis.
            raise Mismatch(dev.ANALYSIS_CHANNEL_CALL, "a function call on the analysis channel (commentary is due)")
        if header["channel"] != "commentary":
            raise Mismatch(dev.MALFORMED_CALL, f"a function call on the {header['channel']} channel (commentary is due)")

    def format(self, calls, content: str = "") -> str:
        preamble = f"{CHANNEL}commentary{MESSAGE}{content}{END}{START}" if content else ""
        return preamble + "".join(
            f"{CHANNEL}commentary to=functions.{c.name} <|constrain|>json{MESSAGE}{json.dumps(c.arguments, ensure_ascii=False)}"
            for c in calls
        )


def _closed_analysis(full: str, spelling: Spelling = GPT_OSS) -> tuple:
    """(the bodies of the analysis messages the reply opens with, each closed by <|end|>; where the text after
    them starts)."""
    bodies, pos = [], 0
    while full.startswith(spelling.start, pos):
        header = spelling.header.match(full, pos + len(spelling.start))
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
