#!/usr/bin/env bash
# Create .venv and install harness with its test extras. llama-cpp-python 0.3.36 is built from source on
# first install (about 12.5 minutes on 2 cores); pip caches the wheel, so later installs take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
