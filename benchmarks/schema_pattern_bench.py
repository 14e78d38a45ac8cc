"""Do schema patterns stay linear in the argument's length?

For each pattern known to make a backtracking matcher exponential or quadratic, checks an argument of n and 4n
characters against it with the matcher `harness parse --tools` uses (harness.schema.safe_regex) and prints the
time at both sizes and their ratio. A linear matcher gives a ratio near 4. Python's `re` is timed beside it at
a small size only: it is exponential on the first patterns (28 a's and "!" took 15 s).

    python benchmarks/schema_pattern_bench.py [--size 4000]
"""

import argparse
import re
import time

from harness.schema import safe_regex

CASES = {
    "^(a+)+$ vs a…a!": ("^(a+)+$", lambda n: "a" * n + "!"),
    "(x+x+)+y vs x…x": ("(x+x+)+y", lambda n: "x" * n),
    "^(a|aa)*$ vs a…ab": ("^(a|aa)*$", lambda n: "a" * n + "b"),
    "^[a-z]{2,30}$ vs letters": ("^[a-z]{2,30}$", lambda n: "q" * n),
    "^\\d+(\\.\\d+)?$ vs digits.": ("^\\d+(\\.\\d+)?$", lambda n: "7" * n + "."),
}


def timed(match, pattern, text) -> float:
    start = time.perf_counter()
    match(pattern, text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4000)
    args = parser.parse_args()
    n = args.size
    print(f"{'pattern vs argument':28} {'n=' + str(n):>10} {'4n':>10} {'ratio':>6} {'re at 22 chars':>15}")
    for label, (pattern, make) in CASES.items():
        small, large = timed(safe_regex.search, pattern, make(n)), timed(safe_regex.search, pattern, make(4 * n))
        backtracking = timed(re.search, pattern, make(22))
        print(f"{label:28} {small:9.3f}s {large:9.3f}s {large / small:6.1f} {backtracking:14.3f}s")


if __name__ == "__main__":
    main()
