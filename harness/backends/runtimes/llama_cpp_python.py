"""llama-cpp-python's OpenAI-compatible server (llama_cpp.server), from the `embedded` extra: one request at a
time, several GGUFs in one process (a config file; it loads the one a request names in place of the last), its
own chat handlers. Its request models drop fields they do not declare, so a switch it lacks is ignored without a
word."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.backends.runtimes.base import Runtime
from harness.core.constants import BINDING_ARCHIVE, BINDING_VERSION
from harness.core.errors import ServerReplyError
from harness.core.lost_characters import lost_beyond_ascii
from harness.core.extras import require


class LlamaCppPython(Runtime):
    name = "llama-cpp-python"
    record_name = BINDING_ARCHIVE
    version = BINDING_VERSION
    summary = f"llama-cpp-python {BINDING_VERSION}'s server (llama_cpp.server), the `embedded` extra"
    startable = True
    health_path = "/v1/models"
    hosts_several_models = True
    model_settings = True
    ignores = {"parallel_tool_calls": "not a field of its chat request: dropped",
               "chat_template_kwargs": "not a field of its chat request: dropped, the template gets its defaults",
               "reasoning_content": "not a field of its assistant message (llama_types): a history's reasoning "
                                    "sent back is dropped before the template"}
    # It computes the logits of every prompt token by default (for logprobs, which no conformance request asks):
    # off, a 1,000-token prompt takes 0.05 s instead of 3 s on a scripted model.
    conformance_settings = {"logits_all": False}
    # Asked for logprobs (top_logprobs 0: its chat handlers ask the model for none without it), it gives each
    # generated token's string, decoded alone, without bytes (chat_answer's logprob_text). The logits they need
    # are kept by its default logits_all, which the deployment suite leaves on.
    generated_fields = {"logprobs": True, "top_logprobs": 0}
    # It evaluates a prompt from the longest prefix it shares with the last one, and no request field turns that
    # off; on it the same greedy request asked twice in a row got another answer (SmolLM2-135M: 3 of 3 cases
    # tried), the second equal to the streamed one asked after it. A one-token completion of a prompt no chat
    # prompt starts with, before each request, has each evaluated afresh: then the non-streamed answer, the
    # streamed one and the non-streamed one asked again were alike in all 3.
    fresh_request = ("/v1/completions", {"prompt": "\n", "max_tokens": 1, "temperature": 0.0})
    probe = ("/openapi.json", lambda api: isinstance(api.get("info"), dict)
             and isinstance(api["info"].get("title"), str) and "llama.cpp Python" in api["info"]["title"])

    def generated_text(self, base_url: str, model: str, answer: dict, timeout: float = 120.0) -> str | None:
        """Its content, where the tokens' strings joined spell it. Each is decoded alone with undecodable bytes
        dropped, so the bytes of a character split across tokens are lost (seen: an emoji as two empty strings,
        "±" and "√" gone from SmolLM2's replies), while its content decodes them all at once: the join spells the
        content when it is the content without some characters beyond ASCII, each where the tokens lost one. The
        stop token is not among them. Where the join does not spell it, or where its handler read a call (then
        nothing returned is the text to check the join against), the answer says the text is not known."""
        pieces = answer.get("logprob_text")
        if not isinstance(pieces, list):
            return None
        text, content = "".join(pieces), answer.get("content") or ""
        if answer.get("tool_calls"):
            raise ServerReplyError("its handler read a call, and its logprob tokens (each decoded alone, a character "
                                   "split across tokens lost) cannot be checked against the text it read", False)
        if lost_beyond_ascii(text, content) is None:
            raise ServerReplyError(f"its logprob tokens (each decoded alone, a character split across tokens lost) "
                                   f"spell {len(text)} characters that are not its content's {len(content)} without "
                                   f"some beyond ASCII: the text the model wrote is not known", False)
        return content

    def check_startable(self) -> None:
        require("uvicorn", "llama-cpp-python's server")

    def command(self, server) -> list:
        # With repack off (the default), it starts through harness.backends.embedded.server, which clears the
        # flag in llama.cpp's default model parameters before running llama_cpp.server unchanged (see
        # harness.backends.servers).
        launcher = ["-m", "llama_cpp.server"] if server.repack else ["-m", "harness.backends.embedded.server"]
        settings = {"n_ctx": server.n_ctx, "n_threads": server.threads, "n_threads_batch": server.threads,
                    "seed": server.seed, **server.settings}
        if len(server.models) > 1:
            return [sys.executable, *launcher, "--config_file", str(_config(server, settings))]
        flags = [str(x).lower() if isinstance(x, bool) else str(x) for k, v in settings.items() for x in (f"--{k}", v)]
        return [sys.executable, *launcher, "--model", str(server.model_path), "--model_alias", server.model,
                "--host", "127.0.0.1", "--port", str(server.port), *flags, *server.extra_args]


def _config(server, settings: dict) -> Path:
    models = [{"model": str(path), "model_alias": alias, **settings} for alias, path in server.models.items()]
    config = {"host": "127.0.0.1", "port": server.port, "models": models}
    path = server.log_path.with_name(server.log_path.name + ".config.json")
    path.write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    return path

