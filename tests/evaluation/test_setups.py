"""A sample's setup (mode and grammar as recorded) decides whether it still counts: one written under another
grammar or the older fallback rule is run again by `harness run`, the new record supersedes the old one in the
transcript (a kill before the old line is removed leaves both, and every reader counts the later), and reports
count only samples of today's setup."""

import json

from harness.storage.records import ModelRecord, ModelRef, SampleRecord, ScenarioRef
from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scored import score_transcripts
from harness.storage.transcripts import read_transcript
from harness.storage.transcript_writer import TranscriptWriter
from harness.grammar.plan import grammar_plan
from harness.live.pending import pending, setups_for

SCENARIO = """\
name: s
description: d
tools:
  - name: ping
    description: Check the relay.
    parameters: {type: object, properties: {}}
    returns: pong
conversation:
  turns:
    - user: Ping.
      expect: {tool: ping}
"""
TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}<tool_call>"
REPLY = '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'


def _scenario(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "s.yaml").write_text(SCENARIO)
    return load_scenarios(tmp_path / "scenarios")[0]


def _sample(sc, index, mode, grammar, reply=REPLY):
    return SampleRecord(ModelRef("m", "f" * 64), ScenarioRef(sc.name, sc.hash), index, index, mode, "hermes",
                        grammar=grammar, turns=[{"user": "Ping.", "steps": [{"reply": reply, "prompt_tail": ""}]}])


def _model():
    return ModelRecord(ModelRef("m", "f" * 64), {"source": "gguf", "sha256": "0" * 64, "text": TEMPLATE},
                       family="hermes")


def _adopt_design():
    """tools/adopt_design.py, loaded as a module (tools/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("adopt_design", "tools/adopt_design.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_a_sample_of_another_setup_is_pending_and_its_new_record_supersedes_the_old(tmp_path):
    sc = _scenario(tmp_path)
    today = grammar_plan("hermes", sc, TEMPLATE).to_json("fallback")
    older = {k: v for k, v in today.items() if k != "retry_on"}      # the fallback rule before it was recorded
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(_model())
        writer.append(_sample(sc, 0, "fallback", older, "old reply"))
        writer.append(_sample(sc, 1, "fallback", today))
    done = read_transcript(path).done_setups()
    work = pending("m", "f" * 64, [sc], 2, 0, done, ["fallback"], None, setups_for("hermes", TEMPLATE))
    assert [todo for _, _, todo in work] == [[0]]          # sample 1 is today's; sample 0 runs again
    # The report leaves the older sample out as stale until it is run again.
    scored = score_transcripts([path], {sc.name: sc})
    assert [r.sample for r, _, _ in scored.samples] == [1] and [r.sample for r in scored.stale] == [0]
    with TranscriptWriter(path) as writer:
        writer.append(_sample(sc, 0, "fallback", today, "new reply"))
        # Killed here: both lines are in the file, and every reader counts the later one.
        scored = score_transcripts([path], {sc.name: sc})
        assert sorted(r.sample for r, _, _ in scored.samples) == [0, 1] and not scored.stale
        assert writer.drop_superseded() == 1
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    replies = [r["turns"][0]["steps"][0]["reply"] for r in lines if r["kind"] == "sample"]
    assert replies == [REPLY, "new reply"] and lines[0]["kind"] == "model"


def test_a_malformed_line_is_kept_when_superseded_records_are_dropped(tmp_path):
    sc = _scenario(tmp_path)
    today = grammar_plan("hermes", sc, TEMPLATE).to_json("grammar")
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(_sample(sc, 0, "grammar", {**today, "gbnf_sha256": "0" * 64}))
    with path.open("a") as f:
        f.write("{not a record}\n")
    with TranscriptWriter(path) as writer:
        writer.append(_sample(sc, 0, "grammar", today))
        assert writer.drop_superseded() == 1
    assert path.read_text().splitlines()[0] == "{not a record}"


def test_a_sample_of_todays_setup_is_not_asked_again_nor_dropped(tmp_path):
    sc = _scenario(tmp_path)
    today = grammar_plan("hermes", sc, TEMPLATE).to_json("grammar")
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(_model())
        writer.append(_sample(sc, 0, "grammar", today))
        writer.append(_sample(sc, 0, "grammar", today))     # asked twice under one setup (a retried failure)
        assert writer.drop_superseded() == 0
    done = read_transcript(path).done_setups()
    assert pending("m", "f" * 64, [sc], 1, 0, done, ["grammar"], None, setups_for("hermes", TEMPLATE))[0][2] == []


def test_a_folder_counts_only_its_own_designs_samples(tmp_path):
    """A results folder holds one grammar design: the default, or a study's own (designs/<variant>/). The same
    no-brace sample counts in its study's folder and is left out of a plain one (a run there asks it again
    under the default), so one mode's row never mixes two designs."""
    from harness.grammar.plan import DEFAULT_VARIANT, folder_variant

    sc = _scenario(tmp_path)
    no_brace = grammar_plan("hermes", sc, TEMPLATE, variant="no-brace").to_json("grammar")
    default = grammar_plan("hermes", sc, TEMPLATE).to_json("grammar")
    counted = {}
    for folder in ("plain", "designs/no-brace"):
        path = tmp_path / folder / "transcripts" / "m.jsonl"
        path.parent.mkdir(parents=True)
        with TranscriptWriter(path) as writer:
            writer.append(_model())
            writer.append(_sample(sc, 0, "grammar", no_brace))
            writer.append(_sample(sc, 1, "grammar", default))
        scored = score_transcripts([path], {sc.name: sc})
        counted[folder] = ([r.sample for r, _, _ in scored.samples], [r.sample for r in scored.stale])
    assert counted == {"plain": ([1], [0]), "designs/no-brace": ([0], [1])}
    assert folder_variant(tmp_path / "plain") == DEFAULT_VARIANT
    assert folder_variant(tmp_path / "designs" / "no-brace" / "bfcl") == "no-brace"
    assert folder_variant(tmp_path / "designs" / "not-a-design") == DEFAULT_VARIANT


