"""LLM-jp 4.1's dialect of Harmony (llama.cpp's `llm-jp-harmony-v1`): gpt-oss' messages and channels, with the
call header its template renders and several calls per turn:

    <|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|> json<|message|>{json arguments}<|end|>
    <|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|> json<|message|>{json arguments}<|call|>

The recipient stands in the role header only, the constraint is `<|constrain|> json` (a blank after the special
token, where gpt-oss writes `<|constrain|>json` or ` json`), and every call but the last is closed by `<|end|>`.

Its tokenizer puts a word-start blank on the text after every special token: the template's
`<|channel|>commentary` is the tokens `<|channel|>` `▁commentary`, which a detokenizer (llama.cpp's, whose tests
hold LLM-jp's replies so) prints as `<|channel|> commentary`. A reply is read in either rendering of those tokens,
the template's text or the detokenized one, but in one of them throughout: the detokenized reply has the blank
after every special token text follows (`<|constrain|>  json`, `<|message|> {`), and a reply with the blank after
some and not others is refused. The gpt-oss spelling of a header is refused as `harmony-dialect`, as gpt-oss'
parser refuses this one's."""

import json
import re

from harness.families.harmony import (CALL, CHANNEL, END, GPT_OSS, LLM_JP, LLM_JP_DECODED, MESSAGE, START,
                                      HarmonyParser, Spelling)
from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.payloads import Mismatch
from harness.formats.shape import Shape, exact

SPECIAL = re.compile(r"<\|(?:start|channel|message|constrain|end|call|return)\|>")


def special_token_blanks(text: str) -> list:
    """(token, whether a blank follows it) for each special token in `text` that text follows (not another
    special token, not the end)."""
    return [(m.group(), text[m.end()] == " ") for m in SPECIAL.finditer(text)
            if m.end() < len(text) and not text.startswith("<|", m.end())]


class LlmJpHarmonyParser(HarmonyParser):
    family = "llm-jp-harmony"
    dialect = "LLM-jp"
    multiple = True
    others = (GPT_OSS,)

    def spelling_of(self, text: str) -> Spelling:
        blanks = special_token_blanks(text)
        return LLM_JP_DECODED if blanks and all(blank for _, blank in blanks) else LLM_JP

    def _not_a_header(self, full, at) -> Mismatch:
        miss = super()._not_a_header(full, at)
        # The template's text has a blank after <|constrain|> alone; one after another token is the detokenizer's.
        if miss.deviation == dev.MALFORMED_CALL and any(blank for token, blank in special_token_blanks(full)
                                                        if token != "<|constrain|>"):
            miss.detail += " (a blank after some special tokens and not after others: the detokenized reply has it " \
                           "after each, the template's text after none but <|constrain|>)"
        return miss

    def _check_call_header(self, header):
        if header["channel_to"] and not header["role_to"]:
            raise Mismatch(dev.HARMONY_DIALECT, "the recipient in the channel header, where gpt-oss writes it; "
                           "LLM-jp's template writes it in the role header")
        super()._check_call_header(header)
        if header["constraint"] is None:
            raise Mismatch(dev.HARMONY_DIALECT, "a call header without the constraint ` <|constrain|> json` its "
                           "template writes, as gpt-oss' parser reads it")

    def format(self, calls, content: str = "") -> str:
        preamble = f"{CHANNEL}commentary{MESSAGE}{content}{END}{START}" if content else ""
        return preamble + f"{END}{START}".join(
            f" to=functions.{c.name}{CHANNEL}commentary <|constrain|> json{MESSAGE}"
            f"{json.dumps(c.arguments, ensure_ascii=False)}" for c in calls)


_ARGS = '{"location": "Paris"}'
_CALL = f" to=functions.get_weather{CHANNEL}commentary <|constrain|> json{MESSAGE}{_ARGS}"
NEAR_MISSES = (
    NearMiss(f"{CHANNEL}commentary to=functions.get_weather <|constrain|> json{MESSAGE}{_ARGS}", dev.HARMONY_DIALECT,
             "the recipient in the channel header, as gpt-oss writes it (llama.cpp reads both places)"),
    NearMiss(f" to=functions.get_weather{CHANNEL}analysis <|constrain|> json{MESSAGE}{_ARGS}",
             dev.ANALYSIS_CHANNEL_CALL, "a function call on the analysis channel (llama.cpp reads it)"),
    NearMiss(f" to=functions.get_weather{CHANNEL} commentary <|constrain|> json{MESSAGE}{_ARGS}", dev.MALFORMED_CALL,
             "a blank after <|channel|> but none after <|message|>: neither rendering of the tokens"),
    NearMiss(f" to=functions.get_weather{CHANNEL}commentary <|constrain|> json{MESSAGE}" + "{'location': 'Paris'}",
             dev.PYTHON_LITERALS),
    NearMiss(f"{_CALL}{END}{START}{CHANNEL}final{MESSAGE}Done.", dev.TRAILING_TEXT,
             "a final message after the calls: the template ends a call turn with the last call"),
    NearMiss(f"{_CALL}{CALL}Done.", dev.TRAILING_TEXT),
)

FAMILY = CustomFamily(
    name="llm-jp-harmony",
    label="Harmony, LLM-jp 4.1 dialect",
    detail="gpt-oss' Harmony channels as LLM-jp 4.1 writes them: a call is an assistant message to functions.NAME "
    "named in the role header, on the commentary channel, constrained `<|constrain|> json`; several calls "
    "are consecutive messages, all but the last closed by <|end|>. Read as the template writes it or as its "
    "tokenizer's blank after each special token prints it.",
    parser=LlmJpHarmonyParser,
    near_misses=NEAR_MISSES,
    # vLLM 0.33.0 and SGLang name no parser for it; llama.cpp routes it to a handler of its own
    # (`chat_format=llm-jp-harmony-v1` in the template) and reports the format only as peg-native.
    peers={},
    multiple_calls=True,
    # The template's text, as the canonical outputs are written: a runtime that matches a grammar against the
    # detokenized text (a blank after each special token) needs that rendering, which no pinned tokenizer shows.
    shape=Shape(
        call=exact(" to=functions.{name}<|channel|>commentary <|constrain|> json<|message|>{arguments}"),
        between=exact("<|end|><|start|>assistant"),
        multiple=True,
        reasoning=(),
        triggers=(" to=functions.",),
        note="assistant messages to functions.NAME in the role header, each but the last closed by <|end|>",
    ),
    # Its tokenizer is not pinned, so which of these it holds as special tokens is not read from it.
    tokens={},
)

