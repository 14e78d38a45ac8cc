"""The `harness` command. Each subcommand lives in its own module exposing `register(subparsers)`;
register sets `func` on its parser, which takes the parsed args and returns an exit code."""

import argparse
import importlib
import json
import sys

from harness.errors import HarnessError

# Order is the order of `harness --help`.
COMMAND_MODULES = [
    "harness.commands_core",
    "harness.commands_pins",
    "harness.commands_run",
    "harness.commands_report",
]


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Conformance and evaluation harness for the tool-call formats of local language models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
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
