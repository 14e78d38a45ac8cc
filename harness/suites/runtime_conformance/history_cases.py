"""History cases of the runtime-conformance corpus: the reasoning a runtime returned, sent back in the next
request, and what the runtime's render of that request does with it beside what the pinned template does.

An agent loop sends the assistant turn it got back with the next request: its `reasoning_content` beside its
`tool_calls`. Templates differ on what they do with it: most render it again after the tool result and drop it
once a new user turn follows (Qwen3, gpt-oss), some keep it always (DeepSeek V4, Kimi K3), some never render it
(Apriel). A runtime that renders otherwise than the template hands the model a history it was not trained on
(aldehir/llm-serving-tests checks this through the runtime's own render).

The assistant turn is the one a runtime that agrees on the template's `reasoning-then-call` case returns: the
strict parse of that reply (its reasoning, its calls, its content), as an OpenAI client sends it back. It is the
same for every runtime, so the case has one hash and its replay needs no earlier record. Two cases follow it:
the tool result and the next request (`history-reasoning-after-tool`), and the tool result, the answer and a new
user turn (`history-reasoning-after-user`).

The judging holds the runtime's prompt (its text where it shows it, /apply-template; else its length in tokens)
against renders of the pinned template (renders()): the messages as sent, and the same without
`reasoning_content`, each also with the arguments as the wire's JSON text and, for a runtime that ignores
chat_template_kwargs, under the template's default switches. The template keeps the reasoning where its own render
holds the reasoning text; the runtime keeps it where its prompt text does, or, shown only as a length, where the
first render of that length does (judge())."""

from __future__ import annotations

import copy

from harness.template.detect import with_string_arguments

AFTER_TOOL = "history-reasoning-after-tool"
AFTER_USER = "history-reasoning-after-user"
CASES = (AFTER_TOOL, AFTER_USER)
# The tool result and the turns that follow it (the answer's words match history-answer's).
RESULT = '{"forecast": ["sunny", "cloudy", "rain"]}'
ANSWER = "Sunny, then cloudy, then rain."
NEXT_QUESTION = "And in Rome?"
NEXT_ANSWER = "Rome gets rain on all three days."
KEPT, DROPPED = "kept", "dropped"


def returned_message(expect: dict) -> dict | None:
    """The assistant message an OpenAI client sends back for a runtime answer that holds what the strict parser
    reads in the reply `expect` was read from: reasoning_content, content and the calls with their ids. None
    where the strict parse holds no reasoning or no call (nothing to send back)."""
    if not expect or not (expect.get("reasoning") or "").strip() or not expect.get("calls") or expect.get("deviation"):
        return None
    return {"role": "assistant", "content": expect.get("content") or "", "reasoning_content": expect["reasoning"],
            "tool_calls": [{"id": f"call{n:05d}", "type": "function",
                            "function": {"name": c["name"], "arguments": copy.deepcopy(c["arguments"])}}
                           for n, c in enumerate(expect["calls"], 1)]}


def conversations(question: list, returned: dict) -> dict:
    """case name -> the messages of its next request (question: the reasoning case's opening turns, unpadded)."""
    results = [{"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": RESULT}
               for call in returned["tool_calls"]]
    after_tool = [*copy.deepcopy(question), copy.deepcopy(returned), *results]
    after_user = [*after_tool, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": NEXT_QUESTION}]
    return {AFTER_TOOL: after_tool, AFTER_USER: after_user}


def add_cases(add, rendered, question: list, thought) -> None:
    """The history cases, through build_corpus's `add` (which pads, renders and parses them) and `rendered` (a
    reply the template writes for an assistant turn); thought: the template's reasoning-then-call case."""
    returned = returned_message(thought.expect)
    why = (None, "the strict parse of the reasoning-then-call reply holds no reasoning and call to send back")
    chats = conversations(question, returned) if returned else {name: question for name in CASES}
    replies = {AFTER_TOOL: ANSWER, AFTER_USER: NEXT_ANSWER}
    for name in CASES:
        reply = _answer(rendered(content=replies[name]), replies[name]) if returned else (lambda m, k: why)
        # The thinking switch of the reasoning case: the conversation goes on with thinking on.
        add(name, chats[name], reply, kwargs=dict(thought.template_kwargs))


def _answer(write, answer: str):
    """The reply the template writes for the answer after this history. A template that rewrites earlier turns
    once an answer follows them (Harmony drops the analysis channel) has no generation prompt that the history
    continues, and the reply read off it is not the answer alone: then it is read off the same history without
    the reasoning, where the earlier turns stay as they are (the reply itself holds no reasoning either way)."""
    def reply(messages, kwargs):
        text = write(messages, kwargs)
        if isinstance(text, str) and answer in text and not any(
                call["function"]["name"] in text for m in messages for call in m.get("tool_calls") or ()):
            return text
        return write(without_reasoning(messages), kwargs)
    return reply


def reasoning_sent(messages: list) -> list:
    """The reasoning_content texts the history carries (empty for a case without any)."""
    return [m["reasoning_content"].strip() for m in messages
            if m.get("role") == "assistant" and isinstance(m.get("reasoning_content"), str)
            and m["reasoning_content"].strip()]


def without_reasoning(messages: list) -> list:
    return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]


