"""Round trip: a parsed call rendered back through its template as the assistant's message gives the rendered
text again, or the conformance report lists where the two fork."""

import dataclasses

import pytest

from harness.pins.sources import list_templates, resolve_template
from harness.reports.conformance import markdown
from harness.template.conformance import check_template
from harness.template.detect import detect
from harness.template.round_trip import fork, round_trip

# The rendered reply region starts at <|CHATBOT_TOKEN|> (the generation prompt ends differently from the
# history), and the parser keeps that token as content: rendered back, the content repeats it.
FORKS = {"CohereForAI-c4ai-command-r-plus-tool_use": 17}


def _trip(template_id, found=None):
    ref = resolve_template(template_id)
    found = found or detect(ref.text, ref.bos_token or "", ref.eos_token or "")
    return round_trip(ref.text, found, ref.bos_token or "", ref.eos_token or ""), found


@pytest.mark.parametrize("template_id", [pin.id for pin in list_templates()])
def test_every_detected_template_round_trips_or_is_a_known_fork(template_id):
    trip, found = _trip(template_id)
    if found.status != "detected":
        assert trip is None
    elif template_id in FORKS:
        assert not trip["same"] and trip["fork"]["offset"] == FORKS[template_id]
    else:
        assert trip == {"same": True, "fork": None, "error": None}


def test_a_rendered_call_the_template_would_not_write_again_forks_where_it_differs():
    _, found = _trip("Qwen-Qwen2.5-7B-Instruct")
    # The same call with other spacing: the parser reads it, the template writes its own spacing back.
    respaced = found.rendered_call.replace('"location": "Paris"', '"location":  "Paris"')
    trip, _ = _trip("Qwen-Qwen2.5-7B-Instruct", dataclasses.replace(found, rendered_call=respaced))
    at = respaced.index('  "Paris"') + 1
    assert not trip["same"] and trip["fork"]["offset"] == at
    assert '"location":  "Paris"' in trip["fork"]["rendered"] and '"location": "Paris"' in trip["fork"]["round_trip"]


def test_fork_names_the_first_difference_and_a_prefix():
    assert fork("abcdef", "abcxef")["offset"] == 3
    assert fork("abc", "abcd") == {"offset": 3, "rendered": "abc", "round_trip": "abcd"}
    long = "x" * 100
    assert fork(long + "a" + long, long + "b" + long)["rendered"] == "x" * 30 + "a" + "x" * 29


def test_the_conformance_report_lists_the_forks():
    rows = [check_template(resolve_template(t)) for t in (*FORKS, "Qwen-Qwen2.5-7B-Instruct", "LFM2-8B-A1B")]
    assert [r["round_trips"] for r in rows] == [False, True, None]
    report = {"harness_version": "test", "templates": rows, "families": [],
              "matrix": {"families": [], "counts": {}, "violations": [], "cells": []},
              "summary": {"templates": 3, "detected": 2, "declared": 1, "walls": 0, "no_tools": 0,
                          "full_conversation_failures": 0, "round_trip_failures": 1, "families": 0,
                          "matrix_cases": 0, "matrix_violations": 0}}
    md = markdown(report)
    section = md.split("## Round trip forks")[1].split("##")[0]
    assert "CohereForAI-c4ai-command-r-plus-tool_use" in section and "Qwen-Qwen2.5" not in section
    assert "gives other text: 1 template(s)" in md
