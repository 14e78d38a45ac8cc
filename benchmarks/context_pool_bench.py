"""Fallback's scenario samples with one context against the embedded backend's contexts, side by side in one run.

Fallback writes every step twice over when its native attempt fails: the model's own prompt, then the retry under
a preamble that opens differently. In one context each prompt evicts the other, so every step reads its whole
prompt again; the embedded backend keeps up to CONTEXTS contexts (harness.backends.embedded.backend) and sends a
prompt to the one holding most of it. This runs the same scenario samples both ways, scenario by scenario so
the machine's load falls on both alike, into two scratch results folders, and prints per arm: seconds a sample
(as recorded), prompt seconds a sample, the tokens llama.cpp decoded (its own count: prompts read and replies
written, the measure that does not move with the load), and how many samples wrote the same replies both ways.

    python benchmarks/context_pool_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--scenario NAME ...]
                                            [--samples 1] [--grammar-variant NAME] [--threads 1]
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness.backends.embedded.backend import CONTEXTS, EmbeddedBackend
from harness.evaluation.scenario_files import load_scenarios
from harness.grammar.plan import DEFAULT_VARIANT, VARIANTS
from harness.live.opening import open_model
from harness.live.runner import run_model


class OneContext(EmbeddedBackend):
    contexts = 1


def samples(transcript: Path) -> dict:
    """(scenario, sample) -> (seconds, prompt seconds, replies)."""
    out = {}
    for line in transcript.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") != "sample":
            continue
        steps = [s for t in record["turns"] for s in t["steps"]]
        prompt = sum((s.get("timings") or {}).get("prompt_seconds") or 0.0 for s in steps)
        out[record["scenario"]["name"], record["sample"]] = (record["seconds"], prompt,
                                                             [s.get("reply") for s in steps])
    return out


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--scenario", action="append", metavar="NAME",
                        help="a shipped scenario (repeatable; default: arithmetic, memory-search, file-chunks)")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--grammar-variant", choices=list(VARIANTS), default=DEFAULT_VARIANT, metavar="NAME")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    names = args.scenario or ["arithmetic", "memory-search", "file-chunks"]
    scenarios = [s for s in load_scenarios() if s.name in names]
    arms = {"one context": open_model(args.model, threads=args.threads, backend_cls=OneContext),
            f"up to {CONTEXTS}": open_model(args.model, threads=args.threads)}
    print(f"model {args.model}, fallback, {args.grammar_variant}, scenarios {', '.join(names)}, "
          f"{args.samples} sample(s) each, {args.threads} thread(s)")
    walls, decoded = dict.fromkeys(arms, 0.0), dict.fromkeys(arms, 0)
    with tempfile.TemporaryDirectory() as scratch:
        for scenario in scenarios:
            for arm, model in arms.items():
                folder = Path(scratch) / str(list(arms).index(arm)) / "designs" / args.grammar_variant
                model.chat.backend.forget()
                before, clock = model.chat.backend.decoded_tokens(), time.monotonic()
                run_model(args.model, [scenario], args.samples, 0, results_dir=folder, model=model,
                          modes=("fallback",), warn=lambda m: None, variant=args.grammar_variant)
                walls[arm] += time.monotonic() - clock
                decoded[arm] += model.chat.backend.decoded_tokens() - before
        got = {arm: samples(Path(scratch) / str(i) / "designs" / args.grammar_variant / "transcripts" /
                            f"{args.model}.jsonl") for i, arm in enumerate(arms)}
    one, pooled = (got[arm] for arm in arms)
    keys = sorted(set(one) & set(pooled))
    print(f"\n{'arm':12} {'samples':>7} {'s a sample':>11} {'prompt s a sample':>18} {'tokens decoded':>15} "
          f"{'wall s':>7}")
    for arm in arms:
        s = statistics.fmean(got[arm][k][0] for k in keys)
        p = statistics.fmean(got[arm][k][1] for k in keys)
        print(f"{arm:12} {len(keys):7d} {s:11.2f} {p:18.2f} {decoded[arm]:15d} {walls[arm]:7.0f}")
    first, second = list(arms)
    print(f"ratio {second} / {first}: seconds {walls[second] / walls[first]:.2f}, tokens decoded "
          f"{decoded[second] / max(decoded[first], 1):.2f}; same replies {sum(one[k][2] == pooled[k][2] for k in keys)}"
          f"/{len(keys)}")


if __name__ == "__main__":
    main()
