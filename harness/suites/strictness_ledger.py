"""The strictness ledger (docs/strictness.md): every case in the committed runtime-conformance records where a
peer runtime read a call from a reply the strict parser rejects (label `runtime-forgave:<deviation>`), with the
deviation and why the harness rejects that text. tools/strictness_ledger.py writes it; a test fails when the
records hold a disagreement the ledger does not list."""

from __future__ import annotations

import json

from harness.evaluation.judging import cell, label_head
from harness.suites.parser_agreement import peer_vocabulary, template_detection

FORGAVE = "runtime-forgave"

# Why the strict parser rejects each kind of text a peer was seen to read. A deviation that shows up in the
# records without an entry here stops the ledger from being written: someone must say why we are stricter.
REASONS = {
    "unclosed-call": (
        "The reply ended inside a call, before the family's closing marker: the model stopped (end of turn, token "
        "limit) mid-call, so its arguments may be cut short. A call that is not seen whole is not run; the peer "
        "closes it for the model and returns it."),
    "invalid-name": (
        "Where the family's opener is followed by a function name, the text is not a name: prose that mentions "
        "the marker, or another family's JSON after this family's opener. No tool was named, so none is called."),
    "invalid-json": (
        "The payload after the family's opener is not JSON (here prose that mentions the marker): there are no "
        "arguments to read, and no tool was named."),
    "malformed-call": (
        "The family's markup is broken: a literal is missing or wrong (another family's call shape inside this "
        "family's markers, a section in the wrong place, a value the format has no spelling for). Which part is "
        "the name and which the arguments would be a guess."),
    "trailing-text": (
        "Text after the calls where the family allows none: the template renders a call turn with nothing after "
        "the call, so the reply is not in the shape the model was trained on, and whether the call or the text "
        "is the answer would be a guess."),
    "call-in-reasoning": (
        "The call stands inside a reasoning block the model opened and never closed: to the template it is part "
        "of the model's thinking, not its answer. A thought is not an action, so nothing is run; the peer lifts "
        "the call out of the reasoning and returns it."),
    "text": (
        "The strict parser reads no call at all (plain text); the peer returned one."),
    "missing-key": (
        "A key the family's call object must carry is absent (Llama 3's object names its arguments `parameters`; "
        "this one says `arguments`, another family's spelling): the object is not this family's call, and which "
        "key holds the arguments would be a guess."),
    "fenced-json": (
        "The call is inside a Markdown code fence: the template renders a call bare, so a fenced object is text "
        "the model chose to show the user, not a call in the shape it was trained to make."),
    "bare-json": (
        "A JSON call object with none of the family's markers around it: the template renders a call inside its "
        "markers, so bare JSON is text the model wrote, and whether the user was meant to read it or a tool to run "
        "it would be a guess."),
    "analysis-channel-call": (
        "A Harmony call on the analysis channel: the template renders every call on commentary and tells the model "
        "so; analysis is its reasoning, and a thought addressed to a tool is not run."),
    "harmony-dialect": (
        "A Harmony header as the other dialect writes it (gpt-oss' where LLM-jp 4.1's is due, or the reverse): "
        "the template never renders it, so which model's format the reply is in would be a guess."),
    "foreign-markers": (
        "The call sits inside another family's markers (Hermes' <tool_call> around a JSON call): the template "
        "never writes them, so the reply is in another model's format, read only by ignoring markup this family "
        "does not have."),
}


# Value spellings the field reads that a family's template never writes, and what the strict parser does with
# each: read (and named on the call), or refused with its deviation. tests/families/test_value_spellings.py
# parses every `text` with its family, so a row cannot drift from the parser.
SPELLINGS = (
    {"family": "lfm2", "text": '<|tool_call_start|>[set_config(config={"enabled": true, "note": null})]'
                               "<|tool_call_end|>",
     "peers": "llama.cpp's LFM2 parser", "verdict": "read", "deviation": None,
     "why": "JSON's true, false and null inside a Python call have one meaning each, the values Python spells "
            "True, False and None; nothing is guessed. The call is read, names where (`json_literals`), and "
            "scoring and `harness parse --tools` give the finding `json-notation-arguments`: the model did not "
            "write the notation its template trains."},
    {"family": "gemma4", "text": "<|tool_call>call:set_config{value:null}<tool_call|>",
     "peers": "llama.cpp's and vLLM's Gemma 4 parsers", "verdict": "refused", "deviation": "json-null",
     "why": "Gemma 4's template writes a null argument as Python's `None` (format_argument falls through to "
            "`{{ argument }}`); its call language takes `true`, `false` and `None`, and `null` is a spelling it "
            "never writes. The family names this one difference exactly (`json-null`, a near miss of its own), so "
            "a runtime that reads it is counted as runtime-forgave:json-null, and a model that writes it is told "
            "precisely what its template expects instead."},
    {"family": "harmony", "text": '<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>'
                                  '{"location": "Paris"}',
     "peers": "llama.cpp's gpt-oss parser (0.5.0 and 0.6.0-dev take commentary or analysis in the call header)",
     "verdict": "refused", "deviation": "analysis-channel-call",
     "why": "gpt-oss' template renders every past call on the commentary channel (`<|channel|>commentary` after "
            "the recipient) and says so to the model (\"Calls to these tools must go to the commentary channel\"); "
            "the analysis channel is its reasoning. A call written there is a thought addressed to a tool, so it is named apart, in either place of the recipient (`<|start|>"
            "assistant to=functions.NAME<|channel|>analysis` too), rather than run."},
    {"family": "llm-jp-harmony", "text": '<|channel|> commentary to=functions.get_weather<|message|> '
                                         '{"location": "Paris"}',
     "peers": "llama.cpp 0.6.0-dev's LLM-jp handler (the recipient in the role or the channel header)",
     "verdict": "refused", "deviation": "harmony-dialect",
     "why": "LLM-jp 4.1's template writes the recipient in the role header and the constraint `<|constrain|> json` "
            "(`<|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|> json<|message|>`); the "
            "recipient in the channel header, without the constraint, is how gpt-oss writes it. The blank after "
            "each special token is the tokenizer's, read in either rendering; the other dialect's header is named "
            "as such."},
    {"family": "qwen-xml", "text": "<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
                                   "</function>",
     "peers": "reported read by runtimes that look for `<function=` alone", "verdict": "refused",
     "deviation": "foreign-markers",
     "why": "Qwen3-Coder's own instruction says \"the tool calling block MUST begin with an opening <tool_call> "
            "tag and end with a closing </tool_call> tag\", and its template renders every call inside them. "
            "Without the opener the same text is MiniCPM-like or Functionary-like markup; which family wrote it "
            "would be a guess."},
)


