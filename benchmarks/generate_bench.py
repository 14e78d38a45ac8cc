"""Generation cost, side by side in one run, on a real model and one rendered prompt:

1. tokens/s through harness.backends.embedded.generate.generate() against a bare llama-cpp-python token loop
   (Llama.generate + detokenize), greedy so both write the same tokens;
2. N samples of one prompt through generate_samples() (prompt read once, N sequences decoded in one batch)
   against N separate generate() calls, each starting cold (prompt cache dropped) and warm (the binding
   reuses the evaluated prompt).

    python benchmarks/generate_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--samples 8] [--tokens 64]
"""

import argparse
import statistics
import time

from harness.backends.embedded.generate import generate, generate_samples, load_model
from harness.template.probe import probe_tools
from harness.template.render import render
from harness.pins.sources import load_sources, model_path, resolve_template

QUESTION = "Show me chunks 0 through 2 of the indexed file imprint/chat.py, and explain what a chunk is."


def bare_loop(llm, prompt, max_tokens):
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    first = None
    count = 0
    text = b""
    for token in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        if first is None:
            first = time.perf_counter()
        if llm.token_eos() == token or count >= max_tokens:
            break
        text += llm.detokenize([token], special=True)
        count += 1
    return count, time.perf_counter() - first


def ours(llm, prompt, max_tokens):
    llm.reset()
    g = generate(llm, prompt, max_tokens=max_tokens, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0,
                 repeat_penalty=1.0, seed=1)
    return g.completion_tokens, g.timings.generation_seconds


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin = load_sources().model(args.model)
    llm = load_model(model_path(args.model), n_threads=args.threads, n_ctx=4096)
    ref = resolve_template(pin.template)
    prompt = render(ref.text, [{"role": "user", "content": QUESTION}], tools=probe_tools(),
                    add_generation_prompt=True, bos_token=ref.bos_token or "", eos_token=ref.eos_token or "")
    n_prompt = len(llm.tokenize(prompt.encode(), add_bos=False, special=True))
    print(f"model {args.model}, prompt {n_prompt} tokens, {args.threads} thread(s), medians of {args.repeat}")

    bare, mine = [], []
    for _ in range(args.repeat):  # interleaved, so machine load hits both alike
        n, s = bare_loop(llm, prompt, args.tokens)
        bare.append(n / s)
        n, s = ours(llm, prompt, args.tokens)
        mine.append(n / s)
    b, m = statistics.median(bare), statistics.median(mine)
    print(f"bare llama-cpp-python loop : {b:7.2f} tokens/s")
    print(f"harness generate()         : {m:7.2f} tokens/s   ({(m / b - 1) * 100:+.1f}% vs bare)")

    n = args.samples
    seeds = list(range(1, n + 1))
    sampling = dict(max_tokens=args.tokens, temperature=0.7)
    llm.reset()
    t = time.perf_counter()
    batch = generate_samples(llm, prompt, n, seeds=seeds, **sampling)
    batched = time.perf_counter() - t
    t = time.perf_counter()
    for seed in seeds:
        llm.reset()
        generate(llm, prompt, seed=seed, **sampling)
    cold = time.perf_counter() - t
    llm.reset()
    t = time.perf_counter()
    for seed in seeds:
        generate(llm, prompt, seed=seed, **sampling)
    warm = time.perf_counter() - t
    tokens = sum(g.completion_tokens for g in batch.generations)
    print(f"{n} samples, one batch (prompt read once)   : {batched:7.2f} s  ({tokens} tokens)")
    print(f"{n} separate runs, prompt read each time    : {cold:7.2f} s  -> batch/cold = {batched / cold:.2f}")
    print(f"{n} separate runs, prompt cache reused      : {warm:7.2f} s  -> batch/warm = {batched / warm:.2f}")


if __name__ == "__main__":
    main()
