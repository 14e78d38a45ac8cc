"""Runtime agreement: does a runtime read what the model writes the way the strict parser does?

For each scenario's opening conversation and seed, the same server is asked twice, greedy, same seed:
- strict path: the harness renders the prompt with the pinned template, asks for the raw text (llama-server's
  /completion, token ids read back through /detokenize; another server's /v1/completions), and parses it with
  the template's family;
- runtime path: the conversation and tools go to /v1/chat/completions; the runtime renders, generates and
  parses, and its tool_calls/content/reasoning are recorded as returned.
Both answers go to results/runtimes/<runtime>.jsonl (append-only, fsynced: a run killed halfway resumes), and
each pair gets one label:

  agree                        the same calls (name and arguments), or no call on either side and the same text
  prompts-differ               the runtime rendered the conversation differently: its prompt (where the server
                               shows it, llama-server's /apply-template) or its length in tokens is not ours, so
                               the replies are not comparable (checked first)
  runtime-forgave:<deviation>  the strict parser rejected the reply with that named deviation; the runtime
                               returned a call anyway
  runtime-dropped-call         the strict parser read a call; the runtime returned none
  runtime-malformed-reply      the runtime's answer breaks the API's shape: a call without a string name,
                               arguments sent as an object instead of a JSON string, tool_calls or content of
                               the wrong type (the detail names each field and what was there)
  runtime-invalid-arguments    the runtime returned a call whose arguments are not a JSON object, or are empty
                               where the strict parser read some
  calls-differ                 both read calls, not the same ones
  replies-differ               no call on either side, but not the same text: same prompt length, yet the
                               runtime generated or post-processed differently
  template-refused             our render of the conversation failed (the template raised); nothing was asked
"""

from __future__ import annotations

import json

from harness.evaluation.records import RUNTIME_CHECK
from harness.evaluation.transcripts import read_transcript

LABELS = ("agree", "prompts-differ", "runtime-forgave", "runtime-dropped-call", "runtime-malformed-reply",
          "runtime-invalid-arguments", "calls-differ", "replies-differ", "template-refused")


def classify(strict, strict_prompt_tokens: int | None, runtime, same_prompt: bool | None = None) -> tuple:
    """(label, detail) for one pair: `strict` a ParseResult, `runtime` a RuntimeReply; same_prompt whether the
    runtime's own render equals ours, where the server shows it (None: it does not)."""
    if same_prompt is False:
        return "prompts-differ", "the runtime's rendered prompt (/apply-template) is not ours"
    if strict_prompt_tokens and runtime.prompt_tokens and strict_prompt_tokens != runtime.prompt_tokens:
        return "prompts-differ", f"strict prompt {strict_prompt_tokens} tokens, runtime's {runtime.prompt_tokens}"
    problems = getattr(runtime, "problems", None)
    if problems:
        return "runtime-malformed-reply", "; ".join(problems)
    runtime_calls, invalid = [], []
    for call in runtime.tool_calls:
        arguments = arguments_object(call.get("arguments"))
        if arguments is None:
            invalid.append(f"{call.get('name')}: arguments {call.get('arguments')!r} are not a JSON object")
        runtime_calls.append((call.get("name"), arguments))
    strict_calls = [(c.name, c.arguments) for c in strict.calls] if strict.accepted else []
    if invalid:
        return "runtime-invalid-arguments", "; ".join(invalid)
    if strict_calls and not runtime_calls:
        return "runtime-dropped-call", f"strict read {', '.join(n for n, _ in strict_calls)}; the runtime returned text"
    if not strict_calls and runtime_calls:
        reason = strict.deviation or "text"
        return f"runtime-forgave:{reason}", f"strict: {strict.detail or 'no call'}; runtime: " + \
            ", ".join(n or "?" for n, _ in runtime_calls)
    if strict_calls != runtime_calls:
        emptied = [n for (n, a), (_, b) in zip(strict_calls, runtime_calls) if a and b == {}]
        if emptied and len(strict_calls) == len(runtime_calls):
            return "runtime-invalid-arguments", f"the runtime emptied the arguments of {', '.join(emptied)}"
        return "calls-differ", f"strict {strict_calls}; runtime {runtime_calls}"
    if not strict_calls and (strict.content or "").strip() != (runtime.content or "").strip():
        return "replies-differ", fork(strict.content, runtime.content)
    return "agree", None


