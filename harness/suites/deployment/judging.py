"""What the deployment suite says of one record: the runtime's labels, and the calls BFCL's checker is handed.

Two readings of one request meet here. The runtime's: what an app receives (`tool_calls`, `content`), non-streamed
and streamed. The strict path's, on the same server: the text the model generated (llama-server shows it, asked
with `verbose`, as runtime conformance asks it) read by the family's strict parser after the runtime's own prompt.
Where they part, a reader sees whether the difference comes from what the model wrote or from how the runtime
read it (harness.evaluation.judging.judge compares them, as runtime conformance does for scripted replies)."""

from __future__ import annotations

import json

from harness import families
from harness.core.lost_characters import lost_beyond_ascii
from harness.evaluation.judging import answer_summary, arguments_object, fork, judge, text
from harness.evaluation.scoring import is_call_attempt, judged_parse

LABELS = {
    "agree": "none of the labels below: the runtime read what the model generated as the strict parser does, "
             "streamed and not, without an error",
    "call-left-in-content": "the runtime returned no call, and its `content` holds a call attempt: a call the "
                            "strict parser reads, or a named near miss of one (a fenced or bare JSON object naming "
                            "an offered tool); with runtime-dropped-call beside it the runtime failed to read the "
                            "model's own format, without it the model wrote another format",
    "malformed-arguments": "a returned call whose arguments are not a JSON object (or whose fields break the "
                           "API's shape: a name that is not a string, arguments that are not a string)",
    "required-ignored": "tool_choice required, yet the runtime returned no call",
    "stream-differs": "the streamed answer (deltas accumulated) is not the non-streamed one: other content, "
                      "other calls or other arguments",
    "runtime-error": "no chat completion came back: an HTTP error, a body that is not JSON, an error event in "
                     "the stream, a stream cut before its finish_reason (the details say which)",
    "runtime-forgave": "(`runtime-forgave:<deviation>`) the strict parser reads no call in the text the model "
                       "generated (the named near miss, or plain text); the runtime returned a call",
    "runtime-dropped-call": "the strict parser reads a call in the text the model generated; the runtime "
                            "returned none (in content or dropped)",
    "calls-differ": "both read calls, not the same ones (names, number, or the arguments changed)",
    "generated-not-shown": "the runtime does not show the text the model generated (a runtime other than "
                           "llama-server), so the strict path has nothing to read: only the runtime's reading "
                           "is judged",
}


def strict_parse(family: str | None, generated: str, prompt: str, tools: list) -> dict:
    """The strict parse of the generated text after the runtime's prompt, with a call to an offered tool in
    another spelling named as that near miss (harness.evaluation.scoring.judged_parse)."""
    names = [t["function"]["name"] for t in tools]
    return judged_parse(families.parse(family, generated, prompt), names).to_json()


def _attempt_in_content(family: str | None, content, prompt: str, tools: list) -> bool:
    parse = judged_parse(families.parse(family, text(content), prompt), [t["function"]["name"] for t in tools])
    return parse.accepted or is_call_attempt(parse)


def _same(a: dict, b: dict) -> bool:
    def shape(x):
        return (text(x.get("content")), text(x.get("reasoning")),
                [(c.get("name"), arguments_object(c.get("arguments"))) for c in x.get("tool_calls") or []])
    return shape(a) == shape(b)


# How a streamed answer differs from the non-streamed one, by kind, in the words a runtime's sentence says them
# with (no parentheses: they stand inside the sentence's own): a reader learns which side an app should trust,
# not only that the two differ.
STREAM_DIFFERENCES = {
    "calls-only-streamed": "only the streamed answer carries tool_calls",
    "calls-only-not-streamed": "only the non-streamed answer carries tool_calls",
    "call-vanished": "the stream finishes with finish_reason tool_calls yet carries no call, and its content stops "
                     "short of the non-streamed one: an app gets neither the call nor its text",
    "content-stops-short": "neither carries a call and the streamed content stops short of the non-streamed one: "
                           "the rest of the reply never streamed",
    "characters-dropped": "the streamed content is the non-streamed one with characters beyond ASCII left out, "
                          "all else alike: a stream decoding each token alone loses a character split across tokens",
    "replacement-withheld": "the non-streamed content ends in a replacement character, which the stream "
                            "withholds, all else alike: a reply cut inside a character",
    "other": "other content, calls or arguments",
}


def stream_difference(plain: dict | None, stream: dict | None) -> str | None:
    """The STREAM_DIFFERENCES kind of a record's two answers; None where both came back and are alike, or where
    either is missing or errored (no answer to compare)."""
    if not plain or not stream or errored(plain) or errored(stream) or _same(plain, stream):
        return None
    calls = bool(plain.get("tool_calls")), bool(stream.get("tool_calls"))
    if calls[0] != calls[1]:
        return "calls-only-streamed" if calls[1] else "calls-only-not-streamed"
    whole, streamed = text(plain.get("content")), text(stream.get("content"))
    if _same({**plain, "content": None}, {**stream, "content": None}):
        # A stream that decodes each token alone loses a character whose bytes span two tokens; not so where the
        # whole content holds U+FFFD (a reply cut inside a character: the stream withholds it, another cause).
        if "\ufffd" not in whole and lost_beyond_ascii(streamed, whole):
            return "characters-dropped"
        if whole.endswith("\ufffd") and whole.rstrip("\ufffd") == streamed:
            return "replacement-withheld"
        if not any(calls) and len(streamed) < len(whole) and whole.startswith(streamed):
            return "call-vanished" if stream.get("finish_reason") == "tool_calls" else "content-stops-short"
    return "other"


