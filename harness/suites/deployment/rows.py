"""The rows of deployment.md's table, their ranking, and the replays' part of the page: a Row is one setup of one
model (in process, served by a runtime, or its committed replies replayed through a runtime by scripted models),
its answers judged by BFCL's checker."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from harness.suites.bfcl.cases import IRRELEVANCE
from harness.peers.bfcl import SETUP_COMMAND
from harness.suites.bfcl.judging import valid_verdict
from harness.reports.rates import rate_cell
from harness.reports.tables import mode_order
from harness.evaluation.judging import label_head
from harness.evaluation.scoring import wilson
from harness.suites.deployment.replays import split_name

NOT_JUDGED = f"not judged (`{SETUP_COMMAND}`)"
REPLAYED = 2         # the rows' order within a model: in process (0), served (1), replayed (2)


class Row:
    """One setup of one model: per answer, (case id, category, errored, left in content, BFCL verdict). A row that
    is not `ranked` (replays: a runtime's reading of fixed text, not a model's answer) is shown without a rank."""

    def __init__(self, model: str, setup: str, order: tuple, ranked: bool = True):
        self.model, self.setup, self.order, self.answers, self.ranked = model, setup, order, [], ranked

    def due(self) -> list:
        return [a for a in self.answers if a[1] not in IRRELEVANCE]

    def cell(self, which: str, judged: bool) -> str:
        if which == "due":
            picked = self.due()
        elif which == "no-call":
            picked = [a for a in self.answers if a[1] in IRRELEVANCE]
        else:
            picked = self.answers
        if which in ("due", "no-call"):
            if picked and not judged:
                return NOT_JUDGED
            return rate_cell([valid_verdict(a[4]) for a in picked])
        return rate_cell([a[2] if which == "errors" else a[3] for a in picked])


@dataclass(frozen=True)
class Rank:
    """A row's place within its model and what it stands on: k of the n call-due cases it was ranked on."""
    place: int
    k: int
    n: int

    @property
    def cell(self) -> str:
        return rate_cell([True] * self.k + [False] * (self.n - self.k))


def reaches(rank: Rank, leader: Rank) -> bool:
    """Whether a lower-ranked setup's Wilson interval reaches the leader's: the cases then do not separate them."""
    return wilson(rank.k, rank.n)[1] >= wilson(leader.k, leader.n)[0]


def _cases(row: Row) -> frozenset:
    return frozenset(a[0] for a in row.due())


def ranking_set(rows: list) -> frozenset:
    """The call-due cases a model's setups are ranked on: among the case sets its rows were asked, the one that
    ranks the most answers (the rows asked every case of it, times its cases). A row asked more is ranked on this
    set alone, so every rank compares the same cases; a row asked fewer (a run not finished) is not ranked."""
    sets = {_cases(r) for r in rows}
    return max(sets, key=lambda s: (sum(s <= _cases(r) for r in rows) * len(s), len(s), sorted(s)),
               default=frozenset())


def rank_rows(rows: list, judged: bool) -> dict:
    """Each ranked row's Rank within its model, on BFCL's calls-due accuracy over the model's ranking_set (ties
    share a place); None for a row not ranked (a replay, a row asked fewer cases, nothing judged)."""
    out = {id(r): None for r in rows}
    if not judged:
        return out
    for model in {r.model for r in rows}:
        mine = [r for r in rows if r.model == model and r.ranked]
        common = ranking_set(mine)
        if not common:
            continue
        scores = {id(r): sum(valid_verdict(a[4]) for a in r.due() if a[0] in common) for r in mine
                  if common <= _cases(r)}
        for r in mine:
            if id(r) in scores:
                out[id(r)] = Rank(1 + sum(s > scores[id(r)] for s in scores.values()), scores[id(r)], len(common))
    return out


def place(rank: Rank | None) -> int:
    """A row's place for sorting: unranked rows after the ranked ones."""
    return rank.place if rank else 99


def replay_rows(answers: list) -> list:
    """A row per model × runtime × mode of the replays (harness.suites.deployment.replays.replay_answers), the
    non-streamed answers: a reply the runtime's grammar rewrote is left out of the cells and counted in the
    setup's name, since what came back is not the runtime's reading of that reply."""
    groups = defaultdict(list)
    for a in answers:
        groups[(a.model, a.runtime, a.mode)].append(a)
    rows = []
    for (model, runtime, mode), mine in groups.items():
        rewritten = sum(a.rewritten for a in mine)
        note = f"; {rewritten} of {len(mine)} rewritten by its grammar, left out" if rewritten else ""
        row = Row(model, f"{runtime}, auto, replayed in-process {mode} replies{note}",
                  (REPLAYED, runtime, mode_order(mode)), ranked=False)
        row.answers = [(a.case.id, a.case.category, a.view["errored"], a.view["left_in_content"], a.verdict)
                       for a in mine if not a.rewritten]
        rows.append(row)
    return rows


