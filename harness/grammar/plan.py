"""What grammar and fallback modes sample under for one scenario: the grammar in the model's family's call shape
("auto": a call or an answer; "required": a call), the preamble a template without a tool format is given,
and the digest of everything that decides a sample's reply (setup_digest), which a run's resume and every
report compare, so a sample recorded under another grammar is re-run and never counted beside current ones.

The plan lives below the evaluation layer so a report can rebuild it from a transcript's model record (its
family and template) without running anything."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.core.hashing import sha256_text
from harness.grammar import GENERIC, GrammarError, GrammarSpec, build_grammar
from harness.grammar.lazy import build_lazy_trigger

# What fires fallback's retry: a call attempt the app can see (harness.live.modes.native_failed). Recorded with
# each fallback sample: samples recorded before it (a retry fired by the case's expected call) are another setup.
FALLBACK_RETRY = "call-attempt"

_TOOLS = "You can call these tools:\n{tools}\n"
_CALL = ('To call a tool, reply with only a JSON object of the form {{"name": "<tool name>", "arguments": '
         "{{<arguments as the tool's parameters describe>}}}}")
# Fallback's retry held to a call (its grammar allows nothing else).
TOOL_PREAMBLE = _TOOLS + _CALL + " and nothing else. Otherwise answer in plain text."
# Grammar mode, where the generic grammar allows a call or an answer object (harness.grammar.generic).
CALL_OR_ANSWER_PREAMBLE = (_TOOLS + _CALL + ". Otherwise reply with only a JSON object of the form "
                           '{{"response": "<your answer>"}}.')
# envelope-or-text-told: both answers the grammar allows, told.
CALL_OR_EITHER_ANSWER_PREAMBLE = (_TOOLS + _CALL + ". Otherwise answer, in plain text or as a JSON object of the "
                                  'form {{"response": "<your answer>"}}.')


def tool_preamble(scenario, preamble: str = TOOL_PREAMBLE) -> str:
    """The exact text that tells a model without a tool template which tools exist and how to call them."""
    tools = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in scenario.tools]
    return preamble.format(tools=json.dumps(tools, ensure_ascii=False, indent=1))


# native-example: the family's own call, as the model's template renders the probe call, shown once.
EXAMPLE_PREAMBLE = ("When you call a tool, write the call exactly in this form (an example call of a tool named "
                    "get_weather; call only the tools you are given, with their own arguments):\n{example}")


@dataclass(frozen=True)
class GrammarPlan:
    spec: GrammarSpec | None  # None: a prompt design that samples without a grammar (native-example)
    preamble: str | None  # sent ahead of the system message when the template cannot carry the tools
    required: GrammarSpec | None = None  # a call and nothing else: fallback's retry of a near miss
    required_preamble: str | None = None  # the preamble of that retry (it may not answer)
    variant: str = "refusal-list"  # the design (VARIANTS); recorded only where it is not UNNAMED_VARIANT
    native_family: str | None = None  # without a grammar: the model's own family reads the replies
    # The preamble opens the system message and the conversation stays as the template takes it (calls as
    # tool_calls): the model's own format is shown, not replaced.
    keeps_calls: bool = False
    # False: a template that carries the tools is not given them, so the preamble is the one place they are told
    # (envelope-or-text-told-once); its own tools block, with its call instructions, is left out.
    template_tools: bool = True

    @property
    def family(self) -> str:
        # The parser that reads replies written under the grammar (without one: the model's own).
        return self.spec.family if self.spec is not None else self.native_family

    def spec_for(self, required: bool) -> GrammarSpec:
        return self.required if required and self.required is not None else self.spec

    def preamble_for(self, required: bool) -> str | None:
        return self.required_preamble if required and self.required is not None else self.preamble

    def to_json(self, mode: str | None = None) -> dict:
        """What the transcript keeps: the grammar's identity and triggers (its GBNF is rebuilt from the
        tools; its hash pins it) and the preamble text as sent; for fallback, what fires its retry."""
        retry = {"retry_on": FALLBACK_RETRY} if mode == "fallback" else {}
        if self.variant != UNNAMED_VARIANT:
            retry["variant"] = self.variant
        if not self.template_tools:
            retry["template_tools"] = False
        if self.spec is not None and self.spec.held_triggers:
            # Where the trigger patterns are the design's own (not the family's words alone), they decide the
            # replies too: their hash is part of the setup.
            retry["held_triggers"] = list(self.spec.held_triggers)
            retry["trigger_patterns_sha256"] = sha256_text("\n".join(self.spec.trigger_patterns))
        if self.spec is None:
            return {**retry, "family": self.native_family, "gbnf_sha256": None, "required_gbnf_sha256": None,
                    "preamble": self.preamble, "required_preamble": self.required_preamble}
        return {**retry, "family": self.spec.family, "requested": self.spec.requested, "lazy": self.spec.lazy,
                "triggers": list(self.spec.triggers), "openings": list(self.spec.openings),
                "answer_excludes": list(self.spec.answer_excludes), "note": self.spec.note,
                "gbnf_sha256": sha256_text(self.spec.gbnf),
                "required_gbnf_sha256": sha256_text(self.required.gbnf)
                if self.required else None, "preamble": self.preamble, "required_preamble": self.required_preamble}


# The grammar designs a run can sample under, by name (--grammar-variant). Each is the "auto" grammar of grammar
# mode and of fallback's retry after a tool ran; a retry held to a call uses the same call grammar in each.
VARIANTS = {
    "refusal-list": "the family's call, or a plain answer that opens like no call and holds none of the call "
                    "spellings the strict parsers name",
    "no-brace": "the family's call, or a plain answer that holds no brace at all: no JSON object outside the call",
    "native-example": "no grammar: the model's own template and parser, with its family's call as the template "
                      "renders a probe call shown once as an example ahead of the system message",
    "envelope": "the JSON envelope for every model: {\"name\", \"arguments\"} or {\"response\"} "
                "(generic-json), described in a preamble",
    "json-or-text": "the bare JSON call {\"name\", \"arguments\"} (generic-json) for every model, or a plain-text "
                    "answer that opens with no brace, bracket, fence or family marker and holds none of the call "
                    "spellings; described in a preamble",
    "json-or-text-own": "json-or-text's grammar under the model's own prompt: a template that carries the tools "
                        "renders them as in native mode, with no preamble, so the first token's choice between "
                        "calling and answering is native mode's (a template without a tool format gets "
                        "json-or-text's preamble)",
    "envelope-or-text": "envelope's answer object beside json-or-text's plain text: the bare JSON call, "
                        "{\"response\"}, or plain text that holds no brace at all, described in json-or-text's "
                        "preamble, so a model that opens with a brace after a tool result can still answer, and "
                        "no call hides in prose",
    "envelope-or-text-told": "envelope-or-text's grammar with both answers told in the preamble (plain text, or "
                             "{\"response\"} as envelope tells it)",
    "envelope-or-text-own": "envelope-or-text's grammar under the model's own prompt (as json-or-text-own is "
                            "json-or-text's)",
    "envelope-or-text-told-once": "envelope-or-text-told with the tools told once: a template that carries the "
                                  "tools is not given them (its tools block and call instructions left out), so "
                                  "the preamble alone tells them and the prompt is about half of told's",
    "lazy-trigger": "llama.cpp's lazy pattern trigger for Hermes templates (2025): free text until the family's call "
                    "marker, anywhere, or a fence or bare JSON object opening {\"name at the start of the reply; "
                    "from there a call held to the tools' schemas (a fenced or bare object is counted apart from "
                    "the family's own calls)",
}
# The numbers (results/grammar-designs.md: 5 BFCL cases of each of 7 categories and 10 YAML scenarios x 5 seeds
# per model, 2026-12-05) choose envelope-or-text-told: under it both Qwen2.5-Coder models write strict calls that
# BFCL's checker passes as often as or at least half as often as native mode's lenient reading (0.5B 10/25
# against 10/25, 1.5B 12/25 against 14/25) with no worse a no-call rate (3/10 against 3/10, 4/10 against 0/10),
# and after a tool result the 1.5B model answers in the answer object it is told of where the bare-call designs
# call again (scenarios, calls due, all checks: 12/30 against json-or-text-own's 2/30; envelope's 17/30 comes with
# 1/10 on BFCL's no-call cases and the 0.5B model calling in 15 of 20 no-call scenario samples). Changing the
# default supersedes every committed grammar and fallback sample, so the main folder's rows are first re-run in
# the chosen design's study folder and the default moves when they are all there (tools/adopt_design.py VARIANT
# --keep refusal-list). envelope-or-text-told-once, measured after (the template not given the tools, so a Qwen
# prompt tells one format, not two), keeps told's BFCL strict calls and passes more of the rest (scenarios, calls
# due, all checks: 0.5B 20/30 against 0/30, 1.5B 16/30 against 12/30; no call made 14/20 and 20/20 against 10/20
# and 10/20): it is the default since 2026-12-06, when the main folder's grammar and fallback rows (every scenario,
# 20 BFCL cases of each of the 11 categories, 10 for the 1.5B model) had been run under it and were adopted
# (results/grammar-designs.md sets it beside refusal-list on all of them; docs/bfcl.md).
DEFAULT_VARIANT = "envelope-or-text-told-once"
# The first design: its records keep no design name (they were written before there were others), so a record
# without one is this design's, whichever is the default today.
UNNAMED_VARIANT = "refusal-list"
LAZY_TRIGGER = "lazy-trigger"
JSON_OR_TEXT = "json-or-text"
JSON_OR_TEXT_OWN = "json-or-text-own"
# The designs that hold every model to the generic JSON shape: (how it answers under "auto",
# harness.grammar.GENERIC_ANSWERS; the preamble that tells it; the prompt). The prompt: TOLD, the preamble opens
# the system message and a template that carries the tools renders them too; OWN, the model's own prompt, so a
# template that carries the tools is not told them again and only one without a tool format gets the preamble;
# TOLD_ONCE, the preamble, and the template is not given the tools.
TOLD, OWN, TOLD_ONCE = "told", "own", "told-once"
_GENERIC_DESIGNS = {
    "envelope": ("object", CALL_OR_ANSWER_PREAMBLE, TOLD),
    JSON_OR_TEXT: ("text", TOOL_PREAMBLE, TOLD),
    JSON_OR_TEXT_OWN: ("text", TOOL_PREAMBLE, OWN),
    "envelope-or-text": ("object-or-text", TOOL_PREAMBLE, TOLD),
    "envelope-or-text-told": ("object-or-text", CALL_OR_EITHER_ANSWER_PREAMBLE, TOLD),
    "envelope-or-text-own": ("object-or-text", TOOL_PREAMBLE, OWN),
    "envelope-or-text-told-once": ("object-or-text", CALL_OR_EITHER_ANSWER_PREAMBLE, TOLD_ONCE),
}
# The designs in the family's own call shape, where the generic one is imposed instead (a template without a
# tool format, a family without a grammar shape): the envelope, told.
_IMPOSED = _GENERIC_DESIGNS["envelope"]


def recorded_variant(grammar: dict | None) -> str:
    """The design a sample was written under, from its recorded grammar block."""
    return (grammar or {}).get("variant", UNNAMED_VARIANT)


def folder_variant(path) -> str:
    """The design a results folder's grammar samples are judged as: a design study's folder (designs/<variant>/,
    or anything inside one) holds its own; every other folder the default, so a sample written under another
    design there is superseded (a run asks it again), never counted beside the default's."""
    for folder in [path, *path.parents]:
        if folder.parent.name == "designs" and folder.name in VARIANTS:
            return folder.name
    return DEFAULT_VARIANT


