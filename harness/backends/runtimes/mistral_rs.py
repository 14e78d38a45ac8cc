"""mistral.rs through its Python API (the `mistralrs` wheel), in an environment of its own: scripts/setup_mistralrs.sh
builds MISTRALRS_VENV in the harness cache, never in .venv. Its HTTP server is a separate binary not on the package
registry, so the harness starts mistralrs_worker.py (this folder) under that venv's python: one GGUF per process,
loaded with mistralrs.Runner (Which.GGUF), its embedded chat template rendered by mistral.rs, tool calls parsed
by mistral.rs, answered as OpenAI chat completions (the worker's docstring maps each field). One request at a
time; the prompt length is its usage.prompt_tokens."""

from __future__ import annotations

from pathlib import Path

from harness.backends.runtimes.base import Runtime
from harness.core.environments import ENVIRONMENTS
from harness.core.errors import MissingEnvironmentError

ENVIRONMENT = ENVIRONMENTS["mistralrs"]
MISTRALRS_VENV, SETUP_COMMAND = ENVIRONMENT.venv, ENVIRONMENT.setup_command
WORKER = Path(__file__).with_name("mistralrs_worker.py")
VERSION = "0.9.5"


def mistralrs_python(venv: Path | None = None) -> Path | None:
    # MISTRALRS_VENV read at call time: a test points it at a folder that is not built.
    return ENVIRONMENT.python(venv or MISTRALRS_VENV)


class MistralRs(Runtime):
    name = "mistralrs"
    record_name = f"mistralrs-{VERSION}"
    version = VERSION
    summary = (f"mistral.rs {VERSION}'s Python API (mistralrs.Runner, Which.GGUF) in its own venv "
               f"({SETUP_COMMAND}), served by harness' worker over it")
    startable = True
    health_path = "/v1/models"
    # Its GGUF loader knows llama, qwen2, phi3 … but not gpt2: it is given the rotary scripted models.
    scripted_arch = "llama"
    # On CPU it keeps the KV cache in f16 unless told otherwise, and its attention then weighs the values in f16:
    # a rotary scripted model reads its position off those weights (a part in 8,000 at position 8,000), which f16
    # rounds away. f32 changes no parsing, only what the model computes; for a real model that can be another
    # greedy token where two were nearly tied, so its rows say so.
    process_env = {"MISTRALRS_CPU_KV_F32": ("1", "its KV cache kept in f32, where a default install on CPU keeps "
                                                 "f16; the scripted models need f32 to read their positions")}
    # Its worker answers one request at a time, two thirds of a conformance run (benchmarks/runtime_phases_bench.py):
    # two workers, each on one thread and its own templates, keep both cores of a 2-core machine busy.
    conformance_workers = 2
    # Asked for logprobs, it gives each generated token's own bytes (chat_answer's logprob_bytes): joined, the text
    # its parser read.
    generated_fields = {"logprobs": True}

    def generated_text(self, base_url: str, model: str, answer: dict, timeout: float = 120.0) -> str | None:
        """The tokens' bytes joined. An answer that stopped on its own (finish_reason stop) lists its stop token
        last, which its content leaves out (Qwen2.5's "<|im_end|>"): dropped, as llama-server's text drops it. One
        its parser ended on a call (tool_calls) or max_tokens cut (length) ends on a token of the reply."""
        pieces = answer.get("logprob_bytes")
        if not isinstance(pieces, list):
            return None
        if answer.get("finish_reason") == "stop":
            pieces = pieces[:-1]
        try:
            return bytes(b for piece in pieces for b in piece).decode("utf-8")
        except UnicodeDecodeError:
            return None
    # Built apart from the main venv; its conformance run is committed (results/runtime-conformance/).
    environment = ENVIRONMENT.script
    ignores = {
        "tool_choice": "\"required\" and a named function: the Python API's ToolChoice is NoTools or Auto only; "
                       "sent as Auto",
        "parallel_tool_calls": "not a field of its ChatCompletionRequest: dropped",
        "seed": "not a field of its ChatCompletionRequest (Runner(seed=) raises on CPU): dropped",
        "chat_template_kwargs": "only enable_thinking has a field (enable_thinking); other keys dropped",
    }
    # The worker lists its one model under the owner "mistralrs-VERSION".
    probe = ("/v1/models", lambda models: isinstance(models.get("data"), list) and any(
        isinstance(m, dict) and str(m.get("owned_by", "")).startswith("mistralrs-") for m in models["data"]))

    def check_startable(self) -> None:
        if mistralrs_python() is None:
            raise MissingEnvironmentError(f"mistral.rs runs in an environment of its own, not built here: {SETUP_COMMAND} "
                                   f"(it builds {MISTRALRS_VENV})")

    def command(self, server) -> list:
        return [str(MISTRALRS_VENV / "bin" / "python"), str(WORKER), "--model", str(server.model_path), "--alias", server.model,
                "--host", "127.0.0.1", "--port", str(server.port), "--threads", str(server.threads),
                *server.extra_args]
