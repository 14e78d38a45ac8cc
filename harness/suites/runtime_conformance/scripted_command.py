"""`harness scripted-model`: GGUFs that write given replies to given conversations, with a template embedded,
and a manifest of what each one answers (docs/scripted-models.md)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from harness.backends import runtimes
from harness.scripted.vocab import CONTROL, USER_DEFINED

RENDER = "render"
# The runtime the printed serve commands start when neither --serve-with nor --key-from names one, and its port.
DEFAULT_SERVE, PORT = "llama-server", 8080


def run(args) -> int:
    from harness.core.errors import HarnessError
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.suites.runtime_conformance.corpus_file import cases_from_file
    from harness.pins.sources import resolve_template

    from harness.scripted.plan import WriteBudget, write_budget

    if args.max_bytes is not None and args.max_bytes < 0:
        raise HarnessError(f"--max-bytes {args.max_bytes}: a number of bytes, 0 or more")
    write_budget.set(WriteBudget(args.max_bytes if args.max_bytes is not None else write_budget.get().max_bytes,
                                 say=lambda message: print(message, file=sys.stderr, flush=True)))
    ref = resolve_template(args.template)
    corpus = cases_from_file(args.cases, ref) if args.cases else build_corpus(ref)
    if not corpus.cases:
        raise HarnessError(f"{ref.id}: no case can be written: " + "; ".join(w for _, w in corpus.skipped))
    out = Path(args.out)
    serve_with = args.serve_with or (None if args.key_from == RENDER else args.key_from) or DEFAULT_SERVE
    path, models, refused = write_manifest(ref, corpus, out, args.key_from, serve_with, args.case)
    served = sum(len(m["requests"]) for m in models)
    print(f"{ref.id}: {len(models)} scripted model(s) answering {served} request(s) -> {out}; manifest {path}")
    for item in refused:
        print(f"  not keyed: {item['request']}: {item['why']}", file=sys.stderr)
    for line in serve_lines(runtimes.get(serve_with), out.resolve(), path.resolve(), models):
        print(line)
    return 0


def write_manifest(ref, corpus, out: Path, key_from: str = RENDER, serve_with: str = DEFAULT_SERVE,
                   cases=None) -> tuple:
    """Build the scripted models of `corpus` (only `cases` of it, None: all) in `out`, keyed to our render
    (key_from RENDER) or to a runtime's prompts, in the architecture `serve_with` loads, and write the manifest
    OUT/TEMPLATE.manifest.json. Returns (manifest path, its models, the requests no model answers with why)."""
    from harness.core.hashing import sha256_text
    from harness.scripted.keying import PromptKey
    from harness.suites.runtime_conformance.driver import TemplateRun, requests_for

    out.mkdir(parents=True, exist_ok=True)
    kind = None if key_from == RENDER else key_from      # our render asks no runtime
    # The models are built in the architecture the serving runtime loads (a rotary one for mistral.rs).
    planner = TemplateRun(kind, kind, ref, corpus, out, writer=None, log=None,
                          arch=runtimes.get(serve_with).scripted_arch)
    requests = requests_for(corpus, cases)
    prepared = planner.prepare(requests, from_runtime=kind is not None)
    models = []
    for plan, path in zip(prepared.models, prepared.paths):
        entries = []
        for slot in plan.slots:
            for name in slot.requests:
                r, key = prepared.requests[name], prepared.keys[name]
                entries.append({"case": r.case.name, "variant": r.variant, "request": r.body, "reply": r.case.reply,
                                "prompt_tokens": key.tokens, "key_source": key.source,
                                "reply_tokens": len(prepared.ids[name]), "reply_ids": list(prepared.ids[name]),
                                "expect": r.case.expect})
                # A history case: the template's renders the runtime's prompt length is judged against.
                history = planner.history_of(r, prepared.ours[name], PromptKey(None, key.source))
                if history is not None:
                    entries[-1]["history"] = history
        models.append({"file": path.name, "served_name": path.stem, "requests": entries})
    refused = [{"request": n, "why": k.error} for n, k in prepared.keys.items() if k.tokens is None]
    refused += [{"request": n, "why": why} for n, why in prepared.refused]
    manifest = {"template": {"id": ref.id, "sha256": sha256_text(ref.text)}, "family": corpus.family,
                "vocabulary": planner.profile, "marker_tokens": marker_tokens(planner.vocab),
                "key_from": key_from, "models": models, "refused": refused,
                "skipped_cases": [{"case": n, "why": w} for n, w in corpus.skipped]}
    path = out / f"{ref.id}.manifest.json"
    path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path, models, refused


def marker_tokens(vocab) -> list:
    """The family's markers the vocabulary holds as the real model's tokens: id, GGUF type, and whether the real
    tokenizer marks it special (harness.scripted.plan.profile_with_tokens)."""
    kinds = {CONTROL: "control", USER_DEFINED: "user-defined"}
    ids = {t: vocab.id(t) for t, _ in vocab.profile.hf_special}
    return [{"token": t, "id": ids[t], "gguf_type": kinds[vocab.types[ids[t]]], "special": special}
            for t, special in vocab.profile.hf_special]


def serve_lines(runtime, out: Path, manifest: Path, models: list) -> list:
    """Each served name, and the commands that serve the models with `runtime` on PORT and ask them, exactly as
    `harness runtime-conformance --server` would start it. A runtime that hosts several models serves them all
    from one process, asked in one run; any other serves one model at a time."""
    from harness.backends.servers import LocalServer
    from harness.core.errors import HarnessError
    from harness.scripted.vocab import CONTEXT_LENGTH

    lines = [f"  {m['served_name']}: {len(m['requests'])} request(s), {out / m['file']}" for m in models]
    groups = [models] if runtime.hosts_several_models else [[m] for m in models]
    url = f"http://127.0.0.1:{PORT}"
    for group in groups:
        if not group:
            continue
        first = out / group[0]["file"]
        several = {m["served_name"]: out / m["file"] for m in group[1:]} or None
        try:
            server = LocalServer(runtime.name, first, port=PORT, alias=group[0]["served_name"], n_ctx=CONTEXT_LENGTH,
                                 settings=runtime.conformance_settings, models=several,
                                 log_path=out / f"{runtime.name}.log")
            serve = subprocess.list2cmdline(server.command())
        except HarnessError as exc:
            serve = f"(cannot be written here: {exc})"
        only = [] if len(group) > 1 else ["--served-model", group[0]["served_name"]]
        run = [".venv/bin/harness", "runtime-conformance", "--endpoint", url, "--manifest", str(manifest), *only,
               "--runtime", runtime.record_name]
        lines += [f"serve ({runtime.name}): {serve}", f"run: {' '.join(shlex.quote(w) for w in run)}"]
    return lines


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scripted-model", help="write GGUFs that write given replies to given conversations (any GGUF runtime)",
        description="Build scripted models for a template: real GGUFs (a family's real vocabulary, the template "
                    "embedded, tiny weights) that write each case's reply after its conversation, and a manifest "
                    "(request, reply, prompt length, expected strict parse). Cases are the template's built-in "
                    "runtime-conformance corpus, or your own (--cases). Replies are keyed to prompt lengths: "
                    "from our render, or from a runtime the command starts on a first scripted model "
                    "(--key-from RUNTIME: as its module keys a prompt; llama-server: its /apply-template and "
                    "/tokenize; others: the usage.prompt_tokens of a one-token reply).")
    p.add_argument("--template", required=True, metavar="PATH_OR_ID", help="a pinned template id or a .jinja file")
    p.add_argument("--cases", type=Path, metavar="FILE",
                   help="YAML list of {name, messages, tools, reply, variants, template_kwargs} (default: the corpus)")
    p.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    p.add_argument("--key-from", choices=(RENDER, *runtimes.startable()), default=RENDER,
                   help="where prompt lengths come from (default render: ours; a runtime is exact for it)")
    p.add_argument("--serve-with", choices=runtimes.startable(), metavar="RUNTIME",
                   help="the runtime whose serve commands are printed, on port 8080, with the run that asks them "
                        f"(default: the --key-from runtime, else {DEFAULT_SERVE})")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for the GGUFs and the manifest")
    p.add_argument("--max-bytes", type=int, metavar="N",
                   help="write up to N bytes of new model files (default 2,000,000,000); the size is said before "
                        "anything is written, and a build past the bound writes nothing")
    p.set_defaults(func=run)
