"""A call attempt is recognised by its structure (an object whose name key, quotes, blanks and case aside, names
an offered tool), wherever it stands in a reply and however its key or fence is spelled; the judge and
fallback's trigger read it through the same function (harness.formats.attempts, scoring.judged_parse)."""

import pytest

from harness.evaluation.scoring import is_call_attempt, judged_parse
from harness.formats import deviations as dev
from harness.formats.attempts import call_attempt
from harness.formats.calls import ParseResult
from harness.live.modes import native_failed, retry_required

TOOLS = ["math.hypot", "read_note", "search", "get_weather"]

# Spellings small models wrote in committed replies under the answer grammar or natively (Qwen2.5-Coder 0.5B and
# 1.5B, results/bfcl and results/transcripts), each with the near miss it is named.
SEEN = [
    ('``{{ "name ": "math.hypot", "arguments": {"x": 4, "y": 5} }}```', dev.DOUBLE_BRACES),
    ('{"name ": "math.hypot", "arguments": {"x": 4, "y": 5}}', dev.CALL_KEY_SPELLING),
    ('Here you go: {"name ": "get_weather", "arguments": {"location": "Paris"}}', dev.CALL_KEY_SPELLING),
    ("I will read it. {\"name': 'read_note', 'arguments': {'title': 'groceries'}}", dev.PYTHON_LITERALS),
    ("{'name': 'search', 'arguments': {'query': 'weather'}}", dev.PYTHON_LITERALS),
    ('```json\n{"name": "search", "arguments": {"query": "x"}}\n```', dev.FENCED_JSON),
    ('``\n{"name": "search", "arguments": {"query": "x"}}\n``', dev.FENCED_JSON),
    ('{"Name": "search", "Arguments": {"query": "x"}}', dev.CALL_KEY_SPELLING),
    ('{"type": "function", "function": {"name": "search", "parameters": {"query": "x"}}}', dev.BARE_JSON),
    ('{"function": "get_weather", "args": {"location": "Oslo"}}', dev.BARE_JSON),
    ('{{"name": "search", "arguments": {}}}', dev.DOUBLE_BRACES),
    ('{ \\"name\\": \\"search\\", \\"arguments\\": {} }', dev.BARE_JSON),
    # Mined from the committed replies the parsers read as plain text (tests hold each form once):
    ('<tools>\n{"name ": "search", "arguments": {"query": "a"}}\n</tools>', dev.CALL_KEY_SPELLING),
    ('Mark the start of the response with `{"name`: "read_note", "arguments": {"title": "x"}}', dev.PYTHON_LITERALS),
    ('Here is the JSON response for your query:\n\n```json\n{\n  "name ": "search",\n  "arguments": {\n'
     '    "query": "a"\n  }\n}\n```', dev.FENCED_JSON),
    ('{"name": "get_weather", "arguments": {"location": <city>}}', dev.BARE_JSON),
]
# Under the no-brace grammar (no `{` in an answer): a list written with keys, in a fence.
BRACKETED = [('Here is the JSON response for the given function call:\n\n```json\n[\n    "name": "search",\n    "arguments": [2, 5, 3]\n]\n```', dev.FENCED_JSON)]

# A tool's definition copied back is no call: it names the tool beside its description, and carries no arguments.
# Each seen in committed replies (Gemma 3 270M copying envelope-or-text-told-once's tool list back; Qwen2.5-Coder
# under refusal-list, typographic quotes; SmolLM2 in a fence; Qwen2.5-Coder natively, its <tools> entry).
DEFINITIONS = [
    'You can call this tool:\n[\n  "name": "search",\n  "description": "Search the user\'s memory.",\n'
    '  "parameters": [\n    "type": "object",\n    "properties": ["query"],\n    "required": ["query"]\n  ]\n],',
    '<tools>\n{"type": "function”, “function”: {"name”: “math.hypot”, “description”: “x”}}',
    'Here\'s a JSON object with the requested information:\n```json\n[\n  ["name": "search", "description": "Find.",',
    '{"name": "read_note", "description": "Read one note.", "parameters": {"type": "object", "properties": {}}}',
    '<tools>\n{"type": "function, "function ": {"name ": "search", "description ": "Search."}}',
    # The list closed, the next tool's keys written after a comma at the top level: in no object at all.
    '[\n  "name": "search",\n  "description": "Find.",\n  "parameters": ["query"]\n],\n  "name": "read_note",\n'
    '  "description": "Read.",\n  "parameters": [\n    "type": "object",\n    "properties": ["title"],\n    ',
]
# ...while a call whose arguments hold a "description" is still a call.
DESCRIBED_CALLS = [
    ('{"name": "search", "arguments": {"query": "x", "description": "long"}}', dev.BARE_JSON),
    ('[{"name": "read_note", "arguments": {"title": "a"}}, {"description": "b"}]', dev.BARE_JSON),
]

# Text that is no call to an offered tool: an answer may quote JSON that calls nothing offered.
NOT_ATTEMPTS = [*DEFINITIONS,
    "The hypotenuse is 6.4.",
    '{"response": "The weather in Paris is sunny."}',
    '{"name": "Alice", "age": 30}',
    "Call search with the query 'weather' to find it.",
    'name: "search"',
    "",
]


@pytest.mark.parametrize("text,name", SEEN + BRACKETED + DESCRIBED_CALLS)
def test_every_seen_spelling_is_a_named_near_miss(text, name):
    assert call_attempt(text, TOOLS) == name


@pytest.mark.parametrize("text", NOT_ATTEMPTS)
def test_text_that_calls_no_offered_tool_is_no_attempt(text):
    assert call_attempt(text, TOOLS) is None


def test_the_offered_tools_decide():
    text = '{"name ": "math.hypot", "arguments": {}}'
    assert call_attempt(text, ["search"]) is None
    assert call_attempt(text, []) is None


@pytest.mark.parametrize("text,name", SEEN)
def test_the_judge_and_fallback_read_the_same_attempt(text, name):
    plain = ParseResult("hermes", content=text)     # what a parser that does not list the spelling returns
    judged = judged_parse(plain, TOOLS)
    assert judged.deviation == name and not judged.calls and judged.content == text
    assert is_call_attempt(judged)
    assert native_failed(plain, TOOLS)


def test_a_read_call_or_a_parsers_own_near_miss_is_left_as_it_is():
    named = ParseResult("hermes", content="x", deviation=dev.INVALID_JSON)
    assert judged_parse(named, TOOLS) is named


@pytest.mark.parametrize("text", NOT_ATTEMPTS)
def test_fallback_never_rewrites_plain_text(text):
    """An app cannot tell plain text from a refusal to call: fallback retries only what it can see failed."""
    assert not native_failed(ParseResult("hermes", content=text), TOOLS)


def test_the_retry_is_held_to_a_call_by_the_attempt_not_by_the_case():
    assert retry_required(True, called_this_turn=False)
    assert not retry_required(True, called_this_turn=True)
    assert not retry_required(False, called_this_turn=False)


def test_a_long_reply_is_read_in_one_pass():
    text = "{" + '"a": "b", ' * 20000 + '"name ": "search"}'
    assert call_attempt(text, TOOLS) == dev.CALL_KEY_SPELLING
    assert call_attempt("{ " * 50000, TOOLS) is None
