#!/usr/bin/env bash
# Build the BFCL checker environment: BFCL's own AST checker, run by harness/peers/bfcl_worker.py in a venv of
# its own in the harness cache, never in .venv. bfcl-eval declares ~30 dependencies (model SDKs, torch through
# sentence-transformers, pinned numpy); its checker imports none of them, only the standard library, its own
# modules and filelock (bfcl_eval/utils.py). So the wheel goes in with --no-deps, from the registry, held to
# the SHA-256 sources.json pins for it (pip refuses any other bytes), beside filelock at the version bfcl-eval
# pins. The one module of bfcl-eval that would import the rest (constants/model_config.py) is not changed on
# disk: the worker puts a stub of that name in sys.modules (docs/bfcl.md says what it holds).
# Prints the seconds taken and the worker's hello (bfcl-eval's version, the checker's SHA-256).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# Where its venv goes: harness/core/environments.py says, for every side environment (standard library only).
VENV=$("$PY" -m harness.core.environments venv bfcl)
start=$(date +%s)
PIN=$("$PY" - <<'PYEOF'
import json
pin = next(a for a in json.load(open("sources.json", encoding="utf-8"))["archives"] if a["package"] == "bfcl-eval")
print(f"{pin['package']}=={pin['version']} --hash=sha256:{pin['sha256']}")
PYEOF
)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
echo "$PIN" > "$REQ"
# filelock first: installed after bfcl-eval, pip would list every dependency --no-deps left out as a conflict.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "filelock==3.20.0"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --require-hashes -r "$REQ"
end=$(date +%s)
echo "bfcl venv: $VENV"
echo "installed: $(du -sb "$VENV" | cut -f1) bytes"
echo "took: $((end - start)) s"
echo '{"op": "hello"}' | "$VENV/bin/python" harness/peers/bfcl_worker.py
