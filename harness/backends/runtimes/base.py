"""What a runtime is to the harness: the base class every module of harness.backends.runtimes subclasses.

Class attributes are the runtime's capabilities; the methods have the defaults of a plain OpenAI-compatible
server, so a runtime overrides only where it differs. A runtime the harness cannot start (it is served by the user,
or needs an environment built apart) sets startable False and is driven through `--endpoint`."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from harness.backends.transport import request_json
from harness.core.errors import ServerReplyError, ServerStartError
from harness.families import get as family_get

USAGE = "usage.prompt_tokens of a one-token chat completion"


@dataclass
class PromptKey:
    """The prompt length a runtime gives a request (harness.scripted.keying keys a scripted reply to it)."""
    tokens: int | None
    source: str
    prompt: str | None = None       # the runtime's prompt text, where it shows it
    error: str | None = None        # the runtime refused the request (HTTP status and its words)

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "source": self.source, "error": self.error}


class Runtime:
    # The name in the table, `--server` and `--key-from`, and the records' `server` field.
    name = ""
    # The name its committed records carry (`--runtime`'s default): the runtime and the version the harness runs.
    record_name = ""
    # One line a reader of the docs and the findings page sees about it.
    summary = ""
    # The version it runs (its records' `build`), where no binary says it.
    version: str | None = None
    # It runs a binary of its own, which `--binary PATH` replaces with the user's build (LocalServer's binary).
    runs_binary = False
    # The registered runtime this one is a newer build of: the runtime-conformance page puts their root causes
    # side by side (harness.suites.runtime_conformance.versions).
    newer_than: str | None = None
    # The harness starts it (command(), health_path); otherwise it is only reached through --endpoint.
    startable = False
    health_path = "/v1/models"
    # More than one request decoded at once in one process (LocalServer's parallel).
    parallel_slots = False
    # One process holds several model files, loading the one a request names (LocalServer's models, ModelHost).
    hosts_several_models = False
    # Takes per-model settings (LocalServer's settings), written beside its models.
    model_settings = False
    # Serves one model per process yet takes another model's weights in place (reload()): the scripted models of
    # one manifest, which share a template, a vocabulary and shapes, are then served by one process, each loaded
    # over the last, instead of one start each. server_env: what its process needs in its environment for that.
    reloads_weights = False
    server_env: dict = {}
    # What the harness sets in its process's environment for every model it serves, real or scripted, where a
    # default install computes otherwise: NAME -> (value, what that changes, in words). LocalServer starts it so;
    # the deployment and runtime-conformance pages print each beside its rows, since a reader deploying the
    # runtime as installed gets the default.
    process_env: dict = {}
    # Request fields that make its answer show the token ids it sampled; empty where it never shows them.
    shown_fields: dict = {}
    # Request fields that make its chat answer carry the ids it generated where it shows no text of them (its
    # logprobs as token ids), and generated_text() their text: the deployment suite asks them on its non-streamed
    # request, so the strict parser reads what the model wrote on that server. Empty: it shows none this way.
    generated_fields: dict = {}
    # Request fields that make each request evaluate its whole prompt afresh, not from what an earlier request
    # left cached: the same greedy request then gets the same answer whichever request came before it.
    fresh_fields: dict = {}
    # Where it has no such field: (path, body) of a request sent before each one, whose prompt shares no prefix with
    # the next, so that one is evaluated afresh (llama-cpp-python reuses the longest prefix its last prompt shares
    # with the next, whatever a request says). None: not needed.
    fresh_request: tuple | None = None
    # Its prompt length comes from its own rendered text (shows_prompt) or from usage.prompt_tokens.
    shows_prompt = False
    # Request fields it accepts without effect: name -> what it does instead.
    ignores: dict = {}
    # Sampling fields of llama.cpp's (top_k, min_p, repeat_penalty) it refuses a request for (an error, not
    # ignored): the deployment suite leaves them out of its requests there, and its records say what was sent.
    refuses_fields: frozenset = frozenset()
    # The scripted models it is given (harness.scripted): "gpt2", the one-block GPT-2 GGUF every llama.cpp-based
    # runtime loads (its committed records were made with it), or "llama", the rotary model of harness.scripted.rotary
    # for a runtime that loads no GPT-2 GGUF.
    scripted_arch = "gpt2"
    # Settings its conformance run starts it with (LocalServer's settings).
    conformance_settings: dict | None = None
    # Servers its conformance run keeps going at once, each on its own share of the templates: more than one for a
    # runtime that answers one request at a time in one process and leaves a core idle (mistral.rs's worker).
    conformance_workers = 1
    # A runtime whose run needs an environment CI does not build: the script that builds it (from the repository
    # root) and why no conformance run of it is committed. Only such a runtime may lack a committed run.
    environment: str | None = None
    not_runnable_here: str | None = None
    # A runtime the harness does not start that a script of the repository serves and asks (from the repository
    # root: the command, to which --template, --case, --variant and --results-dir are added); its records' replay
    # lines run it, since an --endpoint replay needs the server already up.
    served_by: str | None = None
    # A runtime that reads calls only through a parser a family's `peers:` names for it: that project's key there
    # ("vllm", "transformers"), and what its records of a family naming none mean (None: such a family is not
    # served, as vLLM starts no server without a tool parser).
    reader_project: str | None = None
    no_reader: str | None = None
    # The command-line flag that gives it a chat template file instead of the model's own (None: it has none, so a
    # GGUF that embeds no template gets the runtime's fallback, which is another prompt than the stand-in's).
    template_file_flag: str | None = None

    def call_reader(self, family: str | None, template: str) -> str | None:
        """The parser it reads this template's calls with, as the family's `peers:` name it; None for none."""
        if not (self.reader_project and family):
            return None
        return family_get(family).peer(self.reader_project, template)

    @property
    def shows_sampled_ids(self) -> bool:
        return bool(self.shown_fields)

    # -- starting it -------------------------------------------------------------------------------------------
    def check_startable(self) -> None:
        """Raise ServerStartError (or MissingExtraError) saying what to install when it cannot start here."""
        if not self.startable:
            raise ServerStartError(f"the harness does not start {self.name}: serve it yourself and give --endpoint"
                                   + (f" (its environment: bash {self.environment})" if self.environment else ""))

    def command(self, server) -> list:
        """The command line of a LocalServer (model_path, model, models, port, parallel, n_ctx, threads, seed,
        repack, settings, extra_args)."""
        raise ServerStartError(f"the harness does not start {self.name}")

    def build(self, binary=None) -> dict:
        """What ran, for each record's `build` field: by default the version this module runs; a runtime that runs
        a binary says what that binary reports (binary: the user's own, else its own build)."""
        if binary is not None:
            raise ServerStartError(f"--binary: {self.name} runs no binary of its own to replace")
        return {"version": self.version}

    def own_record_name(self, build: dict) -> str:
        """The name records of the user's own build carry: this runtime's, "own", and what the binary reports (its
        commit where it knows it, else the start of its SHA-256, so two builds never share a records file)."""
        number = f"-b{build['build']}" if build.get("build") is not None else ""
        commit = build.get("commit")
        which = commit if commit and commit != "unknown" else build["sha256"][:12]
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.name}-own-{build['version']}{number}-{which}")

    # -- asking it ---------------------------------------------------------------------------------------------
    def prompt_key(self, base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
        """The runtime's own prompt length for a chat request: by default the usage.prompt_tokens of a one-token
        completion of it (the prompt text stays unseen)."""
        return usage_key(base_url, model, body, timeout)

    def process_env_words(self) -> str:
        """What process_env sets, for a page: "started with NAME=VALUE (what it changes)", joined by "; ";
        empty when it sets nothing."""
        return "; ".join(f"started with `{name}={value}` ({why})" for name, (value, why) in self.process_env.items())

    def fresh_marks(self) -> dict:
        """What a record of a request to it says was done so the request was evaluated afresh: its fresh_fields
        (sent in the request), and the request sent before it (`before_each`: fresh_request's path and body)."""
        path, body = self.fresh_request or (None, None)
        return {**self.fresh_fields, **({"before_each": {"path": path, **body}} if path else {})}

    def generated_text(self, base_url: str, model: str, answer: dict, timeout: float = 120.0) -> str | None:
        """The text of the ids a chat answer (chat_answer's, asked with generated_fields) says were generated, as
        the runtime's own tokenizer decodes them; None where it cannot say."""
        return None

    def reload(self, base_url: str, folder, timeout: float = 600.0) -> None:
        """Load `folder`'s weights into the running server in place (reloads_weights); HarnessError when it
        cannot, so the caller starts the server afresh on that folder instead."""
        raise NotImplementedError(f"{self.name} does not reload weights in place")

    def replay(self, record) -> str | None:
        """The line that asks one runtime-conformance record again through `served_by`, run as printed from the
        repository root (it serves the model, asks, and prints the request's labels); None without a script."""
        if not self.served_by:
            return None
        return " ".join([self.served_by, "--template", shlex.quote(record.template["id"]), "--case",
                         shlex.quote(record.case["name"]), "--variant", shlex.quote(record.variant),
                         '--results-dir "$(mktemp -d)"'])

    # -- recognising it ----------------------------------------------------------------------------------------
    # (path, predicate of its JSON answer): how a live server is recognised as this runtime; None: it is not.
    probe: tuple | None = None

    def identifies(self, answer) -> bool:
        return bool(self.probe) and isinstance(answer, dict) and bool(self.probe[1](answer))


def usage_key(base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
    request = {**body, "model": model, "max_tokens": 1, "temperature": 0.0, "stream": False}
    try:
        answer = request_json(f"{base_url}/v1/chat/completions", request, timeout)
    except ServerReplyError as exc:
        return PromptKey(None, USAGE, error=str(exc))
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return PromptKey(None, USAGE, error="the answer carries no usage.prompt_tokens")
    return PromptKey(tokens, USAGE)
