"""Parser agreement: other projects' tool parsers (vLLM, SGLang, transformers' response templates) on the strict parser's corpus, one-shot and
streamed.

Each case is a reply whose strict parse is known (a family's canonical outputs and near misses, every
template's runtime-conformance corpus, and the replies real models wrote in results/transcripts/). A peer parser reads it once whole (its non-streaming entry point) and
as streams: the whole reply in one chunk, token by token, and in seeded random chunks of 1-4 tokens. Labels are
LABELS: as in runtime conformance (harness.evaluation.judging.judge reads the one-shot answer), several can hold
at once, `agree` only alone.

Reasoning is cut first, as the servers' reasoning parsers do before the tool parser runs: a reply whose strict
parse holds reasoning is fed from after the reasoning's closing tag.
"""

from __future__ import annotations

import json

from harness import families as registry
from harness.evaluation.judging import answer_summary, arguments_object, judge, label_head
from harness.suites.parser_agreement.records import ParserAgreementRecord

# The projects whose parsers are compared (harness.peers drives them); a family's `peers:` may name others.
PROJECTS = ("vllm", "sglang", "transformers")
LABELS = {
    "agree": "the peer returned what the strict parser reads, and every stream equals its one-shot",
    "forgave": "(`forgave:<deviation>`) the strict parser rejects the reply with that named deviation; the peer "
               "returned a call",
    "dropped-call": "the strict parser reads a call; the peer returned none and not the call's text",
    "call-left-in-content": "the strict parser reads a call; the peer returned none, the call's text as content",
    "arguments-changed": "same calls, arguments not the same (emptied, not a JSON object, other types)",
    "calls-differ": "both read calls, other names or another number",
    "content-differs": "no call either side, other content",
    "stream-differs": "(`stream-differs k/n`) k of the n streams accumulate to something else than the peer's own "
                      "one-shot answer",
    "crashed": "the peer raised (one-shot, or k/n streams: the details say which)",
}
_RENAMED = {"runtime-dropped-call": "dropped-call", "runtime-forgave": "forgave"}


def fed_text(reply: str, expect: dict, pairs) -> str:
    """What the peer's tool parser is given: the reply after its reasoning block, where the strict parse read one
    (even an empty one). The strict parse reads an empty block as no reasoning (None): a reply that opens with a
    close tag (MiniMax-M3's `</mm:think>` "no reasoning" prefix, a prompt-opened block closed at once) is fed
    from after that tag too, as the servers' reasoning parsers strip it (vLLM's MiniMax-M3 one drops that
    first closer by name)."""
    if expect.get("reasoning") is None:     # "" too is a block read (a prompt-opened one closed at once)
        head = reply.lstrip()
        return next((head[len(close):] for _, close in pairs if head.startswith(close)), reply)
    for _, close in pairs:
        at = reply.find(close)
        if at >= 0:
            return reply[at + len(close):]
    return reply


def _shape(answer: dict) -> tuple:
    return ((answer.get("content") or "").strip(),
            [(c.get("name"), arguments_object(c.get("arguments")), None if arguments_object(c.get("arguments"))
              is not None else c.get("arguments")) for c in answer.get("calls") or []])


def _label(name: str) -> str:
    head, _, tail = name.partition(":")
    head = _RENAMED.get(head, head)
    return f"{head}:{tail}" if tail else head


def classify(expect: dict, answers: dict, tools: list, marker: str | None) -> tuple:
    """(labels, details) of one case: `answers` is the worker's answer to a parse request."""
    if answers.get("error"):
        return ["crashed"], [f"request: {answers['error']}"]
    labels, details = [], []
    one = answers["one_shot"]
    if one.get("error"):
        labels.append("crashed")
        details.append(f"one-shot: {one['error']}")
    else:
        theirs = {"tool_calls": one["calls"], "content": one["content"], "reasoning": expect.get("reasoning")}
        judged, why = judge(expect, theirs, tools, "auto", marker)
        labels += [_label(x) for x in judged]
        details += why
    streams = [("whole", answers["whole"]), ("token by token", answers["by_token"])]
    streams += [(f"random split {i + 1} {answers['random_sizes'][i]}", a) for i, a in enumerate(answers["random"])]
    crashed = [(what, a) for what, a in streams if a.get("error")]
    if crashed:
        labels.append("crashed") if "crashed" not in labels else None
        details.append(f"{len(crashed)}/{len(streams)} streams raised; {crashed[0][0]}: {crashed[0][1]['error']}")
    if not one.get("error"):
        differ = [(what, a) for what, a in streams if not a.get("error") and _shape(a) != _shape(one)]
        if differ:
            labels.append(f"stream-differs {len(differ)}/{len(streams)}")
            details.append(f"{differ[0][0]}: {answer_summary(differ[0][1], 'calls')}; one-shot {answer_summary(one, 'calls')}")
    return (labels or ["agree"]), details


def current(records: list) -> list:
    """The records that stand: of several for one case (a rerun with another parser or corpus), the last."""
    return list({r.case_key(): r for r in records}.values())


def unmapped() -> list:
    """(family, why) for every detectable family no compared project's parser reads."""
    return sorted((name, "no vllm, sglang or transformers parser named in its peers:") for name, f in registry.families().items()
                  if f.detectable and not f.peer_projects() & set(PROJECTS))


def matrix(records: list) -> list:
    """Rows per (family, project): cases, how many carry each label, streams that differ of those fed; parsers:
    every parser of the project that read one of the family's cases (a template may have its own)."""
    rows: dict = {}
    for r in records:
        row = rows.setdefault((r.family, r.project), {
            "family": r.family, "project": r.project, "parsers": {}, "cases": 0,
            **{k: 0 for k in LABELS}, "streams": 0, "streams_differ": 0, "forgiven": {}})
        row["cases"] += 1
        row["parsers"][r.parser] = row["parsers"].get(r.parser, 0) + 1
        for label in r.labels:
            row[label_head(label)] += 1
            if label.startswith("forgave:"):
                name = label.split(":", 1)[1]
                row["forgiven"][name] = row["forgiven"].get(name, 0) + 1
            if label.startswith("stream-differs "):
                row["streams_differ"] += int(label.split()[1].split("/")[0])
        row["streams"] += r.streams
    return [rows[k] for k in sorted(rows)]


def replay_command(r: ParserAgreementRecord) -> str:
    return (f"harness parser-agreement --project {r.project} --family {r.family} --source {r.source} "
            f"--case {json.dumps(r.case, ensure_ascii=False)} --json")

