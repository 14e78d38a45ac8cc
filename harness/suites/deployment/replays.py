"""Replays: what a runtime returns for the text a model really wrote. Every committed in-process BFCL reply of a
model (results/bfcl, each mode) on the deployment suite's drawn cases is written, exactly as recorded, by a
scripted model (harness.scripted: a real GGUF whose weights write given replies) served with the model's own
template, through the runtime's /v1/chat/completions: the case's messages and tools, tool_choice auto,
non-streamed and streamed. Runtime conformance does the serving and labelling (its driver packs the replies into
as few scripted models as their prompt lengths allow and keys each to the runtime's own prompt); this module only
says which replies, and the deployment page judges what came back with BFCL's checker beside the real-served rows.

No real model runs, so a replay is cheap and covers runtimes a model cannot be served on here. Only tool_choice
auto: under required a runtime constrains sampling with a grammar, which would rewrite the scripted text, so the
answer would no longer be the runtime's reading of what the model wrote (runtime conformance's `required` cases
judge that grammar on the template's own calls).

Beside the BFCL cases, each YAML scenario's opening turn (cases.Opening): the first reply each committed sample
of the scenario wrote in each mode (results/transcripts), asked under the opening request the served rows are
asked; the texts the samples of a scenario and mode wrote alike are replayed once, the page counting how many
samples each stands for. The page judges them by the scenario's expectation of that turn (openings.py).

A replay's case name is MODEL/CASE/MODE (a scenario opening's MODEL/scenario-NAME/MODE/TAG, TAG naming the
text). Its case hash covers the reply, so a reply re-recorded since (a stale sample superseded) is asked again,
the records of the old reply are dropped from the file once the new one is replayed, and the page reads only the
records whose reply is the committed one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import families
from harness.core.errors import HarnessError, TemplateError
from harness.core.hashing import sha256_text
from harness.core.values import MODES
from harness.storage.results import ResultsDir, file_stem
from harness.suites.deployment.cases import SCENARIO
from harness.template import detect as detection
from harness.template.kwargs import template_kwargs_for

FOLDER = "replays"       # under DIR/deployment/: records of runtime conformance's kind, one file per model × runtime
AUTO = "auto"


@dataclass(frozen=True)
class Replayed:
    """One committed in-process reply: the case, the mode it was written in, and its text. A scenario opening's
    reply is one distinct first reply of the scenario's samples in that mode, `samples` of them writing it."""
    model: str
    case: object              # harness.suites.bfcl.cases.Case, or cases.Opening
    mode: str
    reply: str
    samples: int = 1

    @property
    def name(self) -> str:
        base = f"{self.model}/{self.case.id}/{self.mode}"
        # A scenario's five samples a mode can write several texts: each its own case, named by the text.
        return base if self.case.category != SCENARIO else f"{base}/{reply_tag(self.reply)}"


def reply_tag(reply: str) -> str:
    return sha256_text(reply)[:12]


def records_path(results: ResultsDir, model_id: str, runtime: str) -> Path:
    return results.root / "deployment" / FOLDER / f"{file_stem(model_id)}.{file_stem(runtime)}.jsonl"


def split_name(name: str) -> tuple:
    """(model, case id, mode) of a replay's case name (a scenario opening's ends with its reply's tag, left out)."""
    model, case, mode, *_ = name.split("/")
    return model, case, mode


def scenario_first_replies(results: ResultsDir, scenarios: dict, warnings: list) -> dict:
    """(model id, scenario name, mode) -> Counter of the first reply each committed sample wrote to the scenario's
    opening turn (results/transcripts; the samples every report counts: today's scenario and setup, each key
    once). A sample that stopped on an error before its first reply has none."""
    from collections import Counter

    from harness.evaluation.scored import score_transcripts

    def first(record, scenario, verdicts, ref):
        steps = (record.turns[0].get("steps") or []) if record.turns else []
        step = steps[0] if steps else {}
        reply = step.get("reply") if not step.get("error") else None
        return record.model.id, record.scenario.name, record.mode, reply if isinstance(reply, str) else None

    scored = score_transcripts(results.transcript_files(), scenarios, keep=first, slim=lambda record: None)
    warnings += scored.warnings
    out: dict = {}
    for model, scenario, mode, reply in scored.samples:
        if reply:
            out.setdefault((model, scenario, mode), Counter())[reply] += 1
    return out


def committed_opening_replies(results: ResultsDir, model_id: str, openings: list, warnings: list) -> list:
    """The model's committed first replies to each scenario opening (cases.Opening), every mode, each distinct
    text of a scenario and mode once (the runtime reads a text the same however many samples wrote it), in the
    openings' order; `samples` says how many wrote it."""
    current = scenario_first_replies(results, {o.scenario.name: o.scenario for o in openings}, warnings)
    out = []
    for opening in openings:
        for mode in MODES:
            written = current.get((model_id, opening.scenario.name, mode), {})
            out += [Replayed(model_id, opening, mode, reply, n) for reply, n in sorted(written.items())]
    return out


