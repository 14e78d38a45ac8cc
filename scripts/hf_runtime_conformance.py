#!/usr/bin/env python3
"""Runtime conformance of runtimes that serve an HF folder (vLLM's CPU build, `transformers serve`): for each
template, the scripted models (`harness scripted-model`) rewritten in HF form (harness.scripted.hf_form), each
served from the vLLM environment (scripts/setup_vllm_cpu.sh; its transformers serves too), then `harness
runtime-conformance --endpoint` asks it every request of the manifest, non-streamed and streamed, and appends the
records to RESULTS/runtime-conformance/RUNTIME.jsonl.

- vllm-cpu: `python -m vllm.entrypoints.openai.api_server` with the family's vLLM tool parser (the family's
  `peers:`) and, where the corpus has a reasoning case, vLLM's reasoning parser for it
  (REASONING in harness/backends/runtimes/vllm_cpu.py, which also holds the command line).
- transformers-serve: `transformers serve FOLDER`, which reads calls through a response template: the
  family's (its `peers:` transformers entry names one of transformers' built-in templates), written into the
  folder's tokenizer_config.json, since the folder's model type (gpt2) has none of its own. A family with none
  is served without one (no response template: calls are not parsed), not skipped: that is what its users get.

Without --template, every template both are given (harness.suites.runtime_conformance.hf_serving: a family with a vLLM tool parser, a
byte-level vocabulary, identical texts once). Run with harness's python (the main venv), not the vLLM
environment's:

    .venv/bin/python scripts/hf_runtime_conformance.py --server vllm-cpu --template Qwen-Qwen2.5-7B-Instruct
    .venv/bin/python scripts/hf_runtime_conformance.py --server transformers-serve

With --replay MODEL (and --cases N), a model's committed in-process replies instead of a template's corpus, into
RESULTS/deployment/replays/MODEL.RUNTIME.jsonl, as `harness deployment --replay` replays them on the runtimes the
harness starts (harness/suites/deployment/README.md, "Replays").

Each runtime is started once per manifest (a template's corpus, or a part of one): transformers serve is asked
with each request naming its scripted model's folder, which it loads when first named; vLLM, one model per
process, starts on the first model under every model's name and is given each next model's weights in place
(Runtime.reload: its worker's reload_weights, the prefix cache emptied, the weights' checksums checked to have
changed), a fraction of a second against a start of about a minute. Either is started afresh for the next model
if it dies or, for vLLM, if a reload is refused. `--server-per-model` starts each model's own process instead.
Start-up (process start to /v1/models answering) is timed apart from the requests and printed, one JSON line per
model (start_s 0 where the server was already up, with reload_s for vLLM; a model transformers serve loads on
its first request has that in its requests' seconds), also appended to WORK/timings.jsonl. A server that does not
start is said with its log's last lines and the run goes on with the next model; a request it does not answer is
left for the next run (the same command asks only what is not recorded; a model whose requests are all recorded
is not served again)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.backends import runtimes  # noqa: E402
from harness.backends.folder_server import FolderServer  # noqa: E402
from harness.core import constants  # noqa: E402
from harness.core.errors import HarnessError, ServerExitedError, ServerStartError  # noqa: E402
from harness.suites.runtime_conformance import SUITE  # noqa: E402
from harness.suites.runtime_conformance.judging import conformance_record  # noqa: E402
from harness.storage.transcripts import now  # noqa: E402
from harness.storage.transcript_writer import TranscriptWriter  # noqa: E402
from harness.families import get as family_get  # noqa: E402
from harness.suites.runtime_conformance.hf_serving import SERVED, hf_form_templates, how_served  # noqa: E402
from harness.suites.runtime_conformance.driver import request_switches  # noqa: E402
from harness.suites.runtime_conformance.endpoint import entry_hash, manifest_field  # noqa: E402
from harness.peers.vllm_cpu import SETUP_COMMAND, vllm_python  # noqa: E402
from harness.pins.sources import load_sources  # noqa: E402
from harness.scripted.hf_form import write_hf_folder  # noqa: E402

# In the harness cache, like the environment itself: a resumed run finds its models built.
WORK_DIR = constants.CACHE_DIR / "hf-runtimes"


def add_tokenizer_config(folder: Path, entries: dict) -> None:
    """Merge entries into the folder's tokenizer_config.json: those of the family's real tokenizer that a parser
    reads (its `peers: tokenizer_config:`; Hy3's token_suffix, which vLLM's hy_v3 parser appends to every
    marker it looks up)."""
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, **entries}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def add_response_template(python: Path, folder: Path, model_type: str) -> None:
    """Write transformers' built-in response template for `model_type` into the folder's tokenizer_config.json
    (read from the environment's transformers, so it is that version's)."""
    code = ("import json, sys; from transformers.cli.serving.utils import _RESPONSE_TEMPLATE_FALLBACKS as F; "
            "print(json.dumps(next(v for k, v in F.items() if sys.argv[1] in k)))")
    template = json.loads(subprocess.run([str(python), "-c", code, model_type], check=True, capture_output=True,
                                         text=True).stdout)
    add_tokenizer_config(folder, {"response_template": template})


def record_unstarted(path: Path, runtime: str, url: str, manifest_path: Path, manifest: dict, model: dict,
                     done: set, why: str) -> int:
    """A server that refuses to start with a scripted model (vLLM checks its tool parser's markers against the
    vocabulary at start-up) answers none of its requests: each is recorded as `runtime-error` with its words, as
    `harness runtime-conformance --server` records a server that does not start, so the refusal is in the
    report rather than lost. Returns how many were recorded."""
    family = manifest["family"]
    markers = family_get(family).markers if family else ()
    n = 0
    with TranscriptWriter(path) as writer:
        for e in model["requests"]:
            key = entry_hash(e)
            if (manifest["template"]["sha256"], e["case"], key, e["variant"]) in done:
                continue
            writer.append(conformance_record(
                runtime=runtime, server="endpoint", endpoint=url, manifest=manifest_field(manifest_path),
                served_model=model["served_name"], template=manifest["template"], family=family,
                profile=manifest["vocabulary"], case={"name": e["case"], "hash": key}, variant=e["variant"],
                request=request_switches(e["request"]), reply=e["reply"], reply_tokens=e["reply_tokens"],
                reply_ids=e.get("reply_ids"), expect=e["expect"], ours={"tokens": e["prompt_tokens"]},
                key={"tokens": e["prompt_tokens"], "source": f"the manifest ({e['key_source']})", "error": None,
                     "same_text": None},
                model=model["file"], plain={"error": f"server start: {why}"}, stream={}, recorded=now(),
                tools=e["request"].get("tools") or [], marker=markers[0] if markers else None,
                build=runtimes.of_record(runtime).build() if runtimes.of_record(runtime) else None))
            n += 1
    return n


def run_template(template: str, args, python: Path) -> list:
    """The template's own corpus: its scripted models (`harness scripted-model`), each served and asked by
    `harness runtime-conformance --endpoint` into RESULTS/runtime-conformance/RUNTIME.jsonl."""
    out = args.work_dir / template
    subprocess.run([sys.executable, "-m", "harness", "scripted-model", "--template", template, "--out", str(out)],
                   check=True, cwd=ROOT)
    runtime = runtimes.get(args.server).record_name

    def ask(url: str, manifest_path: Path, served_name: str) -> int:
        return subprocess.run(
            [sys.executable, "-m", "harness", "runtime-conformance", "--endpoint", url,
             "--manifest", str(manifest_path), "--served-model", served_name,
             "--runtime", runtime, "--results-dir", str(args.results_dir),
             *[x for case in args.case or () for x in ("--case", case)],
             *[x for variant in args.variant or () for x in ("--variant", variant)]], cwd=ROOT).returncode

    return serve_manifest(template, out, out / f"{template}.manifest.json",
                          args.results_dir / "runtime-conformance" / f"{runtime}.jsonl", ask, args, python)


def run_replay(model_id: str, args, python: Path) -> list:
    """The model's committed in-process replies (BFCL's on the drawn cases, --cases a category, and each scenario
    opening's distinct first replies), written by scripted models in HF form through the runtime, asked in this
    process into
    RESULTS/deployment/replays/MODEL.RUNTIME.jsonl: the replay `harness deployment --replay` makes on the
    runtimes the harness starts (harness.suites.deployment.replays), keyed to our render of each request."""
    from harness.storage.results import ResultsDir
    from harness.suites.deployment import replays
    from harness.core.hashing import sha256_text
    from harness.suites.runtime_conformance.driver import request_body
    from harness.suites.runtime_conformance.endpoint import run_manifest
    from harness.suites.runtime_conformance.scheduling import PART
    from harness.suites.runtime_conformance.scripted_command import write_manifest

    results = ResultsDir(args.results_dir)
    ref, corpus, replies = replays.replay_setup(model_id, results, args.cases, log=print)
    runtime = runtimes.get(args.server).record_name
    records = replays.records_path(results, model_id, runtime)
    records.parent.mkdir(parents=True, exist_ok=True)
    build = runtimes.get(args.server).build()
    # Only the replies not yet recorded are built, in parts (runtime_conformance.scheduling.PART requests each):
    # a model's committed replies take hundreds of scripted models (GBs with their HF folders), more than one
    # build may write; each part is built, served and removed before the next, and a resumed run builds only
    # what is left.
    done = {r.done_key() for r in SUITE.read_records(records)[0]}
    sha = sha256_text(ref.text)
    todo = [c for c in corpus.cases if (not args.case or c.name in args.case) and any(
        (sha, c.name, entry_hash({"request": request_body(c, v), "reply": c.reply}), v) not in done
        for v in c.variants)]
    print(f"{model_id} on {runtime}: {len(corpus.cases) - len(todo)} of {len(corpus.cases)} replies recorded, "
          f"{len(todo)} to replay", flush=True)

    def ask(url: str, manifest: Path, served_name: str) -> int:
        done = {r.done_key() for r in SUITE.read_records(records)[0]}
        run = run_manifest(url, served_name, manifest, runtime, records, done, args.case, args.variant,
                           log=lambda r: print(f"{r.case['name']}: {', '.join(r.labels)}", flush=True), build=build)
        for failure in run.failed:
            print(f"failed, not recorded: {failure}", flush=True)
        return 1 if run.left else 0

    rows = []
    for start in range(0, len(todo), PART):
        out = args.work_dir / "replays" / model_id / f"part-{start // PART}"
        manifest_path, _, refused = write_manifest(ref, dataclasses.replace(corpus, cases=todo[start:start + PART]),
                                                   out)
        for item in refused:
            print(f"not keyed: {item['request']}: {item['why']}", flush=True)
        rows += serve_manifest(ref.id, out, manifest_path, records, ask, args, python)
        shutil.rmtree(out)
    dropped = replays.drop_replaced(records, replies)
    if dropped:
        print(f"dropped {dropped} record(s) of replies re-recorded since (their new replies are replayed above)")
    return rows


def serve_manifest(template: str, out: Path, manifest_path: Path, records_path: Path, ask, args, python: Path) -> list:
    """Serve each scripted model of the manifest in HF form with args.server and have `ask(url, manifest path,
    served name)` (its exit status) ask it; a model whose requests are all in records_path is not served again.
    Returns the timing rows."""
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    family = manifest["family"]
    served = runtimes.get(args.server)
    parser, why = how_served(args.server, family, template)
    if why:
        print(f"{template}: {why}; skipped", flush=True)
        return []
    if not parser:
        print(f"{template}: family {family!r}: {served.no_reader}", flush=True)
    reasoning = served.reasoning_parser(template, family, manifest) if args.server == "vllm-cpu" else None
    timings = []
    runtime = served.record_name
    shared, server = served.hosts_several_models and not args.server_per_model, None
    # One process serves the manifest either way where it can: transformers serve loads each folder a request
    # names; vLLM is given the next model's weights in place (Runtime.reload), answering under every model's name.
    reloading = served.reloads_weights and not args.server_per_model
    one_process = shared or reloading
    names = tuple(m["served_name"] for m in manifest["models"])
    records, _ = SUITE.read_records(records_path)
    done = {r.done_key() for r in records}
    try:
        for model in manifest["models"]:
            asked = [e for e in model["requests"] if (not args.case or e["case"] in args.case)
                     and (not args.variant or e["variant"] in args.variant)]
            if not asked:
                continue
            model = {**model, "requests": asked}
            if all((manifest["template"]["sha256"], e["case"], entry_hash(e), e["variant"]) in done
                   for e in model["requests"]):
                print(f"{template}: {model['served_name']}: every request already recorded", flush=True)
                continue
            try:
                folder = write_hf_folder(out / model["file"])
            except ValueError as exc:  # a vocabulary with no HF form yet (SentencePiece): nothing is asked
                print(f"{template}: {model['served_name']}: no HF form: {exc}; skipped", flush=True)
                continue
            config = (family_get(family).peers.get("tokenizer_config") or {}) if family else {}
            if config:
                add_tokenizer_config(folder, config)
            url = f"http://127.0.0.1:{args.port}"
            if args.server == "vllm-cpu":
                aliases = tuple(n for n in names if n != model["served_name"]) if reloading else ()
                command = served.folder_command(python, folder, model["served_name"], args.port, parser, reasoning,
                                                aliases=aliases)
            else:
                if parser:  # a family transformers has no response template for is served without one: no parsing
                    add_response_template(python, folder, parser)
                # One process serves the part: each request names its model's folder, loaded as it is first named.
                command = served.folder_command(python, None if shared else model["served_name"], args.port)
            row = {"server": args.server, "template": template, "model": model["served_name"], "parser": parser,
                   "reasoning_parser": reasoning, "requests": len(model["requests"])}
            if server is not None and reloading:
                loading = time.monotonic()
                try:
                    served.reload(server.base_url, folder)
                    row["reload_s"] = round(time.monotonic() - loading, 1)
                except (HarnessError, OSError) as exc:     # started afresh on this model's folder below
                    print(f"{template}: {model['served_name']}: not reloaded in place ({exc}); started afresh",
                          flush=True)
                    row["reload_error"] = str(exc)[:300]
                    server.stop()
                    server = None
            if server is None:
                name = "shared" if one_process else model["served_name"]
                server = FolderServer(command, out, out / f"{name}.{args.server}.log", args.port, args.start_limit,
                                      env=served.server_env if reloading else None, work_dir=args.work_dir)
                started, why = time.monotonic(), None
                try:
                    server.start()
                except (ServerStartError, ServerExitedError) as exc:   # said from its log, stopped
                    why = str(exc)
                row["start_s"] = round(time.monotonic() - started, 1)
            else:            # the part's server, already up: this model loaded by its first request, or reloaded
                why, row["start_s"] = None, 0.0
            if why:
                row["start_error"] = why
                row["recorded"] = record_unstarted(records_path, runtime, url, manifest_path, manifest, model, done,
                                                   row["start_error"])
                print(f"{template}: {model['served_name']}: {args.server} did not start: {row['start_error']}",
                      flush=True)
            else:
                asked = time.monotonic()
                status = ask(url, manifest_path, model["served_name"])
                row.update(requests_s=round(time.monotonic() - asked, 1), exit=status)
            # Kept only while it serves the manifest and runs: one that died is started afresh for the next model
            # (an exception stops it in the finally below).
            if why or not one_process or not server.running:
                server.stop()
                server = None
            print(json.dumps(row), flush=True)
            with open(args.work_dir / "timings.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            timings.append(row)
    finally:           # a killed run leaves no server behind
        if server is not None:
            server.stop()
    return timings


def default_templates(results_dir: Path) -> list:
    """Every template both HF runtimes are given (harness.suites.runtime_conformance.hf_serving), an identical text under the id their
    records already carry; the others said with why."""
    recorded = set()
    for name in SERVED:
        records, _ = SUITE.read_records(results_dir / "runtime-conformance" / f"{runtimes.get(name).record_name}.jsonl")
        recorded |= {r.template["id"] for r in records}
    selected, skipped = hf_form_templates(load_sources(), prefer=recorded)
    for template, why in skipped:
        print(f"{template}: not given: {why}", flush=True)
    print(f"{len(selected)} template(s): {', '.join(s.template for s in selected)}", flush=True)
    return [s.template for s in selected]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", choices=SERVED, required=True, help="the runtime to serve with")
    p.add_argument("--template", action="append", metavar="ID",
                   help="a pinned template id (repeatable; default: every template both runtimes are given)")
    p.add_argument("--replay", metavar="MODEL",
                   help="instead of templates: the model's committed in-process replies (every mode; BFCL's on "
                        "the drawn cases and each scenario opening's first replies), tool_choice auto, into "
                        "RESULTS/deployment/replays/MODEL.RUNTIME.jsonl")
    p.add_argument("--cases", type=int, default=5, metavar="N",
                   help="with --replay: cases per BFCL category, drawn as harness deployment --cases draws them "
                        "(default 5)")
    p.add_argument("--case", action="append", metavar="NAME",
                   help="only this case (repeatable; a record's replay; with --replay, MODEL/CASE/MODE)")
    p.add_argument("--variant", action="append", metavar="V", help="only this tool_choice variant (repeatable)")
    p.add_argument("--work-dir", type=Path, default=WORK_DIR, metavar="DIR",
                   help=f"scripted models, HF folders, server logs and timings.jsonl (default: {WORK_DIR})")
    p.add_argument("--results-dir", type=Path, default=ROOT / "results", metavar="DIR")
    p.add_argument("--port", type=int, default=8811)
    p.add_argument("--start-limit", type=float, default=900.0, metavar="SECONDS",
                   help="how long a server may take to answer /v1/models (default 900)")
    p.add_argument("--server-per-model", action="store_true",
                   help="start the runtime once per scripted model, naming it (default: once per part, "
                        "transformers serve loading each folder a request names, vLLM reloading each model's "
                        "weights in place; benchmarks/hf_serving_bench.py compares)")
    args = p.parse_args()
    python = vllm_python()
    if python is None:
        print(f"the vLLM CPU environment is not built: {SETUP_COMMAND}", file=sys.stderr)
        return 2
    args.work_dir = args.work_dir.resolve()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    # SIGTERM unwinds like ^C, so the server of the model under way is stopped (it runs in a session of its own).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.replay:
        if args.template:
            print("--replay serves the model's own template: give no --template", file=sys.stderr)
            return 2
        try:
            rows = run_replay(args.replay, args, python)
        except HarnessError as exc:
            print(f"--replay {args.replay}: {exc}", file=sys.stderr)
            return 2
    else:
        templates = args.template or default_templates(args.results_dir)
        rows = [row for template in templates for row in run_template(template, args, python)]
    failed = [r for r in rows if r.get("start_error") or r.get("exit")]
    print(f"{len(rows)} model(s) served, {len(failed)} with a failure; timings in {args.work_dir / 'timings.jsonl'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
