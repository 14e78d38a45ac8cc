"""Runtime conformance: every case of a template's corpus (harness.evaluation.runtime_corpus), written by scripted
models through a real runtime's /v1/chat/completions, non-streamed and streamed, and labelled
(harness.evaluation.runtime_conformance).

Per template and runtime: the requests (case × tool_choice variant) are keyed to the runtime's own prompt
lengths on a first scripted model of the same vocabulary and template that scripts nothing (see
harness.backends.scripted.keying), packed into as few scripted models as their positions allow, and each model
is served once for all its requests. Records are appended as they land (fsynced) and a run resumes past what is
recorded; a request that kills the server is recorded as a runtime-error and the server is started again."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from harness.backends.openai import chat_answer, chat_stream, wire_messages
from harness.backends.scripted.keying import PromptKey, render_key, runtime_key
from harness.backends.scripted.plan import build_models, pack, profile_for, reply_ids
from harness.backends.scripted.vocab import vocab_for
from harness.backends.servers import LocalServer
from harness.core.errors import ServerStartError
from harness.evaluation.runtime_conformance import KIND, classify
from harness.evaluation.runtime_corpus import AUTO, NAMED, NO_PARALLEL, NONE, REQUIRED, Renderer
from harness.evaluation.transcripts import TranscriptWriter, now
from harness.families import get as family_get

EXTRA_TOKENS = 16
TIMEOUT = 120.0


@dataclass
class Request:
    case: object
    variant: str
    body: dict

    @property
    def name(self) -> str:
        return f"{self.case.name}/{self.variant}"


def case_hash(case) -> str:
    blob = json.dumps([case.messages, case.tools, case.reply, case.template_kwargs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def request_body(case, variant: str) -> dict:
    body = {"messages": wire_messages(case.messages), "temperature": 0.0, "seed": 0}
    if case.tools:
        body["tools"] = case.tools
    if case.template_kwargs:
        body["chat_template_kwargs"] = case.template_kwargs
    if variant == NAMED:
        name = (case.expect["calls"] or [{"name": "get_weather"}])[0]["name"]
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif variant == NO_PARALLEL:
        body["tool_choice"], body["parallel_tool_calls"] = AUTO, False
    else:
        body["tool_choice"] = {AUTO: "auto", REQUIRED: "required", NONE: "none"}[variant]
    return body


def requests_for(corpus, cases=None, variants=None) -> list:
    return [Request(c, v, request_body(c, v)) for c in corpus.cases for v in c.variants
            if (not cases or c.name in cases) and (not variants or v in variants)]


def template_sha(ref) -> str:
    return hashlib.sha256(ref.text.encode()).hexdigest()


def done_key(record: dict) -> tuple:
    return record["template"]["sha256"], record["case"]["name"], record["case"]["hash"], record["variant"]


@dataclass
class Prepared:
    requests: dict      # name -> Request
    ours: dict          # name -> PromptKey of our render
    keys: dict          # name -> PromptKey the models are keyed to
    ids: dict           # name -> the reply's token ids
    models: list        # ModelPlan
    paths: list         # their GGUF files
    refused: list       # (name, why) no model can hold
    server: LocalServer | None = None


class TemplateRun:
    """One template's requests through one runtime the harness starts (kind: llama-server, llama-cpp-python)."""

    def __init__(self, kind: str, runtime: str, ref, corpus, workdir: Path, writer, log=print):
        self.kind, self.runtime, self.ref, self.corpus = kind, runtime, ref, corpus
        self.workdir, self.writer, self.log = Path(workdir), writer, log
        self.profile = profile_for(ref.text)
        self.vocab = vocab_for(self.profile)
        self.renderer = Renderer(ref, corpus.detection)
        markers = family_get(corpus.family).markers if corpus.family else ()
        self.marker = markers[0] if markers else None
        self.stem = f"{ref.id}-{self.profile}"

    def server(self, path: Path) -> LocalServer:
        return LocalServer(self.kind, path, alias=self.stem, log_path=self.workdir / f"{self.stem}-{self.kind}.log",
                           ready_timeout=300)

    def prepare(self, requests: list, from_runtime: bool = True) -> "Prepared":
        """Models keyed by our render come first; with from_runtime they are served and answer the runtime's
        own key of every request (a first stand-in of the same vocabulary and template). Only where a key
        differs are the models built again to the runtime's keys, so a runtime that renders as we do costs one
        server start per model. The returned plan may hold that first server, still running."""
        by_name = {r.name: r for r in requests}
        ours, ids = {}, {}
        for r in requests:
            ours[r.name] = render_key(self.vocab, self.renderer.prompt(r.case.messages, r.case.tools or None,
                                                                       r.case.template_kwargs))
            ids[r.name] = reply_ids(self.vocab, r.case.reply)
        models, refused = pack([(n, ours[n].tokens, ids[n]) for n in by_name])
        paths = build_models(self.workdir, self.stem, self.profile, self.ref.text, models)
        prepared = Prepared(by_name, ours, dict(ours), ids, models, paths, refused)
        if not from_runtime or not paths:
            return prepared
        server = self.server(paths[0])
        try:
            server.start()
        except ServerStartError as exc:
            prepared.keys = {n: PromptKey(None, "server start", error=str(exc)) for n in by_name}
            prepared.models, prepared.paths = [], []
            return prepared
        keys = {n: runtime_key(self.kind, server.base_url, server.model, r.body, TIMEOUT) for n, r in by_name.items()}
        prepared.keys = keys
        if any(keys[n].tokens is not None and keys[n].tokens != ours[n].tokens for n in by_name):
            server.stop()
            prepared.models, prepared.refused = pack([(n, keys[n].tokens, ids[n]) for n in by_name
                                                      if keys[n].tokens is not None])
            prepared.paths = build_models(self.workdir, self.stem, self.profile, self.ref.text, prepared.models)
        else:
            refused = {n for n in by_name if keys[n].tokens is None}
            for plan in prepared.models:
                for slot in plan.slots:
                    slot.requests = [n for n in slot.requests if n not in refused]
            prepared.server = server
        return prepared

    def run(self, requests: list) -> list:
        p = self.prepare(requests)
        records = [self._record(p.requests[n], p.ours[n], p.keys[n], None, {}, {}) for n in p.requests
                   if p.keys[n].tokens is None]
        for name, why in p.refused:
            records.append(self._record(p.requests[name], p.ours[name], p.keys[name], None, {"error": why}, {}))
        for n, (plan, path) in enumerate(zip(p.models, p.paths)):
            served = [p.requests[name] for slot in plan.slots for name in slot.requests]
            server = p.server if n == 0 and p.server else self.server(path)
            records += self._serve(server, path, served, p.ours, p.keys, p.ids)
        return records

    def _serve(self, server: LocalServer, path: Path, requests: list, ours, keys, ids) -> list:
        records = []
        try:
            server.start()
        except ServerStartError as exc:
            return [self._record(r, ours[r.name], keys[r.name], path, {"error": f"server start: {exc}"}, {})
                    for r in requests]
        try:
            url = server.base_url + "/v1/chat/completions"
            for r in requests:
                # A runtime that rewrites the reply under its grammar is seen within a few tokens of the script.
                body = {**r.body, "model": server.model, "max_tokens": len(ids[r.name]) + EXTRA_TOKENS}
                plain = self._ask(server, chat_answer, url, body)
                stream = self._ask(server, chat_stream, url, body)
                records.append(self._record(r, ours[r.name], keys[r.name], path, plain, stream, len(ids[r.name])))
        finally:
            server.stop()
        return records

    def _ask(self, server, ask, url, body) -> dict:
        answer = ask(url, body, TIMEOUT)
        if answer.get("error") and not server.running:
            answer["error"] += f"; the server died ({server.exit_status()}) and was started again"
            server.start()
        return answer

    def _record(self, r: Request, ours: PromptKey, key: PromptKey, path, plain: dict, stream: dict,
                reply_tokens: int | None = None) -> dict:
        same = None if key.prompt is None else key.prompt.removeprefix(self.ref.bos_token or "") == \
            (ours.prompt or "").removeprefix(self.ref.bos_token or "")
        record = {"kind": KIND, "runtime": self.runtime, "server": self.kind,
                  "template": {"id": self.ref.id, "sha256": template_sha(self.ref)}, "family": self.corpus.family,
                  "profile": self.profile, "case": {"name": r.case.name, "hash": case_hash(r.case)},
                  "variant": r.variant, "request": r.body, "reply": r.case.reply,
                  "reply_tokens": reply_tokens, "expect": r.case.expect, "ours": {"tokens": ours.tokens},
                  "key": {**key.to_json(), "same_text": same}, "model": path.name if path else None,
                  "plain": plain, "stream": stream, "recorded": now()}
        record["labels"], record["details"] = classify(record, r.case.tools, self.marker)
        self.writer.append(record)
        self.log(record)
        return record


def run_suite(kind: str, runtime: str, templates: list, path: Path, workdir: Path, done: set, cases=None,
              variants=None, log=print) -> tuple:
    """templates: (ResolvedTemplate, Corpus) pairs. Returns (records written, templates skipped with why)."""
    written, skipped = [], []
    with TranscriptWriter(path) as writer:
        for ref, corpus in templates:
            if not corpus.family:
                skipped.append((ref.id, corpus.skipped[0][1]))
                continue
            sha = template_sha(ref)
            todo = [r for r in requests_for(corpus, cases, variants)
                    if (sha, r.case.name, case_hash(r.case), r.variant) not in done]
            if todo:
                written += TemplateRun(kind, runtime, ref, corpus, workdir, writer, log).run(todo)
    return written, skipped
