"""Start-up and seconds per request of each runtime the harness starts, side by side in one run: the same pinned
model served by each, asked the same deployment cases (harness.suites.deployment), into a scratch results folder.

Where a runtime's time goes decides how a run over many models or templates should be shaped: a runtime that
takes longer to start than to answer a case wants its model loaded once for many requests (runtime conformance
starts one server per template; the deployment suite one per model). Printed per runtime: the seconds from
start to its first ready answer, the requests asked, the median seconds of one request (non-streamed and
streamed each count one), and start-up as a number of requests. A runtime not built here is a row saying what
builds it.

    python benchmarks/runtime_startup_bench.py [--model smollm2-135m-instruct-q4_1] [--cases 2]
        [--runtime llama-server --runtime llama-server-next ...]
"""

import argparse
import statistics
import tempfile

from harness.backends import runtimes
from harness.core.errors import HarnessError
from harness.storage.results import ResultsDir
from harness.suites.deployment import cases, driver


def measure(runtime: str, model: str, only: set, folder) -> dict:
    try:
        runtimes.get(runtime).check_startable()
    except HarnessError as exc:
        return {"runtime": runtime, "error": str(exc)}
    try:
        out = driver.run(model, ResultsDir.at(folder), server=runtime, only=only, log=lambda record: None)
    except HarnessError as exc:
        return {"runtime": runtime, "error": str(exc)}
    seconds = [s for r in out.written for s in (r.seconds or {}).values()]
    return {"runtime": runtime, "startup": out.startup, "requests": len(seconds),
            "median": statistics.median(seconds) if seconds else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct-q4_1")
    parser.add_argument("--cases", type=int, default=1, help="cases per category (7 categories)")
    parser.add_argument("--runtime", action="append", help="default: every runtime the harness starts")
    args = parser.parse_args()
    only = {c.id for c in cases.cases(args.cases)}
    rows = []
    for runtime in args.runtime or runtimes.startable():
        with tempfile.TemporaryDirectory(prefix="harness-startup-bench-") as folder:
            rows.append(measure(runtime, args.model, only, folder))
            print(f"measured {runtime}", flush=True)
    print(f"\n{args.model}, {len(only)} cases ({args.cases} per category), each asked non-streamed and streamed")
    print(f"{'runtime':<22} {'start-up s':>10} {'requests':>8} {'median s/request':>17} {'start-up in requests':>21}")
    for row in rows:
        if "error" in row:
            print(f"{row['runtime']:<22} not measured: {row['error']}")
            continue
        if row["startup"] is None or row["median"] is None:
            print(f"{row['runtime']:<22} refused the model at start (its words are in the records' errors)")
            continue
        ratio = row["startup"] / row["median"] if row["median"] else float("nan")
        print(f"{row['runtime']:<22} {row['startup']:>10.1f} {row['requests']:>8} {row['median']:>17.2f} "
              f"{ratio:>21.1f}")


if __name__ == "__main__":
    main()
