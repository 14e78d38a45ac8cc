"""Runtime conformance: every case of a template's corpus (harness.suites.runtime_conformance.corpus), written by scripted
models through a real runtime's /v1/chat/completions, non-streamed and streamed, and labelled
(harness.suites.runtime_conformance.judging).

Per template and runtime: the requests (case × tool_choice variant) are packed into as few scripted models as
their positions allow, keyed to our render; the runtime gives its own prompt length of every request on the first
of them (see harness.scripted.keying), and requests it counts otherwise get models keyed to its count.
Each model is served once for all its requests; a runtime that holds many models in one process (llama-cpp-python)
starts once per phase of a chunk of templates, not once per model (harness.backends.servers.ModelHost). Records are
appended as they land (fsynced) and a run resumes past what is recorded; a request that kills the server is
recorded as a runtime-error and the server is started again."""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends import runtimes
from harness.backends.chat_answers import chat_answer, chat_stream
from harness.backends.openai import wire_messages
from harness.scripted.keying import PromptKey, render_key, runtime_key
from harness.scripted.plan import GPT2, build_models, pack, profile_with_tokens, reply_ids
from harness.scripted.rotary import rotary_vocab, with_bos
from harness.scripted.vocab import CONTEXT_LENGTH, vocab_for
from harness.backends.servers import LocalServer, ModelHost
from harness.core.errors import ServerStartError, TemplateError
from harness.core.hashing import sha256_json, sha256_text
from harness.suites.runtime_conformance import history_cases
from harness.suites.runtime_conformance.judging import conformance_record
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord
from harness.suites.runtime_conformance.scheduling import Stopped, in_workers, shares
from harness.suites.runtime_conformance.corpus import AUTO, NAMED, NAMED_OTHER, NO_PARALLEL, NONE, REQUIRED, Renderer
from harness.storage.transcripts import now, read_transcript
from harness.storage.transcript_writer import TranscriptWriter
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
    return sha256_json([case.messages, case.tools, case.reply, case.template_kwargs])[:16]


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
    harness.suites.runtime_conformance.corpus writes them again)."""
    return {k: v for k, v in body.items() if k not in ("messages", "tools")}


@dataclass
class Prepared:
    requests: dict      # name -> Request
    ours: dict          # name -> PromptKey of our render
    keys: dict          # name -> PromptKey the models are keyed to
    ids: dict           # name -> the reply's token ids
    models: list        # ModelPlan
    paths: list         # their GGUF files
    refused: list       # (name, why) no model can hold
    built: list         # every GGUF written for these requests, served or not
    refusals: dict = field(default_factory=dict)   # name -> (plain, stream) asked though not keyed


def local_server(kind: str, workdir: Path, path: Path, models: dict | None = None, binary: Path | None = None
                 ) -> LocalServer:
    """The server for a scripted model (or, for a runtime that hosts several, a set of them: see ModelHost),
    started with the settings its runtime declares for a conformance run; binary: the user's own build."""
    settings = runtimes.get(kind).conformance_settings
    log = Path(workdir) / f"{path.stem}-{kind}{'-shared' if models else ''}.log"
    return LocalServer(kind, path, alias=path.stem, ready_timeout=300, n_ctx=CONTEXT_LENGTH, settings=settings,
                       models=models, log_path=log, binary=binary)


