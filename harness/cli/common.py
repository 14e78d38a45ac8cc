"""What several commands share: their JSON output and the flags they have in common, declared once."""

import argparse
import json
import sys

from harness.evaluation.results import ResultsDir


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def add_results_dir(parser: argparse.ArgumentParser, what: str, *aliases: str) -> None:
    """--results-dir DIR (args.results_dir, a ResultsDir; default the project's results/). `what` says what the
    command reads or writes there."""
    parser.add_argument("--results-dir", *aliases, dest="results_dir", type=ResultsDir.at, default=ResultsDir.at(),
                        metavar="DIR", help=f"{what} (default: results/)")
