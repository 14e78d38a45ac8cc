"""Replies per second through vLLM's and SGLang's tool parsers and through ours, on the same corpus.

The corpus is `harness parser-agreement`'s (each mapped family's canonical outputs, near misses and its
templates' runtime-conformance replies). Peer parsers are timed inside the peers worker (one-shot entry point,
a fresh parser per reply as a server makes one per request; no protocol cost counted); ours through
harness.families.parse on the same replies. Each side reads the replies --repeat times per round and counts its
fastest of --rounds rounds, so a pause of other work on the machine counts against neither. Prints one line per
family, project and parser, and the totals.

    python benchmarks/parser_agreement_bench.py [--repeat 3] [--rounds 5] [--family NAME ...]

Needs the peers environment: bash scripts/setup_peers.sh
"""

import argparse
import time
from collections import defaultdict

from harness import families
from harness.peers import SETUP_COMMAND, Peers, peers_python, vocab_file
from harness.suites.parser_agreement.driver import build_cases, parser_for
from harness.suites.parser_agreement.judging import PROJECTS
from harness.pins.sources import load_sources, resolve_template


def _ours(family: str, replies: list, repeat: int, rounds: int) -> float:
    """Seconds for our parser to read the replies `repeat` times, after one warm-up read of each: the fastest of
    `rounds` rounds, as the worker counts the peers'."""
    for reply in replies:  # warm-up, as the worker does for the peers
        families.parse(family, reply)
    best = None
    for _ in range(max(1, rounds)):
        start = time.perf_counter()
        for _ in range(repeat):
            for reply in replies:
                families.parse(family, reply)
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--family", action="append")
    args = ap.parse_args()
    python = peers_python()
    if python is None:
        print(f"the peers environment is not built: {SETUP_COMMAND}")
        return 2
    sources = load_sources()
    cases, _ = build_cases([resolve_template(t, sources) for t in sources.templates], set(args.family or ()) or None)
    by_family = defaultdict(list)
    for case in cases:
        by_family[case.family].append(case)
    totals = defaultdict(lambda: [0.0, 0])
    # Ours is timed before the peers' worker starts: the worker's libraries keep threads busy for a while after
    # each request, and on a small machine they would take the CPU from our timing, not from theirs.
    work = []
    for family, group in sorted(by_family.items()):
        totals["ours"][0] += _ours(family, [c.reply for c in group], args.repeat, args.rounds)
        totals["ours"][1] += len(group) * args.repeat
        # A family's templates may be read by other parsers of a project than the family-wide one.
        by_parser = defaultdict(list)
        for case in group:
            for project in PROJECTS:
                if parser_for(case, project):
                    by_parser[(project, parser_for(case, project))].append(case)
        for (project, parser), mine in sorted(by_parser.items()):
            # Ours on the same replies: a template's own parser reads a subset of the family's corpus.
            ours = _ours(family, [c.reply for c in mine], args.repeat, args.rounds)
            work.append((family, project, parser, mine, len(mine) * args.repeat / ours))
    print(f"{'family':<16} {'project':<8} {'parser':<14} {'replies':>7} {'replies/s':>11} {'ours/s':>11} {'ratio':>7}")
    with Peers(python) as peers:
        for family, project, parser, mine, our_rate in work:
            first = mine[0]
            got = peers.ask({"op": "bench", "project": project, "parser": parser,
                             "tokenizer": str(vocab_file(first.profile)), "added_tokens": list(first.added),
                             "tokenizer_config": first.tokenizer_config,
                             "replies": [c.reply for c in mine], "tools": first.tools, "repeat": args.repeat,
                             "rounds": args.rounds})
            if "error" in got:
                print(f"{family:<16} {project:<8} {parser:<14} error: {got['error']}")
                continue
            totals[project][0] += got["seconds"]
            totals[project][1] += got["parsed"]
            rate = got["parsed"] / got["seconds"]
            print(f"{family:<16} {project:<8} {parser:<14} {len(mine):>7} {rate:>11.0f} {our_rate:>11.0f} "
                  f"{our_rate / rate:>6.1f}x" + (f"  ({got['errors']} raised)" if got["errors"] else ""))
    for name, (seconds, n) in totals.items():
        print(f"total {name}: {n} replies in {seconds:.2f} s = {n / seconds:.0f} replies/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
