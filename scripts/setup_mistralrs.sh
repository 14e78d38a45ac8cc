#!/usr/bin/env bash
# Build the mistral.rs environment: the `mistralrs` wheel (mistral.rs' Python API, a Rust extension with no Python
# dependencies) in a venv of its own in the harness cache, never in .venv. The harness starts
# harness/backends/runtimes/mistralrs_worker.py under this venv's python (harness.backends.runtimes.mistral_rs):
# it loads a GGUF with mistralrs.Runner and answers /v1/chat/completions from the Python API.
# The wheel is held to the SHA-256 below (pip refuses any other bytes): the CPU build for x86_64 Linux
# (cp310-abi3, manylinux_2_17), the one this runtime's records were made with; another platform's wheel has
# another hash and is refused.
# Prints the seconds taken and the worker's hello (mistralrs' version).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# Where its venv goes: harness/core/environments.py says, for every side environment (standard library only).
VENV=$("$PY" -m harness.core.environments venv mistralrs)
PIN="mistralrs==0.9.5 --hash=sha256:60cd70976a2ec50175f3d68cd269ccfa75b488c521a34e1d631c1f3da384bd01"
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
echo "$PIN" > "$REQ"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --require-hashes -r "$REQ"
end=$(date +%s)
echo "mistralrs venv: $VENV"
echo "installed: $(du -sb "$VENV" | cut -f1) bytes"
echo "took: $((end - start)) s"
"$VENV/bin/python" harness/backends/runtimes/mistralrs_worker.py --hello