def classify(record, tools: list) -> tuple:
    """(labels, details) of one record (a DeploymentRecord with plain, stream, strict and tool_choice set):
    each answer as an app receives it, then the non-streamed one against the strict parse of what was
    generated, then the streamed one against the non-streamed one."""
    labels, details = [], []
    answers = (("non-streamed", record.plain or {}), ("streamed", record.stream or {}))
    for what, answer in answers:
        if answer.get("error"):
            _add(labels, details, "runtime-error", f"{what}: {answer['error']}")
        for problem in answer.get("problems") or ():
            if "cut short" in problem:
                _add(labels, details, "runtime-error", f"{what}: {problem}")
            else:
                _add(labels, details, "malformed-arguments", f"{what}: {problem}")
    for what, answer in answers:
        if answer.get("error"):
            continue
        calls = answer.get("tool_calls") or []
        bad = [c.get("name") for c in calls if arguments_object(c.get("arguments")) is None]
        if bad:
            _add(labels, details, "malformed-arguments", f"{what}: arguments of {bad} are not a JSON object")
        if not calls and _attempt_in_content(record.family, answer.get("content"), prompt_tail(record), tools):
            _add(labels, details, "call-left-in-content",
                 f"{what}: no tool_calls; content {json.dumps(text(answer.get('content'))[:80], ensure_ascii=False)}")
        if record.tool_choice == "required" and not calls:
            _add(labels, details, "required-ignored", f"{what}: tool_choice required, no call returned")
    plain, stream = answers[0][1], answers[1][1]
    if plain and not plain.get("error"):
        if record.strict is None:
            _add(labels, details, "generated-not-shown", "the runtime showed no generated text")
        else:
            # judge() reads the strict parse as runtime conformance's expect; tool_choice stays "auto" here, so
            # that required-ignored above is the only word on a missing call under "required".
            judged, why = judge(record.strict, plain, tools, "auto", None)
            for label, detail in zip(judged, why):
                head = label.split(":", 1)[0]
                if head == "arguments-changed":
                    label = "calls-differ"
                if head == "content-differs":
                    continue        # the runtime strips or splits text; what an app gets is judged above
                if head == "call-left-in-content":
                    label = "runtime-dropped-call"
                _add(labels, details, label, f"against the strict parse of the generated text: {detail}")
    if plain and stream and not plain.get("error") and not stream.get("error") and not _same(plain, stream):
        same_calls = _same({**plain, "content": None, "reasoning": None}, {**stream, "content": None,
                                                                            "reasoning": None})
        _add(labels, details, "stream-differs",
             fork(plain.get("content"), stream.get("content"), sides=("non-streamed", "streamed")) if same_calls
             and text(plain.get("content")) != text(stream.get("content")) else f"streamed {answer_summary(stream)}; non-streamed {answer_summary(plain)}")
    return (labels or ["agree"]), details


def _add(labels: list, details: list, label: str, detail: str) -> None:
    if label not in labels:
        labels.append(label)
    details.append(detail)


def bfcl_calls(answer: dict | None) -> list:
    """The calls of an answer in BFCL's decoded form ([{name: {param: value}}]), as an app decodes them: every
    call's arguments parsed as JSON. A call whose arguments do not decode makes the whole answer decode to no
    call, as BFCL's own decoder fails on it (for an irrelevance case that counts as an abstention, BFCL's rule)."""
    if not answer or answer.get("error"):
        return []
    out = []
    for call in answer.get("tool_calls") or []:
        arguments = arguments_object(call.get("arguments"))
        if arguments is None or not isinstance(call.get("name"), str):
            return []
        out.append({call["name"]: arguments})
    return out


def prompt_tail(record) -> str:
    """The end of the runtime's prompt (what the template opened, a <think> block), which the strict parser reads
    the generated text after."""
    prompt = getattr(record, "prompt", None) or {}     # a replay's record (runtime conformance's) keeps none
    return prompt["tail"] if isinstance(prompt.get("tail"), str) else ""


def errored(answer: dict | None) -> bool:
    """No chat completion came back: an error, or a stream cut before its finish_reason (no answer, not a short
    one). A missing answer (never asked) is not an errored one."""
    answer = answer or {}
    return bool(answer.get("error")) or any("cut short" in p for p in answer.get("problems") or ())


def answered(answer: dict | None) -> bool:
    """A chat completion came back: asked, and not errored (what every count of answers given counts)."""
    return bool(answer) and not errored(answer)


def median_answered_seconds(records: list) -> float | None:
    """The median seconds of the answers given (non-streamed and streamed each one), as recorded (the upper of two
    middles); None where none was given: an errored answer's seconds say how long the runtime took to fail, not
    to answer."""
    seconds = sorted(s for r in records for side, s in (r.seconds or {}).items()
                     if isinstance(s, (int, float)) and answered(r.plain if side == "plain" else r.stream))
    return seconds[len(seconds) // 2] if seconds else None


def answer_view(record, answer: dict | None, tools: list) -> dict:
    """One answer as a row of the page counts it: errored, its call left in content, its BFCL calls."""
    answer = answer or {}
    failed = errored(answer)
    calls = answer.get("tool_calls") or []
    left = (not failed and not calls
            and _attempt_in_content(record.family, answer.get("content"), prompt_tail(record), tools))
    return {"errored": failed, "left_in_content": left, "calls": [] if failed else bfcl_calls(answer)}
