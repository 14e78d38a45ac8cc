"""The `harness` command. Each subcommand lives in its own module exposing `register(subparsers)`;
register sets `func` on its parser, which takes the parsed args and returns an exit code."""

import argparse
import importlib
import os
import sys

from harness.core.errors import HarnessError

# Order is the order of `harness --help`.
COMMAND_MODULES = [
    "harness.cli.detect",
    "harness.cli.parse",
    "harness.cli.conformance",
    "harness.cli.verify",
    "harness.cli.fetch",
    "harness.cli.pin_template",
    "harness.cli.run",
    "harness.cli.report",
    "harness.cli.score",
    "harness.cli.listing",
    "harness.cli.runtime_check",
    "harness.cli.runtime_conformance",
    "harness.cli.scripted",
    "harness.cli.parser_agreement",
]


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


def command_modules() -> list:
    """Every command's module: the harness's own, then each registered suite's (harness.suites: a suite's
    folder holds its command)."""
    from harness import suites

    return COMMAND_MODULES + [suite.command for suite in suites.registered().values()]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description="Conformance and evaluation harness for the tool-call formats of local language models.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        importlib.import_module(name).register(sub)
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
