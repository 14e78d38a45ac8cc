"""How a run drives a model: native, grammar or fallback.

- native: the model's own template and parser (tools offered only when a family was detected). Every call the
  parser reads runs, a repeated one included (the finding `repeated-call` names it): native measures the model.
- grammar: every step is sampled under the "auto" grammar of the run's design (harness.grammar.plan,
  `--grammar-variant`). The default's is built from the tools' schemas in the model's family's call shape
  (harness.grammar.build_grammar), from the first token on: the reply is the family's call, marker
  included, or a plain answer that does not open like a call (no leading brace, bracket, code fence, the
  family's trigger words or reasoning tag, or another family's marker) and holds no call in a JSON dialect
  anywhere (a "name"/"function"/"tool_name" key, doubled braces, a Python dict); where the family lets text
  come before a call, the family's call may follow that text. A reasoning block may open the reply where the
  model's template knows the family's reasoning tag. No family: the generic JSON call-or-answer shape (the
  family generic-json). A template that takes tools is given them as in native mode; a template without a
  tool format (SmolLM2's ChatML, Gemma) is not, so the tools and the JSON shapes are described in a preamble
  put in front of the system message (CALL_OR_ANSWER_PREAMBLE below, recorded in each sample's transcript).
  Each step records how many sampled tokens the grammar refused (`grammar_refused`; 0: the grammar changed
  nothing in that reply): the reports count the steps where it acted.
- fallback: native first; when a native attempt fails in a way an app can see (a call attempt the strict parser
  cannot read: a named near miss, or an object calling an offered tool in a spelling no parser lists), that step
  is written again under a grammar and records the native attempt, as written, under "fallback_from". The retry
  is held to a call ("required") where none has been made yet this turn, since the attempt showed the model
  meant one; after a tool has run it is the "auto" grammar: a call or an answer. Plain text is never rewritten
  (an app cannot tell it from a refusal to call), and nothing here reads whether the turn expects a call. After a tool has run, a call identical to one whose
  result this turn already has (same tool, same typed arguments) is not run again: the turn is answered from
  that result (a synthesized answer; finding `repeated-call-after-result`), as a chat client that must not run
  a tool twice would, instead of looping until the step limit.
"""

from __future__ import annotations

import json

from harness.core.errors import HarnessError
from harness.core.values import MODES
from harness.evaluation.scoring import retry_due
from harness.grammar.plan import CALL_OR_ANSWER_PREAMBLE, TOOL_PREAMBLE, GrammarPlan, grammar_plan, tool_preamble

__all__ = ["MODES", "CALL_OR_ANSWER_PREAMBLE", "TOOL_PREAMBLE", "GrammarPlan", "grammar_plan", "parse_modes",
           "calls_as_text_messages", "with_preamble", "tool_preamble", "native_failed", "retry_required"]

def parse_modes(values) -> list:
    """--mode values (repeatable, each may be a comma list) as an ordered list without repeats."""
    out = []
    for value in values or ():
        for mode in (m.strip() for m in value.split(",")):
            if mode not in MODES:
                raise HarnessError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
            if mode not in out:
                out.append(mode)
    return out


def with_preamble(messages: list, preamble: str) -> list:
    """The conversation as the template takes it, the preamble opening the system message (or a system message
    of its own where there is none)."""
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": preamble + "\n\n" + messages[0]["content"]}, *messages[1:]]
    return [{"role": "system", "content": preamble}, *messages]


def calls_as_text_messages(messages: list, preamble: str | None, into_user: bool = False) -> list:
    """The conversation for a template without a tool format: the preamble ahead of the system message, an
    assistant call as the JSON it is written in, tool results as user text, and consecutive user messages
    joined (Gemma's template only takes alternating user/assistant turns). into_user: the template refuses a
    system role (Gemma's raises), so the preamble and system text open the first user message instead."""
    head = [m["content"] for m in messages[:1] if m["role"] == "system"]
    messages = messages[len(head):]
    head = [preamble] * bool(preamble) + head
    out = [] if into_user or not head else [{"role": "system", "content": "\n\n".join(head)}]
    lead = "\n\n".join(head) if into_user and head else ""
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = [json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
                                ensure_ascii=False) for c in message["tool_calls"]]
            item = {"role": "assistant", "content": "\n".join(filter(None, [message.get("content") or ""] + calls))}
        elif message["role"] == "tool":
            item = {"role": "user", "content": f"Result of {message.get('name') or 'the tool'}: {message['content']}"}
        else:
            item = {k: v for k, v in message.items() if k != "reasoning_content"}
        if item["role"] == "user" and lead:
            item["content"], lead = lead + "\n\n" + item["content"], ""
        if out and item["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {**out[-1], "content": out[-1]["content"] + "\n\n" + item["content"]}
        else:
            out.append(item)
    return out


def retry_required(attempted: bool, called_this_turn: bool) -> bool:
    """Whether fallback's retry is held to a call. The retry follows from what the native attempt showed: a call
    the parser could not read is a call the model meant, so its retry is a call ("required"), unless a tool has
    already run this turn (then it may answer from the result; it is never forced to call again). Nothing here
    reads whether the turn expects a call: an app never knows that."""
    return attempted and not called_this_turn


def native_failed(parse, tools) -> bool:
    """A native attempt that fallback writes again under the grammar (harness.evaluation.scoring.retry_due: a
    call the app can see failed; plain text is an answer and never rewritten)."""
    return retry_due(parse, tools)
