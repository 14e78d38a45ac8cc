"""BFCL's own checker in its own environment, on hand-made calls: what it says is what BFCL's checker says.

The environment is built by scripts/setup_bfcl.sh on first use (the pinned wheel, by hash, from the registry),
as the archives are fetched on first use; the protocol tests need none of it."""

import json
import subprocess
import sys

import pytest

from harness.suites.bfcl.cases import ARCHIVE_ID, load_suite
from harness.suites.bfcl.lenient_reading import lenient_calls
from harness.core.errors import BFCLCheckerError
from harness.peers.bfcl import WORKER, BFCLChecker, bfcl_python
from harness.pins.archives import archive_tree
from tests.requirements import bfcl_checker_python



@pytest.fixture(scope="module")
def checker():
    bfcl_checker_python()
    with BFCLChecker(tree=archive_tree(ARCHIVE_ID)) as running:
        yield running


@pytest.fixture(scope="module")
def suite():
    return load_suite(["simple_python", "parallel", "irrelevance", "live_relevance"])


def test_the_checker_is_the_pinned_wheels_with_one_module_stubbed(checker):
    assert checker.hello["bfcl_eval"] == "2026.3.23"
    assert set(checker.hello["stubbed"]) == {"bfcl_eval.constants.model_config"}


def test_a_right_call_passes_and_a_wrong_argument_fails(checker, suite):
    case = suite.cases["simple_python_0"]     # calculate_triangle_area(base=10, height=5, unit optional)
    right = checker.judge(case.category, case.functions, [{"calculate_triangle_area": {"base": 10, "height": 5}}],
                          case.answer)
    assert right == {"valid": True, "error_type": None, "errors": []}
    wrong = checker.judge(case.category, case.functions, [{"calculate_triangle_area": {"base": 10, "height": 6}}],
                          case.answer)
    assert not wrong["valid"] and wrong["error_type"] == "value_error:others"
    typed = checker.judge(case.category, case.functions, [{"calculate_triangle_area": {"base": "10", "height": 5}}],
                          case.answer)
    assert typed["error_type"] == "type_error:simple"
    assert checker.judge(case.category, case.functions, [], case.answer)["error_type"] == \
        "simple_function_checker:wrong_count"


def test_parallel_calls_match_in_any_order(checker, suite):
    case = suite.cases["parallel_0"]
    calls = [{name: {k: v[0] for k, v in args.items()}} for a in case.answer for name, args in a.items()]
    assert checker.judge(case.category, case.functions, calls[::-1], case.answer)["valid"]
    assert not checker.judge(case.category, case.functions, calls[:1], case.answer)["valid"]


def test_irrelevance_by_bfcls_rule_counts_no_decodable_call_as_abstention(checker, suite):
    case = suite.cases["irrelevance_0"]
    assert checker.judge(case.category, case.functions, [], None)["valid"]
    assert not checker.judge(case.category, case.functions, [{"f": {"x": 1}}], None)["valid"]
    relevance = suite.cases["live_relevance_0-0-0"]
    assert not checker.judge(relevance.category, relevance.functions, [], None)["valid"]


def test_a_lenient_reading_of_a_fenced_near_miss_is_what_bfcl_then_judges(checker, suite):
    case = suite.cases["simple_python_0"]
    reply = '```json\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n```'
    calls = [{name: args} for name, args in lenient_calls("fenced-json", reply)]
    assert checker.judge(case.category, case.functions, calls, case.answer)["valid"]
    assert lenient_calls("invalid-json", reply) is None     # no lenient reading for that deviation
    assert lenient_calls("double-braces", '{{"name": "f", "arguments": {{"a": 1}}}}') == [("f", {"a": 1})]
    assert lenient_calls("python-literals", "{'name': 'f', 'arguments': {'ok': True}}") == [("f", {"ok": True})]
    assert lenient_calls("stringified-arguments", '{"name": "f", "arguments": "{\\"a\\": 2}"}') == [("f", {"a": 2})]


def test_the_worker_answers_each_line_in_order_and_survives_a_bad_one():
    lines = ['{"op": "nope", "id": 1}', "not json", '{"op": "judge", "id": 3}']
    done = subprocess.run([sys.executable, str(WORKER)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, None, 3]
    assert "unknown op 'nope'" in answers[0]["error"] and answers[1]["error"].startswith("JSONDecodeError")
    assert answers[2]["error"].startswith("KeyError")


def test_an_environment_without_bfcl_is_refused_with_the_command_that_builds_it(monkeypatch):
    with pytest.raises(BFCLCheckerError, match="does not import.*setup_bfcl.sh"):
        BFCLChecker(sys.executable)
    monkeypatch.setattr("harness.peers.bfcl.bfcl_python", lambda venv=None: None)
    with pytest.raises(BFCLCheckerError, match="not built: bash scripts/setup_bfcl.sh"):
        BFCLChecker()


def test_a_checker_whose_bytes_differ_from_the_pin_is_refused(checker, tmp_path):
    tree = tmp_path / "tree"
    target = tree / "eval_checker" / "ast_eval" / "ast_checker.py"
    target.parent.mkdir(parents=True)
    for name in checker.hello["files"]:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes((archive_tree(ARCHIVE_ID) / name).read_bytes())
    target.write_bytes(target.read_bytes() + b"\n# changed\n")
    with pytest.raises(BFCLCheckerError, match="ast_checker.py .* is not the pinned wheel's"):
        BFCLChecker(bfcl_python(), tree=tree)
