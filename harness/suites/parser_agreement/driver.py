"""The parser-agreement suite: which replies each peer parser is given, through which vocabulary, and the records.

A family is compared with a project where its `peers:` names that project's parser (the family's YAML or
module; a template's own where `peers.templates` gives one, Family.peer). Its cases: the canonical outputs and near misses the rejection matrix uses (read without a prompt,
fed through the vocabulary of a template of the family), then each pinned template's runtime-conformance corpus
(its own prompt and tools, its scripted-model vocabulary), then the replies real models wrote in
results/transcripts/ (transcript_cases).
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from dataclasses import dataclass, field

from harness import families as registry
from harness.scripted.plan import DEFAULT_PROFILE, profile_for
from harness.suites.runtime_conformance.corpus import TOOLS, build_corpus
from harness.evaluation.scenario_files import load_scenarios
from harness.storage.transcripts import read_transcript
from harness.storage.transcript_writer import TranscriptWriter, encode_line
from harness.formats.canonical import canonical_outputs
from harness.formats.reasoning import DEFAULT_PAIRS
from harness.suites.parser_agreement import SUITE, peer_vocabulary
from harness.suites.parser_agreement.judging import PROJECTS, classify, fed_text, unmapped
from harness.suites.parser_agreement.records import ParserAgreementRecord

# Special-token spellings: <|…|>, DeepSeek's <｜…｜>, Mistral's [UPPER_CASE]. A vocabulary of another family spells
# them as text, and a peer parser that looks its markers up as tokens would fail on our vocabulary, not on its own.
_SPECIAL = re.compile(r"<\|[^|<>\s]+\|>|<｜[^｜\s]+｜>|\[/?[A-Z_]{3,}\]")
_TAG = re.compile(r"</?[A-Za-z_][\w:.-]*>")
TRANSCRIPT = "transcript:"
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"))


@dataclass
class Case:
    family: str
    source: str          # "canonical", "near-miss", "sglang-event", a template id (its corpus), or "transcript:<model>"
    name: str
    reply: str
    expect: dict         # the strict parse
    tools: list
    profile: str         # the scripted-model vocabulary it is tokenized with
    added: tuple = ()    # the family's special tokens, added to that vocabulary where it lacks them
    tokenizer_config: dict = field(default_factory=dict)  # the real model's tokenizer_config.json entries a peer reads (peers:)
    template_id: str | None = None  # a transcript's: the template the model was prompted with

    @property
    def template(self) -> str | None:
        if self.source.startswith(TRANSCRIPT):
            return self.template_id
        return None if self.source in ("canonical", "near-miss", peer_vocabulary.SOURCE) else self.source


def _tool_for(call) -> dict:
    props = {k: {"type": next(t for cls, t in _JSON_TYPES if isinstance(v, cls))} for k, v in call.arguments.items()
             if v is not None}
    return {"type": "function", "function": {"name": call.name, "description": call.name,
                                             "parameters": {"type": "object", "properties": props}}}


def _family_tools(family) -> list:
    """The corpus tools, plus one per canonical call name they lack (typed from its arguments): a peer that drops a
    call to a function it was not given (SGLang does) must be given every function the replies call."""
    tools = list(TOOLS)
    names = {t["function"]["name"] for t in tools}
    for _, calls, _ in canonical_outputs(family):
        for call in calls:
            if call.name not in names:
                names.add(call.name)
                tools.append(_tool_for(call))
    return tools


def peered() -> list:
    """The names of the families some template of which a project compared here reads."""
    return [name for name, family in registry.families().items() if family.peer_projects() & set(PROJECTS)]


def parser_for(case: Case, project: str) -> str | None:
    """The parser `project` reads the case with: its template's, or the family-wide one (Family.peer)."""
    return registry.get(case.family).peer(project, case.template)


