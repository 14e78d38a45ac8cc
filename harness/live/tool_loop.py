"""One sample of a scenario: the agent loop a local chat runs, with stub tools, recorded step by step.

Per user turn: render the conversation (and the tools, only when a family is in use: `auto` with no family
chats without tools: no parser could read a call it wrote) through the model's template, generate, parse the raw reply
with the family (passing the generation prompt, so a reasoning block the prompt opened is handled), type each
call's arguments by the tool's schema, dispatch to the stub, and loop until the model answers in text or the
step limit is reached. A typed-argument error, an unknown tool or a raising tool goes back to the model as a
tool message {"error": ...}, so the model can correct itself as a chat client would let it. Each call is executed at most
once, and a turn is never re-run after a tool has run: a failed follow-up generation is answered from the results in
hand, and (fallback mode) a call identical to one that already ran this turn is answered from that call's result
instead of running again (harness.live.modes).

Message shapes are those every supported template accepts (harness.template.probe): an assistant tool-call turn has string content ("" when there is no text) and
call ids of nine alphanumerics (call00001, ...)."""

import json
from dataclasses import asdict, dataclass, field

from harness import families
from harness.core.hashing import sha256_text
from harness.schema.arguments import type_arguments
from harness.core.errors import GenerationError, GrammarRuntimeError, TemplateError
from harness.core.values import MAX_SEED
from harness.backends.transport import NOT_NOW
from harness.storage.transcripts import GENERATION_FAILED, RUNTIME_ANSWERED
from harness.formats.calls import ParseResult
from harness.formats.reasoning import prompt_opens
from harness.live.modes import (grammar_plan, native_failed, calls_as_text_messages, retry_required,
                                 with_preamble)
from harness.template.render import render
from harness.template.system_tools import calls_into_content, place

# The parsers need only the end of the prompt (an open <think>, Functionary's ">>>"); scoring re-parses with it.
PROMPT_TAIL = 256
DEFAULT_STEP_TIMEOUT = 180.0
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# A model that reasons spends most of its budget thinking; the scenario's max_tokens would cut its answer.
THINKING_BUDGET_FACTOR = 4


@dataclass
class DrivenModel:
    """A model as the loop drives it: the backend that writes its replies (None: a template only, nothing is
    generated), its template (as embedded in the GGUF), special tokens, the family whose parser reads its
    replies (None: chat without tools) and extra template variables."""

    backend: object
    template: str
    bos_token: str = ""
    eos_token: str = ""
    family: str | None = None
    template_kwargs: dict = field(default_factory=dict)
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    # A template that renders calls but takes no `tools`: where the tool list is written instead
    # (harness.template.system_tools.Placement; the detection in the transcript names it).
    tool_placement: object = None
    # A declared family's template renders no call: past calls go into content as the family writes them.
    calls_in_content: bool = False

    def complete(self, prompt: str, sampling: dict, seed: int, grammar=None):
        """One reply from the backend, handed the two settings of this model it needs (not the model itself)."""
        return self.backend.complete(prompt, sampling, seed, grammar, bos_token=self.bos_token,
                                     timeout=self.step_timeout)

    def complete_many(self, prompt: str, sampling: dict, seeds) -> list:
        return self.backend.complete_many(prompt, sampling, seeds, timeout=self.step_timeout)


def step_seed(sample_seed: int, turn: int, step: int) -> int:
    """The seed of one generation: the sample's own seed for its first step (so the batched first steps of N
    samples and a resumed single sample write the same reply), a fixed derivation after that."""
    if turn == 0 and step == 0:
        return sample_seed % (MAX_SEED + 1)
    return (sample_seed * 1_000_003 + turn * 7919 + step * 104_729) % (MAX_SEED + 1)


def opening_messages(scenario) -> list:
    messages = [{"role": "system", "content": scenario.system}] if scenario.system else []
    messages += json.loads(json.dumps(list(scenario.history)))  # fresh copies: the loop appends to them
    return messages


def render_prompt(chat: DrivenModel, scenario, messages: list, plan=None, calls_as_text: bool = False,
                  required: bool = False) -> str:
    """plan: the GrammarPlan of a grammar attempt (its preamble, if any, goes ahead of the system message;
    required: the attempt is held to a call). calls_as_text: the template has no tool format and the loop is not
    native, so calls and results are written as text (see harness.live.modes.calls_as_text_messages)."""
    # A design that tells the tools in its preamble alone (envelope-or-text-told-once) gives the template none.
    given = chat.family and scenario.tools and (plan is None or plan.template_tools)
    tools = scenario.tool_schemas() if given else None
    preamble = plan.preamble_for(required) if plan is not None else None
    if not (calls_as_text or preamble):
        return _render(chat, messages, tools)
    if plan is not None and plan.keeps_calls:
        return _render(chat, with_preamble(messages, preamble), tools)
    try:
        return _render(chat, calls_as_text_messages(messages, preamble), tools)
    except TemplateError:
        # A template that refuses the system role (Gemma's): the same text opens the first user message.
        return _render(chat, calls_as_text_messages(messages, preamble, into_user=True), tools)


