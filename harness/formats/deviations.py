"""Named deviations: the vocabulary reports use for a reply that is almost, but not, a call.

Each name is public (it appears in transcripts, reports and `harness parse --json`), so names are only
ever added, never renamed."""

import json
import re

from harness.formats.jsonscan import balanced_regions

BARE_JSON = "bare-json"  # a JSON call object with none of the family's markers
FENCED_JSON = "fenced-json"  # a call object inside a Markdown code fence
DOUBLE_BRACES = "double-braces"  # {{"name": ...}} copied from a template's escaped instructions
PYTHON_LITERALS = "python-literals"  # single quotes, True/False/None where JSON was due
NESTED_FUNCTION_SHAPE = "nested-function-shape"  # {"type": "function", "function": {...}} tool-list shape
FOREIGN_MARKERS = "foreign-markers"  # another family's call markers
TRAILING_TEXT = "trailing-text"  # text after the calls where the family allows none
TEXT_BEFORE_CALL = "text-before-call"  # a whole-reply family's call opened mid-reply
UNKNOWN_KEY = "unknown-key"  # a key the family's call object does not have
MISSING_KEY = "missing-key"  # the call object lacks its name or arguments key
UNEXPECTED_VALUE = "unexpected-value"  # a fixed key with a value the family does not allow
INVALID_JSON = "invalid-json"  # the payload is not JSON at all
ARGUMENTS_NOT_OBJECT = "arguments-not-object"  # arguments is a list, number, string...
STRINGIFIED_ARGUMENTS = "stringified-arguments"  # arguments given as a JSON-encoded string
INVALID_NAME = "invalid-name"  # the function name is empty or not an identifier
MALFORMED_CALL = "malformed-call"  # the family's markup is broken (a literal is wrong or missing)
UNCLOSED_CALL = "unclosed-call"  # the reply ended inside a call
EMPTY_CALL = "empty-call"  # markers with no call inside
CALL_IN_REASONING = "call-in-reasoning"  # the only call markup is inside the reasoning block
UNCLOSED_REASONING = "unclosed-reasoning"  # reasoning opened and never closed
DUPLICATE_ARGUMENT = "duplicate-argument"  # the same parameter written twice
NOT_PYTHON_CALL = "not-python-call"  # a Python-call family's payload is not a list of plain calls
DUPLICATE_KEY = "duplicate-key"  # a JSON object with the same key twice ("name" twice in a call object)
NON_FINITE_NUMBER = "non-finite-number"  # NaN, Infinity, or a number too large for a float (1e999)
NUMBER_TOO_LONG = "number-too-long"  # an integer of more digits than Python prints (4300)
NESTING_TOO_DEEP = "nesting-too-deep"  # brackets nested deeper than any call needs (jsonscan.MAX_DEPTH)
NON_JSON_VALUE = "non-json-value"  # a Python literal JSON has no type for (bytes, set, tuple, complex, ...)
LONE_SURROGATE = "lone-surrogate"  # a string escape for half a UTF-16 pair ("\ud83d" alone): no UTF-8 text holds it
MARKUP_IN_VALUE = "markup-in-value"  # a value holding its family's parameter markup (a broken closing tag swallowed it)
JSON_NULL = "json-null"  # JSON's null where the family's template writes Python's None (Gemma 4)
ANALYSIS_CHANNEL_CALL = "analysis-channel-call"  # a Harmony call sent on the analysis channel, not commentary
HARMONY_DIALECT = "harmony-dialect"  # a Harmony header as another dialect writes it (gpt-oss' where LLM-jp's is due, or back)
CALL_KEY_SPELLING = "call-key-spelling"  # a call object whose name key reads so only with blanks or case set aside ("name ")

ALL = sorted(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str) and k != "ALL")

# One `\s*`: a newline is whitespace, and `\s*\n?\s*` backtracks quadratically on a long run of it.
_FENCE = re.compile(r"```(?:json|JSON|tool_call|python)?\s*[\[{]")
_DOUBLE = re.compile(r"\{\{\s*\"")
_CALL_KEYS = ("name", "function", "tool_name")
_PY_DICT = re.compile(r"\{\s*'[A-Za-z_]+'\s*:")
# A call key quoted half the JSON way and half the Python way ({"name': 'read_note', ...}): Qwen2.5-Coder wrote
# it in prose under an answer grammar that refused only the JSON spelling. Neither JSON nor a Python dict, so
# neither of the two above reads it; only call keys, so an answer quoting some other word is not caught.
_KEY_ALTERNATION = "|".join(_CALL_KEYS)
_MIXED_QUOTES = re.compile(rf"""\{{\s*(?:"(?:{_KEY_ALTERNATION})'|'(?:{_KEY_ALTERNATION})")\s*:""")


def json_failure(payload: str) -> str:
    """Name why a payload that should have been JSON is not."""
    stripped = payload.lstrip()
    if stripped.startswith("{{") or _DOUBLE.search(stripped[:40]):
        return DOUBLE_BRACES
    if _PY_DICT.search(stripped[:80]) or _MIXED_QUOTES.search(stripped[:80]) or re.search(r":\s*(True|False|None)\b", stripped):
        return PYTHON_LITERALS
    return INVALID_JSON


