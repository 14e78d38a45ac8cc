"""History cases: the reasoning a runtime returned, sent back after a tool result and after a new user turn, and
the runtime's render of the next request judged against the pinned template's own renders. The templates are
real pins, rendered as the live driver renders them (TemplateRun, no server); only the runtime's prompt is
made by hand."""

import pytest

from harness.suites.runtime_conformance import history_cases as h
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord
from harness.suites.runtime_conformance.causes import cause_key
from harness.suites.runtime_conformance.judging import LABELS, classify
from harness.suites.runtime_conformance.corpus import REASONING, build_corpus
from harness.suites.runtime_conformance.driver import TemplateRun, requests_for
from harness.pins.sources import load_sources, resolve_template
from harness.suites.runtime_conformance.page import conformance_markdown
from harness.scripted.keying import PromptKey, render_key

SOURCES = load_sources()
RUNS: dict = {}


def run_of(template: str, kind: str = "llama-server") -> TemplateRun:
    if (template, kind) not in RUNS:
        ref = resolve_template(template, SOURCES)
        RUNS[template, kind] = TemplateRun(kind, kind, ref, build_corpus(ref), "unused", None, log=None)
    return RUNS[template, kind]


def request(run: TemplateRun, case: str):
    return next(r for r in requests_for(run.corpus, [case]))


def ours(run: TemplateRun, r) -> PromptKey:
    return render_key(run.vocab, run.renderer.prompt(r.case.messages, r.case.tools or None, r.case.template_kwargs))


def judged(run: TemplateRun, case: str, runtime_prompt: str | None = None, tokens: int | None = None) -> tuple:
    """(labels, details, history facts) of the case, the runtime's prompt given as text (counted as ours is) or
    as a length alone."""
    r = request(run, case)
    mine = ours(run, r)
    if runtime_prompt is not None:
        key = PromptKey(render_key(run.vocab, runtime_prompt).tokens, "hand-made", runtime_prompt)
    else:
        key = PromptKey(tokens, "hand-made")
    history = run.history_of(r, mine, key)
    same = None if key.prompt is None else key.prompt == mine.prompt
    record = {"key": {**key.to_json(), "same_text": same}, "ours": {"tokens": mine.tokens}, "history": history}
    labels, details = h.judge(record)
    return labels, details, history


def stripped(run: TemplateRun, case: str) -> str:
    r = request(run, case)
    return run.renderer.prompt(h.without_reasoning(r.case.messages), r.case.tools or None, r.case.template_kwargs)


def test_the_history_sends_back_what_the_reasoning_case_reads():
    run = run_of("Qwen-Qwen3-0.6B")
    cases = {c.name: c for c in run.corpus.cases}
    thought = cases["reasoning-then-call"].expect
    after_tool, after_user = cases[h.AFTER_TOOL], cases[h.AFTER_USER]
    sent = after_tool.messages[1]
    assert sent["reasoning_content"] == thought["reasoning"] and sent["role"] == "assistant"
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in sent["tool_calls"]] == \
        [(c["name"], c["arguments"]) for c in thought["calls"]]
    assert after_tool.messages[2]["role"] == "tool" and after_tool.messages[2]["tool_call_id"] == sent["tool_calls"][0]["id"]
    assert after_user.messages[1:3] == after_tool.messages[1:3] and after_user.messages[-1]["role"] == "user"
    assert after_tool.template_kwargs == {"enable_thinking": True}
    # The next replies are plain answers the strict parser reads as content.
    assert after_tool.expect["content"] == h.ANSWER and not after_tool.expect["calls"]
    assert after_user.expect["content"] == h.NEXT_ANSWER and not after_user.expect["deviation"]