def _render(chat: DrivenModel, messages: list, tools) -> str:
    if chat.tool_placement is not None:
        messages, tools = place(chat.tool_placement, messages, tools), None
    if chat.calls_in_content and chat.family:
        messages = calls_into_content(messages, chat.family)
    return render(chat.template, messages, tools=tools, add_generation_prompt=True, bos_token=chat.bos_token,
                  eos_token=chat.eos_token, **chat.template_kwargs)


def first_prompt(chat: DrivenModel, scenario) -> str:
    """The prompt of the first step, which every sample of the scenario shares (batched generation)."""
    return render_prompt(chat, scenario, opening_messages(scenario) + [{"role": "user", "content": scenario.turns[0].user}])


class StubTools:
    """The scenario's tools as stubs: a fixed result or a fixed error. Counts every execution per call id,
    so a test (and the transcript) can prove no call ran twice."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.executions: dict = {}

    def dispatch(self, call_id: str, call, notation: str = "json") -> dict:
        """Type the call's arguments by the tool's schema (`notation`: how the reading family's template writes a
        non-string value, harness.families.value_notation) and run the stub once."""
        tool = self.scenario.tool(call.name)
        record = {"id": call_id, "name": call.name, "arguments": call.arguments, "typed": None, "errors": [],
                  "coerced": [], "executed": False, "executions": 0, "error": True}
        if tool is None:
            offered = ", ".join(t.name for t in self.scenario.tools) or "none"
            record["result"] = _error(f"unknown tool {call.name!r}; the tools are: {offered}")
            return record
        typed = self._typed(tool, call, notation, record)
        record.update(typed=typed.arguments, errors=typed.errors, coerced=typed.coerced)
        if not typed.ok:
            record["result"] = _error(f"invalid arguments for {call.name}: {typed.error_message()}")
            return record
        if call_id in self.executions:
            raise RuntimeError(f"call {call_id} was about to run a second time")  # a loop bug, never allowed
        self.executions[call_id] = self.executions.get(call_id, 0) + 1
        record.update(executed=True, executions=self.executions[call_id], error=tool.raises is not None,
                      result=tool.result_message())
        return record


    @staticmethod
    def _typed(tool, call, notation: str, record: dict | None = None):
        typed = type_arguments(call.arguments, tool.parameters, notation)
        if not typed.ok and call.arguments and not tool.parameters.get("properties"):
            # A tool that takes nothing, called with invented arguments (small models do): the intent is clear,
            # so it is retried once with no arguments before the call fails. Scoring names both.
            if record is not None:
                record["zero_arg_retry"] = {"invented": call.arguments, "errors": typed.errors}
            typed = type_arguments({}, tool.parameters)
        return typed

    def key(self, call, notation: str = "json") -> tuple:
        """What makes two calls the same call: the tool and the arguments it would run with."""
        tool = self.scenario.tool(call.name)
        typed = self._typed(tool, call, notation) if tool is not None else None
        arguments = typed.arguments if typed is not None and typed.ok else call.arguments
        return call.name, json.dumps(arguments, sort_keys=True, default=str)


def _repeat(call_id: str, call, earlier: tuple) -> dict:
    """A call identical to one that already ran this turn, answered from that call's result, not run."""
    earlier_id, result = earlier
    return {"id": call_id, "name": call.name, "arguments": call.arguments, "typed": None, "errors": [],
            "coerced": [], "executed": False, "executions": 0, "error": False, "repeat_of": earlier_id,
            "result": result}


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)


def _step_record(prompt: str, seed: int, generation, parse: ParseResult | None, shared: bool) -> dict:
    reused = {"reused": True} if getattr(generation, "reused", False) else {}
    return {
        "seed": seed, "prompt_sha256": sha256_text(prompt),
        "prompt_tail": prompt[-PROMPT_TAIL:], "shared_prompt": shared,
        "prompt_tokens": generation.prompt_tokens if generation else None,
        "reply": generation.text if generation else "",
        "completion_tokens": generation.completion_tokens if generation else 0,
        "finish_reason": generation.finish_reason if generation else None,
        "timings": asdict(generation.timings) if generation else None,
        "parse": parse.to_json() if parse else None, "calls": [], "error": None, **reused,
    }


