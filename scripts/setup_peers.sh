#!/usr/bin/env bash
# Build the peers environment: vLLM's and SGLang's real tool parsers, in a venv of their own in the harness
# cache, never in .venv (they pin torch and a transformers older than ours). `harness parser-agreement`
# drives it through a subprocess (harness/evaluation/peers_worker.py).
#
# Their full pins cannot share one environment (vllm 0.33.0 pins torch==2.14.0, openai>=2.25,
# xgrammar==0.2.8, compressed-tensors==0.17.0; sglang 0.5.23 pins torch==2.14.1, openai==2.8.0,
# xgrammar==0.2.7, compressed-tensors==0.18.0) and most of what they pin is GPU kernels and serving code
# that the parsers never import. So both wheels go in with --no-deps, beside the real packages their
# parser modules do import (PARSER_DEPS), and `pip check` lists what is left unmet, printed at the end.
# torch is the real 2.14.1 wheel with the CUDA libraries it declares: it does not import without them.
# SGLang's template detection (`--tool-call-parser auto`) imports its model-config package, which imports
# torchvision (its image transforms) and dill: the torchvision built for torch 2.14 and dill go in too.
# Prints the bytes downloaded and the seconds taken.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# Where its venv goes: harness/core/environments.py says, for every side environment (standard library only).
VENV=$("$PY" -m harness.core.environments venv peers)
PEERS="vllm==0.33.0 sglang==0.5.23"
# transformers 5.19.0 satisfies both (vllm <5.21,>=5.16.1; sglang ==5.19.0); openai is vllm's floor.
PARSER_DEPS="torch==2.14.1 transformers==5.19.0 tokenizers==0.23.2 huggingface_hub partial-json-parser
regex pydantic openai==2.25.0 msgspec pillow cachetools psutil sentencepiece==0.2.1 numpy orjson pybase64
fastapi uvicorn pyyaml jinja2 cbor2 blake3 py-cpuinfo cloudpickle pyzmq prometheus_client tiktoken
mistral_common>=1.11.6 openai-harmony==0.0.4 ijson setproctitle einops requests aiohttp packaging uvloop IPython
xgrammar==0.2.7 gguf>=0.19 torchvision==0.29.1 dill==0.4.1"
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
DL="$(dirname "$VENV")/peers-downloads"
mkdir -p "$DL"
# Download first into a folder of our own, so the bytes fetched can be counted, then install from it.
"$VENV/bin/python" -m pip download --quiet --no-deps -d "$DL" $PEERS
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip download --quiet -d "$DL" $PARSER_DEPS
"$VENV/bin/python" -m pip install --quiet --no-index --find-links "$DL" --no-deps $PEERS
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install --quiet --no-index --find-links "$DL" $PARSER_DEPS
end=$(date +%s)
echo "peers venv: $VENV"
echo "downloaded: $(du -sb "$DL" | cut -f1) bytes in $(ls "$DL" | wc -l) files"
echo "installed: $(du -sb "$VENV" | cut -f1) bytes"
echo "took: $((end - start)) s"
echo "unmet declared requirements (pip check; GPU kernels and serving code the parsers do not import):"
"$VENV/bin/python" -m pip check | grep -E "^(vllm|sglang) " | sed 's/^/  /' || true
"$VENV/bin/python" - <<'EOF'
import importlib
for name in ("torch", "vllm.tool_parsers", "sglang.srt.function_call.function_call_parser",
             "sglang.srt.parser.template_detection"):
    try:
        importlib.import_module(name)
        print(f"import {name}: ok")
    except Exception as exc:  # the report names what does not import and why
        print(f"import {name}: FAILED {type(exc).__name__}: {exc}")
EOF
