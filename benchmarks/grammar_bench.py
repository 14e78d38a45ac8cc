"""Cost of sampling under a tool grammar, side by side in one run, on a real model and one rendered prompt.

The same reply length is written four ways, greedy, and the tokens/s of each is printed with its ratio to the
unconstrained run:

1. no grammar (harness.backends.embedded.generate.generate);
2. a lazy "auto" grammar through the GrammarGate whose trigger never fires (the cost of watching for it);
3. a "required" grammar through the GrammarGate (sample freely, check the token, mask only when refused);
4. the same required grammar inside llama.cpp's sampler chain (GBNF text: every candidate of every token is
   checked), the path harness.backends.embedded.gated avoids.

The required grammar is the generic JSON call of the file-chunks scenario's tools, so 2–4 write a call; its
length is capped by --tokens.

    python benchmarks/grammar_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--tokens 48] [--repeat 3]
"""

import argparse
import dataclasses
import statistics

from harness.backends.embedded.generate import generate, load_model
from harness.grammar import build_grammar
from harness.live.modes import calls_as_text_messages, tool_preamble
from harness.template.render import render
from harness.evaluation.scenario_files import load_scenarios
from harness.pins.sources import load_sources, model_path, resolve_template

SCENARIO = "file-chunks"


def tokens_per_second(llm, prompt, tokens, grammar):
    llm.reset()
    g = generate(llm, prompt, max_tokens=tokens, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0,
                 repeat_penalty=1.0, seed=1, grammar=grammar)
    return (g.completion_tokens - 1) / g.timings.generation_seconds, g


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin = load_sources().model(args.model)
    llm = load_model(model_path(args.model), n_threads=args.threads, n_ctx=4096)
    ref = resolve_template(pin.stand_in_template or pin.template)
    scenario = next(s for s in load_scenarios() if s.name == SCENARIO)
    messages = calls_as_text_messages([{"role": "user", "content": scenario.turns[0].user}], tool_preamble(scenario),
                              into_user=True)
    prompt = render(ref.text, messages, add_generation_prompt=True, bos_token=ref.bos_token or "",
                    eos_token=ref.eos_token or "")
    tools = scenario.tool_schemas()
    lazy = build_grammar(None, tools, "auto")
    # A lazy grammar that cannot fire: its trigger is a word the reply does not contain, so the run measures
    # the watching alone.
    lazy = dataclasses.replace(lazy, trigger_patterns=("^\\s*(<never-written>)",))
    required = build_grammar(None, tools, "required")
    runs = {"no grammar": None, "lazy, never triggered (gate)": lazy, "required (gate)": required,
            "required (llama.cpp sampler chain)": required.gbnf}
    n_prompt = len(llm.tokenize(prompt.encode(), add_bos=False, special=True))
    print(f"model {args.model} (vocabulary {llm.n_vocab()}), prompt {n_prompt} tokens, {args.threads} thread(s), "
          f"up to {args.tokens} tokens, medians of {args.repeat}")
    speeds = {name: [] for name in runs}
    replies = {}
    for _ in range(args.repeat):  # interleaved, so machine load hits every way alike
        for name, grammar in runs.items():
            speed, generation = tokens_per_second(llm, prompt, args.tokens, grammar)
            speeds[name].append(speed)
            replies[name] = generation
    base = statistics.median(speeds["no grammar"])
    for name, values in speeds.items():
        speed = statistics.median(values)
        g = replies[name]
        print(f"{name:36}: {speed:7.2f} tokens/s  x{speed / base:.2f}  ({g.completion_tokens} tokens, "
              f"{g.finish_reason}) {g.text[:60]!r}")


if __name__ == "__main__":
    main()
