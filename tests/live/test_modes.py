"""Modes without a model: --mode values, the scenario field, the grammar plan, and the calls-as-text conversation a
template without a tool format is given."""

import pytest

from harness.core.errors import HarnessError, ScenarioError
from harness.grammar import GENERIC
from harness.live.modes import (
    CALL_OR_ANSWER_PREAMBLE, TOOL_PREAMBLE, calls_as_text_messages, grammar_plan, parse_modes, tool_preamble,
)
from harness.template.render import render
from harness.evaluation.scenario_files import load_scenarios
from harness.core.constants import TEMPLATES_DIR

SCENARIO = """\
name: s
description: d
{modes}tools:
  - name: ping
    description: Check the relay.
    parameters: {{type: object, properties: {{}}}}
    returns: pong
conversation:
  turns:
    - user: Ping.
      expect: {{tool: ping}}
"""


def load(tmp_path, modes=""):
    (tmp_path / "s.yaml").write_text(SCENARIO.format(modes=modes))
    return load_scenarios(tmp_path)[0]


def test_mode_values_are_repeatable_comma_lists():
    assert parse_modes(["grammar,fallback", "native", "grammar"]) == ["grammar", "fallback", "native"]
    assert parse_modes(None) == []
    with pytest.raises(HarnessError, match="unknown mode 'json'"):
        parse_modes(["native,json"])


def test_a_scenario_names_its_default_modes_outside_its_hash(tmp_path):
    plain = load(tmp_path)
    both = load(tmp_path, "modes: [native, grammar]\n")
    assert plain.modes is None and both.modes == ("native", "grammar") and plain.hash == both.hash
    with pytest.raises(ScenarioError, match="modes"):
        load(tmp_path, "modes: [native, json]\n")


def test_modes_come_from_the_command_else_the_scenario_else_the_model_else_native(tmp_path):
    from harness.live.pending import modes_for, pending, planned_count

    plain, named = load(tmp_path), load(tmp_path, "modes: [grammar]\n")
    every = ("native", "grammar", "fallback")
    assert modes_for(plain) == ("native",)
    assert modes_for(plain, every) == every
    assert modes_for(named, every) == ("grammar",)
    assert modes_for(named, every, ["fallback"]) == ("fallback",)
    assert planned_count([plain, named], 2, every) == 2 * 3 + 2 * 1
    work = pending("m", "0" * 64, [plain], 2, 0, set(), model_modes=every)
    # Run in the order that reuses the most prompt: fallback's first attempt reads native's, grammar its retry's.
    assert [(mode, todo) for _, mode, todo in work] == [(m, [0, 1]) for m in ("native", "fallback", "grammar")]
    work = pending("m", "0" * 64, [plain, named], 1, 0, set(), modes=["grammar", "native"])
    assert [(s.name, mode) for s, mode, _ in work] == [(plain.name, "native"), (plain.name, "grammar"),
                                                       (named.name, "native"), (named.name, "grammar")]


def test_the_default_models_name_every_mode_and_bad_model_modes_are_refused(tmp_path):
    import json

    from harness.core import constants
    from harness.core.errors import SourcesError
    from harness.pins.sources import load_sources

    sources = load_sources()
    assert all(m.modes == ("native", "grammar", "fallback") for m in sources.default_models())
    raw = json.loads(constants.SOURCES_PATH.read_text())
    raw["models"][0]["modes"] = ["native", "json"]
    (tmp_path / "sources.json").write_text(json.dumps(raw))
    with pytest.raises(SourcesError, match=r"model '[^']+': field 'modes' must be .*'json'"):
        load_sources(tmp_path / "sources.json")