def has_json_call_object(text: str, call_keys=()) -> bool:
    """Whether a JSON object with a name, function or tool_name key, or one of the family's own `call_keys` (a
    call, alone or in a list), is in the text; a tool's definition (_Definition) is none.

    Only balanced spans are decoded, outermost first: the hook sees every object a decode completes, so a span's
    inner spans are decoded again only past the point where its own decode failed. Linear in the text, up to
    the bounded depth."""
    # A call object has a key, and a key is a quoted string: text without both a brace and a quote holds none.
    if "{" not in text or '"' not in text:
        return False
    keys = (*_CALL_KEYS, *call_keys)
    # A key decodes to one of `keys` only if the text spells it, or escapes some of it with a backslash.
    if "\\" not in text and not any(key in text for key in keys):
        return False
    decoder = _CALL_DECODERS.get(keys) or _call_decoder(keys)
    todo = balanced_regions(text)[::-1]
    while todo:
        region = todo.pop()
        try:
            decoder.raw_decode(text[region.start : region.end])
        except _CallKeyFound:
            return True
        except json.JSONDecodeError as exc:
            todo.extend(c for c in region.children[::-1] if c.end > region.start + exc.pos)
        except ValueError:  # an integer longer than Python reads
            todo.extend(region.children[::-1])
    return False


class _CallKeyFound(Exception):
    """Raised by the decoder's hook at the first object with a call key: the answer is known, decoding stops."""


class _Definition(dict):
    """An object that holds a description key: a tool's definition (the tool list copied back), never a call,
    which carries its arguments and not its tool's description. Nor is an object whose call key holds one
    (OpenAI's {"type": "function", "function": {"name": …, "description": …}})."""


# keys -> a decoder whose hook raises _CallKeyFound. The hook keeps no state, so one decoder per set of keys
# serves every reply (and every thread), where a decoder built per reply cost more than most decodes.
_CALL_DECODERS: dict = {}


def _call_decoder(keys):
    wanted = frozenset(keys)

    def pairs(items):
        obj = dict(items)
        if "description" in obj:
            return _Definition(obj)
        if any(not isinstance(obj[key], _Definition) for key in wanted.intersection(obj)):
            raise _CallKeyFound
        return obj

    _CALL_DECODERS[keys] = decoder = json.JSONDecoder(object_pairs_hook=pairs)
    return decoder


# (own markers, every marker) -> (the foreign ones in order, a regex matching any of them). Keyed by the two
# objects' ids and checked by identity: a parser passes the same tuples on every reply, and the registry's table
# of markers is one tuple until the table is rebuilt, so the list is built once per family, not per reply.
_FOREIGN: dict = {}


def _foreign_of(own_markers, foreign_markers):
    key = (id(own_markers), id(foreign_markers))
    hit = _FOREIGN.get(key)
    if hit is not None and hit[0] is own_markers and hit[1] is foreign_markers:
        return hit[2], hit[3]
    candidates = tuple(m for m in foreign_markers if m not in own_markers)
    # Longest first only so the alternation reads well; any match means some candidate is in the text.
    anywhere = re.compile("|".join(re.escape(m) for m in sorted(candidates, key=len, reverse=True))) \
        if candidates else None
    if len(_FOREIGN) > 256:  # tuples built per call (tests, ad-hoc lists) must not grow it without bound
        _FOREIGN.clear()
    _FOREIGN[key] = (own_markers, foreign_markers, candidates, anywhere)
    return candidates, anywhere


def foreign_marker(text: str, own_markers, foreign_markers) -> str | None:
    """The first of another family's markers (in their order, not the text's) found in `text`, if any."""
    if not text and "" not in foreign_markers:   # a call at the reply's start: nothing before it to search
        return None
    candidates, anywhere = _foreign_of(own_markers, foreign_markers)
    # One regex pass rules out the common case, no foreign marker at all, faster than a find per marker.
    if anywhere is None or anywhere.search(text) is None:
        return None
    for marker in candidates:
        if marker in text:
            return marker
    return None


def classify_unmarked(text: str, own_markers, foreign_markers, call_keys=()) -> str | None:
    """For a reply with no call of the family: name the near miss it is, or None for plain text. `call_keys` are
    the keys the family's own call object names its function by (Command R's tool_name).

    Order matters: the most specific explanation wins (a fenced call is also bare JSON)."""
    if foreign_marker(text, own_markers, foreign_markers):
        return FOREIGN_MARKERS
    if _DOUBLE.search(text):
        return DOUBLE_BRACES
    if has_json_call_object(text, call_keys):
        return FENCED_JSON if _FENCE.search(text) else BARE_JSON
    if _PY_DICT.search(text) or _MIXED_QUOTES.search(text):
        return PYTHON_LITERALS
    return None