def fork(strict_text, runtime_text, context: int = 24, after: int = 48, sides=("strict", "runtime"),
         strip: bool = True) -> str:
    """Where two texts part: the character they fork at, the text both share just before it, and each side's
    text from there (cropping both to the same first characters would hide the difference). Texts are compared
    without their outer whitespace unless strip is False; sides name them."""
    a, b = strict_text or "", runtime_text or ""
    if strip:
        a, b = a.strip(), b.strip()
    first, second = sides
    if not a or not b:
        empty, other, text = (first, second, b) if not a else (second, first, a)
        return f"the {empty} text is empty; {other} text {_crop(text, 0, after)}"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    shared = ("…" if at > context else "") + a[max(0, at - context):at]
    return (f"they fork at character {at} (of {len(a)} {first}, {len(b)} {second}), after "
            f"{json.dumps(shared, ensure_ascii=False)}: {first} {_crop(a, at, after)}; {second} {_crop(b, at, after)}")


def _crop(text: str, start: int, width: int) -> str:
    part = text[start:start + width]
    return json.dumps(part + ("…" if len(text) > start + width else ""), ensure_ascii=False) if part else "(ends)"


def arguments_object(text):
    """A call's arguments as a runtime returned them (a JSON string, or an object), as a dict; None when they are
    not a JSON object (or nest too deep to read)."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def label_family(label: str) -> str:
    return label.split(":", 1)[0]


def agreement_table(records: list) -> list:
    """Rows per (runtime, served model, template): how many pairs got each label."""
    rows: dict = {}
    for r in records:
        row = rows.setdefault((r.runtime, r.served_model, r.template["id"]),
                              {"runtime": r.runtime, "served_model": r.served_model,
                               "template": r.template["id"], "pairs": 0, **{k: 0 for k in LABELS},
                               "forgiven": {}})
        row["pairs"] += 1
        row[label_family(r.label)] += 1
        if r.label.startswith("runtime-forgave:"):
            name = r.label.split(":", 1)[1]
            row["forgiven"][name] = row["forgiven"].get(name, 0) + 1
    return [rows[k] for k in sorted(rows)]


def read_records(path) -> tuple:
    """(records, warnings) of one runtimes file, read as transcripts are: a torn last line (a killed run) or a
    damaged record is named with its line and left out, never a crash."""
    found = read_transcript(path, kinds=(RUNTIME_CHECK,))
    return found.records, found.warnings


def _detail(record) -> str:
    """The record's detail; for replies-differ, where the texts fork, from the two texts it keeps (records
    written before `fork` hold both texts cropped to the same first characters)."""
    if record.label == "replies-differ":
        strict = ((record.strict or {}).get("parse") or {}).get("content")
        runtime = (record.runtime_reply or {}).get("content")
        if isinstance(strict, (str, type(None))) and isinstance(runtime, (str, type(None))):
            return fork(strict, runtime)
    return record.detail


def agreement_markdown(records: list) -> str:
    lines = ["# Runtime agreement", "",
             "The same conversation and seed, greedy, through the harness's strict path (its own render, raw "
             "/v1/completions text, the family's strict parser) and the runtime's own path (/v1/chat/completions "
             "with tools). Labels are defined in harness/evaluation/runtime_agreement.py.", "",
             "| runtime | served model | template | pairs | " + " | ".join(LABELS) + " | deviations forgiven |",
             "|---|---|---|---:|" + "---:|" * len(LABELS) + "---|"]
    for row in agreement_table(records):
        forgiven = ", ".join(f"`{k}` ×{v}" for k, v in sorted(row["forgiven"].items())) or "–"
        lines.append(f"| {row['runtime']} | {row['served_model']} | {row['template']} | {row['pairs']} | "
                     + " | ".join(str(row[k]) for k in LABELS) + f" | {forgiven} |")
    lines += ["", "## Pairs that disagree", ""]
    for r in sorted(records, key=lambda r: (r.runtime, r.served_model, r.scenario.name, r.seed)):
        if r.label != "agree":
            lines.append(f"- {r.runtime} / {r.served_model} / {r.scenario.name} seed {r.seed}: "
                         f"`{r.label}` — {_detail(r)}")
    return "\n".join(lines) + "\n"
