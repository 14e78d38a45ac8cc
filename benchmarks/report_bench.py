"""What does `harness report` cost as the transcripts grow, and does report.html stay the same size?

Makes synthetic results folders of 1k, 10k and 50k samples from the committed transcripts' own records (every
sample record repeated, each copy with a new seed and sample index, so each is a sample of its own; the model
records once per file), runs `harness report --results-dir DIR` on each in a child process, and prints per size
the wall time, the child's peak RSS, report.html's size and the sample pages' total size, side by side.

With --against CHECKOUT (another copy of the harness, e.g. `d=$(mktemp -d) && git archive main | tar -x -C "$d"`), the
same folders are also reported by that copy's code and the ratios printed: time, memory and page size of this
code over that one's.

    python benchmarks/report_bench.py [--sizes 1000,10000,50000] [--against "$d"] [--keep DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPTS = ROOT / "results" / "transcripts"


def make_results(folder: Path, samples: int) -> int:
    """A results folder of `samples` sample records from the committed ones; the count written."""
    records = {}
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        records[path.name] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    pool = [(name, r) for name, rs in records.items() for r in rs if r.get("kind") == "sample"]
    if not pool:
        raise SystemExit(f"{TRANSCRIPTS}: no sample records to repeat")
    stride = 1 + max(r["sample"] for _, r in pool)
    seeds = 1 + max(r["seed"] for _, r in pool)
    out = folder / "transcripts"
    out.mkdir(parents=True)
    files = {name: open(out / name, "w", encoding="utf-8") for name in records}
    try:
        for name, rs in records.items():
            for r in rs:
                if r.get("kind") == "model":
                    files[name].write(json.dumps(r, ensure_ascii=False) + "\n")
        for n in range(samples):
            name, r = pool[n % len(pool)]
            copy = n // len(pool)
            # A new seed and sample index per copy: a sample of its own, not a rerun of the same key.
            files[name].write(json.dumps({**r, "seed": r["seed"] + copy * seeds, "sample": r["sample"] + copy * stride},
                                         ensure_ascii=False) + "\n")
    finally:
        for f in files.values():
            f.close()
    return samples


def report(code: Path, folder: Path) -> dict:
    """`harness report --results-dir folder` with `code` on the path: seconds, peak RSS (bytes), page sizes."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "harness", "report", "--results-dir", str(folder)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=code)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    errors = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"harness report ({code}) on {folder} failed:\n{errors[-2000:]}")
    html = folder / "report.html"
    pages = list((folder / "samples").glob("*.html")) if (folder / "samples").is_dir() else []
    return {"seconds": seconds, "rss": usage.ru_maxrss * 1024, "html": html.stat().st_size,
            "pages": sum(p.stat().st_size for p in pages), "page_count": len(pages),
            "largest_page": max((p.stat().st_size for p in pages), default=0)}


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="sample counts, comma-separated")
    parser.add_argument("--against", type=Path, help="another harness checkout to compare with")
    parser.add_argument("--keep", type=Path, help="make the folders here and keep them (default: a temporary one)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = args.keep or Path(tempfile.mkdtemp(prefix="report-bench-"))
    rows = []
    try:
        for size in sizes:
            folder = base / f"{size}"
            if folder.exists():
                shutil.rmtree(folder)
            make_results(folder, size)
            ours = report(ROOT, folder)
            theirs = None
            if args.against:
                other = base / f"{size}-against"
                if other.exists():
                    shutil.rmtree(other)
                shutil.copytree(folder / "transcripts", other / "transcripts")
                theirs = report(args.against.resolve(), other)
            rows.append((size, ours, theirs))
            print(f"{size:>7} samples: {ours['seconds']:7.1f} s, peak RSS {mb(ours['rss'])}, report.html "
                  f"{mb(ours['html'])}, {ours['page_count']} sample pages {mb(ours['pages'])} (largest "
                  f"{mb(ours['largest_page'])})" + ("" if theirs is None else
                  f"  |  against: {theirs['seconds']:7.1f} s, peak RSS {mb(theirs['rss'])}, report.html "
                  f"{mb(theirs['html'])}"), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print("samples   time     peak RSS   report.html   sample pages" + ("   time ×   RSS ×   report.html ×"
                                                                       if args.against else ""))
    for size, ours, theirs in rows:
        line = (f"{size:>7}  {ours['seconds']:6.1f} s  {mb(ours['rss']):>9}  {mb(ours['html']):>11}  "
                f"{mb(ours['pages']):>12}")
        if theirs:
            line += (f"   {ours['seconds'] / theirs['seconds']:6.2f}  {ours['rss'] / theirs['rss']:6.2f}  "
                     f"{ours['html'] / theirs['html']:13.3f}")
        print(line)
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        grow = last[0] / first[0]
        print(f"\n{grow:.0f}× the samples: time ×{last[1]['seconds'] / first[1]['seconds']:.1f}, peak RSS "
              f"×{last[1]['rss'] / first[1]['rss']:.2f}, report.html ×{last[1]['html'] / first[1]['html']:.2f}")


if __name__ == "__main__":
    main()