def test_templates_without_reasoning_to_send_back_have_no_history_case():
    hermes = run_of("Qwen-Qwen2.5-7B-Instruct").corpus
    assert not {c.name for c in hermes.cases} & set(h.CASES)
    # Hy3's generation prompt opens the reasoning: its reply's strict parse holds no reasoning to send back.
    hy3 = run_of("tencent-Hy3").corpus
    assert not {c.name for c in hy3.cases} & set(h.CASES)
    assert {name for name, _ in hy3.skipped} >= set(h.CASES)


@pytest.mark.parametrize("template, after_tool, after_user", [
    ("Qwen-Qwen3-0.6B", h.KEPT, h.DROPPED),                 # rendered after the tool result, dropped after a user turn
    ("openai-gpt-oss-120b", h.KEPT, h.DROPPED),             # the analysis channel, no thinking switch
    ("deepseek-ai-DeepSeek-V4", h.KEPT, h.KEPT),            # kept always
    ("Apriel-1.6-15b-Thinker-fixed", h.DROPPED, h.DROPPED),  # never rendered
])
def test_what_each_template_does_with_the_reasoning(template, after_tool, after_user):
    run = run_of(template)
    for case, does in ((h.AFTER_TOOL, after_tool), (h.AFTER_USER, after_user)):
        _, _, history = judged(run, case, runtime_prompt=ours(run, request(run, case)).prompt)
        assert history["template"] == does, (template, case)
        assert (REASONING in ours(run, request(run, case)).prompt) == (does == h.KEPT)


def test_a_runtime_rendering_as_the_template_gets_no_history_label():
    run = run_of("Qwen-Qwen3-0.6B")
    for case in h.CASES:
        labels, details, history = judged(run, case, runtime_prompt=ours(run, request(run, case)).prompt)
        assert (labels, details) == ([], []) and history["renders"][0]["same_text"] is True


def test_a_runtime_that_drops_what_the_template_keeps():
    run = run_of("Qwen-Qwen3-0.6B")
    labels, details, history = judged(run, h.AFTER_TOOL, runtime_prompt=stripped(run, h.AFTER_TOOL))
    assert labels == ["history-reasoning-dropped"] and history["reasoning_in_prompt"] is False
    assert "without the reasoning" in details[0] and "by its length" not in details[0]
    # Where the runtime shows only a length: the length of the render without the reasoning says the same.
    without = render_key(run.vocab, stripped(run, h.AFTER_TOOL)).tokens
    labels, details, _ = judged(run, h.AFTER_TOOL, tokens=without)
    assert labels == ["history-reasoning-dropped"] and f"by its length: {without} tokens" in details[0]


def test_a_runtime_that_keeps_what_the_template_drops():
    run = run_of("Qwen-Qwen3-0.6B")
    mine = ours(run, request(run, h.AFTER_USER)).prompt
    # A render that writes the first assistant turn's reasoning back, as a runtime that keeps it would.
    turn = "<|im_start|>assistant\n"
    at = mine.index(turn) + len(turn)
    kept = f"{mine[:at]}<think>\n{REASONING}\n</think>\n\n{mine[at:]}"
    labels, details, history = judged(run, h.AFTER_USER, runtime_prompt=kept)
    assert history["template"] == h.DROPPED and labels == ["history-reasoning-kept"], details


def test_the_reasoning_where_the_template_puts_it_in_another_prompt_is_history_differs():
    run = run_of("deepseek-ai-DeepSeek-V4")
    mine = ours(run, request(run, h.AFTER_TOOL)).prompt
    labels, details, _ = judged(run, h.AFTER_TOOL, runtime_prompt=mine.replace("cloudy", "overcast"))
    assert labels == ["history-differs"] and "so does the runtime, but" in details[0]
    # Shown without the reasoning, and otherwise different too: the reasoning is still dropped.
    labels, _, _ = judged(run, h.AFTER_TOOL, runtime_prompt=stripped(run, h.AFTER_TOOL).replace("cloudy", "overcast"))
    assert labels == ["history-reasoning-dropped"]
    # A length none of the renders has: what the runtime did with the reasoning is not seen.
    labels, details, _ = judged(run, h.AFTER_TOOL, tokens=ours(run, request(run, h.AFTER_TOOL)).tokens + 7)
    assert labels == ["history-differs"] and "not seen" in details[0]


