"""Requests in flight against llama-server --parallel 4, side by side in one run: the same N completions sent
one at a time and four at a time through the OpenAI backend, each scenario's opening prompt rendered with the
model's template, greedy, a fixed reply length. Prints wall time, completion tokens per second and the ratio
of 4 in flight to 1. The server is started here (harness.backends.servers; build it first with
scripts/build_llama_server.sh) and decodes its 4 slots in one batch, so the ratio measures what batching buys
on this machine.

    python benchmarks/inflight_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--requests 8] [--tokens 48]
                                        [--threads 2] [--repeat 3]
"""

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from harness.backends.openai import Endpoint, OpenAIBackend
from harness.evaluation.scenario_files import load_scenarios
from harness.backends.servers import LocalServer
from harness.live.opening import template_chat
from harness.pins.sources import load_sources, model_path
from harness.live.tool_loop import first_prompt

PARALLEL = 4


def prompts(model_id: str, count: int) -> list:
    pin = load_sources().model(model_id)
    chat, _, _ = template_chat(pin.template or pin.stand_in_template)
    opening = [first_prompt(chat, s) for s in load_scenarios()]
    return [(chat, opening[i % len(opening)]) for i in range(count)]


def run(backend, work, tokens: int, in_flight: int) -> tuple:
    sampling = {"max_tokens": tokens, "temperature": 0.0, "top_k": 1}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        done = list(pool.map(lambda item: backend.complete(item[1], sampling, seed=1, bos_token=item[0].bos_token), work))
    return time.monotonic() - started, sum(g.completion_tokens for g in done)


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads (default 2: both cores)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting, interleaved; medians")
    args = parser.parse_args()
    work = prompts(args.model, args.requests)
    with LocalServer("llama-server", model_path(args.model), parallel=PARALLEL, threads=args.threads) as server:
        results = {1: [], PARALLEL: []}
        for _ in range(args.repeat):
            for in_flight in results:
                backend = OpenAIBackend([Endpoint(server.base_url, server.model)], in_flight=in_flight)
                results[in_flight].append(run(backend, work, args.tokens, in_flight))
    print(f"{args.model}, llama-server --parallel {PARALLEL} --threads {args.threads}, {args.requests} requests × "
          f"{args.tokens} tokens, greedy, medians of {args.repeat}")
    base = statistics.median(t for t, _ in results[1])
    for in_flight, runs in results.items():
        seconds = statistics.median(t for t, _ in runs)
        rate = statistics.median(n / t for t, n in runs)
        print(f"  {in_flight} in flight: {seconds:6.1f} s  {rate:6.1f} tokens/s  ×{base / seconds:.2f} vs 1 in flight")


if __name__ == "__main__":
    main()
