"""The BFCL checker worker: BFCL's own AST checker, unmodified, judging calls it is handed.

Runs under the BFCL environment's python (scripts/setup_bfcl.sh: bfcl-eval installed from the pinned wheel with
--no-deps, and filelock, the one package the modules below import), so it imports nothing from harness.

One module is substituted: bfcl_eval.constants.model_config imports every model handler BFCL has (and with them
its ~30 declared dependencies), and the checker reads it for one thing, MODEL_CONFIG_MAPPING[model].underscore_to_dot
(whether a model's function names had their dots replaced by underscores). A stub module of that name holding
MODEL_CONFIG_MAPPING = {"harness": <underscore_to_dot=False>} is put in sys.modules before the checker is imported:
the calls judged here carry the names as the model wrote them, and the tools were offered with BFCL's names as
they are, dots included. Every other module is BFCL's as installed; `hello` answers their SHA-256.

One JSON request per line on stdin, one answer per line on stdout, in order:
  {"op": "hello"} -> {"python", "bfcl_eval", "files": {relative path: sha256}, "stubbed": {module: what}}
  {"op": "judge", "category", "functions", "calls": [{name: {param: value}}], "answer"}
      -> {"valid": bool, "error_type", "errors"}: for irrelevance and relevance categories BFCL's rule from its
         runner (a call is there unless utils.is_empty_output says the decoded output is empty); for the others
         the runner's format check, then ast_checker.ast_checker(functions, calls, answer, Language.PYTHON,
         category, "harness").
A request that fails answers {"error": "Type: message"}.
"""

from __future__ import annotations

import hashlib
import os
import sys
import types

STUBBED = "bfcl_eval.constants.model_config"
MODEL_NAME = "harness"      # the checker looks up MODEL_CONFIG_MAPPING[model_name.replace("_", "/")]
FILES = ("eval_checker/ast_eval/ast_checker.py", "utils.py", "constants/type_mappings.py", "constants/enums.py")


class _NoDots:
    underscore_to_dot = False


def _install_stub() -> None:
    stub = types.ModuleType(STUBBED)
    stub.__doc__ = "Stands in for BFCL's model registry: the one flag its AST checker reads."
    stub.MODEL_CONFIG_MAPPING = {MODEL_NAME: _NoDots()}
    sys.modules[STUBBED] = stub


def main() -> None:
    from lines import serve     # beside this file: run by path, its folder is first on sys.path

    _install_stub()
    serve(handle)


def handle(request: dict) -> dict:
    op = request.get("op")
    if op == "hello":
        return hello()
    if op == "judge":
        return judge(request["category"], request["functions"], request["calls"], request.get("answer"))
    raise ValueError(f"unknown op {op!r}")


def hello() -> dict:
    import importlib.metadata

    import bfcl_eval

    root = os.path.dirname(bfcl_eval.__file__)
    files = {}
    for name in FILES:
        with open(os.path.join(root, name), "rb") as handle:
            files[name] = hashlib.sha256(handle.read()).hexdigest()
    return {"python": sys.version.split()[0], "bfcl_eval": importlib.metadata.version("bfcl-eval"),
            "files": files, "stubbed": {STUBBED: f"MODEL_CONFIG_MAPPING = {{{MODEL_NAME!r}: underscore_to_dot=False}}"}}


def judge(category: str, functions: list, calls: list, answer) -> dict:
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output, is_relevance_or_irrelevance

    if is_relevance_or_irrelevance(category):
        # BFCL's relevance runner: a decoded output holds a call unless it is empty; irrelevance wants none.
        called = not is_empty_output(calls)
        valid = not called if "irrelevance" in category else called
        kind = "irrelevance_error:decoder_success" if "irrelevance" in category else "relevance_error:decoder_failed"
        return {"valid": valid, "error_type": None if valid else kind, "errors": []}
    if not is_function_calling_format_output(calls):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format", "errors": []}
    result = ast_checker(functions, calls, answer, Language.PYTHON, category, MODEL_NAME)
    return {"valid": bool(result["valid"]), "error_type": None if result["valid"] else result.get("error_type"),
            "errors": result.get("error", [])}


if __name__ == "__main__":
    main()