def test_a_studys_samples_are_adopted_into_the_main_folder_superseding_the_older_designs(tmp_path):
    """tools/adopt_design.py: once a study's design is the default, its samples join the main folder's transcript
    and the older design's records of the same samples are dropped; a sample of another setup is refused."""

    import pytest

    from harness.storage.results import ResultsDir

    tool = _adopt_design()
    sc = _scenario(tmp_path)
    main = ResultsDir(tmp_path / "results")
    study = ResultsDir(main.designs / "json-or-text")
    older = grammar_plan("hermes", sc, TEMPLATE, variant="refusal-list").to_json("grammar")
    newer = grammar_plan("hermes", sc, TEMPLATE, variant="json-or-text").to_json("grammar")
    for folder, grammar, reply in ((main, older, REPLY), (study, newer, '{"name": "ping", "arguments": {}}')):
        with TranscriptWriter(folder.transcript("m")) as writer:
            writer.append(_model())
            writer.append(_sample(sc, 0, "native", None, REPLY))
            writer.append(_sample(sc, 0, "grammar", grammar, reply))
    with TranscriptWriter(main.transcript("m")) as writer:
        writer.append(_sample(sc, 0, "fallback",
                              grammar_plan("hermes", sc, TEMPLATE, variant="refusal-list").to_json("fallback")))
    # The old default's grammar and fallback samples are kept in its own study folder first (once), for the
    # designs page and for the replies a person judged; native samples stay the main folder's alone.
    assert tool.keep(main, "refusal-list") == {main.designs / "refusal-list" / "transcripts" / "m.jsonl": 2}
    assert tool.keep(main, "refusal-list") == {}
    kept = read_transcript(main.designs / "refusal-list" / "transcripts" / "m.jsonl").records
    assert [r.mode for r in kept if isinstance(r, SampleRecord)] == ["grammar", "fallback"]
    done = tool.adopt(main, "json-or-text", lambda record: sc)
    assert done == {main.transcript("m"): (1, 1)}      # the grammar sample; native samples stay the main folder's
    assert tool.adopt(main, "json-or-text", lambda record: sc) == {}     # adopted once
    records = [r for r in read_transcript(main.transcript("m")).records if isinstance(r, SampleRecord)]
    assert [(r.mode, r.grammar.get("variant") if r.grammar else None) for r in records] == [
        ("native", None), ("fallback", None), ("grammar", "json-or-text")]   # the study ran no fallback sample
    # A study sample of an older setup is not today's json-or-text sample: refused, nothing written.
    with TranscriptWriter(study.transcript("m")) as writer:
        writer.append(_sample(sc, 1, "grammar", {**newer, "gbnf_sha256": "0" * 64}))
    before = main.transcript("m").read_bytes()
    with pytest.raises(SystemExit, match="not a current json-or-text sample"):
        tool.adopt(main, "json-or-text", lambda record: sc)
    assert main.transcript("m").read_bytes() == before