def transcript_cases(paths, wanted) -> list:
    """Every distinct reply a real model wrote (each step of each sample of the transcripts at `paths`) whose
    parsing family is in `wanted`, in file and step order. Its expectation is what scoring reads: the strict parse
    with the prompt the step recorded (harness.evaluation.scoring.parse_steps); its tools, the scenario's as the
    model was offered them. A reply recorded again (the same family, text and strict parse) is one case. A
    synthesized answer (the loop's text) and a step that wrote nothing are not replies; a sample of a scenario no
    longer defined has no tools to give and is left out."""
    scenarios = {s.name: s for s in load_scenarios()}
    out, seen = [], set()
    for path in paths:
        transcript = read_transcript(path)
        models = transcript.models()
        for record in transcript.samples():
            scenario = scenarios.get(record.scenario.name)
            model = models.get(record.model.sha256)
            if scenario is None or model is None:
                continue
            template = (record.template or {}).get("id") or model.template.get("pinned_id")
            for t, turn in enumerate(record.turns):
                for n, step in enumerate(turn.get("steps") or []):
                    family = step.get("family", record.family)
                    reply = step.get("reply")
                    if step.get("synthesized") or not reply or family not in wanted:
                        continue
                    expect = registry.parse(family, reply, step.get("prompt_tail", "")).to_json()
                    key = (family, reply, repr(expect))
                    if key in seen:
                        continue
                    seen.add(key)
                    name = f"{scenario.name}/{record.mode}/sample {record.sample}/step {t + 1}.{n + 1}"
                    out.append(Case(family, TRANSCRIPT + record.model.id, name, reply, expect, scenario.tool_schemas(),
                                    profile_for(model.template["text"]), template_id=template))
    return out


def build_cases(templates, only_families=None, transcripts=()) -> tuple:
    """(cases, unmapped) for the mapped families; templates: (ResolvedTemplate) to build corpora from;
    transcripts: transcript files whose replies join the corpus (transcript_cases);
    unmapped: (family, why) of the families no compared project reads."""
    mapped = peered()
    wanted = [f for f in mapped if not only_families or f in only_families]
    corpora = [(ref, build_corpus(ref)) for ref in templates]
    corpora = [(ref, c) for ref, c in corpora if c.family in wanted]
    out = []
    for name in wanted:
        family = registry.get(name)
        own = [ref for ref, c in corpora if c.family == name]
        profile = profile_for(own[0].text) if own else DEFAULT_PROFILE
        tools = _family_tools(family)
        for label, _, text in canonical_outputs(family):
            out.append(Case(name, "canonical", label, text, registry.parse(name, text, "").to_json(), tools, profile))
        seen: dict = {}
        for miss in family.near_misses:
            # Named by deviation, numbered from the second of a name: a case's name is its key (records, --case).
            seen[miss.deviation] = seen.get(miss.deviation, 0) + 1
            label = miss.deviation + (f" #{seen[miss.deviation]}" if seen[miss.deviation] > 1 else "")
            out.append(Case(name, "near-miss", label, miss.text, registry.parse(name, miss.text, "").to_json(),
                            tools, profile))
        # The replies SGLang's named tolerances describe (peer_vocabulary.py), with their tools.
        for event, witness in peer_vocabulary.witnesses():
            if witness.family == name:
                out.append(Case(name, peer_vocabulary.SOURCE, event.name, witness.reply,
                                registry.parse(name, witness.reply, "").to_json(), peer_vocabulary.TOOLS, profile))
        for ref, corpus in corpora:
            if corpus.family == name:
                out += [Case(name, ref.id, c.name, c.reply, c.expect, c.tools, profile_for(ref.text))
                        for c in corpus.cases]
    out += transcript_cases(transcripts, wanted)
    for name in wanted:
        family = registry.get(name)
        mine = [c for c in out if c.family == name]
        found = {m.strip() for m in family.markers if m.strip()}
        # A model's stray text (a token it spelt inside a reply) does not make the family's vocabulary.
        for c in mine:
            if not c.source.startswith(TRANSCRIPT) and c.source != peer_vocabulary.SOURCE:
                found.update(_SPECIAL.findall(c.reply))
        # The family's own tags (<tool_call>, <arg_key>, <tool_sep:opensource>): from the canonical calls whose
        # arguments hold no tag-like text, so a value such as "<b>" is not taken for a token.
        for c in mine:
            if c.source == "canonical" and c.name != "quoted unicode":
                found.update(_TAG.findall(c.reply))
        for c in mine:
            c.added = tuple(sorted(found))
            c.tokenizer_config = dict(family.peers.get("tokenizer_config") or {})
    return out, unmapped()


