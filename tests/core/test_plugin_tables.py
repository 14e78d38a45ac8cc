"""harness.core.registry: the one plug-in table every kind uses (backends, runtimes, suites, commands)."""

import pytest

from harness.backends import BACKENDS
from harness.backends import runtimes
from harness.cli import COMMANDS, build_parser
from harness.core.errors import HarnessError
from harness.core.registry import Registry
from harness.suites import SUITES


def test_an_entry_is_imported_only_when_asked_for_and_once():
    table = Registry("thing", {"path": "pathlib:PurePosixPath", "json": "json"})
    assert list(table) == ["path", "json"] and len(table) == 2 and "json" in table and "yaml" not in table
    assert table["path"] == "pathlib:PurePosixPath" and table._loaded == {}
    import json
    import pathlib
    assert table.get("path") is pathlib.PurePosixPath and table.get("json") is json
    assert table.get("path") is table.get("path") and table.every() == [pathlib.PurePosixPath, json]


def test_an_unknown_name_is_refused_with_the_known_ones():
    table = Registry("widget", {"a": "json", "b": "pathlib:Path"})
    with pytest.raises(HarnessError, match=r"^unknown widget 'c'; known: a, b$"):
        table.get("c")
    with pytest.raises(HarnessError, match=r"^unknown widget 'c'"):
        table["c"]


def test_an_entry_pointing_at_nothing_names_the_entry_and_where_it_pointed():
    table = Registry("widget", {"gone": "json:no_such_thing", "nomodule": "harness.no_such_module:X"})
    with pytest.raises(HarnessError, match=r"widget 'gone' is registered as json:no_such_thing, but json has no "
                                           r"no_such_thing"):
        table.get("gone")
    with pytest.raises(ModuleNotFoundError):
        table.get("nomodule")


@pytest.mark.parametrize("where", ["", ":X", "a:b:c", "json:"])
def test_a_malformed_entry_is_refused_when_the_table_is_made(where):
    with pytest.raises(ValueError, match="is not 'module:object' or 'module'"):
        Registry("widget", {"w": where})


@pytest.mark.parametrize("table", [BACKENDS, runtimes.RUNTIMES, SUITES, COMMANDS],
                         ids=lambda t: t.kind)
def test_every_entry_of_every_table_loads(table):
    assert isinstance(table, Registry) and len(table) >= 1
    for name in table:
        assert table.get(name) is not None, name


def test_harness_help_lists_the_commands_table_then_each_folder_suites_command_in_order():
    from harness import suites
    from harness.cli import command_modules
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    # A suite without a command of its own (BFCL: `harness run --suite bfcl`) adds none.
    own = [name for name in suites.SUITES if suites.SUITES.get(name).command is not None]
    assert "bfcl" in suites.SUITES and "bfcl" not in own
    assert list(commands) == list(command_modules()) == [*COMMANDS, *own]