def spelling_lines() -> list:
    lines = ["", "## Value spellings peers read", "",
             "Spellings a family's template never writes that a peer's parser is known to read, and what the "
             "strict parser does with each (`tests/families/test_value_spellings.py` parses every one).", "",
             "| family | reply | read by | here | why |", "|---|---|---|---|---|"]
    for s in SPELLINGS:
        here = "read, named" if s["verdict"] == "read" else f"refused: `{s['deviation']}`"
        # A `|` in a cell, code span or not, would end the cell in a Markdown table.
        why, peers = (s[key].replace("|", "\\|") for key in ("why", "peers"))
        lines.append(f"| {s['family']} | {_cell(s['text'])} | {peers} | {here} | {why} |")
    return lines


def _deviation(label: str) -> str:
    return label.split(":", 1)[1]


def ledger_rows(records: list) -> list:
    """One row per (runtime, deviation, family, case): templates, requests, how many the runtime also rewrote
    (its grammar made the model write other tokens than the script), one reply and what the runtime returned."""
    rows: dict = {}
    for r in records:
        for label in r.labels:
            if label_head(label) != FORGAVE:
                continue
            key = (r.runtime, _deviation(label), r.family or "", r.case["name"])
            row = rows.setdefault(key, {"runtime": r.runtime, "deviation": key[1], "family": key[2],
                                        "case": key[3], "templates": set(), "requests": 0, "rewritten": 0,
                                        "reply": r.reply, "returned": (r.plain or {}).get("tool_calls")})
            row["templates"].add(r.template["id"])
            row["requests"] += 1
            row["rewritten"] += "reply-rewritten" in r.labels
    return [rows[k] for k in sorted(rows)]


def _cell(text: str, limit: int = 110) -> str:
    return f"`{cell(text, limit)}`"


def _returned(calls) -> str:
    """Each call as `name arguments`, the arguments as the runtime sent them (a JSON string, usually)."""
    def arguments(value):
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _cell("; ".join(f"{c.get('name')} {arguments(c.get('arguments'))}" for c in calls or []), 90)


def ledger_markdown(records: list, detection: dict | None = None) -> str:
    """The ledger from the runtime-conformance records; then the vocabulary of SGLang's named tolerances beside
    ours, and, given (harness.suites.parser_agreement.template_detection.compare), SGLang's template detection beside ours."""
    rows = ledger_rows(records)
    missing = sorted({row["deviation"] for row in rows} - set(REASONS))
    if missing:
        raise ValueError(f"runtime-forgave deviations without a reason in harness/suites/strictness_ledger.py "
                         f"REASONS: {', '.join(missing)}")
    lines = ["# Strictness ledger", "",
             "Where a peer runtime reads a call from a reply the strict parser rejects. Generated from the committed "
             "runtime-conformance records (`results/runtime-conformance/*.jsonl`, label `runtime-forgave:<deviation>`) "
             "by `python tools/strictness_ledger.py`; `tests/suites/test_strictness_ledger.py` fails when the "
             "records hold a disagreement this file does not list. The replies are scripted (see "
             "docs/scripted-models.md), so each row is an exact text, not a sample. The last two sections put SGLang's "
             "names for what it forgives beside ours (harness/suites/parser_agreement/peer_vocabulary.py) and its template "
             "detection beside ours (the committed results/template-detection/sglang.jsonl and conformance.json).", "",
             "## Why the harness rejects them", ""]
    seen = {row["deviation"] for row in rows}
    lines += [f"- `{name}`: {REASONS[name]}" for name in sorted(seen)]
    lines += ["", "## Disagreements", "",
              "*rewritten*: of those requests, how many the runtime also made write other tokens than the script "
              "(its lazy grammar, triggered by a marker, forced a call the model did not write).", "",
              "| runtime | deviation | family | case | templates | requests | rewritten | reply (one) | the runtime "
              "returned |", "|---|---|---|---|---|---:|---:|---|---|"]
    for row in rows:
        lines.append(f"| {row['runtime']} | `{row['deviation']}` | {row['family']} | {row['case']} | "
                     f"{', '.join(sorted(row['templates']))} | {row['requests']} | {row['rewritten']} | "
                     f"{_cell(row['reply'])} | {_returned(row['returned'])} |")
    if not rows:
        lines.append("| — | — | — | — | — | 0 | 0 | — | — |")
    lines += spelling_lines()
    lines += peer_vocabulary.vocabulary_lines()
    lines += template_detection.detection_lines(detection or {"version": None, "rows": []})
    return "\n".join(lines) + "\n"
