#!/usr/bin/env python3
"""The deployment suite's rows on the runtimes that load no GGUF here (vLLM's CPU build, transformers serve): the
pinned GGUF's weights dequantized to HF form (harness.live.dequantized: transformers in the vLLM environment
reads the GGUF, float32, chat_template.jinja the template the in-process runs use, a manifest of every file's
SHA-256), the runtime started on that folder, and the suite's requests asked of it (harness.suites.deployment,
as `harness deployment` asks them). Records go to RESULTS/deployment/MODEL.RUNTIME.jsonl, each naming the
runtime and the GGUF with `model.dequantized` ({"from": "Q4_K_M", "folder_sha256", ...}); the page's setup
column says "dequantized from Q4_K_M". Run with harness's python (the main venv), not the vLLM environment's:

    .venv/bin/python scripts/deployment_hf.py --server vllm-cpu --model smollm2-135m-instruct-q4_1 --cases 3

- vllm-cpu: `vllm.entrypoints.openai.api_server` on the folder (VllmCpu.folder_command) with the family's vLLM
  tool parser (`family.peer("vllm", template)`); a model of no family is served without one, and vLLM 0.32.0 then
  refuses tool_choice auto and required alike (HTTP 400, in its words: each "requires --tool-call-parser").
- transformers-serve: `transformers serve` in a folder of links to the weights whose tokenizer_config.json
  carries transformers' response template for the family where it has one (scripts/hf_runtime_conformance.py),
  so the dequantized folder and its hashes stay as made.

A conversion that fails is the rows' words (every request a runtime error: "the weights could not be
dequantized from the GGUF: ..."), as is a runtime whose process ends before it is ready; a server not ready in
--start-limit seconds records nothing. Conversion, start-up and request seconds are printed as one JSON line."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hf_runtime_conformance import add_response_template  # noqa: E402
from harness.backends.folder_server import FolderServer  # noqa: E402

from harness.backends import runtimes  # noqa: E402
from harness.core import constants  # noqa: E402
from harness.live.dequantized import ROOT as FOLDERS  # noqa: E402
from harness.live.dequantized import DequantizeError, dequantized_field, for_model, quantization  # noqa: E402
from harness.suites.runtime_conformance.hf_serving import SERVED, how_served  # noqa: E402
from harness.storage.results import ResultsDir  # noqa: E402
from harness.live.opening import N_CTX  # noqa: E402
from harness.peers.vllm_cpu import SETUP_COMMAND, vllm_python  # noqa: E402
from harness.pins.sources import model_path  # noqa: E402
from harness.suites.deployment import driver  # noqa: E402
from harness.suites.deployment.cases import cases as drawn  # noqa: E402


def serving_folder(server: str, folder: Path, parser: str | None, python: Path, work: Path) -> Path:
    """The folder the runtime is started on: the dequantized one for vLLM; for transformers serve a folder of
    links to it, named as requests name the model, whose tokenizer_config.json (a copy) carries the family's
    response template."""
    if server == "vllm-cpu":
        return folder
    linked = work / "serve" / folder.name
    linked.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        target = linked / path.name
        if target.is_symlink() or target.exists():
            target.unlink()
        if path.name == "tokenizer_config.json":
            target.write_bytes(path.read_bytes())
        else:
            target.symlink_to(path)
    if parser:
        add_response_template(python, linked, parser)
    return linked


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", choices=SERVED, required=True)
    p.add_argument("--model", required=True, metavar="ID", help="a pinned model (its GGUF is dequantized)")
    p.add_argument("--cases", type=int, default=5, metavar="N",
                   help="cases per category (default 5, as harness deployment: 35 cases, 60 records)")
    p.add_argument("--case", action="append", metavar="ID", help="only this drawn case (repeatable)")
    p.add_argument("--again", action="append", metavar="LABEL",
                   help="also ask again each drawn request whose latest record carries LABEL, or is `stale` "
                        "(harness deployment's --again)")
    p.add_argument("--results-dir", type=Path, default=ROOT / "results", metavar="DIR")
    p.add_argument("--work-dir", type=Path, default=FOLDERS / "serving", metavar="DIR",
                   help=f"server logs and transformers serve's linked folders (default: {FOLDERS / 'serving'})")
    p.add_argument("--port", type=int, default=8821)
    p.add_argument("--start-limit", type=float, default=900.0, metavar="SECONDS")
    args = p.parse_args()
    python = vllm_python()
    if python is None:
        print(f"the vLLM CPU environment is not built: {SETUP_COMMAND}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.case or ())
    if only - {c.id for c in drawn(args.cases)}:
        print(f"--case {', '.join(sorted(only))}: not among the drawn cases (--cases {args.cases})", file=sys.stderr)
        return 2
    pin, ref, chat = driver.model_setup(args.model)
    family = chat.family if chat else None
    parser, why = how_served(args.server, family, ref.id)
    runtime = runtimes.get(args.server)
    row = {"server": args.server, "model": args.model, "parser": parser}
    started = time.monotonic()
    try:
        folder, manifest = for_model(args.model, python)
        row.update(conversion_s=manifest["seconds"], folder_bytes=manifest["bytes"],
                   folder_sha256=manifest["folder_sha256"], checked_s=round(time.monotonic() - started, 1))
        hosted = driver.Hosted(args.server, args.model, dequantized_field(manifest))
    except DequantizeError as exc:
        row["conversion_error"] = str(exc)
        hosted = driver.Hosted(args.server, args.model, {"from": quantization(model_path(args.model)),
                                                         "folder_sha256": None}, unserved=str(exc))
    if hosted.unserved is None:
        served = serving_folder(args.server, folder, parser, python, work)
        if args.server == "vllm-cpu":
            # No tool parser where the family has none (why): vLLM then answers tool_choice auto with its refusal.
            command = runtime.folder_command(python, served, args.model, args.port, parser, None, N_CTX)
        else:
            command = runtime.folder_command(python, args.model, args.port)
        # torch's threads, as the in-process runs' and llama-server's (driver.THREADS): on 2 shared cores more
        # threads than free cores spin on barriers (SmolLM2-135M's first 400-token reply took over 5 minutes with
        # torch's default). vLLM's CPU worker binds its own.
        threads = {} if args.server == "vllm-cpu" else {
            "OMP_NUM_THREADS": str(constants.HARNESS_THREADS or driver.THREADS)}
        hosted.local = FolderServer(command, served.parent, work / f"{args.model}.{args.server}.log", args.port,
                                    args.start_limit, threads)

    def log(record):
        print(f"{record.case['id']}/{record.tool_choice}: {', '.join(record.labels)} {record.seconds}", flush=True)

    asked = time.monotonic()
    results = ResultsDir.at(args.results_dir)
    out = driver.run(args.model, results, per_category=args.cases, log=log, only=only or None,
                     hosted=hosted, again=tuple(args.again or ()))
    requests = 2 * len([r for r in out.written if r.seconds and r.seconds.get("plain")])
    row.update(startup_s=out.startup, written=len(out.written), already=out.already, changed=out.changed,
               asked_s=round(time.monotonic() - asked - (out.startup or 0), 1), requests=requests,
               s_per_request=round((time.monotonic() - asked - (out.startup or 0)) / requests, 2) if requests
               else None, records=str(driver.records_path(results, args.model, runtime.record_name)))
    print(json.dumps(row), flush=True)
    with open(work / "timings.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    constants.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    sys.exit(main())