def renders(messages: list, kwargs: dict, ignores_kwargs: bool) -> list:
    """(how, messages, kwargs) of every render of the template a runtime's prompt is held against, the template's
    own first: the reasoning as sent or taken out, the calls' arguments as objects (as templates take them) or as
    the JSON text the wire carries (a runtime that hands them on unparsed), and, for a runtime whose module says
    it ignores chat_template_kwargs, the template's default switches. The reasoning is judged apart from those."""
    out = []
    switches = [("sent", kwargs)] + ([("defaults", {})] if ignores_kwargs and kwargs else [])
    for switch, values in switches:
        for arguments, chat in (("objects", messages), ("json-text", with_string_arguments(messages))):
            for reasoning in (True, False):
                how = {"reasoning": reasoning, "arguments": arguments, "kwargs": switch}
                out.append((how, chat if reasoning else without_reasoning(chat), values))
    return out


def facts(rendered: list, reasoning: list, runtime_prompt: str | None, bos: str = "") -> dict:
    """What a record keeps to judge a history case. rendered: (how, text, tokens) of each of renders(), the
    template's own first (tokens: its length in the scripted vocabulary). Whether the template's render holds
    the reasoning, whether the runtime's prompt does (where it shows it), and for each render its length,
    whether it holds the reasoning and, where the runtime shows its prompt, whether that is its text (BOS aside:
    the runtime adds its own)."""
    shown = runtime_prompt is not None
    text = runtime_prompt.removeprefix(bos) if shown else None
    held = [{**how, "tokens": tokens, "holds": all(r in body for r in reasoning),
             "same_text": text == body.removeprefix(bos) if shown else None} for how, body, tokens in rendered]
    return {"template": KEPT if held[0]["holds"] else DROPPED,
            "reasoning_in_prompt": all(r in text for r in reasoning) if shown else None, "renders": held}


def _matches(render: dict, key: dict) -> bool:
    return render["same_text"] if render["same_text"] is not None else render["tokens"] == key["tokens"]


def _how(render: dict, shown: bool) -> str:
    ways = [w for w, on in (("the calls' arguments as the JSON text the wire carries", render["arguments"] == "json-text"),
                            ("the template's default switches (chat_template_kwargs not applied)",
                             render["kwargs"] == "defaults")) if on]
    what = "the messages as sent" if render["reasoning"] else "the messages without the reasoning"
    under = "; under them the template drops it" if render["reasoning"] and not render["holds"] else ""
    return (f"its prompt is the template's render of {what}" + (f", with {' and '.join(ways)}" if ways else "")
            + under + ("" if shown else f" (by its length: {render['tokens']} tokens)"))


def judge(record: dict) -> tuple:
    """(labels, details) of a history case whose prompt is not our render: does the runtime's prompt hold the
    reasoning where the template's render does? Where the runtime shows its prompt, its text says it; where it
    shows only a length, the first of the template's renders of that length (as sent or without the reasoning,
    the arguments as objects or as the wire's text, the switches sent or the defaults) says it, and a length
    none has cannot be told (history-differs). The reasoning where the template puts it, with a prompt that is
    none of those renders, is history-differs too."""
    history, key = record.get("history"), record.get("key") or {}
    if not history or key.get("tokens") is None:
        return [], []
    renders = history["renders"]
    shown = renders[0]["same_text"] is not None
    if _matches(renders[0], key):
        return [], []
    template = history["template"] == KEPT
    does = f"the template {'renders' if template else 'drops'} the reasoning sent back"
    match = next((r for r in renders if _matches(r, key)), None)
    holds = match["holds"] if match is not None else history.get("reasoning_in_prompt")
    if holds is None:
        lengths = ", ".join(map(str, sorted({r["tokens"] for r in renders})))
        return ["history-differs"], [f"{does}; the runtime's prompt is {key['tokens']} tokens, none of the "
                                     f"template's renders ({lengths} tokens): whether it holds the reasoning is "
                                     "not seen"]
    how = _how(match, shown) if match is not None else \
        "its prompt is none of the template's renders (as sent or without the reasoning, the arguments as objects or JSON text)"
    if template and not holds:
        return ["history-reasoning-dropped"], [f"{does}; the runtime drops it: {how}"]
    if holds and not template:
        return ["history-reasoning-kept"], [f"{does}; the runtime's prompt holds it: {how}"]
    if match is None:
        return ["history-differs"], [f"{does}, and so does the runtime, but {how}"]
    return [], [f"{does}, and so does the runtime: {how}"]


def verdict(record) -> str:
    """One word for the history table: what the runtime's render did with the reasoning."""
    labels = set(record.labels)
    for label, word in (("history-reasoning-dropped", "dropped"), ("history-reasoning-kept", "kept"),
                        ("history-differs", "differs")):
        if label in labels:
            return word
    if (record.key or {}).get("tokens") is None:
        return "error"
    return "as the template"
