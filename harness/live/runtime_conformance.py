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
import re
from dataclasses import dataclass
from pathlib import Path

from harness.backends.chat_answers import chat_answer, chat_stream
from harness.backends.openai import wire_messages
from harness.backends.scripted.keying import PromptKey, render_key, runtime_key
from harness.backends.scripted.plan import build_models, pack, profile_for, reply_ids
from harness.backends.scripted.vocab import CONTEXT_LENGTH, vocab_for
from harness.backends.servers import LocalServer
from harness.core.errors import ServerStartError
from harness.evaluation.runtime_conformance import KIND, classify
from harness.evaluation.runtime_corpus import AUTO, NAMED, NAMED_OTHER, NO_PARALLEL, NONE, REQUIRED, Renderer
from harness.evaluation.records import RuntimeConformanceRecord
from harness.evaluation.transcripts import TranscriptWriter, now
from harness.families import get as family_get

EXTRA_TOKENS = 8
LOCAL_URL = re.compile(r"http://127\.0\.0\.1:\d+")
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
    if variant in (NAMED, NAMED_OTHER):
        called = (case.expect["calls"] or [{"name": "get_weather"}])[0]["name"]
        name = called if variant == NAMED else next(t["function"]["name"] for t in case.tools
                                                     if t["function"]["name"] != called)
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif variant == NO_PARALLEL:
        body["tool_choice"], body["parallel_tool_calls"] = AUTO, False
    else:
        body["tool_choice"] = {AUTO: "auto", REQUIRED: "required", NONE: "none"}[variant]
    return body


def requests_for(corpus, cases=None, variants=None) -> list:
    return [Request(c, v, request_body(c, v)) for c in corpus.cases for v in c.variants
            if (not cases or c.name in cases) and (not variants or v in variants)]


def request_switches(body: dict) -> dict:
    """What a request sets beside the case's messages and tools (those follow from the case's name and hash:
    harness.evaluation.runtime_corpus writes them again)."""
    return {k: v for k, v in body.items() if k not in ("messages", "tools")}


