"""Which build of a runtime's binary ran: its own `--version` words (llama.cpp prints "version: 0.6.0-dev (build
11434, commit unknown)" on stderr) and the SHA-256 of the file, for the `build` field of every runtime-conformance
record. A path given with `--binary` must be an executable file that answers `--version` with those words; any
other is refused in one line before a server is started."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from harness.core.errors import HarnessError
from harness.pins.digest import file_digest

# llama.cpp since its build-info rewrite: "version: 0.6.0-dev (build 11434, commit unknown)"; before it:
# "version: 4567 (abc1234)", the build number standing as the version.
VERSION_LINE = re.compile(r"^version: (?P<version>\S+) \((?:build (?P<build>\d+), commit )?(?P<commit>[^)]*)\)",
                          re.M)
# A binary that does not answer --version at once is not one we can name.
VERSION_TIMEOUT = 60.0


def binary_build(path: Path | str, what: str = "--binary") -> dict:
    """{"version", "build", "commit", "sha256"} of an executable, from its `--version` words; HarnessError in one
    line when the path is no executable file or its answer is not a llama.cpp version line."""
    path = Path(path)
    if not path.is_file():
        why = "is a folder" if path.is_dir() else "does not exist"
        raise HarnessError(f"{what} {path}: {why}; give the path of a built llama-server")
    if not os.access(path, os.X_OK):
        raise HarnessError(f"{what} {path}: not executable (chmod +x it, or give the built llama-server)")
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, errors="replace",
                              timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{what} {path}: did not answer --version within {VERSION_TIMEOUT:g} s") from None
    except OSError as exc:
        raise HarnessError(f"{what} {path}: cannot be run ({exc.strerror or exc})") from None
    said = done.stderr + done.stdout
    match = VERSION_LINE.search(said)
    if done.returncode != 0 or match is None:
        first = next((line.strip() for line in said.splitlines() if line.strip()), "nothing")
        raise HarnessError(f"{what} {path}: does not answer --version as llama.cpp's llama-server does (exit "
                           f"{done.returncode}, said: {first[:120]})")
    build = match.group("build")
    return {"version": match.group("version"), "build": int(build) if build is not None else None,
            "commit": match.group("commit"), "sha256": file_digest(path)[1]}


def build_words(build: dict | None) -> str:
    """One cell: what a record's build says (version, build, commit, archive or the binary's hash)."""
    if not build:
        return "not recorded"
    words = [str(build.get("version") or "?")]
    if build.get("build") is not None:
        words.append(f"build {build['build']}")
    if build.get("commit") is not None:
        words.append(f"commit {build['commit']}")
    if build.get("archive"):
        words.append(f"from archive {build['archive']}")
    elif build.get("sha256"):
        words.append(f"own binary sha256 {build['sha256'][:12]}")
    return ", ".join(words)
