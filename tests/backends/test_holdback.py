"""StreamHoldback: what a streamed reply may show while a tool call could be opening (no model needed)."""

from __future__ import annotations

import random

import pytest

from harness import families as registry
from harness.formats.calls import ToolCall
from harness.formats.reasoning import split_reasoning
from harness.backends.holdback import StreamHoldback

HERMES = ["<tool_call>"]
MISTRAL = ["[TOOL_CALLS]"]
LLAMA = ["<|python_tag|>"]


def stream(chunks, markers, whole_reply=False):
    hold = StreamHoldback(markers, whole_reply=whole_reply)
    shown = [hold.feed(c) for c in chunks]
    return shown, hold.finish(), hold


def test_plain_text_streams_as_it_comes():
    shown, rest, hold = stream(["Hello", ", wor", "ld."], HERMES)
    assert shown == ["Hello", ", wor", "ld."] and rest == ""
    assert not hold.call_opened and hold.withheld == ""


def test_text_from_the_marker_on_is_withheld():
    shown, rest, hold = stream(['Let me check. <tool_call>\n{"name": "f"}', "\n</tool_call>"], HERMES)
    assert shown == ["Let me check. ", ""] and rest == ""
    assert hold.call_opened
    assert hold.withheld == '<tool_call>\n{"name": "f"}\n</tool_call>'


def test_marker_split_across_chunks_is_never_shown():
    shown, rest, hold = stream(["Hi <to", "ol_c", "all>{}"], HERMES)
    assert shown == ["Hi ", "", ""] and rest == ""
    assert hold.withheld == "<tool_call>{}"


def test_partial_marker_released_once_it_is_not_one():
    shown, rest, _ = stream(["a <tool", "s list"], HERMES)
    assert shown == ["a ", "<tools list"] and rest == ""


def test_finish_releases_a_partial_marker_at_the_end():
    shown, rest, hold = stream(["Use [TOOL_", "CALL"], MISTRAL)
    assert shown == ["Use ", ""] and rest == "[TOOL_CALL"
    assert not hold.call_opened


def test_control_token_marker_at_the_very_start():
    shown, rest, hold = stream(["[TOOL_CALLS]", '[{"name": "f", "arguments": {}}]'], MISTRAL)
    assert shown == ["", ""] and rest == "" and hold.withheld.startswith("[TOOL_CALLS][{")


def test_earliest_of_several_markers_wins():
    shown, rest, hold = stream(["x [TOOL_CALLS] y <|python_tag|> z"], MISTRAL + LLAMA)
    assert shown == ["x "] and hold.withheld == "[TOOL_CALLS] y <|python_tag|> z"


def test_whole_reply_call_as_json_is_withheld_entirely():
    shown, rest, hold = stream(["\n ", ' {"name": "get_weather",', ' "parameters": {}}'], LLAMA, whole_reply=True)
    assert shown == ["", "", ""] and rest == ""
    assert hold.call_opened and hold.withheld == '{"name": "get_weather", "parameters": {}}'


def test_whole_reply_opening_with_the_marker_is_a_call():
    shown, rest, hold = stream(["<|pyth", "on_tag|>", '{"name": "f"}'], LLAMA, whole_reply=True)
    assert shown == ["", "", ""] and rest == "" and hold.withheld == '<|python_tag|>{"name": "f"}'


def test_whole_reply_text_streams_once_the_first_character_decides():
    shown, rest, hold = stream(["  ", "The", " answer is 51."], LLAMA, whole_reply=True)
    assert shown == ["", "  The", " answer is 51."] and rest == ""
    assert not hold.call_opened


def test_whole_reply_marker_lookalike_is_released_as_text():
    shown, rest, _ = stream(["<|py", "thon is fun"], LLAMA, whole_reply=True)
    assert shown == ["", "<|python is fun"] and rest == ""


