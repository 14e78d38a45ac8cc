"""Runtime conformance labels: a scripted model wrote an exact reply through a runtime's /v1/chat/completions;
which layer, if any, changed what a strict parser reads in it?

A record holds the scripted reply, its strict parse (after our render of the prompt), the runtime's prompt length
(and text, where it shows it), and the runtime's answers non-streamed and streamed. Its labels (several can hold
at once; `agree` only alone):

  agree                        the runtime returned what the strict parser reads: the same calls (name and typed
                               arguments), or no call and the same text
  prompts-differ               the runtime's prompt is not our render (its /apply-template text, else its length)
  reply-rewritten              the runtime generated other tokens than the scripted reply (its grammar or sampling
                               changed what the model would write): the ids it sampled are not the script's
                               (llama-server shows them), else its completion tokens differ in number
  runtime-forgave:<deviation>  the strict parser rejects the reply with that named deviation; the runtime returned a call
  runtime-dropped-call         the strict parser reads a call; the runtime returned no call and not the call's text
  call-left-in-content         the strict parser reads a call; the runtime returned no call, its text in `content`
  arguments-changed            same calls, arguments not the same: emptied, stringified (not a JSON object), or of
                               other types than the strict parse typed by the tool's schema
  calls-differ                 both read calls, other names or another number (tool_choice none: any call)
  content-differs              no call either side, but the runtime's content or reasoning is not the strict one's
  stream-differs               the streamed answer (deltas accumulated) is not the non-streamed one
  runtime-error                an HTTP error, a refused request or history, a dead server (the records say which)
"""

from __future__ import annotations

import json

from harness.families import value_notation
from harness.schema.arguments import tool_parameters, type_arguments
from harness.evaluation.records import RUNTIME_CONFORMANCE, RuntimeConformanceRecord
from harness.evaluation.runtime_agreement import arguments_object, fork, label_family
from harness.evaluation.transcripts import read_transcript

KIND = "runtime-conformance"
LABELS = ("agree", "prompts-differ", "reply-rewritten", "runtime-forgave", "runtime-dropped-call",
          "call-left-in-content", "arguments-changed", "calls-differ", "content-differs", "stream-differs",
          "runtime-error")


def _typed(name, arguments, tools, notation="json") -> dict:
    for tool in tools:
        if tool.get("function", {}).get("name") == name:
            return type_arguments(arguments, tool_parameters(tool), notation).arguments
    return arguments


def _changed(name, want: dict, got: dict, tools, notation="json") -> bool:
    """Text families (XML, key/value) write every value as text: both sides are typed by the tool's schema before
    they are compared (MiniCPM 5's in the Python notation its template writes). A value the strict parse holds
    typed (3) that the runtime returns as text ("3") changed."""
    if want == got:
        return False
    if _typed(name, want, tools, notation) != _typed(name, got, tools, notation):
        return True
    return any(not isinstance(v, str) and isinstance(got.get(k), str) for k, v in want.items())


def _text(value) -> str:
    return (value or "").strip()


def judge(expect: dict, answer: dict, tools: list, variant: str, marker: str | None, named: str | None = None) -> tuple:
    """(labels, details) of one answer against the strict parse: how the runtime read the reply. `named`: the
    function tool_choice named, for the named-other variant (the reply calls another one)."""
    strict = [(c["name"], c["arguments"]) for c in expect["calls"]] if expect["calls"] and not expect["deviation"] else []
    theirs = answer.get("tool_calls") or []
    content = _text(answer.get("content"))
    if variant == "none":
        if theirs:
            return ["calls-differ"], [f"tool_choice none, yet the runtime returned {[c['name'] for c in theirs]}"]
        return [], []
    if variant == "named-other" and named and theirs:
        if any(c["name"] != named for c in theirs):
            return ["calls-differ"], [f"tool_choice named {named}, yet the runtime returned "
                                      f"{[c['name'] for c in theirs]}"]
        return [], []       # the runtime held the model to the named function (reply-rewritten says how)
    if strict and not theirs:
        names = [n for n, _ in strict]
        if any(n in content for n in names) or (marker and marker.strip() in content):
            return ["call-left-in-content"], [f"strict reads {names}; the runtime returned them as content"]
        return ["runtime-dropped-call"], [f"strict reads {names}; the runtime returned no call and "
                                          f"content {json.dumps(content[:60], ensure_ascii=False)}"]
    if not strict and theirs:
        return [f"runtime-forgave:{expect['deviation'] or 'text'}"], [
            f"strict: {expect['detail'] or 'no call'}; the runtime returned {[c['name'] for c in theirs]}"]
    if strict:
        if [n for n, _ in strict] != [c["name"] for c in theirs]:
            return ["calls-differ"], [f"strict {[n for n, _ in strict]}; runtime {[c['name'] for c in theirs]}"]
        changed = []
        for (name, want), call in zip(strict, theirs):
            got = arguments_object(call.get("arguments"))
            if got is None:
                changed.append(f"{name}: arguments {str(call.get('arguments'))[:80]!r} are not a JSON object")
            elif want and not got:
                changed.append(f"{name}: arguments emptied")
            elif _changed(name, want, got, tools, value_notation(expect.get("family"))):
                changed.append(f"{name}: {json.dumps(got, ensure_ascii=False)[:120]} where strict reads "
                               f"{json.dumps(want, ensure_ascii=False)[:120]}")
        return (["arguments-changed"], changed) if changed else ([], [])
    for field, want, got in (("content", _text(expect["content"]), content),
                             ("reasoning", _text(expect["reasoning"]), _text(answer.get("reasoning")))):
        if want != got:
            return ["content-differs"], [f"{field}: strict {_around(want, got)}, runtime {_around(got, want)}"]
    return [], []


