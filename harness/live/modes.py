"""How a run drives a model: native, grammar or fallback.

- native: the model's own template and parser (tools offered only when a family was detected). Every call the
  parser reads runs, a repeated one included (the finding `repeated-call` names it): native measures the model.
- grammar: every step is sampled under the "auto" grammar built from the tools' schemas in the model's family's
  call shape (harness.grammar.build_grammar), from the first token on: the reply is the family's call, marker
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
- fallback: native first; when a native attempt fails mid-turn (a call attempt the parser cannot read, or no
  call where the turn expects one and none has been made yet), that step is written again under a grammar and
  records the native attempt, as written, under "fallback_from". The retry is held to a call ("required") only
  where the turn expects a call and none has been made yet; otherwise (after a tool has run, or where no call is
  due) it is the "auto" grammar: a call or an answer. After a tool has run, a call identical to one whose
  result this turn already has (same tool, same typed arguments) is not run again: the turn is answered from
  that result (a synthesized answer; finding `repeated-call-after-result`), as a chat client that must not run
  a tool twice would, instead of looping until the step limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.core.hashing import sha256_text
from harness.core.errors import HarnessError
from harness.grammar import GENERIC, GrammarSpec, build_grammar
from harness.core.values import MODES
from harness.evaluation.scoring import is_call_attempt

__all__ = ["MODES", "CALL_OR_ANSWER_PREAMBLE", "TOOL_PREAMBLE", "GrammarPlan", "grammar_plan", "parse_modes",
           "calls_as_text_messages", "tool_preamble", "native_failed", "retry_required"]

_TOOLS = "You can call these tools:\n{tools}\n"
_CALL = ('To call a tool, reply with only a JSON object of the form {{"name": "<tool name>", "arguments": '
         "{{<arguments as the tool's parameters describe>}}}}")
# Fallback's retry held to a call (its grammar allows nothing else).
TOOL_PREAMBLE = _TOOLS + _CALL + " and nothing else. Otherwise answer in plain text."
# Grammar mode, where the generic grammar allows a call or an answer object (harness.grammar.generic).
CALL_OR_ANSWER_PREAMBLE = (_TOOLS + _CALL + ". Otherwise reply with only a JSON object of the form "
                           '{{"response": "<your answer>"}}.')


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


def tool_preamble(scenario, preamble: str = TOOL_PREAMBLE) -> str:
    """The exact text that tells a model without a tool template which tools exist and how to call them."""
    tools = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in scenario.tools]
    return preamble.format(tools=json.dumps(tools, ensure_ascii=False, indent=1))


@dataclass(frozen=True)
class GrammarPlan:
    spec: GrammarSpec
    preamble: str | None  # sent ahead of the system message when the template cannot carry the tools
    required: GrammarSpec | None = None  # a call and nothing else: fallback's retry of a near miss
    required_preamble: str | None = None  # the preamble of that retry (it may not answer)

    @property
    def family(self) -> str:
        return self.spec.family  # the parser that reads replies written under the grammar

    def spec_for(self, required: bool) -> GrammarSpec:
        return self.required if required and self.required is not None else self.spec

    def preamble_for(self, required: bool) -> str | None:
        return self.required_preamble if required and self.required is not None else self.preamble

    def to_json(self) -> dict:
        """What the transcript keeps: the grammar's identity and triggers (its GBNF is rebuilt from the
        tools; its hash pins it) and the preamble text as sent."""
        return {"family": self.spec.family, "requested": self.spec.requested, "lazy": self.spec.lazy,
                "triggers": list(self.spec.triggers), "openings": list(self.spec.openings),
                "answer_excludes": list(self.spec.answer_excludes), "note": self.spec.note,
                "gbnf_sha256": sha256_text(self.spec.gbnf),
                "required_gbnf_sha256": sha256_text(self.required.gbnf)
                if self.required else None, "preamble": self.preamble, "required_preamble": self.required_preamble}


def grammar_plan(family: str | None, scenario, template: str | None = None) -> GrammarPlan | None:
    """The grammar for a scenario's tools in `family`'s call shape; None when the scenario offers no tools.
    template: the model's chat template (a reply may open with a reasoning block where it knows the tag)."""
    if not scenario.tools:
        return None
    spec = build_grammar(family, scenario.tool_schemas(), "auto", template=template)
    # The generic shape is one no template describes: the model must be told (also when a family without a
    # grammar shape had the generic one imposed on it).
    told = spec.family == GENERIC
    return GrammarPlan(spec, tool_preamble(scenario, CALL_OR_ANSWER_PREAMBLE) if told else None,
                       build_grammar(family, scenario.tool_schemas(), "required", template=template),
                       tool_preamble(scenario) if told else None)


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


def retry_required(expects_call: bool | None, called_this_turn: bool) -> bool:
    """Whether fallback's retry is held to a call: only where the turn expects one and none has been made yet.
    After a tool has run, the retry may answer from its result (it is never forced to call again)."""
    return bool(expects_call) and not called_this_turn


def native_failed(parse, expects_call: bool | None, called_this_turn: bool) -> bool:
    """A native attempt that fallback writes again under the grammar: a call the parser could not read, or
    no call where the turn expects one and none has been made yet (after a call, an answer is expected)."""
    if is_call_attempt(parse):
        return True
    return bool(expects_call) and not called_this_turn and not parse.accepted