def test_whole_reply_brace_later_in_the_text_is_not_a_call():
    shown, rest, hold = stream(["Sure: ", '{"a": 1}'], LLAMA, whole_reply=True)
    assert "".join(shown) + rest == 'Sure: {"a": 1}' and not hold.call_opened


def test_whole_reply_marker_later_in_the_text_is_still_withheld():
    shown, rest, hold = stream(["Calling. ", "<|python_tag|>{}"], LLAMA, whole_reply=True)
    assert "".join(shown) + rest == "Calling. " and hold.withheld == "<|python_tag|>{}"


def test_whole_reply_of_only_whitespace_or_partial_marker_is_released_at_the_end():
    assert stream([" ", "\n"], LLAMA, whole_reply=True)[:2] == (["", ""], " \n")
    assert stream([" <|pyt"], LLAMA, whole_reply=True)[:2] == ([""], " <|pyt")


def test_whole_reply_without_markers_uses_the_brace_rule():
    assert stream(['{"x": 1}'], [], whole_reply=True)[:2] == ([""], "")
    assert stream(["no call"], [], whole_reply=True)[:2] == (["no call"], "")


def test_lifecycle_and_bad_markers():
    hold = StreamHoldback(HERMES)
    assert hold.feed("abc") == "abc"
    assert hold.finish() == "" and hold.finish() == ""
    with pytest.raises(RuntimeError):
        hold.feed("more")
    with pytest.raises(ValueError):
        StreamHoldback(["<tool_call>", ""])


def _expected(text, markers, whole_reply):
    """What a complete reply shows in the end, stated directly from the rules."""
    stripped = text.lstrip()
    if whole_reply and stripped and (stripped[0] == "{" or any(stripped.startswith(m) for m in markers)):
        return ""
    hits = [i for i in (text.find(m) for m in markers) if i >= 0]
    return text[:min(hits)] if hits else text


@pytest.mark.parametrize("markers, whole_reply, text", [
    (HERMES, False, 'I will look. <tool_call>\n{"name": "f"}\n</tool_call>'),
    (HERMES, False, "a < b <tool and <tool_ but no call"),
    (["<tool_call>", "<function="], False, "see <function=f> here"),
    (MISTRAL, False, "[TOOL[TOOL_CALLS][{}]"),
    (MISTRAL + LLAMA, False, "<|python|> [TOOL_CALLS] <|python_tag|>"),
    (LLAMA, True, '  {"name": "f", "parameters": {"a": "é🙂"}}'),
    (LLAMA, True, "<|python_tag|>{}"),
    (LLAMA, True, " <|python is a language, [x] {y}"),
    (LLAMA, True, "Café 🙂 <|python_tag|>{}"),
])
def test_any_chunking_shows_the_same_and_never_a_marker(markers, whole_reply, text):
    want = _expected(text, markers, whole_reply)
    rng = random.Random(0)
    splits = [[text[i:i + 1] for i in range(len(text))]]  # one character at a time
    splits += [[text[:i], text[i:]] for i in range(len(text) + 1)]
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(text)), k=min(4, len(text) - 1)))
        splits.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])])
    for chunks in splits:
        hold = StreamHoldback(markers, whole_reply=whole_reply)
        shown = ""
        for c in chunks:
            shown += hold.feed(c)
            assert want.startswith(shown), chunks
            assert not any(m in shown for m in markers)
        shown += hold.finish()
        assert shown == want, chunks
        assert hold.call_opened == (want != text)


# --- the holdback of each family, against that family's parser --------------------------------------------


def _feed_all(hold, chunks):
    shown = "".join(hold.feed(c) for c in chunks) + hold.finish()
    return shown, hold


def test_a_marker_mentioned_in_reasoning_does_not_stop_the_stream():
    text = "<think>Should I use <tool_call> here? No.</think>The answer is 5."
    for chunks in ([text], list(text)):
        shown, hold = _feed_all(StreamHoldback(HERMES, reasoning=[("<think>", "</think>")]), chunks)
        assert shown == text and not hold.call_opened
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    shown, hold = _feed_all(StreamHoldback(HERMES, reasoning=[("<think>", "</think>")]), list(text + call))
    assert shown == text and hold.withheld == call


