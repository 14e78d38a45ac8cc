"""What a runtime answers on /v1/chat/completions, read as an app reads it, non-streamed and streamed. A field
of the wrong type (tool_calls not a list, a name not a string, arguments an object instead of a JSON string) is
named in `problems` rather than ending the request: what a runtime gets wrong is what is being measured."""

from __future__ import annotations

from harness.backends.transport import Exchange, describe, loads, request_json, shown
from harness.core.errors import ServerReplyError


def read_message(message, where: str) -> tuple:
    """(content, reasoning, calls, problems) of a chat answer's message, as an app would read it: calls as
    {"name", "arguments"} with what the server sent in each, and every field of the wrong type named in
    `problems` instead of ending the request (what a runtime gets wrong is what is being measured)."""
    problems = []
    if not isinstance(message, dict):
        return None, None, [], [f"{where} is {describe(message)}, not an object"]
    texts = []
    for key in ("content", "reasoning_content"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"{where}.{key} is {describe(value)}, not a string")
            value = None
        texts.append(value)
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        problems.append(f"{where}.tool_calls is {describe(raw_calls)}, not a list")
        raw_calls = None
    calls = []
    for i, call in enumerate(raw_calls or []):
        here = f"{where}.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            shown = here if not isinstance(call, dict) else f"{here}.function"
            problems.append(f"{shown} is {describe(call if not isinstance(call, dict) else function)}, not an object")
            calls.append({"name": None, "arguments": None})
            continue
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str):
            problems.append(f"{here}.function.name is {'missing' if name is None else describe(name)}, not a string")
        if not isinstance(arguments, str):
            problems.append(f"{here}.function.arguments is {'missing' if arguments is None else describe(arguments)}, "
                            "not the JSON string the API specifies")
        calls.append({"name": name, "arguments": arguments})
    return texts[0], texts[1], calls, problems


def call_ids(raw_calls) -> list:
    """The ids a runtime gave its calls, in order (None where a call has none): an app answers each call by its
    id, so two calls of one answer under one id lose a result."""
    if not isinstance(raw_calls, list):
        return []
    return [c.get("id") if isinstance(c, dict) and isinstance(c.get("id"), str) else None for c in raw_calls]


def _failure(exc: ServerReplyError) -> dict:
    """A request's failure as an answer records it; `expired` where no complete answer came by its deadline."""
    return {"error": str(exc), "status": exc.status, **({"expired": True} if exc.expired else {})}


def chat_answer(url: str, body: dict, timeout: float) -> dict:
    """One /v1/chat/completions answer as the runtime returned it: content, reasoning_content, tool_calls (name
    and the arguments string), finish_reason, completion tokens (and prompt tokens, where usage has them); an HTTP or connection failure, or an answer
    that is not a chat completion, as `error`; fields of the wrong type in `problems`. Where the runtime shows them
    (llama-server's __verbose, asked with "verbose" and "return_tokens"), `generated` is the text the model wrote
    before the runtime parsed it and `generated_tokens` the ids it sampled; where it shows the ids alone (vLLM's
    logprobs as token ids), `generated_tokens`, or only its logprobs' bytes, `logprob_bytes` (one list a token),
    or only their token strings, `logprob_text` (llama-cpp-python gives no bytes): the runtime's generated_text()
    says what the model generated from them."""
    try:
        answer = request_json(url, {**body, "stream": False}, timeout)
    except ServerReplyError as exc:
        return _failure(exc)
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return {"error": f"{url}: the answer has no choices: {shown(answer)}", "status": 200}
    content, reasoning, calls, problems = read_message(choices[0].get("message"), "choices[0].message")
    usage = answer.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    out = {"status": 200, "content": content, "reasoning": reasoning, "tool_calls": calls,
           "finish_reason": choices[0].get("finish_reason"),
           "completion_tokens": tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None}
    debug = answer.get("__verbose")
    if isinstance(debug, dict) and isinstance(debug.get("content"), str):
        out["generated"] = debug["content"]
    sampled = debug.get("tokens") if isinstance(debug, dict) else None
    if isinstance(sampled, list) and sampled and all(type(t) is int for t in sampled):
        out["generated_tokens"] = sampled
    elif (ids := _every_logprob(choices[0].get("logprobs"), _token_id)) is not None:
        out["generated_tokens"] = ids
    elif (pieces := _every_logprob(choices[0].get("logprobs"), _token_bytes)) is not None:
        out["logprob_bytes"] = pieces
    elif (pieces := _every_logprob(choices[0].get("logprobs"), _token_text)) is not None:
        out["logprob_text"] = pieces
    ids = call_ids((choices[0].get("message") or {}).get("tool_calls") if isinstance(choices[0].get("message"), dict)
                   else None)
    if ids:
        out["call_ids"] = ids
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if isinstance(prompt, int) and not isinstance(prompt, bool):
        out["prompt_tokens"] = prompt       # the runtime's own count, checked against a key it did not give
    if problems:
        out["problems"] = problems
    return out


def _token_id(entry) -> int | None:
    token = entry.get("token") if isinstance(entry, dict) else None
    head, _, number = token.partition(":") if isinstance(token, str) else ("", "", "")
    return int(number) if head == "token_id" and number.isdigit() else None


