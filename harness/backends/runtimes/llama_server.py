"""llama.cpp's llama-server, built from the llama.cpp vendored in the pinned llama-cpp-python sources
(scripts/build_llama_server.sh): one GGUF per process, several slots, the model's own template (--jinja) and
llama.cpp's tool-call parsers. It shows its prompt (/apply-template, counted by /tokenize) and, asked, the token
ids it sampled with their text before its parser."""

from __future__ import annotations

from harness.backends import servers
from harness.backends.binaries import binary_build
from harness.backends.runtimes.base import PromptKey, Runtime
from harness.backends.transport import request_json
from harness.core.constants import BINDING_VERSION
from harness.core.errors import ServerReplyError

APPLY_TEMPLATE = "llama-server /apply-template + /tokenize"


class LlamaServer(Runtime):
    name = "llama-server"
    record_name = f"llama-server-{BINDING_VERSION}-vendored"
    summary = f"llama.cpp's server (--jinja), built from the llama.cpp that llama-cpp-python {BINDING_VERSION} vendors"
    # The pinned sources scripts/build_llama_server.sh builds it from, into a cache folder of their own.
    archive = servers.LLAMA_SERVER_ARCHIVE
    version = servers.LLAMA_SERVER_VERSION
    runs_binary = True
    startable = True
    health_path = "/health"
    parallel_slots = True
    # verbose adds the text it generated before its parser; return_tokens the ids it sampled. Neither changes
    # what it generates or parses.
    shown_fields = {"verbose": True, "return_tokens": True}
    # Its prompt cache reuses the longest prefix an earlier request left in the slot; the rest is evaluated in
    # other batches, and a greedy reply can part from the one a fresh evaluation gives (seen: the same request,
    # asked again at once, wrote another reply from character 153 on).
    fresh_fields = {"cache_prompt": False}
    shows_prompt = True
    template_file_flag = "--chat-template-file"
    # A llama-server answering /props with its build and slot count; other servers have no /props.
    probe = ("/props", lambda props: "build_info" in props and "total_slots" in props)

    def check_startable(self) -> None:
        servers.llama_server_binary(archive=self.archive)

    def binary(self, server=None):
        """The binary a server runs: the user's own (`--binary`, LocalServer's binary), else the cached build."""
        own = getattr(server, "binary", None)
        return own if own is not None else servers.llama_server_binary(archive=self.archive)

    def build(self, binary=None) -> dict:
        """What the binary reports (--version) and its SHA-256; the archive it was built from when it is the
        cached build (the user's own: none)."""
        path = binary if binary is not None else self.binary()
        what = "--binary" if binary is not None else f"the cached {self.name} (rebuild: {servers.build_command(self.archive)})"
        return {**binary_build(path, what), "archive": None if binary is not None else self.archive}

    def command(self, server) -> list:
        return [str(self.binary(server)), "--model", str(server.model_path), "--alias", server.model,
                "--host", "127.0.0.1", "--port", str(server.port),
                "--ctx-size", str(server.n_ctx * server.parallel), "--parallel", str(server.parallel),
                "--threads", str(server.threads), "--threads-batch", str(server.threads),
                "--seed", str(server.seed),
                "--jinja",                        # the model's own template and llama.cpp's tool-call parsers
                *([] if server.repack else ["--no-repack"]),
                *server.extra_args]

    def prompt_key(self, base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
        """/apply-template renders the request's messages, tools and switches as a chat completion would, and
        /tokenize (special tokens parsed, BOS added, as a chat completion tokenizes) counts it."""
        try:
            prompt = request_json(f"{base_url}/apply-template", body, timeout).get("prompt")
            if not isinstance(prompt, str):
                return PromptKey(None, APPLY_TEMPLATE, error="/apply-template answered without a prompt")
            tokens = request_json(f"{base_url}/tokenize",
                                  {"content": prompt, "add_special": True, "parse_special": True}, timeout).get("tokens")
        except ServerReplyError as exc:
            return PromptKey(None, APPLY_TEMPLATE, error=str(exc))
        if not isinstance(tokens, list):
            return PromptKey(None, APPLY_TEMPLATE, prompt, error="/tokenize answered without a list of tokens")
        return PromptKey(len(tokens), APPLY_TEMPLATE, prompt)
