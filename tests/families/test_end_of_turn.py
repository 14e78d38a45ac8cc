"""GigaChat's <|message_sep|> closes every message, so it ends the text message before a call and also the
turn: no stop token can be set on it, and it may reach the parser or not. Read from the pinned templates."""

import pytest

from harness import families
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.pins.sources import load_sources, resolve_template

SOURCES = load_sources()


@pytest.mark.parametrize("template, family", [("GigaChat3-10B-A1.8B", "gigachat3"),
                                              ("GigaChat3.1-10B-A1.8B", "gigachat3.1")])
def test_the_closing_message_sep_is_the_end_of_turn_not_content_and_may_be_absent(template, family):
    corpus = build_corpus(resolve_template(template, SOURCES))
    cases = {c.name: c for c in corpus.cases}
    # The template closes a plain answer with <|message_sep|>\n\n: markup, not the answer (vLLM agrees).
    assert cases["history-answer"].reply.endswith("<|message_sep|>\n\n")
    assert cases["history-answer"].expect["content"] == "Sunny, then cloudy, then rain."
    # The call as the template renders it, and as the model's authors' vLLM, SGLang and llama.cpp parsers expect
    # it (ending at its JSON, the closer being the runtime's stop), read alike.
    rendered = cases["text-before-call"].reply
    assert rendered.endswith("}}<|message_sep|>\n\n")
    prompt = "assistant<|role_sep|>\n"
    with_closer = families.parse(family, rendered, prompt)
    without = families.parse(family, rendered[: rendered.rindex("<|message_sep|>")], prompt)
    assert with_closer.accepted and with_closer.content == "Let me check."
    assert without.to_json() == with_closer.to_json()
    # Cut inside the call object, it is still unclosed.
    assert families.parse(family, rendered[: rendered.rindex("}")], prompt).deviation == "unclosed-call"
    assert cases["near-miss-unclosed"].expect["deviation"] == "unclosed-call"