def test_a_model_without_tool_format_gets_the_generic_grammar_and_the_preamble(tmp_path):
    sc = load(tmp_path)
    plan = grammar_plan(None, sc, variant="envelope")
    # Call or answer from the first token on (no marker to wait for); fallback's retry may only call.
    assert plan.family == GENERIC and not plan.spec.lazy and plan.required.tool_choice == "required"
    assert plan.preamble == tool_preamble(sc, CALL_OR_ANSWER_PREAMBLE) and '"name": "ping"' in plan.preamble
    assert '{"response": "<your answer>"}' in plan.preamble_for(required=False)
    assert plan.preamble_for(required=True) == tool_preamble(sc) and "response" not in plan.required_preamble
    assert plan.required_preamble.startswith(TOOL_PREAMBLE.split("{")[0])
    # The chosen design: the same call, or plain text, told as fallback's retry is told.
    chosen = grammar_plan(None, sc, variant="json-or-text-own")
    assert chosen.family == GENERIC and chosen.preamble == tool_preamble(sc) == chosen.required_preamble
    hermes = grammar_plan("hermes", sc, variant="json-or-text-own")
    assert hermes.preamble is hermes.required_preamble is None  # the template carries the tools
    # The default "auto" grammar holds from the first token (a fenced or tagged call is refused at once, the bare
    # one is the call); the plan records what an answer may not open with.
    assert not hermes.spec.lazy and "{" in hermes.to_json()["openings"] and "<tool_call>" in hermes.spec.openings
    family = grammar_plan("hermes", sc, variant="refusal-list")
    assert family.family == "hermes" and not family.spec.lazy and "<tool_call>" in family.spec.openings


def test_calls_as_text_messages_alternate_for_gemma_and_keep_every_word():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ping."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call00001", "type": "function", "function": {"name": "ping", "arguments": {}}}]},
                {"role": "tool", "tool_call_id": "call00001", "name": "ping", "content": "pong"},
                {"role": "user", "content": "Again?"}]
    out = calls_as_text_messages(messages, "TOOLS", into_user=True)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[0]["content"] == "TOOLS\n\nBe brief.\n\nPing."
    assert out[1]["content"] == '{"name": "ping", "arguments": {}}'
    assert out[2]["content"] == "Result of ping: pong\n\nAgain?"
    gemma = (TEMPLATES_DIR / "google-gemma-2-2b-it.jinja").read_text()
    text = render(gemma, out, add_generation_prompt=True, bos_token="<bos>")
    assert "TOOLS" in text and "Result of ping: pong" in text
    assert calls_as_text_messages(messages, "TOOLS")[0] == {"role": "system", "content": "TOOLS\n\nBe brief."}


@pytest.mark.needs_binding
def test_batched_samples_refuse_a_grammar_spec_clearly(tmp_path):
    from harness.core.errors import GenerationError
    from harness.backends.embedded.generate import generate_samples

    spec = grammar_plan(None, load(tmp_path)).spec
    with pytest.raises(GenerationError, match="one by one"):
        generate_samples(object(), "prompt", 2, seeds=[1, 2], max_tokens=8, grammar=spec)


def test_a_grammar_that_cannot_be_built_is_recorded_per_sample_and_not_asked_again(tmp_path, monkeypatch):
    """A tool set our grammar cannot express is a finding recorded per sample (its reason in the error and the
    grammar block), and the record's setup is the one a later run plans for that case: it is not asked again."""
    from types import SimpleNamespace

    from harness.grammar import GrammarError
    from harness.live import pending, runner

    sc = load(tmp_path)

    def refuse(*args, **kwargs):
        raise GrammarError("tool 'x': parameters must be a JSON schema object")

    monkeypatch.setattr(pending, "planned_setup", refuse)
    backend = SimpleNamespace(describe=lambda: {"backend": "embedded", "threads": 1})
    chat = SimpleNamespace(family="hermes", template="{{ x }}", template_kwargs={}, backend=backend)
    model = SimpleNamespace(id="m", sha256="f" * 64, chat=chat, template_id=None, template_source="gguf")
    record = runner._unbuildable(model, sc, 0, 7, "grammar", GrammarError("tool 'x': parameters must be a JSON "
                                                                           "schema object"))
    assert record.error == "grammar: tool 'x': parameters must be a JSON schema object" and record.turns == []
    assert record.grammar == {"error": "tool 'x': parameters must be a JSON schema object"}
    assert pending.setups_for("hermes", "{{ x }}")(sc, "grammar") == record.setup()


