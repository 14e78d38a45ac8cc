"""The parser contract for a near miss (harness/formats/base.py): no calls, a named deviation, and the reply's
text kept as content, never emptied, so a report can show what the model wrote. Held for every near miss every
registered family declares, whichever engine (pattern, markup, a module of its own) reads it."""

import pytest

from harness.families import families, get
from harness.formats import deviations as dev

# A call written inside a reasoning block the reply never closed: its text is the reasoning's, kept there.
REASONING_DEVIATIONS = (dev.CALL_IN_REASONING, dev.UNCLOSED_REASONING)
NEAR_MISSES = [pytest.param(name, index, id=f"{name}-{index}-{miss.deviation}")
               for name, family in families().items() for index, miss in enumerate(family.near_misses)]


def _end_of_turn(family) -> str:
    """The marker a pattern family's parser takes off the end of a reply (GigaChat's `<|message_sep|>`)."""
    return getattr(getattr(family.parser, "spec", None), "end_of_turn", None) or ""


@pytest.mark.parametrize("name, index", NEAR_MISSES)
def test_a_rejected_near_miss_keeps_the_replys_text_as_content(name, index):
    family = get(name)
    miss = family.near_misses[index]
    parsed = family.parse(miss.text)
    assert parsed.calls == [] and parsed.deviation == miss.deviation, (parsed.deviation, parsed.detail)
    content = parsed.content.strip()
    if not content and miss.deviation in REASONING_DEVIATIONS:
        assert parsed.reasoning and miss.text.rstrip().endswith(parsed.reasoning), parsed.reasoning
        return
    assert content, f"{name} emptied the content of its {miss.deviation} near miss"
    # The reply's own text, through to its end: only reasoning and the family's framing may stand before it.
    assert content in miss.text, content
    assert miss.text[miss.text.rindex(content) + len(content):].strip() in ("", _end_of_turn(family))


@pytest.mark.parametrize("name, prompt, reply", [
    # The generation prompt opened the role header (Harmony) or the response section (Kimi K3): that text is the
    # prompt's, not the reply's, and a rejected reply's content is the reply alone.
    ("harmony", "<|start|>assistant",
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{'location': 'Paris'}"),
    ("harmony", "<|start|>assistant",
     "<|channel|>analysis<|message|>Paris, then.<|end|><|start|>assistant<|channel|>commentary "
     "to=get_weather <|constrain|>json<|message|>{}"),
    ("kimi-k3", "<|open|>response<|sep|>",
     '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
     '{"location": "Paris"}<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>'),
    ("kimi-k3", "<|open|>think<|sep|>",
     'Paris, then.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>'
     '<|open|>call tool="get_weather" index="1"<|sep|><|close|>tools<|sep|>'),
])
def test_a_rejected_reply_after_an_opened_prompt_keeps_only_its_own_text(name, prompt, reply):
    parsed = get(name).parse(reply, prompt)
    assert parsed.calls == [] and parsed.deviation, (parsed.deviation, parsed.calls)
    if parsed.reasoning:
        # A closed reasoning part stays reasoning; the content is the text after it.
        assert parsed.reasoning == "Paris, then." and "Paris, then." not in parsed.content
        assert reply.rstrip().endswith(parsed.content) and parsed.content
    else:
        assert parsed.content == reply.strip()