def fed_for(case: Case) -> str:
    """The text a peer's parser is given for the case (judging.fed_text)."""
    pairs = getattr(registry.get(case.family).parser, "reasoning", None) or DEFAULT_PAIRS
    return fed_text(case.reply, case.expect, pairs)


def run_case(peers, case: Case, project: str, parser: str, version: str, splits: int,
             seed: int) -> ParserAgreementRecord:
    family = registry.get(case.family)
    fed = fed_for(case)
    answers = peers.parse(project, parser, case.profile, fed, case.tools, splits, seed, case.added,
                          case.tokenizer_config)
    marker = family.markers[0] if family.markers else None
    labels, details = classify(case.expect, answers, case.tools, marker)
    streams = 0 if answers.get("error") else 2 + len(answers.get("random") or [])
    return ParserAgreementRecord(project=project, version=version, parser=parser, family=case.family,
                                 source=case.source, case=case.name, reply=case.reply, labels=labels,
                                 details=details, streams=streams, splits=splits, seed=seed, fed=fed,
                                 profile=case.profile, expect=case.expect, tokens=answers.get("tokens"),
                                 one_shot=answers.get("one_shot"))


def run_suite(peers, cases: list, projects: list, versions: dict, results, splits: int, seed: int,
              log=lambda record: None) -> tuple:
    """A whole run into results/parser-agreement/PROJECT.jsonl: each record appended as it lands, a case already
    read by the same parser, version and split plan, with the strict parse it was judged against unchanged, taken
    from the file instead (a killed run resumes). At the
    end each file is rewritten with this corpus's records alone, in corpus order, so it holds what this corpus
    and mapping make and nothing stale. Returns (records, how many were resumed)."""
    done: dict = {}
    records, resumed = {p: [] for p in projects}, 0
    with ExitStack() as stack:
        # Every file locked first, then read: a second run on the folder is refused at once (naming the run that
        # holds it) instead of reading the same done set and asking the same cases beside this one.
        writers = {p: stack.enter_context(TranscriptWriter(results.parser_agreement_records(p), wait=False))
                   for p in projects}
        for project in projects:
            found, _ = SUITE.read_records(results.parser_agreement_records(project))
            done.update((r.done_key(), r) for r in found)
        for case in cases:
            for project in projects:
                parser = parser_for(case, project)
                if parser is None:
                    continue
                key = (project, case.family, case.source, case.name, parser, versions[project], case.reply, splits,
                       seed)
                record = done.get(key)
                # The labels hold our strict reading too: a case our parser now reads otherwise, or whose text
                # for the peer is now cut otherwise, is asked again.
                if record is None or record.expect != case.expect or record.fed != fed_for(case):
                    record = run_case(peers, case, project, parser, versions[project], splits, seed)
                    writers[project].append(record)
                    log(record)
                else:
                    resumed += 1
                records[project].append(record)
        # Rewritten while the locks are held, so no other run appends to a file this one then replaces.
        for project, mine in records.items():
            path = results.parser_agreement_records(project)
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_bytes(b"".join(encode_line(r.to_json()) for r in mine))
            tmp.replace(path)
    return [r for mine in records.values() for r in mine], resumed