def _token_bytes(entry) -> list | None:
    data = entry.get("bytes") if isinstance(entry, dict) else None
    ok = isinstance(data, list) and all(type(b) is int and 0 <= b < 256 for b in data)
    return data if ok else None


def _token_text(entry) -> str | None:
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) else None


def _every_logprob(logprobs, read) -> list | None:
    """`read` of each entry of an answer's logprobs, in order; None unless it reads every entry. Read as
    _token_id: the ids of logprobs asked as token ids (vLLM's return_tokens_as_token_ids: "token_id:N"). Read
    as _token_bytes: each token's bytes (OpenAI's, as ints); where a runtime gives each token's own bytes
    (mistral.rs), they spell what it generated. Read as _token_text: each token's string, where a runtime gives no
    bytes (llama-cpp-python, which decodes each token alone: a character split across tokens is lost)."""
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(entries, list) or not entries:
        return None
    out = [read(entry) for entry in entries]
    return None if any(x is None for x in out) else out


def chat_stream(url: str, body: dict, timeout: float) -> dict:
    """The same request streamed: server-sent deltas accumulated as a client does (content and reasoning
    concatenated, tool calls by index with their argument fragments joined), with the number of chunks. The
    whole stream shares one deadline and one byte cap."""
    content, reasoning, calls, finish, chunks, problems, done, ids = [], [], {}, None, 0, [], False, {}
    try:
        with Exchange(url, {**body, "stream": True}, timeout) as exchange:
            exchange.check_status()
            for raw in exchange.lines():
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                event = loads(payload.encode("utf-8"), url, exchange.response.status)
                if isinstance(event, dict) and "error" in event:
                    return {"error": f"{url}: error event in the stream: {shown(event['error'], 300)}"}
                chunks += 1
                finish = _delta(event, chunks, content, reasoning, calls, problems, ids) or finish
    except ServerReplyError as exc:
        return _failure(exc)
    out = {"status": 200, "content": "".join(content) or None, "reasoning": "".join(reasoning) or None,
           "tool_calls": [calls[i] for i in sorted(calls)], "finish_reason": finish, "chunks": chunks}
    if ids:
        out["call_ids"] = [ids.get(i) for i in sorted(calls)]
    if finish is not None and not done:
        # A chunk with a finish_reason, then the end of the body without `data: [DONE]` (transformers serve): the
        # answer finished and is judged as it came; the missing sentinel is noted, since a client that waits for
        # it hangs or reports an error.
        out["no_done_sentinel"] = True
    cut = _cut_short(done, finish, out["tool_calls"], out["content"])
    if cut:
        # A stream that stops early reads as a shorter answer: named, so it is never taken for a clean one.
        out["cut_short"] = cut
        problems.append(cut)
    if problems:
        out["problems"] = problems
    return out


def _cut_short(done: bool, finish, calls: list, content) -> str | None:
    """Why the stream did not end as a complete answer does (a chunk with a finish_reason), or None; with what
    it stopped in, since a call cut mid-arguments looks like a short call. A stream that ends after its
    finish_reason without [DONE] finished (`no_done_sentinel`); one without a finish_reason was cut, [DONE] or
    not."""
    if finish is not None:
        return None
    last = calls[-1]["arguments"] if calls else content
    tail = f"; it stopped after {shown(last[-40:], 60)}" if last else ""
    return f"cut short: the stream ended without {'' if done else '[DONE] and without '}a finish_reason{tail}"


def _delta(event, number: int, content: list, reasoning: list, calls: dict, problems: list, ids: dict):
    """One streamed event folded into the accumulators; its finish_reason, if it has one."""
    where = f"chunk {number}"
    choices = event.get("choices") if isinstance(event, dict) else None
    if not isinstance(choices, list):
        problems.append(f"{where}: choices is {describe(choices)}, not a list")
        return None
    finish = None
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            problems.append(f"{where}: a choice without a delta object: {shown(choice, 60)}")
            continue
        for key, into in (("content", content), ("reasoning_content", reasoning)):
            value = delta.get(key)
            if value is not None and not isinstance(value, str):
                problems.append(f"{where}: delta.{key} is {describe(value)}, not a string")
            elif value:
                into.append(value)
        deltas = delta.get("tool_calls")
        if deltas is not None and not isinstance(deltas, list):
            problems.append(f"{where}: delta.tool_calls is {describe(deltas)}, not a list")
            deltas = None
        for call in deltas or []:
            function = call.get("function") if isinstance(call, dict) else None
            index = call.get("index", len(calls)) if isinstance(call, dict) else len(calls)
            if not isinstance(index, int) or isinstance(index, bool):
                problems.append(f"{where}: a tool call's index is {describe(index)}, not an integer")
                index = len(calls)
            slot = calls.setdefault(index, {"name": "", "arguments": ""})
            if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
                ids.setdefault(index, call["id"])         # sent once, on a call's first delta
            if function is None:
                continue
            if not isinstance(function, dict):
                problems.append(f"{where}: tool call {index}'s function is {describe(function)}, not an object")
                continue
            for key in ("name", "arguments"):
                value = function.get(key)
                if value is not None and not isinstance(value, str):
                    problems.append(f"{where}: tool call {index}'s function.{key} is {describe(value)}, not a string")
                elif value:
                    slot[key] += value
        reason = choice.get("finish_reason")
        finish = reason if isinstance(reason, str) else finish
    return finish
