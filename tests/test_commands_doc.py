"""docs/commands.md is generated from the argparse definitions by tools/commands_doc.py and must stay what that
writes, so the command reference cannot drift from the commands."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("commands_doc", ROOT / "tools" / "commands_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_commands_doc_is_what_the_tool_writes():
    tool = _tool()
    committed = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert committed == tool.generated(), "docs/commands.md is out of date: run python tools/commands_doc.py"


def test_every_command_and_option_is_in_it():
    tool = _tool()
    text = tool.generated()
    for name, _, sub in tool.subcommands(tool.build_parser()):
        assert f"## harness {name}\n" in text
        for action in sub._actions:
            if action.dest == "help":
                continue
            for option in action.option_strings:
                assert f"`{option}" in text or f", {option}" in text, (name, option)
    assert str(ROOT) not in text      # no machine path in a tracked file
