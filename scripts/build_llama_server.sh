#!/usr/bin/env bash
# Build llama-server from the llama.cpp sources vendored in the pinned llama-cpp-python 0.3.36 sdist, so the
# runtime tests judge the same llama.cpp the in-process binding runs. The sources come through harness.pins.archives
# (pinned in sources.json, hash-checked, cached); the binary goes to
# $HARNESS_CACHE/bin/llama-server-<archive id>/ (else $HF_HOME/harness/bin/...), where harness.backends.servers finds it.
# A cached binary that answers --version is kept: a second run does nothing. A killed build resumes where it
# stopped (the build folder is kept until the binary is in place). JOBS sets the parallel compile jobs (2).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}

{ read -r DEST; read -r BUILD; } < <("$PYTHON" -c '
from harness.core import constants
from harness.backends import servers
print(servers.llama_server_dir(), constants.CACHE_DIR / "build" / servers.LLAMA_SERVER_ARCHIVE, sep="\n")')
BINARY="$DEST/llama-server"

if "$BINARY" --version >/dev/null 2>&1; then
    echo "llama-server is already built: $BINARY"
    exit 0
fi

mkdir -p "$(dirname "$DEST")"
# Two builds at once (two terminals, a test run and CI) would share the build folder: one waits, and says so
# (a build takes about 30 minutes on 2 cores). The holder writes its pid into the lock file once it has the lock;
# the file is opened without truncating it, so a waiter can read who holds it.
LOCK="$DEST.lock"
exec 9<>"$LOCK"
if ! flock -n 9; then
    holder=$(head -c 200 "$LOCK" 2>/dev/null | tr -d '\n' || true)
    echo "waiting for another build of llama-server to finish: $LOCK is locked${holder:+ by $holder}" \
         "(a build takes about 30 minutes on 2 cores; this one continues when that one ends)" >&2
    flock 9
fi
printf 'pid %s (%s) since %s\n' "$$" "$0" "$(date -u +%FT%TZ)" > "$LOCK"
if "$BINARY" --version >/dev/null 2>&1; then
    echo "llama-server is already built: $BINARY"
    exit 0
fi

SRC=$("$PYTHON" -c '
import sys
from harness.pins import archives
from harness.backends import servers
print(archives.archive_tree(servers.LLAMA_SERVER_ARCHIVE, log=lambda m: print(m, file=sys.stderr)))')

SECONDS=0
generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi
# - Static libraries: one self-contained binary to copy into the cache, nothing to find at run time.
# - Native CPU kernels, as pip builds llama-cpp-python here: both runtimes then run the same kernels, so
#   their greedy outputs can be compared. (Weight repacking, whose AMX kernels fault on this project's VM, is
#   switched off at run time with --no-repack, not here.)
# - No web UI: it is either built with npm or downloaded from a Hugging Face bucket at build time, and the
#   network is closed; the API does not need it. No OpenSSL: the server listens on 127.0.0.1 over HTTP.
# - Tests, examples and the unified app binary are not needed for the one target built.
cmake -S "$SRC" -B "$BUILD" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_COMMON=ON \
    -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF
cmake --build "$BUILD" --config Release --target llama-server -j "${JOBS:-2}"

BUILT=$(find "$BUILD" -type f -name llama-server -perm -u+x | head -n 1)
if [ -z "$BUILT" ]; then
    echo "build_llama_server: the build finished without a llama-server binary under $BUILD" >&2
    exit 1
fi
"$BUILT" --version

# Into place through a temporary folder renamed over the old one: a reader never sees half a binary.
STAGING=$(mktemp -d "$DEST.XXXXXX.tmp")
cp "$BUILT" "$STAGING/llama-server"
rm -rf "$DEST"
mv "$STAGING" "$DEST"
rm -rf "$BUILD"
echo "llama-server built in $((SECONDS / 60)) min $((SECONDS % 60)) s: $BINARY"