def test_reasoning_the_prompt_opened_streams_until_its_close_tag():
    text = "mention <tool_call> in thought</think>Done. <tool_call>{}"
    hold = StreamHoldback(HERMES, reasoning=[("<think>", "</think>")], prompt="<|im_start|>assistant\n<think>\n")
    shown, hold = _feed_all(hold, list(text))
    assert shown == "mention <tool_call> in thought</think>Done. " and hold.withheld == "<tool_call>{}"


def test_whole_reply_brace_mid_answer_is_released_and_a_later_marker_still_withheld():
    llama3 = ["<|python_tag|>", "{"]
    shown, hold = _feed_all(StreamHoldback(llama3, whole_reply=True), list('Sure: {"a": 1} and the rest.'))
    assert shown == 'Sure: {"a": 1} and the rest.' and not hold.call_opened
    shown, hold = _feed_all(StreamHoldback(llama3, whole_reply=True), ["x {", "} <|python_tag|>{}"])
    assert shown == "x {} " and hold.withheld == "<|python_tag|>{}"
    shown, hold = _feed_all(StreamHoldback(llama3, whole_reply=True), [" ", '{"name": "f"}'])
    assert shown == "" and hold.withheld == '{"name": "f"}'


def _replies(family):
    """Replies a family's holdback must handle: calls with and without text, near misses, plain text, braces,
    and reasoning that mentions each marker, alone and before a call."""
    call = family.format([ToolCall("get_weather", {"location": "Paris", "days": 3})])
    texts = [call, family.format([ToolCall("get_time", {})], content="Let me check. "), "The answer is 42.",
             'Sure: {"a": 1} and {more}.', "  \n", *(m.text for m in family.near_misses)]
    for open_tag, close_tag in getattr(family.parser, "reasoning", ()):
        for marker in family.markers:
            texts += [f"{open_tag}Maybe {marker} then.{close_tag}The answer is 5.",
                      f"{open_tag}I will use {marker}.{close_tag}\n{call}", f"{open_tag}unclosed {marker}"]
    return texts


def _chunkings(text, rng):
    yield [text]
    yield list(text)
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(text)), k=min(3, len(text) - 1))) if len(text) > 1 else []
        yield [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def _marker_in_body(family, body):
    stripped = body.lstrip()
    if family.start_only and any(stripped.startswith(m) for m in family.markers):
        return True
    return any(m in body for m in family.markers if len(m) > 1 or not family.start_only)


@pytest.mark.parametrize("name", registry.names())
def test_each_familys_holdback_releases_what_its_parser_does_not_read_as_a_call(name):
    family = registry.get(name)
    pairs = getattr(family.parser, "reasoning", None)
    rng = random.Random(name)
    for text in _replies(family):
        result = family.parse(text)
        for chunks in _chunkings(text, rng):
            shown, hold = _feed_all(StreamHoldback.for_family(family), chunks)
            # Nothing lost but the whitespace before a call that is the whole reply (withheld starts at the call).
            gap = text[len(shown):len(text) - len(hold.withheld)]
            assert text.startswith(shown) and text.endswith(hold.withheld) and not gap.strip(), (chunks, shown)
            assert not family.parse(shown).calls, (text, shown)  # no call reaches the screen
            if pairs is None:
                continue  # message-structured formats (Harmony, Kimi K3, Functionary v3.2): markup opens every part
            if result.calls:
                assert result.content in shown and (result.reasoning or "") in shown, (text, shown)
            _, body, _ = split_reasoning(text, "", pairs)
            if not _marker_in_body(family, body):
                assert shown == text, (text, shown)  # text that cannot be a call is released
