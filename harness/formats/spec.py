"""Family YAML files → Family objects. A file that breaks a rule is refused with its file, line and field."""

from pathlib import Path

from harness.core.errors import FamilySpecError
from harness.formats import deviations as dev
from harness.formats.base import Family, NearMiss, peers_problem, tokens_problem
from harness.formats.pattern import CallSpec, PatternParser, compile_pattern
from harness.formats.payloads import ObjectShape
from harness.formats.reasoning import DEFAULT_PAIRS
from harness.core.yaml_source import load_located

TOP_KEYS = {
    "name": "a short lower-case id, the public name of the family",
    "label": "the name shown to users",
    "detail": "one or two sentences: who writes this and what a call looks like",
    "markers": "list of strings whose appearance opens a call",
    "start_only": "true when a call can only open at the start of the reply",
    "multiple_calls": "whether one reply may carry several calls (default true)",
    "reasoning": "list of [open, close] tag pairs for reasoning blocks (default <think></think>)",
    "section": "{open, close, optional}: markup around all the calls of a reply",
    "call": "the pattern of one call (or of all calls, with {array} or {pycalls})",
    "param": "the pattern of one parameter, for calls that use {params}",
    "separator": "text between two calls, besides whitespace",
    "object": "how a JSON call object is keyed: name_key, arguments_key, shape, optional, required, id_key",
    "near_misses": "list of {text, deviation, note}: texts this family must reject with that deviation",
    "answer_key": "a reply that is exactly {KEY: STRING} is an answer, its string the content (start_only only)",
    "end_of_turn": "the marker closing the turn's last message when it also separates messages inside the turn "
                   "(GigaChat's <|message_sep|>): not content, and a call may end where it is due",
    "detectable": "false for a format no template writes: detection never picks it (default true)",
    "tokens": "{TOKEN: special|not-special}: markers the real model's tokenizer holds as single added tokens, "
              "and whether they are marked special (scripted models add them so)",
    "tokens_source": "where the kinds in `tokens` come from: the tokenizer file read, or what stands in for it",
    "peers": "the names other projects use for this family: {vllm|sglang|llama.cpp|transformers: NAME}, and "
             "optionally templates: {TEMPLATE ID or PATTERN: {PEER: NAME or null}} and tokenizer_config: {KEY: STRING}",
}
OBJECT_KEYS = {"name_key", "arguments_key", "shape", "optional", "required", "id_key"}


def load_family(path: Path, foreign_markers) -> Family:
    doc = load_located(path, FamilySpecError)
    data = doc.data
    if not isinstance(data, dict):
        raise FamilySpecError(f"{doc.where()}: a family file is a mapping of {', '.join(TOP_KEYS)}")

    def fail(msg, *keys):
        raise FamilySpecError(f"{doc.where(*keys)}: {msg}")

    for key in data:
        if key not in TOP_KEYS:
            fail(f"unknown field (known: {', '.join(TOP_KEYS)})", key)
    for key in ("name", "label", "detail", "markers", "call"):
        if key not in data:
            fail(f"missing required field {key!r}: {TOP_KEYS[key]}")
    for key in ("name", "label", "detail", "call", "param", "separator", "answer_key"):
        if key in data and not isinstance(data[key], str):
            fail("must be a string", key)
    for key in ("start_only", "multiple_calls", "detectable"):
        if key in data and not isinstance(data[key], bool):
            fail("must be true or false", key)
    if path.stem != data["name"]:
        fail(f"the file must be named after the family: {data['name']}.yaml", "name")
    markers = data["markers"]
    if not isinstance(markers, list) or not markers or not all(isinstance(m, str) and m for m in markers):
        fail("must be a non-empty list of non-empty strings", "markers")

    def pattern(source, *keys):
        try:
            return compile_pattern(source)
        except ValueError as exc:
            fail(str(exc), *keys)

    call = pattern(data["call"], "call")
    uses = {v for k, v in call if k == "ph"}
    param = None
    if "params" in uses:
        if "param" not in data:
            fail("a call with {params} needs a `param` pattern", "call")
        param = pattern(data["param"], "param")
        if {v for k, v in param if k == "ph"} != {"key", "value"}:
            fail("a param pattern has exactly {key} and {value}", "param")
    shape = None
    if uses & {"object", "array"}:
        raw = data.get("object", {})
        if not isinstance(raw, dict):
            fail("must be a mapping", "object")
        for key in raw:
            if key not in OBJECT_KEYS:
                fail(f"unknown field (known: {', '.join(sorted(OBJECT_KEYS))})", "object", key)
        shape = ObjectShape(**raw)
        if shape.shape not in ("name-and-arguments", "name-to-arguments"):
            fail("shape is name-and-arguments or name-to-arguments", "object", "shape")
    elif "object" in data:
        fail("only calls with {object} or {array} take an `object` section", "object")
    if not uses & {"object", "array", "pycalls"} and not ({"name"} <= uses and uses & {"arguments", "params"}):
        fail("a call pattern needs {object}, {array}, {pycalls}, or {name} with {arguments} or {params}", "call")

    section = data.get("section") or {}
    if section and (not isinstance(section, dict) or "open" not in section):
        fail("section is a mapping with open (and optionally close, optional)", "section")
    reasoning = data.get("reasoning", [list(p) for p in DEFAULT_PAIRS])
    if not isinstance(reasoning, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(t, str) and t for t in p) for p in reasoning
    ):
        fail("a list of [open, close] pairs", "reasoning")

    start_only = data.get("start_only", False)
    if "end_of_turn" in data and not (isinstance(data["end_of_turn"], str) and data["end_of_turn"].strip()):
        fail("the end-of-turn marker is a non-empty string", "end_of_turn")
    if "answer_key" in data and not (data["answer_key"] and start_only):
        fail("an answer object is the whole reply: a non-empty key, in a start_only family", "answer_key")
    peers = data.get("peers", {})
    problem = peers_problem(peers, family=True)
    if problem:
        fail(problem, "peers")

    problem = tokens_problem(data.get("tokens", {}), data.get("tokens_source", ""))
    if problem:
        fail(problem, "tokens")
    spec = CallSpec(
        call=call,
        param=param,
        section_open=pattern(section["open"], "section", "open") if section else None,
        section_close=pattern(section["close"], "section", "close") if section.get("close") else None,
        section_optional=bool(section.get("optional", False)),
        separator=data.get("separator", ""),
        object=shape,
        answer_key=data.get("answer_key"),
        end_of_turn=data.get("end_of_turn"),
    )
    near = []
    for i, item in enumerate(data.get("near_misses", []) or []):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or "deviation" not in item:
            fail("each near miss is {text, deviation, note}", "near_misses", i)
        if item["deviation"] not in dev.ALL:
            fail(f"unknown deviation {item['deviation']!r} (known: {', '.join(dev.ALL)})", "near_misses", i, "deviation")
        near.append(NearMiss(item["text"], item["deviation"], item.get("note", "")))
    multiple = data.get("multiple_calls", True)
    parser = PatternParser(data["name"], spec, markers, start_only, multiple,
                           tuple(tuple(p) for p in reasoning), foreign_markers)
    return Family(data["name"], data["label"], data["detail"].strip(), tuple(markers), start_only, parser,
                  multiple, tuple(near), str(path), detectable=data.get("detectable", True), peers=dict(peers),
                  tokens=dict(data.get("tokens", {})), tokens_source=str(data.get("tokens_source", "")).strip())
