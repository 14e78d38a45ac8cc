"""Runtime conformance (`harness runtime-conformance`): a scripted model wrote an exact reply through a runtime's
/v1/chat/completions; which layer, if any, changed what a strict parser reads in it?

A record holds the scripted reply, its strict parse (after our render of the prompt), the runtime's prompt length
(and text, where it shows it), and the runtime's answers non-streamed and streamed. Its labels are LABELS
(several can hold at once; `agree` only alone). harness.suites.runtime_conformance.driver asks a runtime the harness
starts, harness.suites.runtime_conformance.endpoint one the user serves; both make their records with conformance_record."""

from __future__ import annotations

import shlex

from harness.suites.runtime_conformance import history_cases
from harness.evaluation.judging import answer_summary, arguments_object, fork, judge, label_head, text
from harness.suites.runtime_conformance.corpus import MALFORMED_HISTORY
from harness.suites.runtime_conformance.records import RUNTIME_CONFORMANCE, RuntimeConformanceRecord

KIND = RUNTIME_CONFORMANCE
LABELS = {
    "agree": "the runtime returned what the strict parser reads: the same calls (name and typed arguments), or no "
             "call and the same text",
    "prompts-differ": "the runtime's prompt is not our render (its /apply-template text, else its length); the "
                      "other labels still judge the reply where the scripted model was keyed to the runtime's own "
                      "prompt; with --endpoint, where its usage.prompt_tokens is not the length the manifest keyed "
                      "the model to, the reply is not judged",
    "reply-rewritten": "the runtime generated other tokens than the scripted reply (its grammar or sampling changed "
                       "what the model would write): the ids it sampled are not the script's (llama-server shows "
                       "them, asked with `verbose` and `return_tokens`), else its completion tokens differ in number; "
                       "where it shows the text it generated, its parse is judged against that text's strict parse",
    "runtime-forgave": "(`runtime-forgave:<deviation>`) the strict parser rejects the reply with that named "
                       "deviation; the runtime returned a call",
    "runtime-dropped-call": "the strict parser reads a call; the runtime returned no call and not the call's text",
    "call-left-in-content": "the strict parser reads a call; the runtime returned no call, its text in `content`",
    "arguments-changed": "same calls, arguments not the same: emptied, stringified (not a JSON object), or of other "
                         "types than the strict parse typed by the tool's schema",
    "calls-differ": "both read calls, other names or another number; under tool_choice none any call; under a named "
                    "function a call to another; under parallel_tool_calls false the first call alone agrees",
    "parallel-ignored": "parallel_tool_calls false, yet the runtime returned more than one call",
    "required-ignored": "tool_choice required, yet the runtime returned no call (the reply is prose; with "
                        "reply-rewritten beside it, its grammar stepped in and still let prose through)",
    "call-ids-repeat": "two calls of one answer (non-streamed or streamed) carry the same id (an app answering by id "
                       "loses a result)",
    "content-differs": "no call either side, but the runtime's content or reasoning is not the strict one's",
    "stream-differs": "the streamed answer (deltas accumulated) is not the non-streamed one",
    "runtime-error": "an HTTP error, a refused request or history, a dead server, a body that is not JSON or is "
                     "empty, an answer with a field of the wrong type (a name not a string, arguments an object "
                     "instead of a JSON string: named in the detail), a stream cut before any chunk with a "
                     "finish_reason (the records say which)",
    "history-refused": "the history holds a call whose arguments are not JSON, and the runtime refused it with a "
                       "4xx and its words: a client error, as it should be (a 5xx is a runtime-error)",
    "history-reasoning-dropped": "the history sends back the reasoning a runtime returned (history cases) and the "
                                 "pinned template renders it there; the runtime's prompt lacks it (its text, else "
                                 "the length of a template render without it)",
    "history-reasoning-kept": "the history sends back reasoning the pinned template drops there (after a new user "
                              "turn, or always); the runtime's prompt holds it (its text, else the length of a "
                              "render that holds it)",
    "history-differs": "the history sends back reasoning and the runtime's prompt is none of the template's renders "
                       "(with or without it, the arguments as objects or text, the switches sent or the defaults), "
                       "though the reasoning is where the template puts it, or only its length shows",
    "no-done-sentinel": "the stream finished (a chunk with a finish_reason) and ended without `data: [DONE]`: "
                        "judged as it came, this label beside what the judging finds; a client that waits for the "
                        "sentinel hangs or reports an error (its root cause counts the requests where nothing else "
                        "differs)",
}


