"""What several commands share (the command line's own, harness.cli, and each suite's, harness.suites): their JSON
output and the flags they have in common, declared once. It sits on the suites' floor so that a suite's command
reads it without importing upward."""

import argparse
import json
import shlex
import sys

from harness.storage.results import ResultsDir


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def add_results_dir(parser: argparse.ArgumentParser, what: str, *aliases: str) -> None:
    """--results-dir DIR (args.results_dir, a ResultsDir; default the project's results/). `what` says what the
    command reads or writes there."""
    parser.add_argument("--results-dir", *aliases, dest="results_dir", type=ResultsDir.at, default=ResultsDir.at(),
                        metavar="DIR", help=f"{what} (default: results/)")

def report_hint(results_dir: ResultsDir) -> str:
    """The command that turns what a run recorded into tables: into the folder the run wrote."""
    folder = "" if results_dir.is_project else f" --results-dir {shlex.quote(str(results_dir.root))}"
    return f"next: harness report{folder}"


# Exit codes scripts rely on (docs/commands.md): 0 clean, 1 a finding (a deviation, a wall, a drifted
# file), 2 any usage or input error (from harness.cli.main).
EXIT_OK, EXIT_FINDING = 0, 1


def log(message: str) -> None:
    """Progress for a person, on stderr, so stdout stays the command's answer."""
    print(message, file=sys.stderr, flush=True)


def detect_ref(ref, **kwargs):
    """The family of a resolved template (harness.pins.sources.ResolvedTemplate), with its special tokens; a
    pin's declared family where detection finds none."""
    from harness.template.detect import detect_declared

    return detect_declared(ref.text, ref.bos_token or "", ref.eos_token or "", **kwargs)


PROBE_SECONDS = 30.0     # a server that cannot say it is there within this will not serve a run


def check_endpoints(endpoints, timeout: float) -> None:
    """Each server answers HTTP before any sample is asked of it: a dead or mistyped endpoint is a usage error
    now, not a run of failed samples."""
    from harness.backends.transport import probe
    from harness.core.errors import HarnessError

    for endpoint in endpoints:
        why = probe(endpoint.route("/models"), min(timeout, PROBE_SECONDS))
        if why:
            raise HarnessError(f"--endpoint {endpoint.url}: the server does not answer ({why}); start it or fix "
                               "the URL")


def check_runtime_name(name: str) -> str:
    """A --runtime name names a records file: one plain id (harness.pins.entries.ID_PATTERN, no newline)."""
    from harness.core.errors import HarnessError
    from harness.pins.entries import ID_PATTERN

    if not ID_PATTERN.fullmatch(name):
        raise HarnessError(f"--runtime {name!r}: a name of letters, digits, '.', '_' or '-' (it names a file)")
    return name