def agreement_lines(answers: list, records: list, served_verdicts: dict, judged: bool) -> list:
    """Per model × runtime with both: the served model's non-streamed auto answers beside the replays of its
    in-process native replies on the same cases. Same text: the runtime showed what the served model generated
    and it is the in-process reply; same verdict: BFCL's checker says the same of both answers (served_verdicts:
    (model, runtime, case id) -> the served answer's verdict)."""
    served = {(r.model["id"], r.runtime, r.case["id"]): r for r in records if r.tool_choice == "auto"}
    lines = ["| model | runtime | cases | served model wrote the in-process native reply | same BFCL verdict | "
             "replays rewritten by the runtime's grammar (every mode) | replays whose stream differs |",
             "|---|---|---:|---|---|---|---|"]
    pairs = sorted({(a.model, a.runtime) for a in answers} & {(m, r) for m, r, _ in served})
    for model, runtime in pairs:
        mine = [a for a in answers if (a.model, a.runtime) == (model, runtime)]
        native = [a for a in mine if a.mode == "native" and (model, runtime, a.case.id) in served]
        generated = [((served[(model, runtime, a.case.id)].plain or {}).get("generated"), a) for a in native]
        texts = [text == a.reply for text, a in generated if isinstance(text, str)]
        verdicts = [valid_verdict(a.verdict) == valid_verdict(served_verdicts.get((model, runtime, a.case.id)))
                    for a in native if not a.rewritten]
        lines.append(f"| {model} | {runtime} | {len(native)} | {rate_cell(texts) if texts else '– (not shown)'} | "
                     f"{rate_cell(verdicts) if judged else NOT_JUDGED} | "
                     f"{rate_cell([a.rewritten for a in mine])} | {rate_cell([a.stream_differs for a in mine])} |")
    return lines if pairs else []


# The runtime-conformance labels a replay can carry under tool_choice auto, in the order a reader asks: read as
# the strict parser reads the text, or how it was read otherwise (harness.suites.runtime_conformance.causes).
REPLAY_LABELS = ("agree", "call-left-in-content", "runtime-dropped-call", "runtime-forgave", "calls-differ",
                 "arguments-changed", "content-differs", "reply-rewritten", "stream-differs", "prompts-differ",
                 "runtime-error", "no-done-sentinel")
# A stream ended without `data: [DONE]` says nothing of how the runtime read the text: such a replay with no other
# label agrees.
ASIDE = {"agree", "no-done-sentinel"}


def replay_label_lines(records: list) -> list:
    """Per model × runtime, the labels of its replays (replays.current_records: BFCL and scenario openings): each
    the runtime's answer to a text against the strict parse of that text, so a reader sees whether the runtime
    reads a family's calls as its parser does, apart from whether the model wrote them right."""
    groups = defaultdict(list)
    for r in records:
        heads = {label_head(x) for x in r.labels}
        groups[(split_name(r.case["name"])[0], r.runtime)].append(heads | ({"agree"} if heads <= ASIDE else set()))
    lines = ["| model | runtime | replays | " + " | ".join(REPLAY_LABELS) + " |",
             "|---|---|---:|" + "---:|" * len(REPLAY_LABELS)]
    for (model, runtime), heads in sorted(groups.items()):
        counts = Counter(h for mine in heads for h in mine)
        lines.append(f"| {model} | {runtime} | {len(heads)} | "
                     + " | ".join(str(counts[k]) for k in REPLAY_LABELS) + " |")
    return lines if groups else []


def replay_section(replayed: list, records: list, served_verdicts: dict, judged: bool, labels: list,
                   gaps: list) -> list:
    """deployment.md's "Replays beside served": what the replay rows are, the served model beside its replays,
    how each runtime read the replayed texts (labels: replay_label_lines), the replays not made (gaps)."""
    missing = ["Replays not made, or not finished (harness/suites/deployment/replay_gaps.py):", "", *gaps, ""] \
        if gaps else []
    read = ["How each runtime read the replayed texts (BFCL's and the scenario openings'): runtime conformance's "
            "labels, each answer against the strict parse of the text it was given, so a row says whether the "
            "runtime reads the family's calls as its parser does, whatever the model wrote "
            "(harness/suites/runtime_conformance/README.md). *agree*: read as the strict parser reads it (a "
            "stream that ends without `data: [DONE]` aside); a replay can carry several labels.", "", *labels, ""] \
        if labels else []
    if not replayed:
        return ["## Replays beside served", "", *read, *missing] if read or missing else []
    return ["## Replays beside served", "", "The rows *replayed in-process MODE replies*: each committed in-process "
            "reply of the model on these cases, written exactly by a scripted model (the model's template, a tiny "
            "GGUF whose weights write that text) through the runtime, tool_choice auto: what an app receives for "
            "that text there. They are not ranked: they answer how the runtime reads fixed text, not how well a "
            "model calls. Where the runtime's grammar made the scripted model write other text (llama.cpp holds a "
            "call it has opened to its own JSON shape), the reply is left out of the cells and counted. Below, "
            "the served model beside the replay of its in-process native replies "
            "(`harness deployment --replay --server RUNTIME --model MODEL --cases N` adds a replay). Where the "
            "served model wrote other text, llama-server computes and samples otherwise, not reads otherwise: its "
            "flash attention is on by default and its repeat penalty counts the prompt's tokens; with both as in "
            "process its text is the in-process text on every case tried (tools/served_vs_in_process.py, "
            "harness/suites/deployment/README.md).", "",
            *agreement_lines(replayed, records, served_verdicts, judged), "", *read, *missing]
