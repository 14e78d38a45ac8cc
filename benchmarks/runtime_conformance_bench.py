"""The whole runtime-conformance suite, timed: `harness runtime-conformance` over every pinned template on
llama-server and on llama-cpp-python's server, the two runs side by side (one process each, each server on one
thread: the 2 cores of this machine), into a scratch results folder. Prints each runtime's wall time, the CPU
time of its run and the servers it started, requests and label counts, and the wall time of both together.
Build llama-server first (scripts/build_llama_server.sh).

    python benchmarks/runtime_conformance_bench.py [--template ID ...] [--results-dir DIR]
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNTIMES = {"llama-server": "llama-server-0.3.36-vendored", "llama-cpp-python": "llama-cpp-python-0.3.36"}


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", action="append", default=[], metavar="ID")
    parser.add_argument("--results-dir", type=Path, metavar="DIR", help="default: a temporary folder")
    args = parser.parse_args()
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="runtime-conformance-bench-"))
    started, runs = time.monotonic(), {}
    for server in RUNTIMES:
        command = [sys.executable, "-m", "harness", "runtime-conformance", "--server", server,
                   "--results-dir", str(results), *sum((["--template", t] for t in args.template), [])]
        out = tempfile.TemporaryFile(mode="w+")
        runs[server] = (time.monotonic(), out, subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL))
    elapsed, cpu = {}, {}
    for server, (began, out, process) in runs.items():
        # wait4's usage covers the run and the servers it started and reaped.
        _, status, usage = os.wait4(process.pid, 0)
        elapsed[server], cpu[server] = time.monotonic() - began, usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) != 0:
            out.seek(0)
            print(f"{server}: exit {os.waitstatus_to_exitcode(status)}\n{out.read()}", file=sys.stderr)
            return 1
    total = time.monotonic() - started
    print(f"{'runtime':<18} {'seconds':>8} {'cpu s':>8} {'requests':>9}  labels")
    for server, runtime in RUNTIMES.items():
        path = results / "runtime-conformance" / f"{runtime}.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
        labels = collections.Counter(label.split(":")[0] for r in records for label in r["labels"])
        print(f"{server:<18} {elapsed[server]:8.1f} {cpu[server]:8.1f} {len(records):9d}  {dict(sorted(labels.items()))}")
    print(f"both, side by side: {total:.1f} s ({total / 60:.1f} min); records in {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
