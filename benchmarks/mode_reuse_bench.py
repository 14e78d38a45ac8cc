"""Seconds per BFCL case per mode, modes run apart against modes run together, side by side in one run.

`harness run` takes a case's modes back to back (harness.live.pending orders the work case by case), so a mode
whose prompt is the one the mode before it read (grammar and fallback on a model whose template carries the
tools: the same rendered prompt as native) keeps the evaluated prompt (the binding reuses the longest prefix
already in its context) and reads only its last token again. A run of one mode at a time (`--mode grammar`,
the way a single mode is re-run) reads every prompt in full. This benchmark runs the same cases both ways on
one loaded model, into two scratch results folders, and prints per mode: seconds a case (each sample's own
seconds, as recorded), prompt seconds a case, and how many replies are identical between the two ways
(greedy sampling: a reused prefix must not change what the model writes).

    python benchmarks/mode_reuse_bench.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m] [--cases 1] [--threads 1]
                                          [--grammar-variant NAME ...]

A case's modes run native, fallback, grammar (harness.live.pending.REUSE_ORDER). A design whose grammar prompt
is native's (json-or-text-own, lazy-trigger on a template that carries the tools) reuses the whole prompt in
grammar and fallback; one that adds a preamble ahead of the system message (envelope-or-text-told) reuses
native's in fallback's first attempt, and in grammar the tools its preamble shares with fallback's retry. With
several designs each runs both ways in the same run, case by case, and "vs first apart" sets each against the
first design's modes run apart (today's cost of a one-mode run under the first design).

Together, a request asked a second time (fallback's first attempt is native's request) is answered from the
embedded backend's memo (harness.backends.embedded.reply_memo). --memo-off adds a third way, together with the
memo emptied before every request, so its share of the saving is printed beside the rest.
"""

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from harness.suites.bfcl.cases import draw, load_suite
from harness.grammar.plan import DEFAULT_VARIANT, VARIANTS
from harness.backends.embedded.reply_memo import ReplyMemo
from harness.live.opening import open_model
from harness.live.runner import run_model

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_irrelevance"]
MODES = ("native", "grammar", "fallback")


def samples(folder: Path) -> dict:
    """(case, mode) -> (seconds, prompt seconds, replies) of each sample recorded under `folder`."""
    out = {}
    for path in (folder / "bfcl").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") != "sample":
                continue
            steps = [s for t in record["turns"] for s in t["steps"]]
            prompt = sum((s.get("timings") or {}).get("prompt_seconds") or 0.0 for s in steps)
            out[record["scenario"]["name"], record["mode"]] = (record["seconds"], prompt,
                                                               [s.get("reply") for s in steps])
    return out


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    parser.add_argument("--cases", type=int, default=1, help="cases drawn per category")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--grammar-variant", action="append", choices=list(VARIANTS), metavar="NAME",
                        help="a grammar design of grammar and fallback modes, run both ways (repeatable: each "
                             f"design side by side in the same run; default {DEFAULT_VARIANT})")
    parser.add_argument("--memo-off", action="store_true",
                        help="also run the modes together with the reply memo off (its share of the saving)")
    args = parser.parse_args()
    variants = args.grammar_variant or [DEFAULT_VARIANT]
    scenarios = [c.scenario for c in draw(load_suite(CATEGORIES), CATEGORIES, args.cases, 0)]
    model = open_model(args.model, threads=args.threads)
    print(f"model {args.model}, {len(scenarios)} BFCL cases ({args.cases} a category), {args.threads} thread(s), "
          f"grammar designs {', '.join(variants)}")
    kinds = ("apart", "together", "no-memo") if args.memo_off else ("apart", "together")
    ways = [(variant, way) for variant in variants for way in kinds]
    memo = model.chat.backend.memo
    walls = dict.fromkeys(ways, 0.0)
    with tempfile.TemporaryDirectory() as scratch:
        # Case by case, every way one after the other, so the machine's load falls on all alike. Apart: each mode
        # from an empty context (a run of that mode alone); together: the modes back to back, as one run.
        for scenario in scenarios:
            for variant, way in ways:
                folder = Path(scratch) / variant / way
                clock = time.monotonic()
                # Keeps nothing: every request is written (the memo's share of the saving).
                model.chat.backend.memo = ReplyMemo(kept=0) if way == "no-memo" else memo
                for modes in ([(m,) for m in MODES] if way == "apart" else [MODES]):
                    model.chat.backend.forget()
                    run_model(args.model, [scenario], None, 0, results_dir=folder, model=model, modes=modes,
                              transcript=folder / "bfcl" / f"{args.model}.jsonl", warn=lambda m: None,
                              variant=variant)
                walls[variant, way] += time.monotonic() - clock
        got = {key: samples(Path(scratch) / key[0] / key[1]) for key in ways}
    before = got[variants[0], "apart"]
    print(f"\n{'mode':9} {'design':17} {'cases':>5} {'apart s/case':>13} {'together s/case':>16} {'ratio':>6} "
          f"{'vs first apart':>15} {'prompt s apart':>15} {'prompt s together':>18} {'same replies':>13}"
          + (f" {'no-memo s/case':>15} {'same':>6}" if args.memo_off else ""))
    for mode in MODES:
        for variant in variants:
            apart, together = got[variant, "apart"], got[variant, "together"]
            keys = sorted(k for k in apart if k[1] == mode and k in together and k in before)
            if not keys:
                continue
            a = statistics.fmean(apart[k][0] for k in keys)
            t = statistics.fmean(together[k][0] for k in keys)
            first = statistics.fmean(before[k][0] for k in keys)
            pa = statistics.fmean(apart[k][1] for k in keys)
            pt = statistics.fmean(together[k][1] for k in keys)
            same = sum(apart[k][2] == together[k][2] for k in keys)
            extra = ""
            if args.memo_off:
                off = got[variant, "no-memo"]
                held = [k for k in keys if k in off]
                extra = (f" {statistics.fmean(off[k][0] for k in held):15.2f} "
                         f"{sum(off[k][2] == together[k][2] for k in held):>3d}/{len(held)}") if held else ""
            print(f"{mode:9} {variant:17} {len(keys):5d} {a:13.2f} {t:16.2f} {t / a:6.2f} {t / first:15.2f} "
                  f"{pa:15.2f} {pt:18.2f} {same:>6d}/{len(keys)}{extra}")
    for variant in variants:
        apart, together = walls[variant, "apart"], walls[variant, "together"]
        off = (f"; together, memo off: {walls[variant, 'no-memo']:.0f} s "
               f"({walls[variant, 'no-memo'] / walls[variants[0], 'apart']:.2f})") if args.memo_off else ""
        print(f"wall {variant}: apart {apart:.0f} s, together {together:.0f} s (ratio {together / apart:.2f}; "
              f"together against {variants[0]} apart: {together / walls[variants[0], 'apart']:.2f}{off})")
    for variant in variants:
        apart, together = got[variant, "apart"], got[variant, "together"]
        differing = defaultdict(list)
        for k in apart:
            if k in together and apart[k][2] != together[k][2]:
                differing[k[1]].append(k[0])
        for mode, names in differing.items():
            print(f"replies that differ apart/together ({variant}, {mode}): {', '.join(names)}")


if __name__ == "__main__":
    main()