class TemplateRun:
    """One template's requests through one runtime the harness starts (kind: its name in harness.backends.runtimes).
    plan() builds models keyed by our render; rekey() asks the runtime for its own key of every request on the
    first of them; rekeyed() builds models for the requests whose key differs; serve() asks each model's
    requests. run_suite() does this for many templates at once, so that a runtime holding many models in one
    process starts once per phase, not once per model."""

    def __init__(self, kind: str, runtime: str, ref, corpus, workdir: Path, writer, log=print, arch: str | None = None,
                 binary: Path | None = None, build: dict | None = None):
        self.kind, self.runtime, self.ref, self.corpus = kind, runtime, ref, corpus
        # The user's own build of the runtime's binary (None: its own), and what ran, for each record.
        self.binary, self.build = binary, build
        self.stop: threading.Event | None = None      # set: stop before the next request (run_suite's workers)
        self.workdir, self.writer, self.log = Path(workdir), writer, log
        self.profile = profile_with_tokens(ref.text, family_get(corpus.family) if corpus.family else None)
        # The scripted architecture the runtime loads (Runtime.scripted_arch); a rotary model's vocabulary has a BOS
        # of its own, which its template writes (harness.scripted.rotary.with_bos).
        self.arch = arch or (runtimes.get(kind).scripted_arch if kind else GPT2)
        self.rotary = self.arch != GPT2
        self.vocab = rotary_vocab(self.profile) if self.rotary else vocab_for(self.profile)
        self.template = ref.text
        # Our prompt as the runtime should render it: the scripted vocabulary's BOS and end of turn, which is what
        # the runtime hands the template (the pin's tokens are the real model's; here only the reply uses them).
        profile = self.vocab.profile
        self.renderer = Renderer(ref, corpus.detection, bos=profile.bos or "", eos=profile.end_of_turn)
        markers = family_get(corpus.family).markers if corpus.family else ()
        self.marker = markers[0] if markers else None
        self.stem = f"{ref.id}-{self.profile}" + (f"-{self.arch}" if self.rotary else "")

    def prepare(self, requests: list, from_runtime: bool = True) -> Prepared:
        """plan(), then with from_runtime rekey() on a server of the first model and rekeyed(): the models that
        answer every request, keyed to the runtime's prompts (or to our render)."""
        p = self.plan(requests)
        if from_runtime and p.paths:
            make = functools.partial(local_server, self.kind, self.workdir, binary=self.binary)
            with ModelHost(self.kind, p.paths[:1], make) as host:
                self.rekey(p, host)
            self.rekeyed(p)
        return p

    def plan(self, requests: list) -> Prepared:
        """Models keyed by our render, built; no server is asked."""
        by_name = {r.name: r for r in requests}
        ours, ids, counted, spelt = {}, {}, {}, {}      # variants of a case share its prompt and reply
        prompts = {r.name: self.renderer.prompt(r.case.messages, r.case.tools or None, r.case.template_kwargs)
                   for r in requests}
        bos_refused = []
        if self.rotary:
            prompts, bos_refused = self._with_bos(prompts)
        for r in requests:
            prompt = prompts[r.name]
            ours[r.name] = counted.get(prompt) or counted.setdefault(prompt, render_key(self.vocab, prompt))
            ids[r.name] = spelt.get(r.case.reply) or spelt.setdefault(r.case.reply, reply_ids(self.vocab, r.case.reply))
        wanted = [(n, ours[n].tokens, ids[n]) for n in by_name if n not in dict(bos_refused)]
        models, refused = pack(wanted)
        paths = build_models(self.workdir, self.stem, self.profile, self.template, models, self.arch)
        return Prepared(by_name, ours, dict(ours), ids, models, paths, refused + bos_refused, list(paths))

    def _with_bos(self, prompts: dict) -> tuple:
        """A rotary model's prompts and template: BOS written first by the template (prefixed where its render does
        not open with it), and the requests whose prompt would hold another BOS, refused with why."""
        bos = self.vocab.profile.bos
        opens = all(p.startswith(bos) for p in prompts.values())
        self.template = with_bos(self.ref.text, opens)
        prompts = {n: p if opens else bos + p for n, p in prompts.items()}
        bos_id = self.vocab.id(bos)
        refused = [(n, f"the prompt holds BOS ({bos}) more than once; a rotary scripted model needs it once, first")
                   for n, p in prompts.items() if self.vocab.prompt_ids(p).count(bos_id) != 1]
        return prompts, refused

    def rekey(self, p: Prepared, host: ModelHost) -> None:
        """The runtime's key of every request, asked on the first planned model (a stand-in of the same vocabulary
        and template). Requests whose key differs leave their models (rekeyed() builds theirs); so do the requests
        the runtime refused; models left with no request are dropped."""
        try:
            server, model = host.serve(p.paths[0])
        except ServerStartError as exc:
            p.keys = {n: PromptKey(None, "server start", error=str(exc)) for n in p.requests}
            p.models, p.paths = [], []
            return
        p.keys = {n: runtime_key(self.kind, server.base_url, model, r.body, TIMEOUT) for n, r in p.requests.items()}
        # A request the runtime would not key (it refused to render the prompt) is still sent to its chat endpoint,
        # so its record says what a client gets there: a 4xx and words, or a 5xx. No model is keyed to it, so
        # nothing more is judged.
        url = server.base_url + "/v1/chat/completions"
        for n, key in p.keys.items():
            if key.tokens is None:
                body = {**p.requests[n].body, "model": model, "max_tokens": EXTRA_TOKENS}
                p.refusals[n] = (self._ask(server, chat_answer, url, body), self._ask(server, chat_stream, url, body))
        moved = {n for n in p.requests if p.keys[n].tokens != p.ours[n].tokens}
        for plan in p.models:
            for slot in plan.slots:
                slot.requests = [n for n in slot.requests if n not in moved]
        kept = [i for i, m in enumerate(p.models) if any(slot.requests for slot in m.slots)]
        p.models, p.paths = [p.models[i] for i in kept], [p.paths[i] for i in kept]
        p.refused = [(n, why) for n, why in p.refused if n not in moved]

    def rekeyed(self, p: Prepared) -> tuple:
        """Models for the requests whose runtime key differs from ours, keyed to the runtime's count; added to p
        and returned as (models, paths)."""
        served = {n for plan in p.models for slot in plan.slots for n in slot.requests}
        refused = {n for n, _ in p.refused}
        moved = [n for n in p.requests if p.keys[n].tokens is not None and n not in served | refused]
        extra, again = pack([(n, p.keys[n].tokens, p.ids[n]) for n in moved])
        paths = build_models(self.workdir, f"{self.stem}-rekeyed", self.profile, self.template, extra, self.arch)
        p.models, p.paths, p.built = p.models + extra, p.paths + paths, p.built + paths
        p.refused += again
        return extra, paths

    def unserved(self, p: Prepared) -> list:
        """Records of the requests no model answers: the runtime refused them, or no model can hold them."""
        records = [self._record(p.requests[n], p.ours[n], p.keys[n], None, *p.refusals.get(n, ({}, {})))
                   for n in p.requests if p.keys[n].tokens is None]
        for name, why in p.refused:
            records.append(self._record(p.requests[name], p.ours[name], p.keys[name], None, {"error": why}, {}))
        return records

    def serve(self, p: Prepared, host: ModelHost, models: list, paths: list) -> list:
        records = []
        for plan, path in zip(models, paths):
            requests = [p.requests[name] for slot in plan.slots for name in slot.requests]
            try:
                server, model = host.serve(path)
            except ServerStartError as exc:
                records += [self._record(r, p.ours[r.name], p.keys[r.name], path, {"error": f"server start: {exc}"},
                                         {}) for r in requests]
                continue
            url = server.base_url + "/v1/chat/completions"
            for r in requests:
                if self.stop is not None and self.stop.is_set():
                    raise Stopped        # another worker failed or the run was stopped: unwind, servers stopped
                # A runtime that rewrites the reply under its grammar is seen within a few tokens of the script.
                body = {**r.body, "model": model, "max_tokens": len(p.ids[r.name]) + EXTRA_TOKENS}
                # A runtime that shows the tokens it sampled (and their text before its parser) when asked; the
                # fields change nothing else.
                shown = runtimes.get(self.kind).shown_fields
                plain = self._ask(server, chat_answer, url, {**body, **shown})
                stream = self._ask(server, chat_stream, url, body)
                records.append(self._record(r, p.ours[r.name], p.keys[r.name], path, plain, stream,
                                            p.ids[r.name]))
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

    def history_of(self, r: Request, ours: PromptKey, key: PromptKey) -> dict | None:
        """For a case whose history sends reasoning back: the template's renders the runtime's prompt is held
        against (with and without the reasoning, ...: harness.suites.runtime_conformance.history_cases), rendered and counted as
        our prompt is."""
        sent = history_cases.reasoning_sent(r.case.messages)
        if not sent or ours.prompt is None:
            return None
        ignores = bool(self.kind) and "chat_template_kwargs" in runtimes.get(self.kind).ignores
        bos = self.vocab.profile.bos if self.rotary and ours.prompt.startswith(self.vocab.profile.bos) else ""
        rendered = []
        for how, messages, kwargs in history_cases.renders(r.case.messages, r.case.template_kwargs, ignores):
            try:
                text = self.renderer.prompt(messages, r.case.tools or None, kwargs)
            except TemplateError:         # a template that iterates arguments refuses them as text: no such render
                continue
            text = text if text.startswith(bos) else bos + text      # as plan() prefixes a rotary model's prompts
            rendered.append((how, text, render_key(self.vocab, text).tokens))
        return history_cases.facts(rendered, sent, key.prompt, self.renderer.bos)

    def _record(self, r: Request, ours: PromptKey, key: PromptKey, path, plain: dict, stream: dict,
                reply_ids: tuple | None = None):
        bos = self.renderer.bos
        same = None if key.prompt is None else key.prompt.removeprefix(bos) == (ours.prompt or "").removeprefix(bos)
        key_seen = {**key.to_json(), "same_text": same}
        for answer in (plain, stream, key_seen):
            if answer.get("error"):       # the port and the scratch folder change from run to run; the words do not
                answer["error"] = LOCAL_URL.sub("", answer["error"]).replace(f"{self.workdir}/", "")
        typed = conformance_record(
            runtime=self.runtime, server=self.kind, template={"id": self.ref.id, "sha256": sha256_text(self.ref.text)},
            family=self.corpus.family, profile=self.profile, case={"name": r.case.name, "hash": case_hash(r.case)},
            variant=r.variant, request=request_switches(r.body), reply=r.case.reply,
            reply_tokens=None if reply_ids is None else len(reply_ids),
            reply_ids=None if reply_ids is None else list(reply_ids), expect=r.case.expect,
            ours={"tokens": ours.tokens}, key=key_seen, model=path.name if path else None, plain=plain,
            stream=stream, recorded=now(), tools=r.case.tools, marker=self.marker,
            reparse=lambda text: r.case.parse(self.corpus.family, text), build=self.build,
            history=self.history_of(r, ours, key))
        self.writer.append(typed)
        self.log(typed)
        return typed