def _around(text: str, other: str) -> str:
    """`text` from a little before where it first differs from `other`, quoted."""
    at = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b), min(len(text), len(other)))
    start = max(0, at - 20)
    piece = ("…" if start else "") + text[start:start + 60] + ("…" if len(text) > start + 60 else "")
    return json.dumps(piece, ensure_ascii=False)


def _same_answer(a: dict, b: dict) -> bool:
    def shape(x):
        return (_text(x.get("content")), _text(x.get("reasoning")),
                [(c.get("name"), arguments_object(c.get("arguments"))) for c in x.get("tool_calls") or []])
    return shape(a) == shape(b)


def _rewritten(record: dict, plain: dict) -> str | None:
    """Why the runtime's tokens are not the script's, or None. The sampled ids where the runtime shows them
    (llama-server): a grammar that forces one token keeps the count, and a detokenizer that hides a control token
    changes the text of an unchanged reply; else the count of completion tokens."""
    script, sampled = record.get("reply_ids"), plain.get("generated_tokens")
    if script is not None and sampled is not None:
        if sampled in (script, script[:-1]):          # the end of turn is counted by some runtimes, not others
            return None
        at = next((i for i, (a, b) in enumerate(zip(script, sampled)) if a != b), min(len(script), len(sampled)))
        text = plain.get("generated")
        seen = "" if text is None else "; " + fork(record["reply"], text, sides=("script", "generated"), strip=False)
        return (f"the runtime sampled other tokens than the script from token {at} (of {len(script)} script, "
                f"{len(sampled)} sampled){seen}")
    want, got = record["reply_tokens"], plain.get("completion_tokens")
    if got is not None and want is not None and got not in (want, want - 1):
        return f"{got} completion tokens where the script has {want} (end of turn included)"
    return None


def classify(record: dict, tools: list, marker: str | None) -> tuple:
    """(labels, details) for one record: prompt, generation, parse (non-streamed), then the stream."""
    labels, details = [], []
    plain, stream = record.get("plain") or {}, record.get("stream") or {}
    answers = (("non-streamed", plain), ("streamed", stream))
    errors = [f"{what}: {x['error']}" for what, x in answers if x.get("error")]
    # Fields of the wrong type (harness.backends.chat_answers): the answer breaks the API's shape.
    errors += [f"{what}: {problem}" for what, x in answers for problem in x.get("problems") or ()]
    key = record.get("key") or {}
    if key.get("error"):
        errors.insert(0, f"prompt: {key['error']}")
    if errors:
        labels.append("runtime-error")
        details += errors
    ours = record.get("ours") or {}
    if key.get("tokens") is not None and (key["tokens"] != ours.get("tokens") or key.get("same_text") is False):
        labels.append("prompts-differ")
        details.append(f"the runtime's prompt: {key['tokens']} tokens" +
                       ("" if key.get("same_text") is None else f", text {'equal' if key['same_text'] else 'not ours'}")
                       + f"; ours {ours.get('tokens')} tokens")
    if not plain.get("error") and plain:
        rewritten = _rewritten(record, plain)
        if rewritten:
            labels.append("reply-rewritten")
            details.append(rewritten)
        choice = (record.get("request") or {}).get("tool_choice")
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        judged, why = judge(record["expect"], plain, tools, record["variant"], marker, named)
        labels += judged
        details += why
        if not stream.get("error") and stream and not _same_answer(plain, stream):
            labels.append("stream-differs")
            details.append(f"streamed {_summary(stream)}; non-streamed {_summary(plain)}")
    return (labels or ["agree"]), details