def test_other_arguments_or_switches_are_not_blamed_on_the_reasoning():
    # gpt-oss renders a call's arguments with tojson: handed the wire's JSON text, its prompt grows by the quotes.
    run = run_of("openai-gpt-oss-120b", "llama-cpp-python")
    r = request(run, h.AFTER_USER)
    history = run.history_of(r, ours(run, r), PromptKey(None, "unused"))
    as_text = next(x for x in history["renders"] if x["arguments"] == "json-text" and x["reasoning"])
    assert as_text["tokens"] != history["renders"][0]["tokens"]
    labels, details, _ = judged(run, h.AFTER_USER, tokens=as_text["tokens"])
    assert labels == [] and "so does the runtime" in details[0] and "JSON text" in details[0]
    # llama-cpp-python's module says it ignores chat_template_kwargs: the template's default switches are tried.
    bielik = run_of("Bielik-11B-v3.0-Instruct", "llama-cpp-python")
    r = request(bielik, h.AFTER_TOOL)
    kinds = {x["kwargs"] for x in bielik.history_of(r, ours(bielik, r), PromptKey(None, "unused"))["renders"]}
    assert kinds == {"sent", "defaults"}
    # Reka Edge renders the reasoning with thinking on (sent) and drops it under its default switches: a runtime
    # that does not apply chat_template_kwargs drops it, whatever it does with the field.
    reka = run_of("Reka-Edge", "llama-cpp-python")
    r = request(reka, h.AFTER_TOOL)
    renders = reka.history_of(r, ours(reka, r), PromptKey(None, "unused"))["renders"]
    defaults = next(x for x in renders if x["kwargs"] == "defaults" and x["reasoning"] and x["arguments"] == "objects")
    assert renders[0]["holds"] and not defaults["holds"]
    labels, details, _ = judged(reka, h.AFTER_TOOL, tokens=defaults["tokens"])
    assert labels == ["history-reasoning-dropped"] and "under them the template drops it" in details[0]


def test_classify_labels_a_history_record_and_its_cause_says_where():
    run = run_of("Qwen-Qwen3-0.6B")
    r = request(run, h.AFTER_TOOL)
    mine = ours(run, r)
    text = stripped(run, h.AFTER_TOOL)
    key = PromptKey(render_key(run.vocab, text).tokens, "hand-made", text)
    answer = {"status": 200, "content": h.ANSWER, "reasoning": None, "tool_calls": []}
    raw = {"runtime": "rt", "server": "llama-server", "template": {"id": run.ref.id, "sha256": "s"},
           "family": run.corpus.family, "case": {"name": h.AFTER_TOOL, "hash": "h"}, "variant": "auto",
           "reply": r.case.reply, "reply_tokens": None, "expect": r.case.expect, "ours": {"tokens": mine.tokens},
           "key": {**key.to_json(), "same_text": False}, "plain": answer, "stream": answer,
           "history": run.history_of(r, mine, key)}
    labels, details = classify(raw, r.case.tools, None)
    assert labels == ["prompts-differ", "history-reasoning-dropped"] and set(labels) <= set(LABELS)
    record = RuntimeConformanceRecord.from_json({**raw, "labels": labels, "details": details})
    assert RuntimeConformanceRecord.from_json(record.to_json()).history == raw["history"]
    assert cause_key(record) == ("history-reasoning-dropped", "after a tool result")
    page = conformance_markdown([record], [])
    assert "## History: the reasoning sent back" in page
    assert f"| {run.ref.id} | hermes | {h.AFTER_TOOL} | kept | dropped |" in page
    # A record without a history (every record before these cases) is written as it was.
    assert "history" not in RuntimeConformanceRecord.from_json({**raw, "history": None, "labels": labels}).to_json()