class _StepGenerator:
    """Generates one step's reply in a mode: the generation (under a grammar, with its runtime retry), the thinking
    budget, and the parse with the family that reads it."""

    def __init__(self, chat: DrivenModel, scenario, mode: str, plan):
        self.chat, self.scenario, self.mode, self.plan = chat, scenario, mode, plan
        self.calls_as_text = mode != "native" and chat.family is None  # tools-less template: calls written as text
        self.thinks = False  # sticky: once a reply reasons, later steps get the larger budget too

    def sampling(self, prompt: str) -> dict:
        sampling = dict(self.scenario.sampling)
        if self.thinks or prompt_opens(prompt, THINK_OPEN):
            sampling["max_tokens"] = sampling["max_tokens"] * THINKING_BUDGET_FACTOR
        return sampling

    def attempt(self, messages, seed, grammar: bool, first=None, required: bool = False) -> dict:
        """One attempt: {"prompt", "generation", "parse", "family", "extra"}; raises GenerationError and
        TemplateError (the caller records them). required: held to a call (fallback's retry of a near miss)."""
        plan = self.plan if grammar else None
        prompt = render_prompt(self.chat, self.scenario, messages, plan, self.calls_as_text, required)
        spec = None if plan is None else plan.spec_for(required)
        extra = {"grammar": "required" if required else "auto"} if spec is not None else {}
        if first is not None:
            generation = first
        else:
            sampling = self.sampling(prompt)
            generation = self._write(prompt, sampling, seed, spec, extra)
            if (generation.finish_reason == "length" and THINK_OPEN in generation.text
                    and THINK_CLOSE not in generation.text and not self.thinks):
                # Cut inside a think block: nothing ran on this reply yet, so it is written again with room.
                self.thinks = True
                extra["thinking_budget_retry"] = {"max_tokens": sampling["max_tokens"], "reply": generation.text}
                generation = self._write(prompt, self.sampling(prompt), seed, spec, extra)
        if THINK_OPEN in generation.text:
            self.thinks = True
        if spec is not None:
            extra["grammar_from"] = generation.grammar_from  # None: the lazy grammar never took over
            # Sampled tokens the grammar refused: 0 means it changed nothing in this reply (None: it did not run).
            extra["grammar_refused"] = generation.grammar_refused
            if spec.lazy:
                # Which trigger fired, and whether the call it opened is in another spelling than the family's
                # own (lazy-trigger's fenced or bare object): the strict parser reads that one as a near miss,
                # and the reports count it apart.
                trigger = spec.trigger_word(generation.text, generation.grammar_from)
                extra["grammar_trigger"] = trigger
                extra["grammar_held"] = trigger is not None and trigger in spec.held_triggers
        family = plan.family if plan is not None else self.chat.family
        return {"prompt": prompt, "generation": generation, "parse": families.parse(family, generation.text, prompt),
                "family": family, "extra": extra}

    def _write(self, prompt, sampling, seed, spec, extra):
        if spec is None:
            return self.chat.complete(prompt, sampling, seed)
        try:
            return self.chat.complete(prompt, sampling, seed, grammar=spec)
        except GrammarRuntimeError as exc:
            # Grammar sampling failed inside the runtime (llama.cpp has, under GPU offload): retry once
            # unconstrained, and say so in the transcript.
            extra["grammar_runtime_retry"] = str(exc)
            return self.chat.complete(prompt, sampling, seed)


def _failure_prefix(exc: GenerationError) -> str:
    """How a failed generation is recorded. A server that answered the request whole with an error (an HTTP 500
    given every time, a 4xx) gave the runtime's answer: a finding about that runtime, recorded as done. No answer
    (refused, cut, past the deadline), a "not now" status or a redirect (the URL's problem) is not: the sample is
    recorded as not generated, and a later run asks it again."""
    status = getattr(exc, "status", None)
    if status is not None and status not in NOT_NOW and not 300 <= status < 400:
        return RUNTIME_ANSWERED
    return GENERATION_FAILED