def committed_replies(results: ResultsDir, model_id: str, drawn: list, warnings: list) -> list:
    """The model's committed BFCL replies on the drawn cases, every mode, in the draw's order. A sample that
    stopped on an error wrote no reply to replay and is left out."""
    from harness.suites.bfcl.judging import read_outcomes

    by_id = {c.id: c for c in drawn}
    outcomes, _, _ = read_outcomes(results, warnings)
    mine = [o for o in outcomes if o.model == model_id and o.case in by_id and not o.errored and o.reply]
    order = {c.id: i for i, c in enumerate(drawn)}
    mine.sort(key=lambda o: (order[o.case], o.mode))
    return [Replayed(model_id, by_id[o.case], o.mode, o.reply) for o in mine]


def replay_corpus(ref, replies: list):
    """The replies as runtime conformance's corpus for the model's template: each case the request an app sends
    (harness.suites.deployment.cases.messages and the case's tools), its reply the committed text, its
    expectation the strict parse of that text after our render of the same request (the family the template's
    own probe detects; a template of no family reads no call, and a runtime that returns one is named for it)."""
    from harness.suites.deployment.cases import messages as case_messages
    from harness.suites.runtime_conformance.corpus import Case, Corpus, Renderer

    found = detection.detect_declared(ref.text, ref.bos_token or "", ref.eos_token or "",
                                      **template_kwargs_for(ref.text))
    renderer = Renderer(ref, found)
    cases, refused = [], []
    for replayed in replies:
        messages, tools = case_messages(replayed.case), replayed.case.scenario.tool_schemas()
        try:
            prompt = renderer.prompt(messages, tools, renderer.kwargs)
        except TemplateError as exc:
            # The app's request cannot be rendered (Gemma's template refuses a system message): no scripted model
            # can be keyed to it. Named, not replayed; the other replies go on.
            refused.append((replayed.name, f"the template refuses the request: {exc}"))
            continue
        expect = families.parse(found.family, replayed.reply, prompt).to_json()
        cases.append(Case(replayed.name, messages, tools, replayed.reply, (AUTO,), dict(renderer.kwargs), expect,
                          prompt=prompt))
    return Corpus(ref.id, found.family, cases, refused, found)


def replay_setup(model_id: str, results: ResultsDir, per_category: int, log=print, only: set | None = None) -> tuple:
    """(the model's template, its replies on the drawn cases as a replay corpus, the replies): what a replay
    through any runtime serves, whether the harness starts it (run) or a script serves scripted models in HF form
    (scripts/hf_runtime_conformance.py --replay). only: these case ids of the draw."""
    from harness.suites.deployment import cases
    from harness.suites.deployment.driver import model_setup

    warnings: list = []
    drawn, openings = cases.cases(per_category), cases.openings()
    unknown = sorted((only or set()) - {c.id for c in drawn + openings})
    if unknown:
        raise HarnessError(f"--case {', '.join(unknown)}: not among the {len(drawn)} drawn cases (--cases "
                           f"{per_category}; e.g. {', '.join(c.id for c in drawn[:3])}) nor the scenario openings "
                           f"({', '.join(o.id for o in openings[:2])}, …)")
    replies = committed_replies(results, model_id, [c for c in drawn if not only or c.id in only], warnings)
    replies += committed_opening_replies(results, model_id, [o for o in openings if not only or o.id in only],
                                         warnings)
    for warning in warnings:
        log(f"warning: {warning}")
    if not replies:
        raise HarnessError(f"{model_id}: no committed BFCL replies on the {per_category} drawn case(s) per category "
                           f"under {results.root / 'bfcl'} (harness run --suite bfcl --model {model_id} records "
                           f"them), nor scenario replies under {results.transcripts} (harness run --model "
                           f"{model_id})")
    _, ref, _ = model_setup(model_id)
    if ref is None:
        raise HarnessError(f"{model_id}: neither a template of its own nor a stand-in: nothing to script it with")
    corpus = replay_corpus(ref, replies)
    for name, why in corpus.skipped:
        log(f"warning: not replayed: {name}: {why}")
    return ref, corpus, replies


def run(model_id: str, results: ResultsDir, server: str, per_category: int, workdir: Path, log=print,
        keep: bool = False, only: set | None = None) -> tuple:
    """Replay the model's committed replies on the drawn cases (only: these case ids of them) through `server` (a
    runtime the harness starts). Returns (records written, replies found, records path); a killed run resumes
    past what is recorded."""
    from harness.backends import runtimes
    from harness.suites.runtime_conformance.driver import run_suite

    ref, corpus, replies = replay_setup(model_id, results, per_category, log, only)
    served = runtimes.get(server)
    build = served.build(None)
    runtime = served.record_name
    path = records_path(results, model_id, runtime)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A model's committed subset (220 cases in 3 modes) is far more requests than a template's own corpus: the
    # driver builds and serves them in parts (runtime_conformance.scheduling.PART), what a part recorded not again.
    written, skipped = run_suite(server, runtime, [(ref, corpus)], path, Path(workdir), set(), log=log, keep=keep,
                                 build=build)
    for template_id, why in skipped:
        raise HarnessError(f"{model_id}: no scripted model for {template_id}: {why}")
    dropped = drop_replaced(path, replies)
    if dropped:
        log(f"dropped {dropped} record(s) of replies re-recorded since (their new replies are replayed above)")
    return written, len(replies), path


