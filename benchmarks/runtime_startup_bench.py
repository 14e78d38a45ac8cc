"""Start-up and seconds per request of each runtime the harness starts, side by side in one run: the same pinned
model served by each, asked the same deployment cases (harness.suites.deployment), into a scratch results folder.

Where a runtime's time goes decides how a run over many models or templates should be shaped: a runtime that
takes longer to start than to answer a case wants its model loaded once for many requests (runtime conformance
starts one server per template; the deployment suite one per model). Printed per runtime: the seconds from
start to its first ready answer, the requests asked, the median seconds of one request (non-streamed and
streamed each count one), and start-up as a number of requests. A runtime not built here is a row saying what
builds it.

The runtimes that load no GGUF (vLLM's CPU build, transformers serve) are measured by scripts/deployment_hf.py,
as their deployment rows are made: the model's weights dequantized to HF form once (that folder is cached, so
the seconds its conversion took are printed apart, beside the seconds this run spent checking the cached
folder), then the runtime started on it and asked the same cases; its start-up and request seconds come from
its records.

    python benchmarks/runtime_startup_bench.py [--model smollm2-135m-instruct-q4_1] [--cases 2]
        [--runtime llama-server --runtime vllm-cpu ...]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.backends import runtimes
from harness.core.errors import HarnessError
from harness.storage.results import ResultsDir
from harness.suites.deployment import cases, driver
from harness.suites.runtime_conformance.hf_serving import SERVED

ROOT = Path(__file__).resolve().parents[1]
HF_PORT = 8851      # not deployment_hf.py's default, so a deployment run beside the benchmark keeps its port


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


def measure_hf(runtime: str, model: str, per_category: int, only: set, folder: str) -> dict:
    """One runtime that loads no GGUF, through scripts/deployment_hf.py into the scratch folder, asked the cases
    the others are asked (each named, so no scenario opening is added): its JSON line gives the conversion and
    start-up seconds, its records each request's seconds."""
    command = [sys.executable, str(ROOT / "scripts" / "deployment_hf.py"), "--server", runtime, "--model", model,
               "--cases", str(per_category), *(x for case in sorted(only) for x in ("--case", case)),
               "--results-dir", folder, "--work-dir", str(Path(folder) / "work"), "--port", str(HF_PORT)]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode or not lines:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        return {"runtime": runtime, "error": said}
    row = json.loads(lines[-1])
    if row.get("conversion_error"):
        return {"runtime": runtime, "error": row["conversion_error"]}
    seconds = []
    with open(row["records"], encoding="utf-8") as f:
        for line in f:
            seconds += [s for s in (json.loads(line).get("seconds") or {}).values() if isinstance(s, (int, float))]
    return {"runtime": f"{runtime} (HF)", "startup": row.get("startup_s"), "requests": len(seconds),
            "median": statistics.median(seconds) if seconds else None,
            "conversion": row.get("conversion_s"), "checked": row.get("checked_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct-q4_1")
    parser.add_argument("--cases", type=int, default=1, help="cases per category (7 categories)")
    parser.add_argument("--runtime", action="append", help="default: every runtime the harness starts")
    args = parser.parse_args()
    only = {c.id for c in cases.cases(args.cases)}
    rows = []
    for runtime in args.runtime or (*runtimes.startable(), *SERVED):
        with tempfile.TemporaryDirectory(prefix="harness-startup-bench-") as folder:
            rows.append(measure_hf(runtime, args.model, args.cases, only, folder) if runtime in SERVED
                        else measure(runtime, args.model, only, folder))
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
    for row in rows:
        if row.get("conversion") is not None:
            print(f"{row['runtime']}: the GGUF dequantized to HF form in {row['conversion']:.1f} s when its folder "
                  f"was made (once per model; this run checked the cached folder in {row['checked']:.1f} s)")


if __name__ == "__main__":
    main()