def run_sample(chat: DrivenModel, scenario, seed: int, first=None, mode: str = "native", plan=None) -> dict:
    """Run every user turn of the scenario once in `mode` (harness.live.modes). `first` is the first step's
    Generation when it was written in a batch with the other samples (same prompt, this sample's seed; a
    native attempt). `plan` overrides the GrammarPlan built for the scenario (tests inject faults with it).
    Returns {"turns", "error", "executions"}; "error" is set when a render or generation failed and the
    sample stopped there."""
    if mode != "native" and plan is None:
        plan = grammar_plan(chat.family, scenario, chat.template)
    writer = _StepGenerator(chat, scenario, mode, plan)
    tools = StubTools(scenario)
    tool_names = [t.name for t in scenario.tools]   # what the app offered: all fallback may know of the case
    messages = opening_messages(scenario)
    turns, counter = [], 0
    for turn_index, turn in enumerate(scenario.turns):
        messages.append({"role": "user", "content": turn.user})
        steps, results = [], []  # results: (name, result) of the calls that ran in this turn
        ran = {}  # StubTools.key of each call that ran in this turn -> (its id, its result)
        turns.append({"user": turn.user, "steps": steps})
        for step_index in range(scenario.max_steps):
            seed_here = step_seed(seed, turn_index, step_index)
            shared = first is not None and turn_index == 0 and step_index == 0
            grammar = mode == "grammar" and plan is not None
            try:
                done = writer.attempt(messages, seed_here, grammar, first if shared else None)
                fallback_from = None
                if mode == "fallback" and plan is not None and native_failed(done["parse"], tool_names):
                    fallback_from = _record(done, seed_here, shared)
                    # The model tried to call: held to a call until one ran this turn (harness.live.modes).
                    # After a tool ran, the retry may answer from its result.
                    done = writer.attempt(messages, seed_here, True, required=retry_required(True, bool(results)))
                    shared = False
            except TemplateError as exc:
                steps.append({**_step_record("", seed_here, None, None, False), "error": f"render: {exc}"})
                return {"turns": turns, "error": f"render: {exc}", "executions": tools.executions}
            except GenerationError as exc:
                if results:
                    # A tool already ran: never re-run the loop (it would run twice); answer from the
                    # result in hand and go on with the next user turn.
                    text = _synthesized(results)
                    steps.append({**_step_record("", seed_here, None, None, False), "reply": text,
                                  "synthesized": True, "generation_error": f"{GENERATION_FAILED} {exc}"})
                    messages.append(_assistant(text, None))
                    break
                said = f"{_failure_prefix(exc)} {exc}"
                steps.append({**_step_record("", seed_here, None, None, False), "error": said})
                return {"turns": turns, "error": said, "executions": tools.executions}
            step = _record(done, seed_here, shared)
            if fallback_from is not None:
                step["fallback_from"] = fallback_from
            steps.append(step)
            parse = done["parse"]
            if not parse.accepted:
                # Text, or a near miss shown as text (a parser never repairs: a near miss never becomes a call).
                messages.append(_assistant(parse.content, parse.reasoning))
                break
            calls, repeated = [], []
            notation = families.value_notation(parse.family)
            for call in parse.calls:
                counter += 1
                call_id = f"call{counter:05d}"
                key = tools.key(call, notation)
                if mode == "fallback" and key in ran:
                    record = _repeat(call_id, call, ran[key])
                    repeated.append((call.name, record["result"]))
                else:
                    record = tools.dispatch(call_id, call, notation)
                    if record["executed"]:
                        results.append((call.name, record["result"]))
                        ran[key] = (call_id, record["result"])
                step["calls"].append(record)
                calls.append((call_id, call, record))
            if repeated and len(repeated) == len(calls):
                # Every call of this reply already ran this turn: running them again would repeat their side
                # effects and loop to the step limit. The turn is answered from the results in hand; the
                # reply stays recorded as written.
                step["repeated_call_after_result"] = [rec["repeat_of"] for _, _, rec in calls]
                text = _synthesized(repeated)
                steps.append({**_step_record("", seed_here, None, None, False), "reply": text, "synthesized": True})
                messages.append(_assistant(text, None))
                break
            message = _assistant(parse.content, parse.reasoning)
            message["tool_calls"] = [
                {"id": cid, "type": "function",
                 "function": {"name": call.name, "arguments": rec["typed"] if not rec["errors"] and rec["typed"] is not None
                              else _as_object(call.arguments)}}
                for cid, call, rec in calls]
            messages.append(message)
            for cid, call, rec in calls:
                messages.append({"role": "tool", "tool_call_id": cid, "name": call.name, "content": rec["result"]})
    return {"turns": turns, "error": None, "executions": tools.executions}


def _record(done: dict, seed: int, shared: bool) -> dict:
    step = _step_record(done["prompt"], seed, done["generation"], done["parse"], shared)
    step["family"] = done["family"]  # the parser that read this attempt (a grammar's may differ from native)
    step.update(done["extra"])
    return step


def _synthesized(results: list) -> str:
    """The answer a failed follow-up leaves: the tool results already in hand, as they came back."""
    return "\n".join(f"{name}: {result}" for name, result in results)


def _assistant(content: str, reasoning: str | None) -> dict:
    message = {"role": "assistant", "content": content or ""}
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def _as_object(arguments):
    # Templates serialise arguments with tojson or iterate them as a mapping; give them a mapping always.
    return arguments if isinstance(arguments, dict) else {"value": arguments}
