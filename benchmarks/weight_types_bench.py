"""Why one runtime is slow on one model: each model's weights by GGUF type, beside the seconds the runtime takes to
read the same prompt (one deployment case, tool_choice auto, one token generated) and to answer it in full, the
models side by side in one run, one thread each.

A "Q4_K_M" file is not all Q4_K: llama.cpp's k-quants need rows of a multiple of 256 values, so a model whose
rows are not (Qwen2.5-0.5B's 896) keeps most of its weights as Q5_0 or Q8_0. A runtime reads each type with a kernel
of its own, and one without a vectorised kernel for a type is slow on exactly the models that hold it, whatever
their size: the table shows the share of each type and the tokens read a second, so a reader sees whether a
larger model is the faster one. Which kernel the time goes to is the profiler's to say (`perf record -p PID` on
the server while it reads a prompt).

    python benchmarks/weight_types_bench.py [--runtime mistralrs] [--model ID ...] [--threads 1] [--case ID]
"""

import argparse
import json
import time
from collections import Counter

import gguf

from harness.backends import runtimes
from harness.backends.servers import LocalServer
from harness.backends.transport import request_json
from harness.core.errors import HarnessError
from harness.pins.sources import model_path
from harness.suites.deployment import cases

MODELS = ("qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m", "smollm2-135m-instruct-q4_1")
TIMEOUT = 1800.0


def weight_types(path) -> dict:
    """GGUF type name -> share of the model's weights (by values; F32 norms and biases count too)."""
    counts = Counter()
    for tensor in gguf.GGUFReader(str(path)).tensors:
        counts[tensor.tensor_type.name] += int(tensor.n_elements)
    total = sum(counts.values())
    return {name: n / total for name, n in counts.most_common()}


def ask(server: LocalServer, body: dict, max_tokens: int) -> tuple:
    """(seconds, prompt tokens, completion tokens) of one non-streamed answer."""
    started = time.monotonic()
    answer = request_json(server.base_url + "/v1/chat/completions",
                          {**body, "model": server.model, "max_tokens": max_tokens, "stream": False}, TIMEOUT)
    usage = answer.get("usage") or {}
    return time.monotonic() - started, usage.get("prompt_tokens"), usage.get("completion_tokens")


def measure(runtime: str, model: str, body: dict, threads: int) -> dict:
    try:
        path = model_path(model)
    except HarnessError as exc:
        return {"model": model, "error": str(exc)}
    if not path.is_file():
        return {"model": model, "error": f"not fetched: harness fetch --models {model}"}
    row = {"model": model, "types": weight_types(path)}
    with LocalServer(runtime, path, alias=model, threads=threads, ready_timeout=600) as server:
        row["read"], row["prompt"], _ = ask(server, body, 1)
        row["answer"], _, row["completion"] = ask(server, body, 400)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="mistralrs", choices=runtimes.startable())
    parser.add_argument("--model", action="append", help=f"default: {', '.join(MODELS)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--case", default=None, help="a drawn deployment case (default: the first drawn)")
    args = parser.parse_args()
    runtimes.get(args.runtime).check_startable()
    drawn = cases.cases(1)
    case = next((c for c in drawn if c.id == args.case), None) if args.case else drawn[0]
    if case is None:
        raise SystemExit(f"--case {args.case}: not among {', '.join(c.id for c in drawn)}")
    body = cases.body(case, "auto")
    rows = []
    for model in args.model or MODELS:
        rows.append(measure(args.runtime, model, body, args.threads))
        print(f"measured {model}", flush=True)
    print(f"\n{args.runtime}, {args.threads} thread(s), case {case.id}, tool_choice auto, non-streamed")
    print(f"{'model':<36} {'prompt':>6} {'read s':>7} {'tokens/s':>8} {'answer s':>8} {'tokens':>6}  weights by type")
    fastest = None
    for row in rows:
        if "error" in row:
            print(f"{row['model']:<36} not measured: {row['error']}")
            continue
        rate = row["prompt"] / row["read"] if row["prompt"] and row["read"] else float("nan")
        fastest = max(fastest or rate, rate)
        types = ", ".join(f"{name} {share:.0%}" for name, share in row["types"].items() if share >= 0.005)
        print(f"{row['model']:<36} {row['prompt']:>6} {row['read']:>7.1f} {rate:>8.1f} {row['answer']:>8.1f} "
              f"{row['completion']:>6}  {types}")
        row["rate"] = rate
    for row in rows:
        if "rate" in row and fastest and row["rate"] < fastest:
            print(f"{row['model']}: {fastest / row['rate']:.2f}x the seconds a prompt token of the fastest reader")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