def check_variant(name: str) -> str:
    """`name` when it is a grammar variant; else a GrammarError listing them."""
    if name not in VARIANTS:
        raise GrammarError(f"unknown grammar variant {name!r} (variants: {', '.join(VARIANTS)})")
    return name


def grammar_plan(family: str | None, scenario, template: str | None = None,
                 variant: str = DEFAULT_VARIANT, example: str | None = None) -> GrammarPlan | None:
    """The grammar for a scenario's tools in `family`'s call shape (the `variant`'s design); None when the
    scenario offers no tools. template: the model's chat template (a reply may open with a reasoning block where
    it knows the tag). example: the probe call as the template renders it (native-example; the detection's)."""
    check_variant(variant)
    if not scenario.tools:
        return None
    if variant == "native-example":
        if family is None or not example:
            raise GrammarError("native-example shows the model's own call format: this template has none"
                               if family is None else "native-example needs the probe call as the template "
                               "renders it, and detection found none")
        shown = EXAMPLE_PREAMBLE.format(example=example)
        return GrammarPlan(None, shown, None, shown, variant, native_family=family, keeps_calls=True)
    if variant == LAZY_TRIGGER:
        spec = build_lazy_trigger(family, scenario.tool_schemas())
        # A template that cannot carry the tools is told them, and that a call is the JSON object alone, as
        # fallback's retry is: the reply is free text until the object opens it.
        told = spec.family == GENERIC
        return GrammarPlan(spec, tool_preamble(scenario) if told else None,
                           build_grammar(family, scenario.tool_schemas(), "required", template=template),
                           tool_preamble(scenario) if told else None, variant)
    shape = GENERIC if variant in _GENERIC_DESIGNS else family
    answer = "no-brace" if variant == "no-brace" else "refusal-list"
    generic_answer, told_how, prompt = _GENERIC_DESIGNS.get(variant, _IMPOSED)
    spec = build_grammar(shape, scenario.tool_schemas(), "auto", template=template, answer=answer,
                         generic_answer=generic_answer)
    # The generic shape is one no template describes: the model must be told (also when a family without a
    # grammar shape had the generic one imposed on it). The own-prompt designs tell only a template that cannot
    # carry the tools: one that can renders them as in native mode, so the prompt is native's.
    told = spec.family == GENERIC and (prompt != OWN or family is None)
    return GrammarPlan(spec, tool_preamble(scenario, told_how) if told else None,
                       build_grammar(shape, scenario.tool_schemas(), "required", template=template),
                       tool_preamble(scenario) if told else None, variant,
                       template_tools=not (told and prompt == TOLD_ONCE and family is not None))


def setup_digest(mode: str, grammar: dict | None) -> str:
    """What decides a sample's reply beyond its model, scenario (whose hash holds its sampling) and seed, as one
    digest: the mode and the grammar as the transcript keeps it (GBNF hashes, preambles, the design, what fires
    a retry). Two records of one sample with different digests were written under different setups: the older is
    superseded, never mixed."""
    return sha256_text(json.dumps({"mode": mode, "grammar": grammar if mode != "native" else None},
                                  sort_keys=True, ensure_ascii=False))[:16]


def unbuildable_grammar(exc) -> dict:
    """The grammar block of a sample whose grammar cannot be built for its tools: the reason, as recorded."""
    return {"error": str(exc)}


def planned_setup(mode: str, family: str | None, scenario, template: str | None,
                  variant: str = DEFAULT_VARIANT, example: str | None = None) -> str:
    """The setup digest a sample of `scenario` in `mode` gets today, for a model of `family` and `template`."""
    plan = grammar_plan(family, scenario, template, variant, example) if mode != "native" else None
    return setup_digest(mode, plan.to_json(mode) if plan is not None else None)
