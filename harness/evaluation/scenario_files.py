"""Scenario files: the scenarios folder (`scenarios/*.yaml`, one scenario per file), the tool library beside it
(`library/tools.yaml`), scenarios asked for by name, and a scenario file given by its path. Each file is parsed
by harness.evaluation.scenarios.parse_scenario."""

import os
from pathlib import Path

from harness.core import constants
from harness.core.errors import ScenarioError
from harness.core.yaml_source import load_located
from harness.evaluation import scenarios
from harness.evaluation.scenarios import LIBRARY_PATH



def load_library(path: Path) -> dict:
    """Declared tools by name, as raw mappings (a scenario may override the stub's result per tool). Only a
    library that is not there at all is empty: one that is there but not a readable file is an error."""
    if not os.path.lexists(path):
        return {}
    doc = load_located(path, ScenarioError)
    c = scenarios._Checker(doc)
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("tools"), list):
        c.fail((), "the tool library needs a 'tools' list")
    library = {}
    for i, raw in enumerate(doc.data["tools"]):
        tool = scenarios._tool(c, raw, ("tools", i), {})
        if tool.name in library:
            c.fail(("tools", i, "name"), f"tool {tool.name!r} is declared twice")
        library[tool.name] = raw
    return library


def load_scenarios(directory: Path | None = None, names=None) -> list:
    """Every scenario in the directory (sorted by name), or the named ones, in the order named. A name that is
    the path of a .yaml file (a scenario kept outside the checkout) is read from there. With names, a broken
    file of another scenario does not stop the named ones: only a file that holds one of them (by its `name`,
    or its file name where the YAML cannot be read) has its error reported."""
    directory = Path(directory or constants.SCENARIOS_DIR)
    library = load_library(directory / LIBRARY_PATH)
    found, broken = {}, []
    for path in sorted(directory.glob("*.yaml")):
        try:
            scenario = scenarios.parse_scenario(load_located(path, ScenarioError), library)
        except ScenarioError as error:
            if not names:
                raise
            broken.append((path, error))
            continue
        if scenario.name in found:
            raise ScenarioError(f"{path}:1: name: {scenario.name!r} is also defined in {found[scenario.name].path}")
        found[scenario.name] = scenario
    if not names:
        return sorted(found.values(), key=lambda s: s.name)
    for path, error in broken:
        if _claimed_name(path) in names:
            raise error
    out = []
    for name in names:
        if _is_path(name):
            out.append(_scenario_file(Path(name).expanduser(), library, found))
        elif name in found:
            out.append(found[name])
        else:
            raise ScenarioError(f"no scenario named {name} in {directory} (known: {', '.join(sorted(found))}; a "
                                "scenario file elsewhere is given by its path, ending in .yaml)")
    return out


def _is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name


def _claimed_name(path: Path) -> str:
    """The name a scenario file that failed to load was meant to have: its `name` field if the YAML reads."""
    try:
        data = load_located(path, ScenarioError).data
    except ScenarioError:
        return path.stem
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else path.stem


def _scenario_file(path: Path, library: dict, shipped: dict) -> object:
    """A scenario given by its path: its tools from the library beside it (library/tools.yaml), else from the
    scenarios folder's. Its name must not be a different shipped scenario's: their samples would share a key."""
    if not os.path.lexists(path):
        raise ScenarioError(f"{path}: no such scenario file")
    own = path.parent / LIBRARY_PATH
    tools = load_library(own) if os.path.lexists(own) else library
    scenario = scenarios.parse_scenario(load_located(path, ScenarioError), tools)
    other = shipped.get(scenario.name)
    if other is not None and other.hash != scenario.hash and other.path.resolve() != path.resolve():
        raise ScenarioError(f"{path}:1: name: {scenario.name!r} is a different scenario in {other.path}; give this "
                            "one a name of its own")
    return scenario


def declared_tools(directory: Path | None = None) -> list:
    directory = Path(directory or constants.SCENARIOS_DIR)
    return list(load_library(directory / LIBRARY_PATH))
