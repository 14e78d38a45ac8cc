"""Functionary v3.2's recipient lines: every part of a reply starts with `>>>RECIPIENT\\n`. The recipient `all` is
text for the user, any other recipient is a function and what follows is its JSON arguments:

    >>>all\\nLet me check.>>>get_weather\\n{"location": "Paris"}>>>get_time\\n{}

The generation prompt already ends with `>>>`, so the model's reply starts with the recipient itself; parsing
takes the prompt to know that. The template renders the text part first and the calls after it, so text after a
call is trailing text. `>>>all` text is content, never a call, whatever it holds."""

import json
import re

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.payloads import Mismatch, check_arguments, decode_json
from harness.formats.scanner import no_call
from harness.formats.shape import Shape, exact

MARK = ">>>"
TEXT_RECIPIENT = "all"
RECIPIENT = re.compile(r">>>([A-Za-z_][A-Za-z0-9_.\-]*)\n")
# A recipient whose line does not end before the arguments (`>>>get_weather {...}`), or a reply cut off after it.
BROKEN_RECIPIENT = re.compile(r">>>([A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*(\{|\Z)")


class FunctionaryV32Parser:
    family = "functionary-v3.2"
    markers = (MARK,)

    def __init__(self, foreign_markers):
        self.foreign_markers = foreign_markers

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        opened = prompt.endswith(MARK)
        full = MARK + text if opened else text
        result = ParseResult(self.family, content=text.strip())
        first = full.find(MARK)
        if first < 0:
            return no_call(result, full, self.markers, self.foreign_markers(), None)
        try:
            texts, calls = self._read_parts(full, first, opened)
        except Mismatch as miss:
            result.deviation, result.detail = miss.deviation, miss.detail
            return result
        result.content = "".join([full[:first], *texts]).strip()
        if not calls:
            return no_call(result, result.content, self.markers, self.foreign_markers(), None)
        foreign = dev.foreign_marker(result.content, self.markers, self.foreign_markers())
        if foreign:
            # Another family's call in the text: accepting ours would leave it in content, unexecuted.
            result.deviation, result.detail = dev.FOREIGN_MARKERS, f"{foreign!r} in the text beside the calls"
            return result
        result.calls = calls
        return result

    def _read_parts(self, full, pos, opened):
        texts, calls = [], []
        while pos < len(full):
            header = RECIPIENT.match(full, pos)
            if header is None:
                broken = BROKEN_RECIPIENT.match(full, pos)
                if broken and broken.group(1) != TEXT_RECIPIENT:
                    raise Mismatch(dev.MALFORMED_CALL if broken.group(2) else dev.UNCLOSED_CALL,
                                   f"a recipient must be followed by a newline, at offset {pos}")
                if calls:
                    raise Mismatch(dev.TRAILING_TEXT, f"text after the calls: {full[pos:pos + 60]!r}")
                # `>>>` then prose: the model skipped the recipient; it is text, not a call. Only the prompt's
                # own `>>>` is left out of the content.
                texts.append(full[pos + len(MARK) if opened and pos == 0 else pos :])
                return texts, calls
            recipient, pos = header.group(1), header.end()
            if recipient == TEXT_RECIPIENT:
                if calls:
                    raise Mismatch(dev.TRAILING_TEXT, "text (>>>all) after the calls")
                end = full.find(MARK, pos)
                end = len(full) if end < 0 else end
                texts.append(full[pos:end])
                pos = end
                continue
            arguments, pos = decode_json(full, pos)
            calls.append(ToolCall(recipient, check_arguments(arguments)))
            after = len(full) - len(full[pos:].lstrip())
            if after < len(full) and not full.startswith(MARK, after):
                raise Mismatch(dev.TRAILING_TEXT, f"text after the call: {full[after:after + 60]!r}")
            pos = after
        return texts, calls

    def format(self, calls, content: str = "") -> str:
        text = f"{MARK}{TEXT_RECIPIENT}\n{content}" if content else ""
        return text + "".join(f"{MARK}{c.name}\n{json.dumps(c.arguments, ensure_ascii=False)}" for c in calls)


NEAR_MISSES = (
    NearMiss(">>>get_weather\n{'location': 'Paris'}", dev.PYTHON_LITERALS),
    NearMiss('>>>get_weather {"location": "Paris"}', dev.MALFORMED_CALL, "the recipient line not ended"),
    NearMiss('>>>get_weather\n{"location": "Paris"}\nI will report back.', dev.TRAILING_TEXT),
    NearMiss('>>>get_weather\n{"location": "Paris"', dev.UNCLOSED_CALL),
    NearMiss('>>>all\nLet me check.\n{"name": "get_weather", "arguments": {"location": "Paris"}}', dev.BARE_JSON,
             "the call written as JSON in the text channel instead of to its recipient"),
)


FAMILY = CustomFamily(
    name="functionary-v3.2",
    label="Functionary v3.2 >>> recipients",
    detail=">>>NAME\\n{json arguments} per call, after optional >>>all\\n text; the generation prompt opens the "
    "first >>>. Written by meetkai functionary-medium-v3.2.",
    parser=FunctionaryV32Parser,
    near_misses=NEAR_MISSES,
    shape=Shape(
        # The generation prompt ends with `>>>`, so the first recipient's `>>>` is optional.
        section_open=exact(">>>"),
        section_optional=True,
        call=exact("{name}\n{arguments}"),
        between=exact("{ws}>>>"),
        reasoning=(),
        # `>>>` alone also opens the text channel (`>>>all`), so a trigger names the function.
        triggers=(">>>{name}\n",),
        start_triggers=("{name}\n",),
        note=">>>NAME\\n{json} recipients; triggers name the function, since >>>all is text",
    ),
)