def run_suite(kind: str, runtime: str, templates: list, path: Path, workdir: Path, done: set, cases=None,
              variants=None, log=print, keep=False, binary: Path | None = None, build: dict | None = None) -> tuple:
    """templates: (ResolvedTemplate, Corpus) pairs. Returns (records written, templates skipped with why).
    binary: the user's own build of the runtime's binary (None: its own); build: what ran (Runtime.build), written
    into every record.

    Templates go in chunks (scheduling.shares: a template of many requests in parts, the work among the runtime's
    workers): their models keyed by our render are built and served by one ModelHost, which first gives each
    template's runtime key; then the models of requests the runtime keys otherwise are built and served by a
    second host. A runtime that hosts several models thus starts twice per chunk; any other once per model."""
    skipped, seen, todo = [], {}, []
    Path(workdir).mkdir(parents=True, exist_ok=True)
    written = []
    # The lock is taken before the done set is read, as harness run takes it: a second run on this file stops
    # at once, naming the run that holds it, and one that starts after it skips what it recorded.
    with TranscriptWriter(path, wait=False) as writer:
        done = set(done) | {r.done_key() for r in read_transcript(path, kinds=(RuntimeConformanceRecord,)).records}
        for ref, corpus in templates:
            # A template no family reads has no corpus of its own (build_corpus says why); a corpus handed in
            # (deployment replays) is asked as given: its expectations say no call is read.
            if not corpus.family and corpus.skipped and not corpus.cases:
                skipped.append((ref.id, corpus.skipped[0][1]))
                continue
            sha = sha256_text(ref.text)
            if seen.setdefault(sha, ref.id) != ref.id:
                skipped.append((ref.id, f"the same template as {seen[sha]}"))
                continue
            requests = [r for r in requests_for(corpus, cases, variants)
                        if (sha, r.case.name, case_hash(r.case), r.variant) not in done]
            if requests:
                todo.append((ref, corpus, requests))
        def work(share: list, stop: threading.Event | None = None, folder: Path = Path(workdir)) -> list:
            out = []
            folder.mkdir(parents=True, exist_ok=True)
            for chunk in share:
                if stop is not None and stop.is_set():
                    break
                runs = [(TemplateRun(kind, runtime, ref, corpus, folder, writer, log, binary=binary, build=build),
                         requests) for ref, corpus, requests in chunk]
                for run, _ in runs:
                    run.stop = stop
                out += _run_chunk(kind, folder, runs, keep, binary)
            return out

        each = shares(todo, runtimes.get(kind).conformance_workers)
        if len(each) == 1:
            written += work(each[0])
        else:
            # Each worker builds, serves and deletes its models in a folder of its own: two workers can plan a
            # model of the same name (one case under two tool_choice values, split between them), and one
            # worker's clean-up must not delete a file the other is about to serve.
            folders = [Path(workdir) / f"worker-{i}" for i in range(len(each))]
            written += in_workers(lambda share, stop: work(share[1], stop, share[0]), list(zip(folders, each)))
    return written, skipped


def _run_chunk(kind: str, workdir: Path, runs: list, keep: bool, binary: Path | None = None) -> list:
    make = functools.partial(local_server, kind, workdir, binary=binary)
    plans, records = [], []
    try:
        for run, requests in runs:
            plans.append((run, run.plan(requests)))
        with ModelHost(kind, [path for _, p in plans for path in p.paths], make) as host:
            for run, p in plans:
                if p.paths:
                    run.rekey(p, host)
                records += run.serve(p, host, p.models, p.paths)
        extra = [(run, p, run.rekeyed(p)) for run, p in plans]
        with ModelHost(kind, [path for *_, (_, paths) in extra for path in paths], make) as host:
            for run, p, (models, paths) in extra:
                records += run.unserved(p) + run.serve(p, host, models, paths)
    finally:
        if not keep:      # ~20 MB each; a suite over every template would pile them up
            for _, p in plans:
                for path in p.built:
                    path.unlink(missing_ok=True)
    return records