def test_lazy_trigger_plan_keeps_the_familys_tools_or_tells_a_template_without_them(tmp_path):
    """lazy-trigger: a family keeps its template's tools (no preamble) and its own call as fallback's required
    retry; a model without a family is told the tools and that a call is the JSON object alone, as fallback's
    retry is ("answer in plain text otherwise"): its reply is free text until that object opens it."""
    from harness.grammar.plan import setup_digest

    sc = load(tmp_path)
    hermes = grammar_plan("hermes", sc, variant="lazy-trigger")
    assert hermes.family == "hermes" and hermes.spec.lazy and hermes.preamble is hermes.required_preamble is None
    assert hermes.required.tool_choice == "required" and hermes.required.family == "hermes"
    plain = grammar_plan(None, sc, variant="lazy-trigger")
    assert plain.family == GENERIC and plain.spec.lazy and plain.preamble == tool_preamble(sc) == plain.required_preamble
    assert "Otherwise answer in plain text." in plain.preamble and "response" not in plain.preamble
    # The setup says which design wrote a sample, and its trigger patterns (they decide replies as the GBNF does);
    # the other designs' setups keep no such field, so their recorded digests stand.
    recorded = hermes.to_json("grammar")
    assert recorded["variant"] == "lazy-trigger" and recorded["lazy"] and "```json" in recorded["held_triggers"]
    assert "trigger_patterns_sha256" in recorded
    default = grammar_plan("hermes", sc)
    assert "held_triggers" not in default.to_json("grammar") and "trigger_patterns_sha256" not in default.to_json()
    digests = {setup_digest("grammar", grammar_plan("hermes", sc, variant=v).to_json("grammar"))
               for v in ("refusal-list", "no-brace", "envelope", "json-or-text", "json-or-text-own",
                         "envelope-or-text", "envelope-or-text-told", "envelope-or-text-own",
                         "envelope-or-text-told-once", "lazy-trigger")}
    assert len(digests) == 10
    # json-or-text holds every model to the bare JSON call, told in the preamble, whatever its template's format.
    bare = grammar_plan("hermes", sc, variant="json-or-text")
    assert bare.family == "generic-json" and bare.spec.openings[:3] == ("{", "[", "```")
    assert "Otherwise answer in plain text." in bare.preamble and "<tool_call>" in bare.spec.openings
    # json-or-text-own: the same grammar under the model's own prompt where its template carries the tools (no
    # preamble, for the call or its held retry); a template without a tool format is told as json-or-text tells it.
    own = grammar_plan("hermes", sc, variant="json-or-text-own")
    assert own.spec.gbnf == bare.spec.gbnf and own.preamble is None and own.required_preamble is None
    assert own.required.gbnf == bare.required.gbnf and own.family == "generic-json"
    untold = grammar_plan(None, sc, variant="json-or-text-own")
    assert untold.preamble == grammar_plan(None, sc, variant="json-or-text").preamble
    # envelope-or-text-own: the same prompts, a grammar that also takes the answer object (and text with no brace).
    both = grammar_plan("hermes", sc, variant="envelope-or-text-own")
    assert both.preamble is None and both.required.gbnf == own.required.gbnf and both.spec.gbnf != own.spec.gbnf
    assert both.spec.answer_excludes == ("{",) and both.family == "generic-json"
    assert grammar_plan(None, sc, variant="envelope-or-text-own").preamble == untold.preamble
    told = grammar_plan("hermes", sc, variant="envelope-or-text")
    assert told.spec.gbnf == both.spec.gbnf and told.preamble == bare.preamble
    # envelope-or-text-told: the same grammar, both answers it allows told.
    either = grammar_plan("hermes", sc, variant="envelope-or-text-told")
    assert either.spec.gbnf == both.spec.gbnf and "in plain text or as a JSON object" in either.preamble
    assert '{"response": "<your answer>"}' in either.preamble and either.required_preamble == bare.required_preamble


@pytest.mark.parametrize("argv,folder,said", [
    # The design is taken (a study's folder holds its own design, named or not); the model is not.
    (["--grammar-variant", "lazy-trigger"], "designs/lazy-trigger", "no model 'no-such-model'"),
    ([], "designs/lazy-trigger", "no model 'no-such-model'"),
    (["--grammar-variant", "lazy"], ".", "unknown grammar variant 'lazy' (variants: refusal-list, no-brace, "
                                         "native-example, envelope, json-or-text, json-or-text-own, "
                                         "envelope-or-text, envelope-or-text-told, envelope-or-text-own, "
                                         "envelope-or-text-told-once, lazy-trigger)"),
    # A folder holds one design: another one's samples go to a study folder of their own.
    (["--grammar-variant", "no-brace"], ".", "a design study's samples go to a folder of their own: "
                                             "--results-dir "),
    (["--grammar-variant", "no-brace"], "designs/envelope", "holds envelope"),
])
def test_run_takes_a_design_in_its_folder_and_refuses_an_unknown_or_misplaced_one(argv, folder, said, tmp_path,
                                                                                   capsys):
    from harness.cli import main

    assert main(["run", *argv, "--model", "no-such-model", "--results-dir", str(tmp_path / folder)]) == 2
    assert said in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before anything is written
