"""Does parsing stay linear on hostile replies?

For each hostile shape of reply, builds it at n and 4n characters, parses it with every registered family
(the same text for all, or each family's own first marker in front where the shape says so), and prints the
total time at both sizes and their ratio side by side. Linear parsing gives a ratio near 4; a quadratic step
gives near 16.

    python benchmarks/parse_bench.py [--size 16000] [--repeat 3]
"""

import argparse
import statistics
import time

from harness import families as registry

SHAPES = {
    "open brackets [[[": lambda n, m: "[" * n,
    "open braces {{{": lambda n, m: "{" * n,
    'nested keys {"a":': lambda n, m: '{"a":' * (n // 5),
    "keys without values {\"": lambda n, m: '{"' * (n // 2),
    "fence then newlines": lambda n, m: "```" + "\n" * n,
    "fences then spaces": lambda n, m: ("```json" + " " * 64) * (n // 71),
    "escaped quotes \\\"": lambda n, m: '["' + '\\"' * (n // 2),
    "unclosed list [1,": lambda n, m: "[1," * (n // 3),
    "closed objects {}": lambda n, m: '{"a": 1} ' * (n // 9),
    "bare calls, broken": lambda n, m: '{"name": "f", "arguments": {"a": [1, 2}} ' * (n // 40),
    "python dicts {'a':": lambda n, m: "{'a': " * (n // 6),
    "digits": lambda n, m: "1" * n,
    "marker, open brackets": lambda n, m: m + "[" * n,
    "marker, nested keys": lambda n, m: m + '{"a":' * (n // 5),
    "marker, newlines": lambda n, m: m + "\n" * n,
    "marker, attribute chain": lambda n, m: m + "[f(x=" + "a." * (n // 2) + "b)]",
    "marker repeated": lambda n, m: m * (n // max(len(m), 1)),
}


def parse_all(families, shape, n) -> float:
    texts = [(family, shape(n, family.markers[0])) for family in families]
    start = time.perf_counter()
    for family, text in texts:
        family.parse(text)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=16000, help="n, in characters (default 16000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size; the median is printed")
    args = parser.parse_args()
    families = list(registry.families().values())
    n = args.size
    print(f"{len(families)} families, every parse of each shape summed; median of {args.repeat} interleaved runs")
    print(f"{'shape':<28}{f't({n}) ms':>14}{f't({4 * n}) ms':>14}{'ratio':>8}")
    worst = 0.0
    for label, shape in SHAPES.items():
        small, large = [], []
        for _ in range(args.repeat):
            small.append(parse_all(families, shape, n))
            large.append(parse_all(families, shape, 4 * n))
        t1, t4 = statistics.median(small), statistics.median(large)
        ratio = t4 / t1 if t1 > 0 else float("inf")
        worst = max(worst, ratio)
        print(f"{label:<28}{t1 * 1000:>14.1f}{t4 * 1000:>14.1f}{ratio:>8.1f}")
    print(f"worst ratio: {worst:.1f} (linear is about 4)")


if __name__ == "__main__":
    main()