def _same_answer(a: dict, b: dict) -> bool:
    def shape(x):
        return (text(x.get("content")), text(x.get("reasoning")),
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


def _refused_bad_history(record: dict, answers) -> bool:
    """Both answers to the malformed-history case are 4xx refusals (and nothing else went wrong)."""
    if (record.get("case") or {}).get("name") != MALFORMED_HISTORY:
        return False
    return all(x.get("error") and not x.get("problems") and 400 <= (x.get("status") or 0) < 500 for _, x in answers)


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
    if errors and _refused_bad_history(record, answers):
        labels.append("history-refused")
        details += errors
    elif errors:
        labels.append("runtime-error")
        details += errors
    if key.get("error"):
        # The runtime gave no prompt length, so no model was keyed to it: what its chat endpoint answered (asked
        # all the same) is recorded, not judged.
        return labels, details
    if stream.get("no_done_sentinel"):
        labels.append("no-done-sentinel")
        details.append(f"streamed: ended after finish_reason {stream.get('finish_reason')!r} without data: [DONE]")
    ours = record.get("ours") or {}
    if key.get("tokens") is not None and (key["tokens"] != ours.get("tokens") or key.get("same_text") is False):
        labels.append("prompts-differ")
        details.append(f"the runtime's prompt: {key['tokens']} tokens" +
                       ("" if key.get("same_text") is None else f", text {'equal' if key['same_text'] else 'not ours'}")
                       + f"; ours {ours.get('tokens')} tokens")
        judged, why = history_cases.judge(record)
        labels += judged
        details += why
    keyed = key.get("keyed")
    if keyed is not None and key.get("tokens") not in (None, keyed):
        # A model keyed to another prompt length writes at other positions than its script: what comes back is
        # not the script's reply, so nothing after the prompt is the runtime's doing.
        details.append(f"the scripted model is keyed to {keyed} prompt tokens, the runtime counts {key['tokens']}: "
                       "its reply is not the script's and is not judged; key the models to this runtime and "
                       "serve them again")
        return (labels or ["agree"]), details
    if not plain.get("error") and plain:
        rewritten = _rewritten(record, plain)
        expect = record["expect"]
        if rewritten:
            labels.append("reply-rewritten")
            details.append(rewritten)
            if record.get("generated_expect") is not None:
                # What the runtime parsed is the text it generated, not the script: judged against that text's
                # strict parse, so a grammar that closed the call is named (reply-rewritten), not forgiven.
                expect = record["generated_expect"]
                details.append("its parse is judged on the text it generated: "
                               + (f"strict reads {[c['name'] for c in expect['calls']]}" if expect["calls"]
                                  and not expect["deviation"] else f"strict: {expect['deviation'] or 'no call'}"))
        choice = (record.get("request") or {}).get("tool_choice")
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        judged, why = judge(expect, plain, tools, record["variant"], marker, named)
        labels += judged
        details += why
        for what, answer in answers:
            ids = [i for i in answer.get("call_ids") or () if i]
            if len(ids) != len(set(ids)):
                labels.append("call-ids-repeat")
                details.append(f"{what}: call ids {ids}")
                break
        if not stream.get("error") and stream and not _same_answer(plain, stream):
            labels.append("stream-differs")
            details.append(f"streamed {answer_summary(stream)}; non-streamed {answer_summary(plain)}")
    return (labels or ["agree"]), details


def generated_expect(record: RuntimeConformanceRecord, reparse) -> dict | None:
    """The strict parse of the text the runtime generated, where it shows that text and it is not the script's
    reply (see RuntimeConformanceRecord.generated_expect); None otherwise or without a way to parse."""
    generated = (record.plain or {}).get("generated")
    if reparse is None or not isinstance(generated, str) or generated == record.reply:
        return None
    return reparse(generated)


# Replays are printed to be pasted in a shell at the repository root, where scripts/setup.sh makes .venv.
HARNESS = ".venv/bin/harness"


def replay_command(record: RuntimeConformanceRecord) -> str:
    """One line that asks this single case again, into a scratch results folder, run as printed from the
    repository root (it prints the request's labels and details). A runtime the user serves is asked the case
    from its template's manifest, rebuilt (`--template`: no machine's path), its request naming its own model."""
    where = ["--server", record.server, "--template", record.template["id"]]
    if record.server == "endpoint":
        where = ["--endpoint", record.endpoint, "--template", record.template["id"], "--runtime", record.runtime]
    return " ".join([HARNESS, "runtime-conformance", *map(shlex.quote, where), "--case", record.case["name"], "--variant",
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
        for label in {label_head(x) for x in r.labels}:
            row[label] += 1
    return [rows[k] for k in sorted(rows)]


def conformance_record(*, runtime: str, server: str, template: dict, family: str | None, profile: str | None,
                       case: dict, variant: str, request: dict, reply: str, reply_tokens: int | None,
                       reply_ids: list | None, expect: dict, ours: dict, key: dict, model: str | None, plain: dict,
                       stream: dict, recorded: str, tools: list, marker: str | None, endpoint: str | None = None,
                       manifest: str | None = None, served_model: str | None = None,
                       reparse=None, build: dict | None = None,
                       history: dict | None = None) -> RuntimeConformanceRecord:
    """The one way a runtime-conformance record is made: every field as asked, labelled by classify (tools: the
    case's, to type arguments; marker: the family's call opener, to see a call left in content). endpoint,
    manifest and served_model: a runtime the user serves (server "endpoint"). reparse: text -> its strict parse
    after the case's prompt (as `expect` is of the reply), for the text a runtime shows it generated instead.
    build: which build of the runtime answered (Runtime.build). history: for a case that sends reasoning back,
    what judges the runtime's render (history_cases.facts)."""
    record = RuntimeConformanceRecord(
        runtime=runtime, server=server, template=template, case=case, variant=variant, reply=reply, labels=[],
        family=family, profile=profile, request=request, reply_tokens=reply_tokens, reply_ids=reply_ids,
        expect=expect, ours=ours, key=key, model=model, plain=plain, stream=stream, recorded=recorded,
        endpoint=endpoint, manifest=manifest, served_model=served_model, build=build, history=history)
    record.generated_expect = generated_expect(record, reparse)
    record.labels, record.details = classify(record.to_json(), tools, marker)
    return record