def template_sha(ref) -> str:
    return hashlib.sha256(ref.text.encode()).hexdigest()


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

    def __init__(self, kind: str, runtime: str, ref, corpus, workdir: Path, writer, log=print, keep=True):
        self.kind, self.runtime, self.ref, self.corpus, self.keep = kind, runtime, ref, corpus, keep
        self.workdir, self.writer, self.log = Path(workdir), writer, log
        self.profile = profile_for(ref.text)
        self.vocab = vocab_for(self.profile)
        # Our prompt as the runtime should render it: the scripted vocabulary's BOS and end of turn, which is what
        # the runtime hands the template (the pin's tokens are the real model's; here only the reply uses them).
        profile = self.vocab.profile
        self.renderer = Renderer(ref, corpus.detection, bos=profile.bos or "", eos=profile.end_of_turn)
        markers = family_get(corpus.family).markers if corpus.family else ()
        self.marker = markers[0] if markers else None
        self.stem = f"{ref.id}-{self.profile}"

    def server(self, path: Path) -> LocalServer:
        # llama-cpp-python's server computes the logits of every prompt token by default (for logprobs, which
        # no request here asks): off, a 1,000-token prompt takes 0.05 s instead of 3 s on a scripted model.
        extra = ["--logits_all", "false"] if self.kind == "llama-cpp-python" else []
        return LocalServer(self.kind, path, extra_args=extra, alias=self.stem, ready_timeout=300,
                           n_ctx=CONTEXT_LENGTH, log_path=self.workdir / f"{self.stem}-{self.kind}.log")

    def prepare(self, requests: list, from_runtime: bool = True) -> "Prepared":
        """Models keyed by our render come first; with from_runtime the first is served and answers the
        runtime's own key of every request (a first stand-in of the same vocabulary and template). Only the
        requests whose key differs get models built again, so a runtime that renders as we do costs one server
        start per model. The returned plan may hold that first server, still running."""
        by_name = {r.name: r for r in requests}
        ours, ids, counted, spelt = {}, {}, {}, {}      # variants of a case share its prompt and reply
        for r in requests:
            prompt = self.renderer.prompt(r.case.messages, r.case.tools or None, r.case.template_kwargs)
            ours[r.name] = counted.get(prompt) or counted.setdefault(prompt, render_key(self.vocab, prompt))
            ids[r.name] = spelt.get(r.case.reply) or spelt.setdefault(r.case.reply, reply_ids(self.vocab, r.case.reply))
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
        # Requests the runtime refused are not served; those whose prompt it counts otherwise get models of their
        # own, keyed to its count. The rest stay on the models built, the first of which is already serving.
        moved = {n for n in by_name if keys[n].tokens != ours[n].tokens}
        for plan in models:
            for slot in plan.slots:
                slot.requests = [n for n in slot.requests if n not in moved]
        kept = [i for i, m in enumerate(models) if any(slot.requests for slot in m.slots)]
        if kept[:1] == [0]:
            prepared.server = server
        else:
            server.stop()
        for i, path in enumerate(paths):
            if i not in kept and not self.keep:
                path.unlink(missing_ok=True)
        extra, again = pack([(n, keys[n].tokens, ids[n]) for n in moved if keys[n].tokens is not None])
        prepared.models = [models[i] for i in kept] + extra
        prepared.paths = [paths[i] for i in kept] + build_models(self.workdir, f"{self.stem}-rekeyed", self.profile,
                                                                 self.ref.text, extra)
        prepared.refused = [(n, why) for n, why in refused if n not in moved] + again
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
            if not self.keep:
                path.unlink(missing_ok=True)     # ~75 MB each; a suite over every template would pile them up
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
            answer["error"] += f"; the server died ({server.exit_status()})"
            try:
                server.start()
                answer["error"] += " and was started again"
            except ServerStartError as exc:       # the next requests fail alike and are recorded so
                answer["error"] += f" and did not start again: {exc}"
        return answer

    def _record(self, r: Request, ours: PromptKey, key: PromptKey, path, plain: dict, stream: dict,
                reply_tokens: int | None = None) -> dict:
        bos = self.renderer.bos
        same = None if key.prompt is None else key.prompt.removeprefix(bos) == (ours.prompt or "").removeprefix(bos)
        record = {"kind": KIND, "runtime": self.runtime, "server": self.kind,
                  "template": {"id": self.ref.id, "sha256": template_sha(self.ref)}, "family": self.corpus.family,
                  "profile": self.profile, "case": {"name": r.case.name, "hash": case_hash(r.case)},
                  "variant": r.variant, "request": request_switches(r.body), "reply": r.case.reply,
                  "reply_tokens": reply_tokens, "expect": r.case.expect, "ours": {"tokens": ours.tokens},
                  "key": {**key.to_json(), "same_text": same}, "model": path.name if path else None,
                  "plain": plain, "stream": stream, "recorded": now()}
        for answer in (plain, stream, record["key"]):
            if answer.get("error"):       # the port changes from run to run; the path and the words do not
                answer["error"] = LOCAL_URL.sub("", answer["error"])
        record["labels"], record["details"] = classify(record, r.case.tools, self.marker)
        typed = RuntimeConformanceRecord.from_json(record)
        self.writer.append(typed)
        self.log(typed)
        return typed


def run_suite(kind: str, runtime: str, templates: list, path: Path, workdir: Path, done: set, cases=None,
              variants=None, log=print, keep=False) -> tuple:
    """templates: (ResolvedTemplate, Corpus) pairs. Returns (records written, templates skipped with why)."""
    written, skipped, seen = [], [], {}
    Path(workdir).mkdir(parents=True, exist_ok=True)
    with TranscriptWriter(path) as writer:
        for ref, corpus in templates:
            if not corpus.family:
                skipped.append((ref.id, corpus.skipped[0][1]))
                continue
            sha = template_sha(ref)
            if seen.setdefault(sha, ref.id) != ref.id:
                skipped.append((ref.id, f"the same template as {seen[sha]}"))
                continue
            todo = [r for r in requests_for(corpus, cases, variants)
                    if (sha, r.case.name, case_hash(r.case), r.variant) not in done]
            if todo:
                written += TemplateRun(kind, runtime, ref, corpus, workdir, writer, log, keep).run(todo)
    return written, skipped
