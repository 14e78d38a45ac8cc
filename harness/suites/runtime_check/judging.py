"""Runtime agreement (`harness runtime-check`): does a runtime read what the model writes the way the strict parser
does?

For each scenario's opening conversation and seed, the same server is asked twice, greedy, same seed:
- strict path: the harness renders the prompt with the pinned template, asks for the raw text (llama-server's
  /completion, token ids read back through /detokenize; another server's /v1/completions), and parses it with
  the template's family;
- runtime path: the conversation and tools go to /v1/chat/completions; the runtime renders, generates and
  parses, and its tool_calls/content/reasoning are recorded as returned.
Both answers go to results/runtimes/<runtime>.jsonl (append-only, fsynced: a run killed halfway resumes), and
each pair gets one label of LABELS (driver.py asks, page.py writes the page).
"""

from __future__ import annotations

from harness.evaluation.judging import arguments_object, fork, label_head
from harness.suites.runtime_check.records import RuntimeCheckRecord

LABELS = {
    "agree": "the same calls (name and arguments), or no call on either side and the same text",
    "prompts-differ": "the runtime rendered the conversation differently: its prompt (where the server shows it, "
                      "llama-server's /apply-template) or its length in tokens is not ours, so the replies are not "
                      "comparable (checked first)",
    "runtime-forgave": "(`runtime-forgave:<deviation>`) the strict parser rejected the reply with that named "
                       "deviation; the runtime returned a call anyway",
    "runtime-dropped-call": "the strict parser read a call; the runtime returned none",
    "runtime-malformed-reply": "the runtime's answer breaks the API's shape: a call without a string name, "
                               "arguments sent as an object instead of a JSON string, tool_calls or content of the "
                               "wrong type (the detail names each field and what was there)",
    "runtime-invalid-arguments": "the runtime returned a call whose arguments are not a JSON object, or are empty "
                                 "where the strict parser read some",
    "calls-differ": "both read calls, not the same ones",
    "replies-differ": "no call on either side, but not the same text: same prompt length, yet the runtime "
                      "generated or post-processed differently",
    "template-refused": "our render of the conversation failed (the template raised); nothing was asked",
    "runtime-error": "the runtime's chat endpoint answered, but not with a chat completion: an HTTP error status "
                     "(a 500 given every time, a 4xx refusal) or a body that is not JSON or is empty (the detail "
                     "holds its words); a request that got no answer, or a 408, 429, 502, 503 or 504, is not "
                     "recorded and is asked again",
}


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


def agreement_table(records: list) -> list:
    """Rows per (runtime, served model, template): how many pairs got each label, and the deviations forgiven."""
    rows: dict = {}
    for r in records:
        row = rows.setdefault((r.runtime, r.served_model, r.template["id"]),
                              {"runtime": r.runtime, "served_model": r.served_model,
                               "template": r.template["id"], "pairs": 0, **{k: 0 for k in LABELS},
                               "forgiven": {}})
        row["pairs"] += 1
        row[label_head(r.label)] += 1
        if r.label.startswith("runtime-forgave:"):
            name = r.label.split(":", 1)[1]
            row["forgiven"][name] = row["forgiven"].get(name, 0) + 1
    return [rows[k] for k in sorted(rows)]


def replay_command(record: RuntimeCheckRecord) -> str:
    """One line that asks this pair again, into a scratch results folder."""
    endpoints = " ".join(f"--endpoint {url}" for url in record.endpoints) or "--endpoint URL"
    return (f"harness runtime-check {endpoints} --served-model {record.served_model} --template "
            f"{record.template['id']} --runtime {record.runtime} --scenario {record.scenario.name} --seed "
            f'{record.seed} --results-dir "$(mktemp -d)"')
