"""BFCL subset cost, in one run:

1. tokens/s of the harness's generation path (the embedded backend's complete(), the call `harness run --suite
   bfcl` makes) against a bare llama-cpp-python token loop (Llama.generate + detokenize), on the same BFCL
   prompts (the drawn cases rendered through the model's own template with their tools, as the runner renders
   them), greedy so both write the same tokens. Goal: ours / bare >= 0.9.
2. How long the recorded BFCL samples in a results folder took, per model × mode (sum of each sample's seconds,
   the cases, seconds a case) — what a workstation plans for.

    python benchmarks/bfcl_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--cases 2] [--tokens 64]
                                    [--results-dir results]
"""

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from harness.suites.bfcl.cases import draw, load_suite
from harness.live.opening import open_model
from harness.live.tool_loop import first_prompt

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_irrelevance"]


def bare_loop(llm, prompt: str, max_tokens: int) -> tuple:
    """(tokens after the first, seconds from the first token on) of the binding's own loop, greedy: the rate
    the harness's Generation.tokens_per_second states for its own path."""
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    first, count = None, 0
    for token in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        if first is None:
            first = time.perf_counter()
        if llm.token_eos() == token or count >= max_tokens:
            break
        llm.detokenize([token], special=True)
        count += 1
    return max(count - 1, 0), time.perf_counter() - (first or time.perf_counter())


def ours(chat, prompt: str, max_tokens: int) -> tuple:
    chat.backend.forget()
    sampling = dict(max_tokens=max_tokens, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
    g = chat.complete(prompt, sampling, seed=1)
    return max(g.completion_tokens - 1, 0), g.timings.generation_seconds


def speed(args) -> None:
    model = open_model(args.model, threads=args.threads)
    cases = draw(load_suite(CATEGORIES), CATEGORIES, args.cases, 0)
    print(f"model {args.model}, {len(cases)} BFCL cases ({args.cases} a category), {args.threads} thread(s), "
          f"at most {args.tokens} tokens a reply")
    bare, mine = [], []
    for case in cases:
        prompt = first_prompt(model.chat, case.scenario)
        # Interleaved, so machine load hits both alike; a case's rate is tokens over generation seconds.
        n, s = bare_loop(model.chat.backend.llm, prompt, args.tokens)
        if n and s > 0:
            bare.append(n / s)
        n, s = ours(model.chat, prompt, args.tokens)
        if n and s > 0:
            mine.append(n / s)
    b, m = statistics.median(bare), statistics.median(mine)
    print(f"bare llama-cpp-python loop : {b:7.2f} tokens/s (median over {len(bare)} prompts)")
    print(f"harness complete()         : {m:7.2f} tokens/s (median over {len(mine)} prompts)   ours/bare = "
          f"{m / b:.2f}  (goal >= 0.9)")


def recorded(results_dir: Path) -> None:
    files = sorted((results_dir / "bfcl").glob("*.jsonl"))
    if not files:
        print(f"no BFCL records in {results_dir / 'bfcl'}")
        return
    took = defaultdict(list)
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn tail: report leaves it out too
            if record.get("kind") == "sample" and record.get("seconds") is not None:
                took[record["model"]["id"], record["mode"]].append(record["seconds"])
    print(f"\nrecorded BFCL samples in {results_dir}/bfcl (wall seconds as run; models ran side by side, one thread"
          " each):")
    print(f"{'model':40} {'mode':9} {'cases':>5} {'minutes':>8} {'s a case':>8}")
    for (model, mode), seconds in sorted(took.items()):
        print(f"{model:40} {mode:9} {len(seconds):5d} {sum(seconds) / 60:8.1f} {sum(seconds) / len(seconds):8.1f}")


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--cases", type=int, default=2, help="cases drawn per category for the speed part")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    parser.add_argument("--skip-speed", action="store_true", help="only the recorded times")
    args = parser.parse_args()
    if not args.skip_speed:
        speed(args)
    recorded(args.results_dir)


if __name__ == "__main__":
    main()