def test_a_studys_samples_are_carried_to_a_design_only_where_its_prompt_and_grammar_are_the_same(tmp_path):
    """tools/adopt_design.py --carry-from: envelope-or-text-told and -told-once differ only in whether a template
    that carries the tools is given them. For a model whose template has no tool format the two send the same
    prompt and grammar, so told's samples are carried (marked with the design and setup they were written under)
    and count in told-once's folder; a hermes model's are not (told-once's prompt differs), nor a stale one."""
    import dataclasses

    from harness.storage.results import ResultsDir

    tool = _adopt_design()
    sc = _scenario(tmp_path)
    main = ResultsDir(tmp_path / "results")
    source = ResultsDir(main.designs / "envelope-or-text-told")
    plain = "{% for m in messages %}{{ m.content }}{% endfor %}"
    bare = ModelRecord(ModelRef("b", "e" * 64), {"source": "gguf", "sha256": "1" * 64, "text": plain}, family=None)
    told = {family: grammar_plan(family, sc, text, variant="envelope-or-text-told")
            for family, text in ((None, plain), ("hermes", TEMPLATE))}
    call = '{"name": "ping", "arguments": {}}'
    with TranscriptWriter(source.transcript("b")) as writer:
        writer.append(bare)
        for index, mode in enumerate(("grammar", "fallback")):
            record = dataclasses.replace(_sample(sc, index, mode, told[None].to_json(mode), call),
                                         model=bare.model, family=None)
            if mode == "fallback":     # the tools-less native attempt wrote the call as bare JSON: retried
                record.turns[0]["steps"][0]["fallback_from"] = {"reply": call, "prompt_tail": "", "family": None}
            writer.append(record)
        stale = {**told[None].to_json("grammar"), "gbnf_sha256": "0" * 64}
        writer.append(dataclasses.replace(_sample(sc, 2, "grammar", stale, call), model=bare.model, family=None))
    with TranscriptWriter(source.transcript("m")) as writer:
        writer.append(_model())
        writer.append(_sample(sc, 0, "grammar", told["hermes"].to_json("grammar"), call))
    once = main.designs / "envelope-or-text-told-once" / "transcripts"
    done = tool.carry(main, "envelope-or-text-told", "envelope-or-text-told-once", lambda record: sc)
    assert done == {once / "b.jsonl": (2, 1)}
    assert not (once / "m.jsonl").exists()
    assert tool.carry(main, "envelope-or-text-told", "envelope-or-text-told-once", lambda record: sc) == {
        once / "b.jsonl": (0, 1)}                         # carried once
    carried = [r for r in read_transcript(once / "b.jsonl").records if isinstance(r, SampleRecord)]
    assert [(r.mode, r.grammar["variant"], r.carried["from"]) for r in carried] == [
        ("grammar", "envelope-or-text-told-once", "envelope-or-text-told"),
        ("fallback", "envelope-or-text-told-once", "envelope-or-text-told")]
    assert carried[0].carried["setup"] != carried[0].setup()
    # In told-once's folder they are today's told-once samples: counted, not stale.
    scored = score_transcripts([once / "b.jsonl"], {sc.name: sc})
    assert sorted(r.sample for r, _, _ in scored.samples) == [0, 1] and not scored.stale


def test_a_fallback_sample_whose_retry_todays_rule_would_not_make_runs_again_and_supersedes(tmp_path):
    """The grammar stayed, the rule reading a call attempt changed: a native reply that copied the tool's
    definition back was rewritten as if it were a call. Today's rule lets it stand, so the sample (whose later
    steps followed the rewrite) is stale: left out of the report, run again, its old record dropped."""
    from harness.live.pending import RETRIES_CHANGED, stale_retries

    sc = _scenario(tmp_path)
    today = grammar_plan("hermes", sc, TEMPLATE).to_json("fallback")
    definition = '{"name": "ping", "description": "Check the relay.", "parameters": {"type": "object"}}'
    near_miss = '{"name": "ping", "arguments": {}}'

    def retried(index, native):
        record = _sample(sc, index, "fallback", today)
        record.turns[0]["steps"][0]["fallback_from"] = {"reply": native, "prompt_tail": "", "family": "hermes"}
        return record

    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(_model())
        writer.append(retried(0, definition))
        writer.append(retried(1, near_miss))
    transcript = read_transcript(path)
    rerun = stale_retries(transcript, [sc])
    assert [key[5] for key in rerun] == [0]
    done = {**transcript.done_setups(), **dict.fromkeys(rerun, RETRIES_CHANGED)}
    work = pending("m", "f" * 64, [sc], 2, 0, done, ["fallback"], None, setups_for("hermes", TEMPLATE))
    assert [todo for _, _, todo in work] == [[0]]
    scored = score_transcripts([path], {sc.name: sc})
    assert [r.sample for r, _, _ in scored.samples] == [1] and [r.sample for r in scored.stale] == [0]
    with TranscriptWriter(path) as writer:
        writer.append(_sample(sc, 0, "fallback", today, definition))     # run again: the definition stands
        assert writer.drop_superseded() == 0            # the same setup: only the run's own rerun set drops it
        assert writer.drop_superseded(rerun) == 1
    replies = [r.turns[0]["steps"][0]["reply"] for r in read_transcript(path).records if isinstance(r, SampleRecord)]
    assert replies == [REPLY, definition]
    assert not stale_retries(read_transcript(path), [sc])
