#!/usr/bin/env bash
# Create .venv and install harness with its test extras, which include the `embedded` extra (llama-cpp-python,
# for running models in this process). llama-cpp-python 0.3.36 is built from source on first install (about
# 12.5 minutes on 2 cores); pip caches the wheel, so later installs take seconds. Without the extras
# (`pip install -e .`) nothing is built, and detect, parse, conformance, list, verify, report and score work.
# The HTML report's tests drive a headless Chromium (Debian's chromium package, about 20 s to install with
# its 115 dependencies); without it they skip, so it is installed here only where apt-get can run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "setup: chromium is missing; the HTML report's browser tests will skip. Install it with:" \
             "apt-get install -y chromium" >&2
    fi
fi