def drop_replaced(path: Path, replies: list) -> int:
    """Remove from the replay file the records of these replies' names whose reply is no longer the committed
    one (a sample superseded since): the page leaves them out anyway, and kept they would be counted in its
    warning for good. Records of other names are kept. Returns how many were dropped."""
    from harness.storage.transcript_writer import TranscriptWriter
    from harness.suites.runtime_conformance.records import RuntimeConformanceRecord

    current = {r.name: r.reply for r in replies}
    # A scenario opening's text no committed sample of its scenario and mode writes now (the samples re-run).
    openings = {split_name(r.name) for r in replies if r.case.category == SCENARIO}

    def replaced(name: str, reply: str) -> bool:
        if name in current:
            return reply != current[name]
        return name.count("/") == 3 and split_name(name) in openings

    if not path.exists():
        return 0
    with TranscriptWriter(path, wait=False) as writer:
        return writer.drop(lambda records: [r for r in records if replaced(r.case["name"], r.reply)],
                           kinds=(RuntimeConformanceRecord,))


def read_replays(results: ResultsDir, warnings: list) -> list:
    """Every replay record under DIR/deployment/replays, each file and each question once."""
    from harness.suites import read_folder
    from harness.suites.runtime_conformance.records import RuntimeConformanceRecord

    def home(r) -> str:
        return f"{file_stem(split_name(r.case['name'])[0])}.{file_stem(r.runtime)}.jsonl"

    return read_folder(results.root / "deployment" / FOLDER, RuntimeConformanceRecord,
                       lambda r: (r.runtime, *r.done_key()), home, warnings)


REWRITTEN = "reply-rewritten"


def current_records(records: list, outcomes: list, current: dict) -> list:
    """The replay records whose reply is a committed one now: a BFCL reply the model's record of that case and
    mode holds (outcomes: bfcl.judging.read_outcomes), or a text a committed sample of the scenario and mode
    wrote first (current: scenario_first_replies)."""
    committed = {(o.model, o.case, o.mode): o.reply for o in outcomes}
    out = []
    for r in records:
        model, case_id, mode = split_name(r.case["name"])
        if case_id.startswith(f"{SCENARIO}-"):
            if r.reply in current.get((model, case_id[len(SCENARIO) + 1:], mode), {}):
                out.append(r)
        elif committed.get((model, case_id, mode)) == r.reply:
            out.append(r)
    return out


@dataclass
class ReplayAnswer:
    """One replay, non-streamed, as the page counts it: the BFCL verdict of what came back, or why none is."""
    model: str
    runtime: str
    mode: str
    case: object
    rewritten: bool            # the runtime's grammar made the scripted model write other text: not this reply
    view: dict                 # harness.suites.deployment.judging.answer_view of the non-streamed answer
    reply: str                 # the committed reply the scripted model was given
    verdict: dict | None = None
    stream_differs: bool = False


def replay_answers(results: ResultsDir, outcomes: list, models: dict, suite, judge, warnings: list,
                   records: list | None = None) -> list:
    """The replays of the cases the deployment rows hold (models: model id -> case ids), each whose reply is the
    committed one (a reply re-recorded since is left out, counted in a warning), judged by `judge(case, calls)`
    (BFCL's checker; None: not judged). outcomes: the committed BFCL records read (bfcl.judging.read_outcomes),
    whose replies are the current ones. A reply the runtime's grammar rewrote gets no verdict: what came back is
    not the runtime's reading of that text. records: the replay records already read (read_replays), else read
    here."""
    from harness.evaluation.judging import label_head
    from harness.suites.deployment.judging import answer_view

    current = {(o.model, o.case, o.mode): o.reply for o in outcomes}
    out, stale = [], 0
    for r in read_replays(results, warnings) if records is None else records:
        model, case_id, mode = split_name(r.case["name"])
        if case_id not in models.get(model, ()) or case_id not in suite.cases:
            continue
        if current.get((model, case_id, mode)) != r.reply:
            stale += 1
            continue
        case = suite.cases[case_id]
        heads = {label_head(x) for x in r.labels}
        view = answer_view(r, r.plain, case.scenario.tool_schemas())
        answer = ReplayAnswer(model, r.runtime, mode, case, REWRITTEN in heads, view, r.reply,
                              stream_differs="stream-differs" in heads)
        if judge is not None and not answer.rewritten:
            answer.verdict = ({"valid": False, "error_type": "runtime-error"} if view["errored"] else
                              judge(case, view["calls"]))
        out.append(answer)
    if stale:
        warnings.append(f"deployment replays: {stale} record(s) of a reply re-recorded since, left out (run "
                        "harness deployment --replay again)")
    return out