def _summary(answer: dict) -> str:
    calls = [(c.get("name"), c.get("arguments")) for c in answer.get("tool_calls") or []]
    return json.dumps({"content": _text(answer.get("content"))[:60], "calls": calls}, ensure_ascii=False)[:200]


def read_records(path) -> tuple:
    found = read_transcript(path, kinds=(RUNTIME_CONFORMANCE,))
    return found.records, found.warnings


def replay_command(record: RuntimeConformanceRecord) -> str:
    """One line that asks this single case again, into a scratch results folder."""
    where = ["--server", record.server, "--template", record.template["id"]]
    if record.server == "endpoint":
        where = ["--endpoint", record.endpoint, "--manifest", record.manifest, "--served-model",
                 record.served_model, "--runtime", record.runtime]
    return " ".join(["harness runtime-conformance", *where, "--case", record.case["name"], "--variant",
                     record.variant, '--results-dir "$(mktemp -d)"'])


def matrix(records: list) -> list:
    """Rows per (runtime, family): requests, and how many carry each label."""
    rows: dict = {}
    for r in records:
        row = rows.setdefault((r.runtime, r.family), {"runtime": r.runtime, "family": r.family,
                                                            "templates": set(), "requests": 0,
                                                            **{k: 0 for k in LABELS}})
        row["templates"].add(r.template["id"])
        row["requests"] += 1
        for label in {label_family(x) for x in r.labels}:
            row[label] += 1
    return [rows[k] for k in sorted(rows)]


def cell(text: str, limit: int = 160) -> str:
    """A text in one markdown table cell or list line: cropped, quoted as JSON, pipes and backticks made safe."""
    text = text if len(text) <= limit else text[:limit] + "…"
    return json.dumps(text, ensure_ascii=False).replace("|", "\\|").replace("`", "'")


def disagreement_lines(records: list, order, head, replay, limit: int = 160) -> list:
    """The "Disagreements" section of a suite's page: each record not labelled agree, in `order`, as `head(r)`,
    its labels and details, then its reply and the command `replay(r)` that asks it again."""
    lines = ["", "## Disagreements", ""]
    for r in sorted(records, key=order):
        if r.labels == ["agree"]:
            continue
        lines.append(f"- {head(r)}: `{'`, `'.join(r.labels)}` — {'; '.join(r.details)}")
        lines.append(f"  reply {cell(r.reply, limit)}; replay: `{replay(r)}`")
    return lines


def conformance_markdown(records: list, unscripted: list) -> str:
    """results/runtime-conformance.md: the runtime × family matrix, then every disagreement with its reply and
    the command that replays it. unscripted: (template id, why no scripted model is built for it)."""
    lines = ["# Runtime conformance", "",
             "Scripted models (real GGUFs: a family's vocabulary, the pinned template, weights that write exact "
             "replies) write every case of each template's corpus through the runtime's /v1/chat/completions, "
             "non-streamed and streamed. Each request is labelled by what the runtime did with a reply whose "
             "strict parse is known; a request can carry several labels (a row counts each once). Labels are "
             "defined in harness/evaluation/runtime_conformance.py; the corpus in "
             "harness/evaluation/runtime_corpus.py; made by `harness runtime-conformance` and `harness report`.", "",
             "| runtime | family | templates | requests | " + " | ".join(LABELS) + " |",
             "|---|---|---:|---:|" + "---:|" * len(LABELS)]
    for row in matrix(records):
        lines.append(f"| {row['runtime']} | {row['family']} | {len(row['templates'])} | {row['requests']} | "
                     + " | ".join(str(row[k]) for k in LABELS) + " |")
    if unscripted:
        lines += ["", "## Templates without a scripted model", ""]
        lines += [f"- {t}: {why}" for t, why in unscripted]
    lines += disagreement_lines(
        records, lambda r: (r.runtime, r.family or "", r.template["id"], r.case["name"], r.variant),
        lambda r: f"**{r.runtime}** / {r.template['id']} ({r.family}) / {r.case['name']}/{r.variant}", replay_command)
    return "\n".join(lines) + "\n"
