"""The `harness` command. Each subcommand lives in its own module exposing `register(subparsers)`;
register sets `func` on its parser, which takes the parsed args and returns an exit code."""

import argparse
import importlib
import os
import sys

from harness.core.errors import HarnessError
from harness.core.registry import Registry

# One line per command: its name and the module whose register(subparsers) adds it. Order is the order of
# `harness --help`.
COMMANDS = Registry("command", {
    "detect": "harness.cli.detect",
    "parse": "harness.cli.parse",
    "conformance": "harness.cli.conformance",
    "verify": "harness.cli.verify",
    "fetch": "harness.cli.fetch",
    "pin-template": "harness.cli.pin_template",
    "run": "harness.cli.run",
    "report": "harness.cli.report",
    "score": "harness.cli.score",
    "list": "harness.cli.listing",
    "scripted-model": "harness.suites.runtime_conformance.scripted_command",
})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("harness")
    except PackageNotFoundError:       # run from a checkout that was never installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """No prefix matching, here or in any subcommand (add_subparsers makes subparsers of this class): with it
    `run --temp 0` would silently be read as `--template 0`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def command_modules() -> dict:
    """Every command's name and module: the harness's own (COMMANDS), then each folder suite's (harness.suites: a
    suite's folder holds its command, named as the suite; BFCL's records are made by `harness run --suite bfcl`,
    so it adds none)."""
    from harness import suites

    return {**dict(COMMANDS.items()),
            **{name: suite.command for name, suite in suites.registered().items() if suite.command is not None}}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description="Conformance and evaluation harness for the tool-call formats of local language models.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = command_modules()
    for name, module in modules.items():
        importlib.import_module(module).register(sub)
    if list(sub.choices) != list(modules):
        raise HarnessError(f"the commands registered ({', '.join(sub.choices)}) are not the tables' "
                           f"({', '.join(modules)})")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HarnessError as exc:
        print(f"harness {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `harness list | head`: the reader left. Point stdout at /dev/null so the interpreter's final flush
        # does not print a traceback on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
